package simnet

import (
	"flag"
	"testing"
)

var simMoveSeeds = flag.Int("sim.move-seeds", 4, "TestSimMoves: seeds to run (from 1)")

// movesOptions is seed's options with partition moves on over 5 nodes
// (moves need a node outside each replica set).
func movesOptions(t *testing.T, seed uint64, bug string) Options {
	o := seedOptions(t, seed, "mixed", bug)
	o.Nodes = 5
	o.Moves = true
	return o
}

// With Options.Moves, partitions of the main topic move to other nodes
// under the seed's faults and the moves' own crashes (the leader mid-move
// and in the joint configuration, an added node); every seed passes every
// check, including the end-of-run one that each move finished with hosts
// and raft voters equal to the metadata's replicas.
func TestSimMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("simulator seeds with 5 nodes")
	}
	names := []string{"event/partition-move", "check/move-finished", "event/partition-move-cancelled",
		"event/partition-move-rolled-back", "event/move-stranded", "event/partition-move-abandoned",
		"fault/move-crash-leader", "fault/move-crash-joint", "fault/move-crash-added"}
	total := make([]int64, len(names))
	for seed := uint64(1); seed <= uint64(*simMoveSeeds); seed++ {
		res := runSeed(t, movesOptions(t, seed, ""), "")
		if res.Failed() {
			t.Fatalf("seed %d failed: %s", seed, firstLine(res.Failures[0]))
		}
		for i, name := range names {
			total[i] += res.Coverage.Count(name)
		}
	}
	for i, name := range names {
		t.Logf("%-34s %d", name, total[i])
	}
	if total[1] == 0 {
		t.Fatal("no move finished in any seed")
	}
}

// A leader reported from a move's target and left outside it by a
// redirect keeps every node's metadata checkpoint restorable. Seed 91
// failed on main before engine/metadata accepted such a leader ("node 5
// metadata checkpoint at 33 does not restore: ... partition 2: leader 1 in
// term 4"); TestRedirectedMoveLeaderRestores pins the rule there.
func TestSimMovesRedirectedLeaderRestores(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulator seed with 5 nodes")
	}
	if res := runSeed(t, movesOptions(t, 91, ""), ""); res.Failed() {
		t.Fatalf("seed 91 failed: %s", firstLine(res.Failures[0]))
	}
}

// The disk-stall check holds a group to its bound only when enough voters
// besides the stalled node can elect (canElectWithout): seed 5 failed on
// 2eb1879 ("node 1's fsyncs hang since 13.70s, and group 3 ... is led by
// nobody 6.98s later") because node 4's replica of partition 3, outside
// its voters 1 2 3, was counted while node 2 rebuilt a wiped replica. The
// victim choice applies the same rule, so the seed now stalls another
// node; with the old rule kept for the choice only, the check skips group
// 3 at 20.68s.
func TestSimMovesStallCountsVoters(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulator seed with 5 nodes")
	}
	if res := runSeed(t, movesOptions(t, 5, ""), ""); res.Failed() {
		t.Fatalf("seed 5 failed: %s", firstLine(res.Failures[0]))
	}
}

// A moves seed replays bit for bit: moves, cancels and their crashes draw
// from the seed's streams only, and no map order reaches a conf change.
func TestSimMovesDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("two simulator runs")
	}
	a := runSeed(t, movesOptions(t, 3, ""), "")
	b := runSeed(t, movesOptions(t, 3, ""), "")
	if a.Hash != b.Hash || a.Events != b.Events {
		t.Fatalf("seed 3 ran twice: hash %x / %x, events %d / %d", a.Hash, b.Hash, a.Events, b.Events)
	}
	if a.Coverage.Count("event/partition-move") == 0 {
		t.Fatal("seed 3 recorded no move")
	}
}
