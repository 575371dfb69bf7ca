package audit

import (
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog/wal"
)

// sameForDir answers as sameRecords over wal.ForDir does, and forDir
// returns wal.ForDir's list, for lists with resets, other directories'
// records and changed entries, cut into segments at random (empty ones
// included).
func TestSameForDirMatchesForDir(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dirs := []string{"a", "b"}
	gen := func() []wal.Record {
		var out []wal.Record
		for range rng.IntN(8) {
			out = append(out, wal.Record{Dir: dirs[rng.IntN(2)], Reset: rng.IntN(4) == 0,
				Entries: []*raftpb.Entry{{Index: new(uint64(rng.IntN(3))), Term: new(uint64(1))}}})
		}
		return out
	}
	split := func(all []wal.Record) [][]wal.Record {
		var segs [][]wal.Record
		for range 4 {
			n := rng.IntN(len(all) + 1)
			segs = append(segs, all[:n])
			all = all[n:]
		}
		return append(segs, all)
	}
	agree, differ := 0, 0
	for range 5000 {
		all := gen()
		prev := wal.ForDir(all, "a")
		if rng.IntN(2) == 0 {
			prev = wal.ForDir(gen(), "a")
		}
		segs := split(all)
		if got, want := wal.ForDirSegments(segs, "a"), wal.ForDir(all, "a"); !sameRecords(got, want) || len(got) != len(want) {
			t.Fatalf("ForDirSegments(%v) = %v, want %v", segs, got, want)
		}
		want := sameRecords(prev, wal.ForDir(all, "a"))
		if got := sameForDir(prev, segs, "a"); got != want {
			t.Fatalf("sameForDir(%v, %v) = %v, want %v", prev, segs, got, want)
		}
		if want {
			agree++
		} else {
			differ++
		}
	}
	if agree == 0 || differ == 0 {
		t.Fatalf("cases not mixed: %d same, %d different", agree, differ)
	}
}
