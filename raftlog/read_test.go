package raftlog_test

import (
	"errors"
	"math"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// TestStartReadDoesNoIO reads ranges of a reopened log (sealed segments
// not yet indexed, the tail cache off) with StartRead, Run and FinishRead:
// StartRead reads no byte, Run reads them all, and the entries equal
// Entries' for the same range and size limit (cut at the same entry), in
// ranges within one segment, across several and at the size limit; the
// indexes Run built are installed, so a later Entries reads only the range.
func TestStartReadDoesNoIO(t *testing.T) {
	disk := &readingDisk{Disk: memdisk.New()}
	buildLog(t, disk, 5000, 1000, 64<<10)
	l := mustOpen(t, disk, raftlog.Options{TailCacheBytesMax: -1})
	ref := mustOpen(t, memdiskCopy(t, disk), raftlog.Options{TailCacheBytesMax: -1})
	for _, c := range []struct{ lo, hi, max uint64 }{
		{1, 2, math.MaxUint64}, {10, 40, math.MaxUint64}, {50, 700, math.MaxUint64},
		{1, 5001, 200 << 10}, {4000, 5001, math.MaxUint64}, {333, 334, 1}, {700, 2100, 100 << 10},
	} {
		before := disk.read
		ents, rd, err := l.StartRead(c.lo, c.hi, c.max)
		must(t, err)
		if ents != nil || rd == nil {
			t.Fatalf("[%d, %d): StartRead served %d entries from memory", c.lo, c.hi, len(ents))
		}
		if disk.read != before {
			t.Fatalf("[%d, %d): StartRead read %d bytes", c.lo, c.hi, disk.read-before)
		}
		must(t, rd.Run())
		if disk.read == before {
			t.Fatalf("[%d, %d): Run read nothing", c.lo, c.hi)
		}
		got, err := l.FinishRead(rd)
		must(t, err)
		want, err := ref.Entries(c.lo, c.hi, c.max)
		must(t, err)
		if len(got) != len(want) {
			t.Fatalf("[%d, %d) max %d: %d entries, Entries gives %d", c.lo, c.hi, c.max, len(got), len(want))
		}
		for i := range got {
			if !proto.Equal(got[i], want[i]) {
				t.Fatalf("[%d, %d): entry %d differs", c.lo, c.hi, i)
			}
		}
	}
	// Every segment up to 5000 was indexed by a Run: Entries now reads
	// just the range.
	before := disk.read
	ents, err := l.Entries(1, 2, math.MaxUint64)
	must(t, err)
	if n := disk.read - before; n > 2000 || len(ents) != 1 {
		t.Fatalf("Entries after the reads indexed every segment: read %d bytes for one entry", n)
	}
}

// TestStartReadFromTailCacheDoesNoIO: entries the tail cache holds come
// back from StartRead at once, with no Read.
func TestStartReadFromTailCacheDoesNoIO(t *testing.T) {
	disk := &readingDisk{Disk: memdisk.New()}
	l := mustOpen(t, disk, raftlog.Options{})
	must(t, l.Append(batch(1, 10, 1, 100)))
	ents, rd, err := l.StartRead(3, 8, math.MaxUint64)
	must(t, err)
	if rd != nil || len(ents) != 5 || ents[0].GetIndex() != 3 || disk.read != 0 {
		t.Fatalf("StartRead of the cached tail: read %v, %d entries, %d bytes read", rd != nil, len(ents), disk.read)
	}
}

// TestFinishReadAfterCompactionIsNotCorruption: a compaction retires the
// segment a Read was to read (its file closed) before the Read runs; the
// Run fails, and FinishRead says raft.ErrCompacted (read again), never
// ErrCorrupt.
func TestFinishReadAfterCompactionIsNotCorruption(t *testing.T) {
	disk := memdisk.New()
	buildLog(t, disk, 2000, 1000, 64<<10)
	l := mustOpen(t, disk, raftlog.Options{TailCacheBytesMax: -1})
	_, rd, err := l.StartRead(10, 20, math.MaxUint64)
	must(t, err)
	must(t, l.CreateSnapshot(1500, &raftpb.ConfState{Voters: []uint64{1}}, []byte("s")))
	if rd.Run() == nil {
		t.Fatalf("a read of a retired segment's closed file succeeded")
	}
	_, err = l.FinishRead(rd)
	if !errors.Is(err, raft.ErrCompacted) || errors.Is(err, raftlog.ErrCorrupt) {
		t.Fatalf("FinishRead after the segment was retired: %v, want raft.ErrCompacted", err)
	}
}

// TestReadRunFindsCorruption: a bit flipped in a sealed segment fails the
// Run with ErrCorrupt, and FinishRead passes it on.
func TestReadRunFindsCorruption(t *testing.T) {
	disk := memdisk.New()
	buildLog(t, disk, 2000, 1000, 64<<10)
	l := mustOpen(t, disk, raftlog.Options{TailCacheBytesMax: -1})
	name := l.Dir() + "/00000000000000000001.log"
	disk.FlipBit(name, 500, 3) // inside entry 1's data
	_, rd, err := l.StartRead(1, 40, math.MaxUint64)
	must(t, err)
	if err := rd.Run(); !errors.Is(err, raftlog.ErrCorrupt) {
		t.Fatalf("Run over a flipped bit: %v, want ErrCorrupt", err)
	}
	if _, err := l.FinishRead(rd); !errors.Is(err, raftlog.ErrCorrupt) {
		t.Fatalf("FinishRead over a flipped bit: %v, want ErrCorrupt", err)
	}
}

// memdiskCopy is a second disk holding the same files.
func memdiskCopy(t *testing.T, from *readingDisk) *memdisk.Disk {
	t.Helper()
	src := from.Disk.(*memdisk.Disk)
	dst := memdisk.New()
	for _, name := range src.Files() {
		buf, _ := src.ReadFile(name)
		f, err := dst.Open(name)
		must(t, err)
		_, err = f.WriteAt(buf, 0)
		must(t, err)
		must(t, f.Sync())
		must(t, f.Close())
	}
	return dst
}
