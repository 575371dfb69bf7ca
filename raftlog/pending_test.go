package raftlog_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// Entries SaveSome took but no write has put on file yet are read from
// memory, even with the tail cache off: Entries, a split read spanning
// written and unwritten entries, and Term. Once the sync job ran and
// FinishSync came back they are read from the file (the cache off evicts
// them). A power loss or a kill (the Log dropped) before the job ran loses
// only them: the log reopens at what the last sync covered.
func TestSaveSomeServesUnwrittenEntriesFromMemory(t *testing.T) {
	for seed := range uint64(20) {
		disk := &countingDisk{Disk: memdisk.New()}
		l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 1 << 20, TailCacheBytesMax: -1})
		must(t, l.Save(batch(1, 5, 1, 30), hardState(1, 1, 5)))
		must(t, l.Sync())
		disk.reset()
		es := batch(6, 5, 2, 30)
		n, err := l.SaveSome(es, hardState(2, 1, 5))
		must(t, err)
		if n != len(es) {
			t.Fatalf("SaveSome took %d of %d", n, len(es))
		}
		disk.expect(t, "SaveSome", 0, 0, 0)
		got, err := l.Entries(3, 11, math.MaxUint64)
		must(t, err)
		checkRange(t, "Entries across the pending write", got, 3, 11)
		pre, rd, err := l.StartRead(4, 9, math.MaxUint64)
		must(t, err)
		if rd == nil {
			t.Fatalf("StartRead of entries on file served from memory with the cache off (%d entries)", len(pre))
		}
		must(t, rd.Run())
		got, err = l.FinishRead(rd)
		must(t, err)
		checkRange(t, "split read across the pending write", got, 4, 9)
		if term, err := l.Term(10); err != nil || term != 2 {
			t.Fatalf("Term(10) = %d, %v; want 2", term, err)
		}
		disk.reset()
		run := l.StartSync()
		switch seed % 3 {
		case 0: // the job never runs: a power loss
			disk.Disk.(*memdisk.Disk).Crash(rand.New(rand.NewPCG(seed, 1)))
		case 1: // the job never runs: a kill drops the Log's memory
			must(t, l.Close())
		default:
			must(t, l.FinishSync(run()))
			disk.expect(t, "the sync job: one write, one fsync", 1, 0, 1)
			got, err = l.Entries(6, 11, math.MaxUint64)
			must(t, err)
			checkRange(t, "Entries after the job", got, 6, 11)
			if disk.reads == 0 {
				t.Fatalf("entries on file read from memory with the cache off")
			}
			must(t, l.Close())
		}
		l = mustOpen(t, disk.Disk, raftlog.Options{})
		last, _ := l.LastIndex()
		if want := map[uint64]uint64{0: 5, 1: 5, 2: 10}[seed%3]; last != want {
			t.Fatalf("seed %d: reopened at last index %d, want %d", seed, last, want)
		}
		got, err = l.Entries(1, last+1, math.MaxUint64)
		must(t, err)
		checkRange(t, "after reopening", got, 1, last+1)
		must(t, l.Close())
	}
}

// checkRange fails unless got holds entries lo..hi-1 as batch made them.
func checkRange(t *testing.T, what string, got []*raftpb.Entry, lo, hi uint64) {
	t.Helper()
	if uint64(len(got)) != hi-lo {
		t.Fatalf("%s: %d entries, want %d", what, len(got), hi-lo)
	}
	for i, e := range got {
		want := batch(lo+uint64(i), 1, e.GetTerm(), 30)[0]
		if e.GetIndex() != lo+uint64(i) || string(e.GetData()) != string(want.GetData()) {
			t.Fatalf("%s: entry %d is index %d data %q", what, lo+uint64(i), e.GetIndex(), e.GetData())
		}
	}
}

// A kill (the Log's memory gone, the files as written) after a compaction
// retired every segment before the active one never leaves the log without
// a segment continuing the snapshot, though the active segment's entries
// were still pending: its segment record is written when it is created.
// (With the record pending too, every partition of a killed node failed
// to open: "no segment continues snapshot".)
func TestKillAfterCompactionKeepsTheActiveSegment(t *testing.T) {
	disk := memdisk.New()
	l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 400})
	es := batch(1, 12, 1, 20)
	n, err := l.SaveSome(es, hardState(1, 1, 0))
	must(t, err)
	if n == 0 || n == len(es) {
		t.Fatalf("SaveSome took %d of %d entries, want a roll inside", n, len(es))
	}
	must(t, l.FinishSync(l.StartSync()()))
	m, err := l.SaveSome(es[n:], hardState(1, 1, uint64(n)))
	must(t, err)
	if m != len(es)-n {
		t.Fatalf("SaveSome of the rest took %d of %d", m, len(es)-n)
	}
	run, err := l.StartCreateSnapshot(uint64(n), nil, []byte("state"))
	must(t, err)
	must(t, l.FinishCreateSnapshot(run()))
	if first, _ := l.FirstIndex(); first != uint64(n)+1 {
		t.Fatalf("first index %d after compacting to %d", first, n)
	}
	must(t, l.Close()) // a kill: the pending entries are lost, the renames kept
	l = mustOpen(t, disk, raftlog.Options{})
	if first, _ := l.FirstIndex(); first != uint64(n)+1 {
		t.Fatalf("reopened with first index %d, want %d", first, n+1)
	}
	if last, _ := l.LastIndex(); last != uint64(n) {
		t.Fatalf("reopened with last index %d, want %d (the rest was never written)", last, n)
	}
	must(t, l.Close())
}

// StartSyncPhases splits the sync job in two: after write the entries are
// on file but unsynced (a kill keeps them, a power loss drops them); after
// sync a power loss keeps them too. The simulator runs the phases as two
// events so that crashes land between them.
func TestStartSyncPhasesWriteThenSync(t *testing.T) {
	for _, step := range []string{"write, then power loss", "write, then kill", "write and sync, then power loss"} {
		disk := memdisk.New()
		l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 1 << 20})
		must(t, l.Save(batch(1, 5, 1, 30), hardState(1, 1, 5)))
		must(t, l.Sync())
		if _, err := l.SaveSome(batch(6, 5, 2, 30), hardState(2, 1, 5)); err != nil {
			t.Fatal(err)
		}
		write, sync := l.StartSyncPhases()
		must(t, write())
		want := uint64(10)
		switch step {
		case "write, then power loss":
			if disk.Synced("log") {
				t.Fatalf("%s: the log counts as synced after the write phase alone", step)
			}
			disk.Crash(rand.New(rand.NewPCG(1, 1)))
			want = 5
		case "write, then kill":
			must(t, l.Close())
		default:
			must(t, l.FinishSync(sync()))
			if !disk.Synced("log") {
				t.Fatalf("%s: the log is not synced after both phases", step)
			}
			must(t, l.Close())
			disk.Crash(rand.New(rand.NewPCG(1, 1)))
		}
		l = mustOpen(t, disk, raftlog.Options{})
		if last, _ := l.LastIndex(); last != want {
			t.Fatalf("%s: reopened at last index %d, want %d", step, last, want)
		}
		must(t, l.Close())
	}
}
