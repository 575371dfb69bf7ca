package simnet

import (
	"flag"
	"runtime/debug"
	"testing"
)

var flagClassicSeeds = flag.Int("sim.classic-seeds", 8, "seeds of TestSimClassicGroups")

// classicOptions is seed's group run with three classic members beside the
// four native ones, on production's configuration drawn per seed as in the
// standard sample.
func classicOptions(t *testing.T, seed uint64, bug string) Options {
	o := knobOptions(t, seed, "mixed", bug, true)
	o.GroupMembers, o.ClassicMembers = 4, 3
	return o
}

// TestSimClassicGroups runs Kafka classic members (JoinGroup, SyncGroup,
// Heartbeat through kafkaproto's handlers; commits in their generation)
// under the run's faults and coordinator fail-overs: no partition held
// twice, no member expelled while heartbeating within its session,
// generations never back, no acknowledged commit lost (when read back and
// by the final read). The steps must really have travelled as Kafka
// requests, and members must have joined, committed and had their
// commits checked, and the final read must have run.
func TestSimClassicGroups(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	n := *flagClassicSeeds
	if testing.Short() {
		n = min(n, 3)
	}
	var requests, joins, commits, checked, finals int64
	for seed := uint64(1); seed <= uint64(n); seed++ {
		res := runSeed(t, classicOptions(t, seed, ""), "")
		if res.Failed() {
			t.Errorf("seed %d failed:\n%s", seed, res.Failures)
		}
		requests += res.Coverage.Count("event/kafka-classic-request")
		joins += res.Coverage.Count("event/classic-join")
		commits += res.Coverage.Count("event/classic-commit")
		checked += res.Coverage.Count("event/classic-fetch-checked")
		finals += res.Coverage.Count("check/classic-final-offsets")
		t.Logf("seed %d: kafka=%d joins=%d rejoins=%d commits=%d checked=%d expelled=%d crash=%d", seed,
			res.Coverage.Count("event/kafka-classic-request"), res.Coverage.Count("event/classic-join"),
			res.Coverage.Count("event/classic-rejoin"), res.Coverage.Count("event/classic-commit"),
			res.Coverage.Count("event/classic-fetch-checked"), res.Coverage.Count("event/classic-expelled"),
			res.Coverage.Count("event/classic-member-crash"))
	}
	if requests == 0 || joins == 0 || commits == 0 || checked == 0 || finals != int64(n) {
		t.Fatalf("classic workload idle: %d Kafka requests, %d joins, %d commits, %d fetches checked, %d of %d final reads",
			requests, joins, commits, checked, finals, n)
	}
}

// TestSimClassicGroupsDeterministic runs one classic seed twice: the trace
// hashes must match (heartbeat sequence numbers come from the run, not
// the wall clock).
func TestSimClassicGroupsDeterministic(t *testing.T) {
	a := runSeed(t, classicOptions(t, 4, ""), "")
	b := runSeed(t, classicOptions(t, 4, ""), "")
	if a.Hash != b.Hash || a.Events != b.Events {
		t.Fatalf("seed 4 ran twice: hash %016x vs %016x, events %d vs %d", a.Hash, b.Hash, a.Events, b.Events)
	}
}
