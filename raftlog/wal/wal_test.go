package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
	"github.com/strandlog/strand/raftlog/wal"
	"go.etcd.io/raft/v3/raftpb"
	"pgregory.net/rapid"
)

type fataler interface {
	Helper()
	Fatal(args ...any)
}

func must(t fataler, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func entry(index, term uint64, data string) *raftpb.Entry {
	e := &raftpb.Entry{Index: ptr(index), Term: ptr(term), Type: raftpb.EntryType_EntryNormal.Enum()}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func hard(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: ptr(term), Vote: ptr(vote), Commit: ptr(commit)}
}

// describe renders records for comparison.
func describe(recs []wal.Record) string {
	var b bytes.Buffer
	for _, r := range recs {
		fmt.Fprintf(&b, "%s reset=%v", r.Dir, r.Reset)
		if r.Hard != nil {
			fmt.Fprintf(&b, " hs=%d/%d/%d", r.Hard.GetTerm(), r.Hard.GetVote(), r.Hard.GetCommit())
		}
		for _, e := range r.Entries {
			fmt.Fprintf(&b, " %d@%d:%d:%q", e.GetIndex(), e.GetTerm(), e.GetType(), e.GetData())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func sampleRecords() []wal.Record {
	return []wal.Record{
		{Dir: "p/a/0/log", Entries: []*raftpb.Entry{entry(1, 1, "one"), entry(2, 1, "")}, Hard: hard(1, 2, 1)},
		{Dir: "p/b/3/log", Reset: true},
		{Dir: "p/a/0/log", Hard: hard(2, 0, 2)},
		{Dir: "p/b/3/log", Entries: []*raftpb.Entry{entry(7, 3, "seven")}},
	}
}

// TestAppendSyncReopen shows that synced records come back in order, with
// resets, hard states and entries, and that a reopened log appends after
// them.
func TestAppendSyncReopen(t *testing.T) {
	disk := memdisk.New()
	w, recs, err := wal.Open(disk, "wal")
	must(t, err)
	if len(recs) != 0 {
		t.Fatalf("new log has %d records", len(recs))
	}
	want := sampleRecords()
	must(t, w.Append(want[:2]...))
	must(t, w.Append(want[2:]...))
	must(t, w.Sync())
	disk.Crash(nil)
	w, recs, err = wal.Open(disk, "wal")
	must(t, err)
	if got, exp := describe(recs), describe(want); got != exp {
		t.Fatalf("recovered\n%s\nwant\n%s", got, exp)
	}
	more := wal.Record{Dir: "p/c/0/log", Entries: []*raftpb.Entry{entry(1, 1, "x")}}
	must(t, w.Append(more))
	run := w.StartSync()
	must(t, w.FinishSync(run()))
	disk.Crash(nil)
	_, recs, err = wal.Open(disk, "wal")
	must(t, err)
	if got, exp := describe(recs), describe(append(want, more)); got != exp {
		t.Fatalf("recovered\n%s\nwant\n%s", got, exp)
	}
}

// TestUnsyncedRecordsMayGo shows that a power loss takes back what was not
// synced, and that a write sync covered is kept.
func TestUnsyncedRecordsMayGo(t *testing.T) {
	disk := memdisk.New()
	w, _, err := wal.Open(disk, "wal")
	must(t, err)
	recs := sampleRecords()
	must(t, w.Append(recs[0]))
	must(t, w.Sync())
	must(t, w.Append(recs[1:]...))
	disk.Crash(nil)
	_, got, err := wal.Open(disk, "wal")
	must(t, err)
	if describe(got) != describe(recs[:1]) {
		t.Fatalf("recovered\n%s", describe(got))
	}
}

// TestDamageInsideSyncedDataFails shows that a flipped bit in a record
// followed by valid records is ErrCorrupt, and that a torn tail is cut.
func TestDamageInsideSyncedDataFails(t *testing.T) {
	disk := memdisk.New()
	w, _, err := wal.Open(disk, "wal")
	must(t, err)
	must(t, w.Append(sampleRecords()...))
	must(t, w.Sync())
	name := "wal/00000000000000000001.wal"
	disk.FlipBit(name, 40, 3)
	if _, _, err := wal.Open(disk, "wal"); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("open of a damaged log: %v, want ErrCorrupt", err)
	}
	disk.FlipBit(name, 40, 3)
	data, _ := disk.ReadFile(name)
	f, err := disk.Open(name)
	must(t, err)
	must(t, f.Truncate(int64(len(data)-3)))
	_, recs, err := wal.Open(disk, "wal")
	must(t, err)
	if describe(recs) != describe(sampleRecords()[:3]) {
		t.Fatalf("torn tail: recovered\n%s", describe(recs))
	}
}

// TestRotateRemovesOldSegments shows that Rotate leaves one segment, that
// older records are gone and newer ones kept, and that a gap between
// segments is corruption.
func TestRotateRemovesOldSegments(t *testing.T) {
	disk := memdisk.New()
	w, _, err := wal.Open(disk, "wal")
	must(t, err)
	recs := sampleRecords()
	must(t, w.Append(recs[:2]...))
	must(t, w.Rotate())
	must(t, w.Append(recs[2:]...))
	must(t, w.Rotate())
	must(t, w.Append(recs[3]))
	must(t, w.Sync())
	if w.Segments() != 1 {
		t.Fatalf("%d segments after Rotate", w.Segments())
	}
	disk.Crash(nil)
	_, got, err := wal.Open(disk, "wal")
	must(t, err)
	if describe(got) != describe(recs[3:]) {
		t.Fatalf("recovered\n%s", describe(got))
	}
	f, err := disk.Open("wal/00000000000000000009.wal")
	must(t, err)
	_, err = f.WriteAt([]byte("x"), 0)
	must(t, err)
	if _, _, err := wal.Open(disk, "wal"); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("open with a gap: %v, want ErrCorrupt", err)
	}
}

// TestStartRemoveOldOffTheCaller shows the removal StartRemoveOld hands
// out: the retired segments leave the log's accounting at once, appends
// and syncs go on before run, a power loss before run leaves them to be
// replayed (with the newer records after them), and after run and another
// power loss only the last segment's records remain.
func TestStartRemoveOldOffTheCaller(t *testing.T) {
	disk := memdisk.New()
	w, _, err := wal.Open(disk, "wal")
	must(t, err)
	recs := sampleRecords()
	must(t, w.Append(recs[:2]...))
	must(t, w.Roll())
	before := w.Bytes()
	run := w.StartRemoveOld()
	if w.Segments() != 1 || w.Bytes() >= before {
		t.Fatalf("after StartRemoveOld: %d segments, %d bytes (was %d)", w.Segments(), w.Bytes(), before)
	}
	must(t, w.Append(recs[2:]...))
	must(t, w.Sync())
	snapshot := disk.Clone()
	snapshot.Crash(nil)
	_, got, err := wal.Open(snapshot, "wal")
	must(t, err)
	if describe(got) != describe(recs) {
		t.Fatalf("power loss before the removal ran: recovered\n%s", describe(got))
	}
	must(t, run())
	disk.Crash(nil)
	_, got, err = wal.Open(disk, "wal")
	must(t, err)
	if describe(got) != describe(recs[2:]) {
		t.Fatalf("power loss after the removal: recovered\n%s", describe(got))
	}
}

// FuzzOpenWAL feeds arbitrary bytes as the last segment after a valid first
// one: Open must not panic, and either fails with ErrCorrupt or recovers
// records that a second Open returns again (recovery is idempotent) and
// after which an append reads back.
func FuzzOpenWAL(f *testing.F) {
	disk := memdisk.New()
	w, _, err := wal.Open(disk, "wal")
	must(f, err)
	must(f, w.Append(sampleRecords()...))
	must(f, w.Sync())
	valid, _ := disk.ReadFile("wal/00000000000000000001.wal")
	f.Add(valid)
	f.Add(valid[:len(valid)-7])
	flipped := bytes.Clone(valid)
	flipped[30] ^= 4
	f.Add(flipped)
	f.Add([]byte{})
	f.Add(valid[:12])
	f.Fuzz(func(t *testing.T, content []byte) {
		disk := memdisk.New()
		w, _, err := wal.Open(disk, "wal")
		must(t, err)
		must(t, w.Append(sampleRecords()[0]))
		must(t, w.Rotate())
		file, err := disk.Open("wal/00000000000000000003.wal")
		must(t, err)
		_, err = file.WriteAt(content, 0)
		must(t, err)
		w2, recs, err := wal.Open(disk, "wal")
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("open failed without ErrCorrupt: %v", err)
			}
			return
		}
		more := wal.Record{Dir: "d", Entries: []*raftpb.Entry{entry(5, 5, "five")}}
		must(t, w2.Append(more))
		must(t, w2.Sync())
		disk.Crash(nil)
		_, again, err := wal.Open(disk, "wal")
		must(t, err)
		if describe(again) != describe(append(recs, more)) {
			t.Fatalf("reopen: got\n%s\nwant\n%s", describe(again), describe(append(recs, more)))
		}
	})
}

// TestModelCrash drives random appends, syncs (whole or split), rotations
// and power losses (memdisk.Crash: a random prefix of unsynced writes
// survives, the last possibly torn): every recovery returns a prefix of the
// records appended since the last rotation that holds at least every
// record a sync covered.
func TestModelCrash(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		disk := memdisk.New()
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		w, _, err := wal.Open(disk, "wal")
		must(t, err)
		var all []wal.Record // since the last Rotate
		durable := 0
		next := uint64(1)
		for range rapid.IntRange(1, 60).Draw(t, "ops") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2, 3:
				n := rapid.IntRange(1, 3).Draw(t, "n")
				var recs []wal.Record
				for range n {
					r := wal.Record{Dir: fmt.Sprintf("g%d", rapid.IntRange(0, 2).Draw(t, "g")),
						Reset: rapid.IntRange(0, 5).Draw(t, "reset") == 0}
					for range rapid.IntRange(0, 3).Draw(t, "entries") {
						r.Entries = append(r.Entries, entry(next, 1, rapid.StringN(0, 40, -1).Draw(t, "data")))
						next++
					}
					if rapid.Bool().Draw(t, "hard") {
						r.Hard = hard(next, 1, next/2)
					}
					recs = append(recs, r)
				}
				must(t, w.Append(recs...))
				all = append(all, recs...)
			case 4, 5:
				must(t, w.Sync())
				durable = len(all)
			case 6:
				run := w.StartSync()
				must(t, w.FinishSync(run()))
				durable = len(all)
			case 7:
				must(t, w.Rotate())
				all, durable = nil, 0
			case 8, 9:
				disk.Crash(rng)
				var got []wal.Record
				w, got, err = wal.Open(disk, "wal")
				must(t, err)
				if len(got) < durable || len(got) > len(all) || describe(got) != describe(all[:len(got)]) {
					t.Fatalf("recovered %d records (durable %d of %d):\n%s\nappended:\n%s",
						len(got), durable, len(all), describe(got), describe(all))
				}
				all, durable = got, len(got)
			}
		}
	})
}

var _ raftlog.Disk = (*memdisk.Disk)(nil)
