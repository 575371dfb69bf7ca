package audit

import (
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog/wal"
)

// sameForDir answers as sameRecords over wal.ForDir does, for lists with
// resets, other directories' records and changed entries.
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
	agree, differ := 0, 0
	for range 5000 {
		all := gen()
		prev := wal.ForDir(all, "a")
		if rng.IntN(2) == 0 {
			prev = wal.ForDir(gen(), "a")
		}
		want := sameRecords(prev, wal.ForDir(all, "a"))
		if got := sameForDir(prev, all, "a"); got != want {
			t.Fatalf("sameForDir(%v, %v) = %v, want %v", prev, all, got, want)
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
