package raftlog_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// SaveSome issues no write and stops where the active segment rolls: it
// encodes what fits and the seal as pending writes and reports how many
// entries it took; the caller's background sync (StartSync's job) then
// issues the writes, one per segment however many SaveSomes came before,
// and makes the sealed segment durable, and the next SaveSome creates the
// next segment with no fsync of its own (only its segment record is
// written at once). Save across a roll
// writes and fsyncs on the caller's thread (the roll
// TestSyncCostsOnlyWhatIsDirty counts); SaveSome's writes and fsyncs are
// all in the job.
func TestSaveSomeLeavesTheRollSyncToTheCaller(t *testing.T) {
	disk := &countingDisk{Disk: memdisk.New()}
	l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 400})
	must(t, l.Sync())
	disk.reset()
	n, err := l.SaveSome(batch(1, 5, 1, 20), hardState(1, 1, 3))
	must(t, err)
	if n != 5 {
		t.Fatalf("SaveSome of 5 entries that fit wrote %d", n)
	}
	disk.expect(t, "save of 5 entries and a hard state: pending", 0, 0, 0)
	es := batch(6, 6, 1, 20)
	n, err = l.SaveSome(es, hardState(1, 1, 8))
	must(t, err)
	if n == 0 || n >= len(es) {
		t.Fatalf("SaveSome across a roll wrote %d of %d entries, want some", n, len(es))
	}
	disk.expect(t, "save up to the roll: entries and seal, pending", 0, 0, 0)
	run := l.StartSync()
	must(t, l.FinishSync(run()))
	disk.expect(t, "the caller's sync job: both saves in one write, the sealed segment synced", 1, 0, 1)
	m, err := l.SaveSome(es[n:], hardState(1, 1, 8))
	must(t, err)
	if m != len(es)-n {
		t.Fatalf("SaveSome of the rest wrote %d of %d", m, len(es)-n)
	}
	disk.expect(t, "the rest: next segment created with its segment record, the entries pending", 0, 0, 1)
	must(t, l.Sync())
	disk.expect(t, "sync after the roll: entries and hard state in one write", 1, 1, 1)
	must(t, l.Close())
	l = mustOpen(t, disk.Disk, raftlog.Options{})
	must(t, l.VerifyFrom(0))
	if last, _ := l.LastIndex(); last != 11 {
		t.Fatalf("reopened at last index %d, want 11", last)
	}
	if hs, _, _ := l.InitialState(); hs.GetCommit() != 8 {
		t.Fatalf("reopened with commit %d, want 8", hs.GetCommit())
	}
}

// A write after SaveSome sealed the segment, with no sync in between,
// syncs the sealed segment before creating the next (every segment but the
// last is durable); a power loss while the roll waits for its sync loses
// only unsynced entries: the seal ending the last segment is cut like a
// torn tail and everything synced before reopens.
func TestSaveSomeRollKeepsSealedSegmentsDurable(t *testing.T) {
	for seed := range uint64(40) {
		base := memdisk.New()
		disk := &countingDisk{Disk: base}
		l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 400})
		must(t, l.Save(batch(1, 4, 1, 20), hardState(1, 1, 4)))
		must(t, l.Sync())
		es := batch(5, 8, 1, 20)
		n, err := l.SaveSome(es, hardState(1, 1, 12))
		must(t, err)
		low, high := uint64(4), uint64(4+n) // what a power loss may leave
		if seed%2 == 0 {                    // the caller forgot the sync: the next write makes it
			disk.reset()
			m, err := l.SaveSome(es[n:], nil)
			must(t, err)
			if m != len(es)-n || disk.fileSyncs != 1 {
				t.Fatalf("write after an unsynced roll: wrote %d of %d with %d fsyncs, want all with 1", m, len(es)-n, disk.fileSyncs)
			}
			low, high = uint64(4+n), uint64(4+len(es)) // the sealed segment is durable
		}
		base.Crash(rand.New(rand.NewPCG(seed, 3)))
		l = mustOpen(t, base, raftlog.Options{SegmentBytesMax: 400})
		must(t, l.VerifyFrom(0))
		last, _ := l.LastIndex()
		if last < low || last > high {
			t.Fatalf("seed %d: reopened at last index %d, want %d..%d", seed, last, low, high)
		}
		ents, err := l.Entries(1, last+1, math.MaxUint64)
		must(t, err)
		if uint64(len(ents)) != last {
			t.Fatalf("seed %d: %d entries read back, want %d", seed, len(ents), last)
		}
		must(t, l.Save(batch(last+1, 8, 2, 20), nil))
		must(t, l.Sync())
		must(t, l.Close())
	}
}

// Roll (segment.ms) while a roll SaveSome began waits for its sync
// finishes that roll instead of sealing the sealed segment again; the log
// reopens whole.
func TestRollFinishesPendingRoll(t *testing.T) {
	disk := memdisk.New()
	l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 400})
	es := batch(1, 12, 1, 20)
	n, err := l.SaveSome(es, nil)
	must(t, err)
	if n == len(es) {
		t.Fatal("SaveSome did not stop at a roll")
	}
	must(t, l.Sync())
	rolled, err := l.Roll()
	must(t, err)
	if !rolled {
		t.Fatal("Roll with a roll pending reported none")
	}
	m, err := l.SaveSome(es[n:], hardState(1, 1, 12))
	must(t, err)
	if m != len(es)-n {
		t.Fatalf("rest: wrote %d of %d", m, len(es)-n)
	}
	must(t, l.Sync())
	must(t, l.Close())
	l = mustOpen(t, disk, raftlog.Options{})
	must(t, l.VerifyFrom(0))
	if last, _ := l.LastIndex(); last != 12 {
		t.Fatalf("reopened at last index %d, want 12", last)
	}
}

// StartCreateSnapshot's job makes the snapshot durable with no fsync on
// the caller's thread; FinishCreateSnapshot then installs it and compacts,
// as CreateSnapshot. A power loss between the job and the finish reopens
// on the new snapshot, the segments it covers discarded; one before the
// job reopens as before it.
func TestStartCreateSnapshotRunsItsFsyncsInTheJob(t *testing.T) {
	conf := &raftpb.ConfState{Voters: []uint64{1}}
	build := func() (*memdisk.Disk, *countingDisk, *raftlog.Log) {
		d := memdisk.New()
		cd := &countingDisk{Disk: d}
		l := mustOpen(t, cd, raftlog.Options{SegmentBytesMax: 256})
		for i := uint64(1); i <= 40; i++ {
			must(t, l.Save(entriesOf(entry(i, 1, strings.Repeat("x", 40))), hardState(1, 1, i)))
		}
		must(t, l.Sync())
		cd.reset()
		return d, cd, l
	}
	_, cd, l := build()
	run, err := l.StartCreateSnapshot(30, conf, []byte("s"))
	must(t, err)
	must(t, l.SetHardState(hardState(2, 1, 40))) // writes go on meanwhile
	cd.expect(t, "start and a write", 0, 0, 1)
	must(t, run())
	cd.expect(t, "the job: snapshot file and directory", 1, 1, 1)
	must(t, l.FinishCreateSnapshot(nil))
	cd.expect(t, "finish: no fsync", 0, 0, 0)
	if first, _ := l.FirstIndex(); first != 31 {
		t.Fatalf("first index %d after the finish, want 31", first)
	}
	if snap, _ := l.Snapshot(); snap.GetMetadata().GetIndex() != 30 {
		t.Fatalf("snapshot at %d, want 30", snap.GetMetadata().GetIndex())
	}
	for _, ran := range []bool{false, true} {
		d, _, l := build()
		run, err := l.StartCreateSnapshot(30, conf, []byte("s"))
		must(t, err)
		if ran {
			must(t, run())
		}
		d.Crash(rand.New(rand.NewPCG(1, 1)))
		l = mustOpen(t, d, raftlog.Options{SegmentBytesMax: 256})
		snap, _ := l.Snapshot()
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		switch {
		case ran && (snap.GetMetadata().GetIndex() != 30 || first != 31):
			t.Fatalf("crash after the job: snapshot %d, first index %d; want 30, 31", snap.GetMetadata().GetIndex(), first)
		case !ran && (snap.GetMetadata().GetIndex() != 0 || first != 1):
			t.Fatalf("crash before the job: snapshot %d, first index %d; want none, 1", snap.GetMetadata().GetIndex(), first)
		case last != 40:
			t.Fatalf("last index %d, want 40", last)
		}
		must(t, l.VerifyFrom(first))
		must(t, l.Close())
	}
}

// SealActive (a roll by age, segment.ms) writes and syncs nothing itself:
// the seal is pending, the caller's sync job writes and fsyncs it, and Roll
// then only creates the next segment (its segment record, no fsync). A
// power loss at any point leaves every synced entry; sealing an empty
// active segment, or one sealed already, does nothing.
func TestSealActiveLeavesTheFsyncToTheJob(t *testing.T) {
	for seed := range uint64(30) {
		base := memdisk.New()
		disk := &countingDisk{Disk: base}
		l := mustOpen(t, disk, raftlog.Options{SegmentBytesMax: 1 << 20})
		if sealed, err := l.SealActive(); err != nil || sealed {
			t.Fatalf("SealActive of an empty segment: %v, %v; want nothing sealed", sealed, err)
		}
		must(t, l.Save(batch(1, 4, 1, 20), hardState(1, 1, 4)))
		must(t, l.Sync())
		must(t, l.Save(batch(5, 2, 1, 20), nil)) // pending, unsynced
		disk.reset()
		sealed, err := l.SealActive()
		must(t, err)
		if !sealed || !l.RollPending() {
			t.Fatalf("SealActive of a segment with entries: sealed %v, roll pending %v", sealed, l.RollPending())
		}
		disk.expect(t, "SealActive: the seal pending", 0, 0, 0)
		if again, err := l.SealActive(); err != nil || again {
			t.Fatalf("SealActive of a sealed segment: %v, %v; want nothing", again, err)
		}
		low := uint64(4)
		if seed%3 != 0 {
			run := l.StartSync()
			must(t, l.FinishSync(run()))
			disk.expect(t, "the sync job: the entries and seal in one write, one fsync", 1, 0, 1)
			low = 6
			if seed%3 == 2 {
				rolled, err := l.Roll()
				must(t, err)
				if !rolled || l.RollPending() {
					t.Fatalf("Roll after the sealed segment synced: rolled %v, roll pending %v", rolled, l.RollPending())
				}
				disk.expect(t, "Roll after the job: the next segment created, no fsync", 0, 0, 1)
				if segs := l.Segments(nil); len(segs) != 2 {
					t.Fatalf("%d segments after the roll, want 2", len(segs))
				}
			}
		}
		base.Crash(rand.New(rand.NewPCG(seed, 5)))
		l = mustOpen(t, base, raftlog.Options{SegmentBytesMax: 1 << 20})
		must(t, l.VerifyFrom(0))
		last, _ := l.LastIndex()
		if last < low || last > 6 {
			t.Fatalf("seed %d: reopened at last index %d, want %d..6", seed, last, low)
		}
		must(t, l.Save(batch(last+1, 3, 2, 20), nil))
		must(t, l.Sync())
		must(t, l.Close())
	}
}
