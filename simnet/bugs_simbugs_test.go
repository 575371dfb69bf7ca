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
// seed 40, which passes without it.
func TestSimCatchesWipedNodeVotes(t *testing.T) {
	o := seedOptions(t, 40, "mixed", "WipedNodeVotes")
	o.Faults.WipeRejoin = true
	if res := runSeed(t, o, ""); !res.Failed() {
		t.Fatal("seed 40 with WipedNodeVotes passed: the checks no longer see a wiped node voting")
	}
}

// RepairTrustsItself (a replica discarded for corrupt data reopens as new
// and votes at once) breaks seed 22, which passes without it.
func TestSimCatchesRepairTrustsItself(t *testing.T) {
	if res := runSeed(t, seedOptions(t, 22, "mixed", "RepairTrustsItself"), ""); !res.Failed() {
		t.Fatal("seed 22 with RepairTrustsItself passed: the checks no longer see a repaired replica voting")
	}
}
