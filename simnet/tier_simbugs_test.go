//go:build simbugs

package simnet

import "testing"

// The tier check (tier.go) catches an upload shifted by one batch: the
// object misses the segment's first batch (25 of the 25 tiered seeds of
// 1-60). Seeds 8-14 hold five tiered seeds (8, 10, 11, 12, 14); the two
// others draw no tiering and cannot catch it.
func TestSimCatchesTierUploadShifted(t *testing.T) {
	requireCatches(t, "TierUploadShifted", 8, 14, 5, "tier:", sampleOptions, func(o *Options) { o.StopAtFailure = true })
}

// The tier check catches an object deleted when its TIER_ADD is proposed:
// the manifest lists a segment the bucket lacks (25 of the 25 tiered
// seeds of 1-60).
func TestSimCatchesTierDeleteOnPropose(t *testing.T) {
	requireCatches(t, "TierDeleteOnPropose", 8, 14, 5, "tier:", sampleOptions, func(o *Options) { o.StopAtFailure = true })
}
