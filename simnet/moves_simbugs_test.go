//go:build simbugs

package simnet

import (
	"runtime/debug"
	"testing"
)

// Each partition-move bug is caught with the moves workload: at its pinned
// seed, or else within 200 seeds.
func TestSimCatchesMoveBugs(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, bug := range MoveBugNames {
		t.Run(bug, func(t *testing.T) {
			requireCaught(t, bug, func(seed uint64) Options { return movesOptions(t, seed, bug) })
		})
	}
}

// A coordinator built on a replica a move added that starts at the log's
// end (MoveRacesRebalance) is caught by the standard sample, which moves
// the group's __strand_offsets partition off its coordinator while the
// members rebalance; neither side run combines groups and moves.
func TestSimCatchesMoveRacesRebalance(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, bug := range SampleBugNames {
		t.Run(bug, func(t *testing.T) {
			requireCaught(t, bug, func(seed uint64) Options { return sampleOptions(t, seed, "mixed", bug) })
		})
	}
}
