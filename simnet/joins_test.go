package simnet

import (
	"flag"
	"testing"
)

var simJoinSeeds = flag.Int("sim.join-seeds", 10, "TestSimJoins: seeds to run (from 1; -short: 3)")

// joinsOptions is seed's options with node joins on: 3 nodes in
// Config.Nodes and 2 spares that join mid-run.
// (The same as seedOptions under -sim.joins, so make sim JOINS=1 replays.)
func joinsOptions(t *testing.T, seed uint64, bug string) Options {
	o := seedOptions(t, seed, "mixed", bug)
	o.Nodes = 5
	o.Joins = true
	return o
}

// With Options.Joins, spare nodes register over the wire and join with
// Config.Join, and some seeds decommission one node or two (in series or
// overlapping) or one while a spare joins (moves, then REMOVE),
// under the seed's faults and the changes' own crashes (the joiner, the
// metadata leader while a learner waits for promotion, the drained node);
// every seed passes every check, including the end-of-run one that the
// metadata group's configuration is what the metadata state asks.
func TestSimJoins(t *testing.T) {
	seeds := *simJoinSeeds
	if testing.Short() {
		seeds = min(seeds, 3)
	}
	names := []string{"event/node-joined", "event/node-decommissioning", "event/decom-moves", "event/decom-moves-refused",
		"event/node-removed", "check/membership-settled", "fault/join-crash-joiner", "fault/join-crash-meta-leader",
		"fault/decom-crash-node", "fault/decom-crash-mid-moves", "event/decommission-two", "event/decommission-series",
		"event/decommission-overlap", "event/decommission-during-join", "event/decommission-skipped", "check/decom-drained"}
	total := make([]int64, len(names))
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		res := runSeed(t, joinsOptions(t, seed, ""), "")
		if why, known := knownJoinBugs[seed]; known && res.Failed() {
			t.Logf("seed %d fails by a known bug (%s): %s", seed, why, firstLine(res.Failures[0]))
			continue
		}
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
	if total[0] == 0 || total[5] == 0 {
		t.Fatal("no node joined, or the membership never settled, in any seed")
	}
}

// knownJoinBugs are seeds of TestSimJoins that fail on the correct code
// by a bug found and not yet fixed (notes/simjoin.md); they run and log
// their result. Replay: make sim JOINS=1 SEEDS=1 SEED_START=N.
var knownJoinBugs = map[uint64]string{} // lookup only; none open

// A metadata member that applied a joiner's registration but not the
// configuration change adding it takes the joiner's messages once the
// joiner leads: seed 37 failed before (node 2 dropped 1,240 messages from
// leader 5 and stayed at commit 25: "registered node 5 not in the
// metadata group 10s after the final heal").
func TestSimJoinsStaleMember(t *testing.T) {
	if res := runSeed(t, joinsOptions(t, 37, ""), ""); res.Failed() {
		t.Fatalf("seed 37 failed: %s", firstLine(res.Failures[0]))
	}
}

// A REMOVE refused because the metadata leader still lists the drained
// node sends the decommission back to planning: seed 345 of the standard
// sample failed before ("time limit 1m0s reached ... 1 actors still
// working"): the drain judged node 4 drained from the only live node's
// metadata, replayed to 48 of 74, and retried the refused REMOVE ("node 4
// still holds 1 replicas") for 70 s without planning the move of sim/0.
// With the fix (a2f360c) the seed had its REMOVE refused once and node 4
// removed; since the fault planner's change d388f84 its trace no longer
// reaches the refusal (none in seeds 1-200 of the sample, 701-800, or
// 1-60 with -sim.joins), so this pins the seed, not the path: the path
// has no deterministic test yet (the refusal's count is logged).
func TestSimDecommissionRemoveRefusedDrainsAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulator seed with 5 nodes")
	}
	res := runSeed(t, sampleOptions(t, 345, "mixed", ""), "")
	if res.Failed() {
		t.Fatalf("seed 345 failed: %s", firstLine(res.Failures[0]))
	}
	t.Logf("REMOVE refused %d times, nodes removed %d", res.Coverage.Count("event/decommission-remove-refused"),
		res.Coverage.Count("event/node-removed"))
}
