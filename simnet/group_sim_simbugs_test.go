//go:build simbugs

package simnet

import (
	"runtime/debug"
	"testing"
)

// Each of the coordinator's planted bugs is caught by the group workload's
// checks: at its pinned seed, or else within 200 seeds.
func TestSimCatchesGroupBugs(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, bug := range GroupBugNames {
		t.Run(bug, func(t *testing.T) {
			requireCaught(t, bug, func(seed uint64) Options {
				if bug == "GroupClassicForgotten" {
					return classicOptions(t, seed, bug) // classic members to lose
				}
				return groupOptions(t, seed, bug)
			})
		})
	}
}
