package audit

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
)

const dir = "g/log"

func entries(first, last, term uint64) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := first; i <= last; i++ {
		out = append(out, &raftpb.Entry{Index: new(i), Term: new(term), Data: []byte("payload")})
	}
	return out
}

func hardState(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPromisesOverSyncedDataHoldOverUnsyncedFail shows the audit's verdicts
// on a log with synced and unsynced entries and hard state: promises about
// synced data pass, promises about data still in the page cache (or never
// written) fail with ErrBroken, and the same promises pass once synced.
func TestPromisesOverSyncedDataHoldOverUnsyncedFail(t *testing.T) {
	disk := memdisk.New()
	l, err := raftlog.Open(disk, dir, raftlog.Options{})
	must(t, err)
	must(t, l.Save(entries(1, 3, 1), hardState(1, 2, 1)))
	must(t, l.Sync())
	// Unsynced: entries 4..9 of term 2 and a vote for 3 in term 2.
	must(t, l.Save(entries(4, 9, 2), hardState(2, 3, 3)))
	a := New(disk)
	held := []Promise{
		{Index: 3, Term: 1},
		{Index: 2},
		{HardTerm: 1, Vote: 2},
		{HardTerm: 1},
	}
	broken := []Promise{
		{Index: 9},
		{Index: 4, Term: 2},
		{Index: 3, Term: 2},    // synced entry, wrong term
		{HardTerm: 2},          // term not durable
		{HardTerm: 2, Vote: 3}, // vote not durable
		{HardTerm: 1, Vote: 3}, // a different vote in the same term
		{Index: 12},            // never written
	}
	check := func(stage string, held, broken []Promise) {
		t.Helper()
		for _, p := range held {
			if err := a.Check(dir, p); err != nil {
				t.Errorf("%s: promise %v: %v", stage, p, err)
			}
		}
		for _, p := range broken {
			if err := a.Check(dir, p); !errors.Is(err, ErrBroken) {
				t.Errorf("%s: promise %v: got %v, want ErrBroken", stage, p, err)
			}
		}
	}
	check("before sync", held, broken)
	if a.Opens != 1 {
		t.Errorf("%d recoveries for checks at one durable generation, want 1", a.Opens)
	}
	must(t, l.Sync())
	check("after sync", append(held, Promise{Index: 9, Term: 2}, Promise{HardTerm: 2, Vote: 3}),
		[]Promise{{Index: 3, Term: 2}, {HardTerm: 3}, {Index: 12}})
	if a.Opens != 2 {
		t.Errorf("%d recoveries after one sync, want 2", a.Opens)
	}
	// The live log was not disturbed: it still writes and reads.
	must(t, l.Save(entries(10, 10, 2), nil))
	must(t, l.Sync())
	if got, err := l.Entries(1, 11, 1<<20); err != nil || len(got) != 10 {
		t.Fatalf("live log after audits: %d entries, %v", len(got), err)
	}
}

// TestTruncationNotDurable shows a follower's replaced tail: once the new
// entries are synced the promise about the new term holds, while before
// the sync a crash would keep the old entries (raftlog syncs the cut
// itself, so only the new entries are at stake).
func TestTruncationNotDurable(t *testing.T) {
	disk := memdisk.New()
	l, err := raftlog.Open(disk, dir, raftlog.Options{})
	must(t, err)
	must(t, l.Save(entries(1, 5, 1), hardState(1, 1, 2)))
	must(t, l.Sync())
	must(t, l.Save(entries(4, 4, 2), hardState(2, 2, 2)))
	a := New(disk)
	if err := a.Check(dir, Promise{Index: 4, Term: 2, HardTerm: 2}); !errors.Is(err, ErrBroken) {
		t.Fatalf("unsynced replacement: %v, want ErrBroken", err)
	}
	must(t, l.Sync())
	if err := a.Check(dir, Promise{Index: 4, Term: 2, HardTerm: 2, Vote: 2}); err != nil {
		t.Fatalf("synced replacement: %v", err)
	}
	if err := a.Check(dir, Promise{Index: 5}); !errors.Is(err, ErrBroken) {
		t.Fatalf("the cut entry 5 still promised: %v", err)
	}
}

// TestUnopenableProjection shows a directory whose durable state would not
// recover (a segment flipped inside synced data) breaks every promise.
func TestUnopenableProjection(t *testing.T) {
	disk := memdisk.New()
	l, err := raftlog.Open(disk, dir, raftlog.Options{SegmentBytesMax: 256})
	must(t, err)
	must(t, l.Save(entries(1, 9, 1), hardState(1, 1, 1)))
	must(t, l.Sync())
	disk.FlipBit(dir+"/00000000000000000001.log", 40, 3)
	if err := New(disk).Check(dir, Promise{}); !errors.Is(err, ErrBroken) {
		t.Fatalf("corrupt synced segment: %v, want ErrBroken", err)
	}
}
