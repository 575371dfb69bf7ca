package simnet

import (
	"flag"
	"runtime/debug"
	"testing"
)

var flagGroupSeeds = flag.Int("sim.group-seeds", 10, "seeds of TestSimGroups")

// groupOptions is seed's standard run with the group workload on: four
// members (two static) beside the usual clients, authorization drawn as
// in the standard sample.
func groupOptions(t *testing.T, seed uint64, bug string) Options {
	o := seedOptions(t, seed, "mixed", bug)
	o.GroupMembers = 4
	o.CompactCoordinators = true
	return o
}

// TestSimGroups runs the consumer group (clientlib GroupConsumers) under
// the run's faults: no partition held by two members at once, zombie
// commits refused, committed offsets linearizable, convergence after the
// heal, at-least-once delivery.
func TestSimGroups(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	n := *flagGroupSeeds
	if testing.Short() {
		n = min(n, 3)
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		res := runSeed(t, groupOptions(t, seed, ""), "")
		if res.Failed() {
			t.Errorf("seed %d failed:\n%s", seed, res.Failures)
		}
		t.Logf("seed %d coverage: commits=%d handovers=%d converged=%d zombie=%d", seed,
			res.Coverage.Count("event/group-commit"), res.Coverage.Count("event/group-handover"),
			res.Coverage.Count("event/group-converged"), res.Coverage.Count("event/group-zombie-commit"))
		t.Logf("seed %d members: starts=%d batches=%d crashes=%d slow=%d committed=%d at-least-once=%d", seed,
			res.Coverage.Count("event/lib-member-start"), res.Coverage.Count("event/lib-member-batch"),
			res.Coverage.Count("event/lib-member-crash"), res.Coverage.Count("event/lib-member-slow"),
			res.Coverage.Count("event/lib-group-committed"), res.Coverage.Count("event/lib-group-at-least-once"))
		t.Logf("seed %d restores: checked=%d after-compaction=%d compactions=%d", seed,
			res.Coverage.Count("group/restore-checked"), res.Coverage.Count("group/restore-after-compaction"),
			res.Coverage.Count("coordinator/compactions"))
	}
}

// TestSimGroupsDeterministic runs one group seed twice: the trace hashes
// must match (no map order or wall clock leaks from the coordinator).
func TestSimGroupsDeterministic(t *testing.T) {
	a := runSeed(t, groupOptions(t, 6, ""), "")
	b := runSeed(t, groupOptions(t, 6, ""), "")
	if a.Hash != b.Hash || a.Events != b.Events {
		t.Fatalf("seed 6 ran twice: hash %016x vs %016x, events %d vs %d", a.Hash, b.Hash, a.Events, b.Events)
	}
}

// Seed 351 of the standard sample: after two decommissions a member's
// coordinator lookups went only to the two removed nodes (its other
// candidates were suspects, asked last), which named a coordinator that had
// moved; it got no partition for 12 s after the heal ("groups: no
// convergence"). Removed nodes now name none
// (TestRemovedNodeNamesNoCoordinator) and a lookup asks on past such an
// answer (TestSimulatedLookupSkipsNodesNamingNoCoordinator).
func TestSimGroupsLookupPastRemovedNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulator seed with 5 nodes")
	}
	if res := runSeed(t, sampleOptions(t, 351, "mixed", ""), ""); res.Failed() {
		t.Fatalf("seed 351 failed: %s", firstLine(res.Failures[0]))
	}
}
