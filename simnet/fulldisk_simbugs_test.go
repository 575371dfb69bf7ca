//go:build simbugs

package simnet

import "testing"

// The full-disk check (fullcheck.go) catches a full leader that refuses
// produce but never hands its leaderships on: in the full-disk episode
// (fulldisk.go) it still leads once the check's bound is over. Caught in
// 4 of seeds 1-30 [3 10 28 30] (15 of them draw full disks) once half the
// episodes restart the victim; pinned as 2 within 1-12.
func TestSimCatchesFullLeaderKeepsLeading(t *testing.T) {
	requireCatches(t, "FullLeaderKeepsLeading", 1, 12, 2, "full disk:", sampleOptions, func(o *Options) { o.StopAtFailure = true })
}
