package simnet

import (
	"flag"
	"testing"
)

var simJoinSeeds = flag.Int("sim.join-seeds", 10, "TestSimJoins: seeds to run (from 1; -short: 3)")

// joinsOptions is seed's options with node joins on: 3 nodes in
// Config.Nodes and 2 spares that join mid-run.
func joinsOptions(t *testing.T, seed uint64, bug string) Options {
	o := seedOptions(t, seed, "mixed", bug)
	o.Nodes = 5
	o.Joins = true
	return o
}

// With Options.Joins, spare nodes register over the wire and join with
// Config.Join, and some seeds decommission a node (moves, then REMOVE),
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
		"fault/decom-crash-node", "fault/decom-crash-mid-moves"}
	total := make([]int64, len(names))
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		res := runSeed(t, joinsOptions(t, seed, ""), "")
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
