//go:build simbugs

package simnet

import "testing"

// The full-disk check (fullcheck.go) catches a full leader that refuses
// produce but never hands its leaderships on: in the full-disk episode
// (fulldisk.go) it still leads once the check's bound is over. Caught in
// 3 of seeds 1-11 [4 10 11] at 4623850; 1 2 3 4 10 11 draw full disks
// (seed 1's victim was crashed by a join as its episode began and led
// nothing after; seed 2 ran no episode, seed 3's check never ran).
func TestSimCatchesFullLeaderKeepsLeading(t *testing.T) {
	requireCatches(t, "FullLeaderKeepsLeading", 1, 11, 3, "full disk:", sampleOptions, func(o *Options) { o.StopAtFailure = true })
}
