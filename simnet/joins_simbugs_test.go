//go:build simbugs

package simnet

import (
	"runtime/debug"
	"testing"
)

// Each node-membership bug is caught with the joins workload: at its
// pinned seed, or else within 200 seeds.
func TestSimCatchesJoinBugs(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, bug := range JoinBugNames {
		t.Run(bug, func(t *testing.T) {
			requireCaught(t, bug, func(seed uint64) Options { return joinsOptions(t, seed, bug) })
		})
	}
}
