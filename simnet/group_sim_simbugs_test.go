//go:build simbugs

package simnet

import (
	"runtime/debug"
	"testing"
)

// Each of the coordinator's planted bugs is caught by the group workload's
// checks within 200 seeds.
func TestSimCatchesGroupBugs(t *testing.T) {
	const seedsMax = 200
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, bug := range GroupBugNames {
		t.Run(bug, func(t *testing.T) {
			for seed := uint64(1); seed <= seedsMax; seed++ {
				res := runSeed(t, groupOptions(t, seed, bug), "")
				if res.Failed() {
					t.Logf("%s caught at seed %d: %s", bug, seed, firstLine(res.Failures[0]))
					return
				}
			}
			t.Errorf("%s not caught in %d seeds", bug, seedsMax)
		})
	}
}
