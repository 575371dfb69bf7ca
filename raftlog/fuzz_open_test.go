package raftlog_test

import (
	"errors"
	"math"
	"testing"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// segmentSeeds returns real segment files (from a small log) to seed FuzzOpenSegment.
func segmentSeeds(t testing.TB) [][]byte {
	disk := memdisk.New()
	l, err := raftlog.Open(disk, "log", raftlog.Options{SegmentBytesMax: 1 << 20})
	must(t, err)
	must(t, l.SetHardState(hardState(1, 1, 0)))
	for i := uint64(1); i <= 4; i++ {
		must(t, l.Append(entriesOf(entry(i, 1, "entry data"))))
	}
	must(t, l.SetHardState(hardState(1, 1, 3)))
	must(t, l.Sync())
	must(t, l.Close())
	buf, _ := disk.ReadFile("log/00000000000000000001.log")
	torn := append([]byte(nil), buf[:len(buf)-5]...)
	flipped := append([]byte(nil), buf...)
	flipped[40] ^= 1
	return [][]byte{buf, torn, flipped, buf[:30], {}, []byte("not a segment at all")}
}

// FuzzOpenSegment feeds arbitrary bytes as the only segment file: Open must not panic, and either fails or recovers a log whose every entry reads back without error, the same after a second Open.
func FuzzOpenSegment(f *testing.F) {
	for _, seed := range segmentSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		disk := memdisk.New()
		file, err := disk.Open("log/00000000000000000001.log")
		must(t, err)
		_, err = file.WriteAt(content, 0)
		must(t, err)
		l, err := raftlog.Open(disk, "log", raftlog.Options{})
		if err != nil {
			if !errors.Is(err, raftlog.ErrCorrupt) {
				t.Fatalf("open failed without ErrCorrupt: %v", err)
			}
			return
		}
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		if first != 1 {
			t.Fatalf("first index %d", first)
		}
		var n int
		if last >= first {
			ents, err := l.Entries(first, last+1, math.MaxUint64)
			must(t, err)
			n = len(ents)
		}
		hs, _, _ := l.InitialState()
		must(t, l.Close())
		again, err := raftlog.Open(disk, "log", raftlog.Options{})
		must(t, err)
		last2, _ := again.LastIndex()
		hs2, _, _ := again.InitialState()
		if last2 != last || hs.GetCommit() != hs2.GetCommit() || uint64(n) != last-first+1 {
			t.Fatalf("reopen: last %d then %d, %d entries", last, last2, n)
		}
	})
}
