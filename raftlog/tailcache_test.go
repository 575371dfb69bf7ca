package raftlog_test

import (
	"strings"
	"testing"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// TestSetTailCacheBytesMaxEvicts lowers a log's tail cache bound after ten
// 1 KiB entries were cached: the oldest are evicted at once down to the new
// bound, reads of evicted entries still come from the disk, and later
// appends keep within it.
func TestSetTailCacheBytesMaxEvicts(t *testing.T) {
	l := mustOpen(t, memdisk.New(), raftlog.Options{TailCacheBytesMax: 1 << 20})
	data := strings.Repeat("x", 1024)
	for i := uint64(1); i <= 10; i++ {
		must(t, l.Save(entriesOf(entry(i, 1, data)), hardState(1, 0, 0)))
	}
	if n, _ := l.TailCachedForTest(); n != 10 {
		t.Fatalf("%d entries cached, want 10", n)
	}
	l.SetTailCacheBytesMax(3000)
	if n, b := l.TailCachedForTest(); n != 2 || b > 3000 {
		t.Fatalf("after lowering the bound to 3000 bytes: %d entries, %d bytes cached; want 2 within 3000", n, b)
	}
	es, err := l.Entries(1, 11, 1<<30)
	if err != nil || len(es) != 10 || string(es[0].GetData()) != data {
		t.Fatalf("Entries(1, 11) after eviction: %d entries, err %v", len(es), err)
	}
	must(t, l.Save(entriesOf(entry(11, 1, data)), hardState(1, 0, 0)))
	if n, b := l.TailCachedForTest(); n != 2 || b > 3000 {
		t.Fatalf("after one more append: %d entries, %d bytes cached; want 2 within 3000", n, b)
	}
	l.SetTailCacheBytesMax(-1)
	if n, _ := l.TailCachedForTest(); n != 0 {
		t.Fatalf("cache off: %d entries still cached", n)
	}
}
