package raftlog_test

import (
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// snapNoSync is a Disk on which snapshot files are never synced and no
// directory is: a process killed right after CreateSnapshot wrote them.
type snapNoSync struct{ raftlog.Disk }

func (d snapNoSync) SyncDir(string) error { return nil }

func (d snapNoSync) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	if err == nil && strings.HasSuffix(name, ".snap") {
		return noSyncFile{f}, nil
	}
	return f, err
}

// A process killed after writing a snapshot but before syncing it leaves a
// valid snapshot in the page cache; the restart adopts it and removes the
// segments below it, so it must make the snapshot durable first: a power
// loss after that restart used to leave neither (Open: "log does not
// continue snapshot 0", found by the simulator once logs were compacted).
func TestRecoverySyncsAdoptedSnapshot(t *testing.T) {
	d := memdisk.New()
	opts := raftlog.Options{SegmentBytesMax: 256}
	l := mustOpen(t, d, opts)
	for i := uint64(1); i <= 40; i++ {
		must(t, l.Save(entriesOf(entry(i, 1, strings.Repeat("x", 40))), hardState(1, 1, i)))
	}
	must(t, l.Sync())
	must(t, l.Close())

	killed := mustOpen(t, snapNoSync{d}, opts)
	point := killed.CompactionPoint(30)
	if point == 0 {
		t.Fatal("no whole segment below index 30")
	}
	conf := &raftpb.ConfState{Voters: []uint64{1}}
	must(t, killed.CreateSnapshot(point, conf, []byte("state")))
	must(t, killed.Close()) // killed: the page cache keeps the unsynced snapshot

	restarted := mustOpen(t, d, opts)
	must(t, restarted.Close())
	d.Crash(nil) // then a power loss

	l, err := raftlog.Open(d, "log", opts)
	if err != nil {
		t.Fatalf("open after the power loss: %v", err)
	}
	defer l.Close()
	if first, _ := l.FirstIndex(); first != point+1 {
		t.Fatalf("first index %d, want %d", first, point+1)
	}
}

// A process killed inside a truncation leaves the side file's hard state
// in the page cache only; Open adopts it (rule 7), so it must make it
// durable with everything else it recovered (rule 8): after the restart
// the directory is synced. Found by the simulator's recovery check (seed
// 15: "recovery reported unsynced data as stable").
func TestRecoverySyncsSideFile(t *testing.T) {
	d := memdisk.New()
	opts := raftlog.Options{SegmentBytesMax: 256}
	l := mustOpen(t, d, opts)
	for i := uint64(1); i <= 40; i++ {
		must(t, l.Save(entriesOf(entry(i, 1, strings.Repeat("x", 40))), hardState(1, 1, i)))
	}
	must(t, l.Sync())
	must(t, l.Close())

	killed := mustOpen(t, noSyncDisk{d}, opts)
	must(t, killed.Save(entriesOf(entry(5, 2, "y")), hardState(2, 2, 4))) // truncates at 5
	must(t, killed.Close())                                               // killed: nothing synced

	restarted := mustOpen(t, d, opts)
	defer restarted.Close()
	if !d.Synced("log") {
		t.Fatal("after Open a power loss would change the recovered log: a file holds unsynced data")
	}
}

// Compaction retires the segments below the snapshot by renaming them to
// ".del" (no unlink on the caller's path); TakeTrash's job removes them,
// and a power loss before it ran, or before the directory was synced,
// leaves files that recovery removes without changing what the log holds.
func TestCompactionRetiresSegmentsForTakeTrash(t *testing.T) {
	build := func() (*memdisk.Disk, *raftlog.Log) {
		d := memdisk.New()
		l := mustOpen(t, d, raftlog.Options{SegmentBytesMax: 256})
		for i := uint64(1); i <= 40; i++ {
			must(t, l.Save(entriesOf(entry(i, 1, strings.Repeat("x", 40))), hardState(1, 1, i)))
		}
		must(t, l.Sync())
		must(t, l.CreateSnapshot(30, &raftpb.ConfState{Voters: []uint64{1}}, []byte("s")))
		return d, l
	}
	count := func(d *memdisk.Disk, suffix string) int {
		n := 0
		for _, f := range d.Files() {
			if strings.HasSuffix(f, suffix) {
				n++
			}
		}
		return n
	}
	d, l := build()
	retired := count(d, ".log.del")
	if retired == 0 {
		t.Fatal("compaction retired no segment")
	}
	if first, _ := l.FirstIndex(); first != 31 {
		t.Fatalf("first index %d after compaction, want 31", first)
	}
	run := l.TakeTrash()
	if run == nil || l.TakeTrash() != nil {
		t.Fatal("TakeTrash: want one job, then none")
	}
	must(t, run())
	if n := count(d, ".del"); n != 0 {
		t.Fatalf("%d retired files left after the job", n)
	}

	for _, synced := range []bool{false, true} {
		d, l := build()
		if synced {
			must(t, l.Sync()) // the renames durable, the job never ran
		}
		want := stateOf(t, l)
		must(t, l.Close())
		d.Crash(nil)
		l = mustOpen(t, d, raftlog.Options{SegmentBytesMax: 256})
		if got := stateOf(t, l); !got.equal(want) {
			t.Fatalf("synced=%v: recovered state differs", synced)
		}
		if n := count(d, ".del"); n != 0 {
			t.Fatalf("synced=%v: recovery left %d retired files", synced, n)
		}
	}
}
