//go:build simbugs

package simnet

import (
	"runtime/debug"
	"testing"
)

// Each planted bug is caught within 200 seeds: the checks can fail. Runs
// only in simbugs builds (make test runs it with -tags simbugs).
func TestSimCatchesPlantedBugs(t *testing.T) {
	const seedsMax = 200
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, bug := range BugNames {
		t.Run(bug, func(t *testing.T) {
			for seed := uint64(1); seed <= seedsMax; seed++ {
				res := runSeed(t, seedOptions(t, seed, "mixed", bug), "")
				if res.Failed() {
					t.Logf("%s caught at seed %d (%d seeds): %s", bug, seed, seed, firstLine(res.Failures[0]))
					return
				}
			}
			t.Errorf("%s not caught in %d seeds", bug, seedsMax)
		})
	}
}

// WipedNodeVotes (a wiped node rejoins as new and votes at once) breaks
// seed 16, which passes without it (TestSimWipedNodeRejoinsSafely).
func TestSimCatchesWipedNodeVotes(t *testing.T) {
	o := seedOptions(t, 16, "mixed", "WipedNodeVotes")
	o.Faults.WipeRejoin = true
	if res := runSeed(t, o, ""); !res.Failed() {
		t.Fatal("seed 16 with WipedNodeVotes passed: the checks no longer see a wiped node voting")
	}
}

// RepairTrustsItself (a replica discarded for corrupt data reopens as new
// and votes at once) breaks seed 38, which passes without it.
func TestSimCatchesRepairTrustsItself(t *testing.T) {
	if res := runSeed(t, seedOptions(t, 38, "mixed", "RepairTrustsItself"), ""); !res.Failed() {
		t.Fatal("seed 38 with RepairTrustsItself passed: the checks no longer see a repaired replica voting")
	}
}
