package simnet

import (
	"strings"
	"testing"

	"github.com/strandlog/strand/raftlog/memdisk"
)

// TestHeldCheckCountsPrefixesBelowRaftLogStart shows prefixheld.go's
// rules on hand-made figures of a 3-voter partition: records in the
// leader's prefix and in a follower's raft log pass the first rule (two
// holders) but fail the second once a raft log starts past them (one
// prefix holds them: PrefixTrimUnheld's state); with a second prefix they
// pass; a follower's disk replaced lowers the count needed until it holds
// everything again; and a record on no replica fails the first rule.
func TestHeldCheckCountsPrefixesBelowRaftLogStart(t *testing.T) {
	o := Choose(Standard(1, Safety))
	o.Compacted = true
	w := newWorld(o)
	h := w.held
	const key = "p/" + topicKV + "@1/0"
	set := func(i int, prefixEnd, raftFrom, hwm int64) {
		r := h.replica(key, w.nodes[i])
		r.prefixEnd, r.raftFrom, r.hwm = prefixEnd, raftFrom, hwm
	}
	run := func(want string) {
		t.Helper()
		p := h.parts[key]
		p.voters, p.failed = 3, false
		w.failures, w.failureCount = nil, 0
		h.check(key, p)
		switch {
		case want == "" && len(w.failures) > 0:
			t.Fatalf("failures %q, want none", w.failures)
		case want != "" && (len(w.failures) != 1 || !strings.Contains(w.failures[0], want)):
			t.Fatalf("failures %q, want one with %q", w.failures, want)
		}
	}
	set(0, 100, 0, 120) // the leader passed, its raft log untrimmed
	set(1, 0, 0, 120)
	set(2, 0, 0, 120)
	run("")
	set(0, 100, 96, 120) // the leader trimmed up to its prefix alone
	run("held in the compacted prefixes of 1 replicas")
	set(1, 100, 0, 120) // a follower passed too: a majority
	run("")
	set(2, 0, 110, 120) // the other got a raft snapshot: still a majority of prefixes
	run("")
	w.nodes[1].disk = memdisk.New() // a follower's disk replaced: one copy must do
	run("")
	set(1, 100, 96, 120) // it installed a prefix: the majority is needed again
	if r := h.parts[key].replicas[1]; !r.lost {
		t.Fatalf("replica %+v: want it lost until checked", r)
	}
	run("")
	if r := h.parts[key].replicas[1]; r.lost {
		t.Fatalf("replica %+v holds everything: no longer lost", r)
	}
	set(0, 0, 110, 120) // [50, 100) left in node 2's prefix only
	set(1, 50, 110, 120)
	set(2, 100, 110, 120)
	run("held by 1 replicas")
}
