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

// TestFindSeesOnlyKeptEntries shows Find locates an entry a crash would
// keep and fails with ErrBroken for one still in the page cache.
func TestFindSeesOnlyKeptEntries(t *testing.T) {
	disk := memdisk.New()
	l, err := raftlog.Open(disk, dir, raftlog.Options{})
	must(t, err)
	must(t, l.Save(entries(1, 40, 1), hardState(1, 1, 1)))
	must(t, l.Sync())
	must(t, l.Save([]*raftpb.Entry{{Index: new(uint64(41)), Term: new(uint64(1)), Data: []byte("acked")}}, nil))
	a := New(disk)
	isIndex := func(i uint64) func(*raftpb.Entry) bool {
		return func(e *raftpb.Entry) bool { return e.GetIndex() == i }
	}
	if i, term, err := a.Find(dir, 100, isIndex(3)); err != nil || i != 3 || term != 1 {
		t.Fatalf("synced entry 3: %d %d %v", i, term, err)
	}
	if _, _, err := a.Find(dir, 10, isIndex(3)); !errors.Is(err, ErrBroken) {
		t.Fatalf("entry 3 beyond the limit: %v, want ErrBroken", err)
	}
	acked := func(e *raftpb.Entry) bool { return string(e.GetData()) == "acked" }
	if _, _, err := a.Find(dir, 100, acked); !errors.Is(err, ErrBroken) {
		t.Fatalf("unsynced entry: %v, want ErrBroken", err)
	}
	must(t, l.Sync())
	if i, _, err := a.Find(dir, 100, acked); err != nil || i != 41 {
		t.Fatalf("synced entry 41: %d %v", i, err)
	}
}
