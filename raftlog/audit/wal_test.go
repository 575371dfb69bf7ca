package audit

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
	"github.com/strandlog/strand/raftlog/wal"
)

// TestWALKeepsPromises shows the audit of a node with the write-ahead log:
// writes the log never synced hold once the write-ahead log holds them
// durably, and break while it does not (the same promises fail without
// UseWAL, which would see only the log's own synced bytes).
func TestWALKeepsPromises(t *testing.T) {
	disk := memdisk.New()
	w, _, err := wal.Open(disk, "wal")
	must(t, err)
	l, err := raftlog.Open(disk, dir, raftlog.Options{BeforeSync: w.Sync})
	must(t, err)
	save := func(first, last, term uint64, vote uint64) {
		ents, hs := entries(first, last, term), hardState(term, vote, 0)
		must(t, w.Append(wal.Prepare(l, ents, hs)))
		must(t, l.Save(ents, hs))
	}
	save(1, 3, 1, 2)
	must(t, w.Sync())
	save(4, 6, 2, 3)
	a := New(disk)
	a.UseWAL("wal")
	for _, p := range []Promise{{Index: 3, Term: 1}, {HardTerm: 1, Vote: 2}} {
		if err := a.Check(dir, p); err != nil {
			t.Errorf("promise %v over the synced write-ahead log: %v", p, err)
		}
	}
	broken := []Promise{{Index: 6, Term: 2}, {HardTerm: 2, Vote: 3}}
	for _, p := range broken {
		if err := a.Check(dir, p); !errors.Is(err, ErrBroken) {
			t.Errorf("promise %v before the write-ahead log's sync: %v, want ErrBroken", p, err)
		}
	}
	must(t, w.Sync())
	for _, p := range broken {
		if err := a.Check(dir, p); err != nil {
			t.Errorf("promise %v after the write-ahead log's sync: %v", p, err)
		}
	}
	plain := New(disk)
	if err := plain.Check(dir, Promise{Index: 3, Term: 1}); !errors.Is(err, ErrBroken) {
		t.Errorf("without UseWAL the log's unsynced entries pass: %v", err)
	}
}

// TestWALSyncOfAnotherLogKeepsTheView shows that with the write-ahead log
// a sync carrying only another log's writes does not recover the audited
// log again (its projection and its records are as they were), while a
// sync carrying its own writes does, and the new promise holds.
func TestWALSyncOfAnotherLogKeepsTheView(t *testing.T) {
	disk := memdisk.New()
	w, _, err := wal.Open(disk, "wal")
	must(t, err)
	open := func(dir string) func(first, last, term uint64) {
		l, err := raftlog.Open(disk, dir, raftlog.Options{BeforeSync: w.Sync})
		must(t, err)
		return func(first, last, term uint64) {
			ents, hs := entries(first, last, term), hardState(term, 0, 0)
			must(t, w.Append(wal.Prepare(l, ents, hs)))
			must(t, l.Save(ents, hs))
			must(t, w.Sync())
		}
	}
	saveA, saveB := open(dir), open("other/log")
	saveA(1, 3, 1)
	a := New(disk)
	a.UseWAL("wal")
	must(t, a.Check(dir, Promise{Index: 3, Term: 1}))
	saveB(1, 5, 1)
	must(t, a.Check(dir, Promise{Index: 3, Term: 1}))
	if a.Opens != 1 {
		t.Errorf("%d recoveries after a sync of another log's writes, want 1", a.Opens)
	}
	saveA(4, 6, 2)
	must(t, a.Check(dir, Promise{Index: 6, Term: 2, HardTerm: 2}))
	if a.Opens != 2 {
		t.Errorf("%d recoveries after a sync of the log's own writes, want 2", a.Opens)
	}
	must(t, a.Check("other/log", Promise{Index: 5, Term: 1}))
}
