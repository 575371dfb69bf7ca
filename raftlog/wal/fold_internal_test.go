package wal

import (
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestFoldHardStateIsNewest checks that fold's hard state, folded in
// scalars, is the one newest gives folding the records' hard states one
// by one (term, then the vote in that term, the highest commit), and that
// a single hard state comes back as it was.
func TestFoldHardStateIsNewest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		var recs []Record
		var want *raftpb.HardState
		for range r.IntN(6) {
			rec := Record{Dir: "d"}
			if r.IntN(3) > 0 {
				hs := &raftpb.HardState{}
				if r.IntN(4) > 0 {
					hs.Term = ptr(uint64(r.IntN(4)))
				}
				if r.IntN(3) > 0 {
					hs.Vote = ptr(uint64(r.IntN(3)))
				}
				hs.Commit = ptr(uint64(r.IntN(10)))
				rec.Hard = hs
				want = newest(want, hs)
			}
			recs = append(recs, rec)
		}
		_, _, got := fold(recs)
		if (got == nil) != (want == nil) || got.GetTerm() != want.GetTerm() || got.GetVote() != want.GetVote() ||
			got.GetCommit() != want.GetCommit() {
			t.Fatalf("trial %d: fold's hard state %v, newest's %v", trial, got, want)
		}
		if hards := countHard(recs); hards == 1 && got != want {
			t.Fatalf("trial %d: a single hard state came back as a copy", trial)
		}
	}
}

func countHard(recs []Record) int {
	n := 0
	for _, r := range recs {
		if r.Hard != nil {
			n++
		}
	}
	return n
}
