package raftlog_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/strandlog/strand/raftlog"
)

// TestStorageMatchesMemoryStorage shows Log answers every raft.Storage query as raft.MemoryStorage does after the same operations, also across reopen.
func TestStorageMatchesMemoryStorage(t *testing.T) {
	for _, kind := range fastDiskKinds {
		t.Run(kind.name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				disk := kind.make(t)
				opts := raftlog.Options{SegmentBytesMax: rapid.Int64Range(64, 2048).Draw(rt, "segmentBytesMax"),
					TailCacheBytesMax: rapid.SampledFrom([]int64{-1, 0, 300}).Draw(rt, "tailCacheBytesMax")}
				l := mustOpen(t, disk, opts)
				defer func() { l.Close() }()
				ms := raft.NewMemoryStorage()
				for step := 0; step < 30; step++ {
					l = compareStep(rt, disk, opts, l, ms)
					compareStorage(rt, l, ms)
				}
			})
		})
	}
}

// compareStep applies one random operation to both storages.
func compareStep(rt *rapid.T, disk raftlog.Disk, opts raftlog.Options, l *raftlog.Log, ms *raft.MemoryStorage) *raftlog.Log {
	first, _ := ms.FirstIndex()
	last, _ := ms.LastIndex()
	hs, _, _ := ms.InitialState()
	commit := max(hs.GetCommit(), first-1) // raft's commit never trails the snapshot
	switch rapid.IntRange(0, 9).Draw(rt, "op") {
	case 0, 1, 2, 3:
		start := rapid.Uint64Range(max(first, commit+1), last+1).Draw(rt, "start")
		prevTerm, _ := ms.Term(start - 1)
		n := rapid.IntRange(1, 6).Draw(rt, "count")
		term := prevTerm + rapid.Uint64Range(0, 2).Draw(rt, "termBump")
		var batch []*raftpb.Entry
		for j := 0; j < n; j++ {
			data := rapid.StringN(0, 120, -1).Draw(rt, "data")
			batch = append(batch, entry(start+uint64(j), term, data))
		}
		mustRT(rt, ms.Append(batch))
		mustRT(rt, l.Append(batch))
	case 4:
		if min(last, commit) < first {
			return l
		}
		i := rapid.Uint64Range(first, min(last, commit)).Draw(rt, "snapIndex")
		cs := &raftpb.ConfState{Voters: []uint64{1, rapid.Uint64Range(2, 9).Draw(rt, "voter")}}
		data := []byte(fmt.Sprintf("state@%d", i))
		_, err := ms.CreateSnapshot(i, cs, data)
		mustRT(rt, err)
		mustRT(rt, ms.Compact(i))
		mustRT(rt, l.CreateSnapshot(i, cs, data))
	case 5:
		i := rapid.Uint64Range(commit+1, last+5).Draw(rt, "applyIndex")
		lastTerm, _ := ms.Term(last)
		snap := &raftpb.Snapshot{Data: []byte("leader"), Metadata: &raftpb.SnapshotMetadata{
			Index: new(i), Term: new(lastTerm + 1), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}
		errM := ms.ApplySnapshot(snap)
		errL := l.ApplySnapshot(snap)
		if !errors.Is(errL, errM) {
			rt.Fatalf("apply snapshot: memory %v, log %v", errM, errL)
		}
		if errM == nil { // raft follows a snapshot with its commit
			hs := hardState(hs.GetTerm(), hs.GetVote(), i)
			mustRT(rt, ms.SetHardState(hs))
			mustRT(rt, l.SetHardState(hs))
		}
	case 6:
		hs := nextHardState(rt, hs, commit, last)
		mustRT(rt, ms.SetHardState(hs))
		mustRT(rt, l.SetHardState(hs))
	case 7:
		mustRT(rt, l.Sync())
	case 8:
		mustRT(rt, l.Close())
		var err error
		l, err = raftlog.Open(disk, "log", opts)
		mustRT(rt, err)
	case 9:
		i := rapid.Uint64Range(0, first-1).Draw(rt, "staleSnapIndex")
		errM := func() error { _, err := ms.CreateSnapshot(i, nil, nil); return err }()
		if errM == nil {
			return l // only the out-of-date case is compared here
		}
		if err := l.CreateSnapshot(i, nil, nil); !errors.Is(err, errM) {
			rt.Fatalf("create stale snapshot %d: memory %v, log %v", i, errM, err)
		}
	}
	return l
}

// compareStorage checks every Storage query on both.
func compareStorage(rt *rapid.T, l *raftlog.Log, ms *raft.MemoryStorage) {
	firstM, _ := ms.FirstIndex()
	lastM, _ := ms.LastIndex()
	firstL, _ := l.FirstIndex()
	lastL, _ := l.LastIndex()
	if firstM != firstL || lastM != lastL {
		rt.Fatalf("first/last: memory %d/%d, log %d/%d", firstM, lastM, firstL, lastL)
	}
	for i := uint64(0); i <= lastM+2; i++ {
		tm, errM := ms.Term(i)
		tl, errL := l.Term(i)
		if tm != tl || !errors.Is(errL, errM) || (errM == nil) != (errL == nil) {
			rt.Fatalf("term(%d): memory %d %v, log %d %v", i, tm, errM, tl, errL)
		}
	}
	for k := 0; k < 4; k++ {
		lo := rapid.Uint64Range(0, lastM+1).Draw(rt, "lo")
		hi := rapid.Uint64Range(lo, lastM+1).Draw(rt, "hi")
		maxSize := rapid.SampledFrom([]uint64{0, 1, 50, 150, 400, math.MaxUint64}).Draw(rt, "maxSize")
		em, errM := ms.Entries(lo, hi, maxSize)
		el, errL := l.Entries(lo, hi, maxSize)
		if !errors.Is(errL, errM) || (errM == nil) != (errL == nil) {
			rt.Fatalf("entries(%d,%d,%d): memory err %v, log err %v", lo, hi, maxSize, errM, errL)
		}
		if len(em) != len(el) {
			rt.Fatalf("entries(%d,%d,%d): memory %d entries, log %d", lo, hi, maxSize, len(em), len(el))
		}
		for j := range em {
			if !proto.Equal(em[j], el[j]) {
				rt.Fatalf("entries(%d,%d,%d)[%d]: memory %v, log %v", lo, hi, maxSize, j, em[j], el[j])
			}
		}
		if len(el) > 0 { // the caller may append: must not disturb the log
			_ = append(el, entry(999, 999, "x"))
		}
	}
	sm, _ := ms.Snapshot()
	sl, _ := l.Snapshot()
	if !proto.Equal(sm, sl) {
		rt.Fatalf("snapshot: memory %v, log %v", sm, sl)
	}
	hm, cm, _ := ms.InitialState()
	hl, cl, _ := l.InitialState()
	if !proto.Equal(hm, hl) || !proto.Equal(cm, cl) {
		rt.Fatalf("initial state: memory %v %v, log %v %v", hm, cm, hl, cl)
	}
}

func mustRT(rt *rapid.T, err error) {
	rt.Helper()
	if err != nil {
		rt.Fatal(err)
	}
}

// nextHardState draws a hard state that raft could write after hs: the term
// never goes down, the vote changes only from none within a term, and the
// commit grows within [commitLo, commitHi].
func nextHardState(rt *rapid.T, hs *raftpb.HardState, commitLo, commitHi uint64) *raftpb.HardState {
	term := hs.GetTerm() + rapid.Uint64Range(0, 1).Draw(rt, "termBump")
	vote := hs.GetVote()
	if term != hs.GetTerm() || vote == 0 {
		vote = rapid.Uint64Range(0, 3).Draw(rt, "vote")
	}
	commit := rapid.Uint64Range(max(commitLo, hs.GetCommit()), max(commitHi, commitLo, hs.GetCommit())).Draw(rt, "commit")
	return hardState(term, vote, commit)
}
