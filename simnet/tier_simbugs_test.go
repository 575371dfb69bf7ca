//go:build simbugs

package simnet

import "testing"

// The tier check (tier.go) catches an upload shifted by one batch: the
// object misses the segment's first batch (25 of the 25 tiered seeds of
// 1-60). Seeds 8-14 hold five tiered seeds (8, 10, 11, 12, 14); the two
// others draw no tiering and cannot catch it.
// After the s16 merges 4 of seeds 8-14 [8 10 11 14]: CI asks 4 within
// 8-20.
func TestSimCatchesTierUploadShifted(t *testing.T) {
	requireCatches(t, "TierUploadShifted", 8, 20, 4, "tier:", sampleOptions, func(o *Options) { o.StopAtFailure = true })
}

// The tier check catches an object deleted when its TIER_ADD is proposed:
// the manifest lists a segment the bucket lacks (25 of the 25 tiered
// seeds of 1-60).
func TestSimCatchesTierDeleteOnPropose(t *testing.T) {
	requireCatches(t, "TierDeleteOnPropose", 8, 14, 5, "tier:", sampleOptions, func(o *Options) { o.StopAtFailure = true })
}

// The tier check catches local retention dropping raft segments before a
// TIER_ADD covers them: a replica's raft log starts above the remote log's
// end (VerifyTierLocal; 17 of the 25 tiered seeds of 1-60, go test -tags
// simbugs -run TestSimCatchRate -sim.catchrate=60, at 3645b47). Seeds 8-14
// hold four of them (8, 10, 12, 14).
func TestSimCatchesTierLocalEarly(t *testing.T) {
	requireCatches(t, "TierLocalEarly", 8, 14, 4, "tier:", sampleOptions, func(o *Options) { o.StopAtFailure = true })
}

// The readers' checks catch a remote read that starts one batch after the
// fetch's offset: a library consumer seeking to 0 handed a later offset
// (seed 10), the linearizability of the fetches (12), a native reader
// handed a batch it cannot decode (14). 18 of the 25 tiered seeds of 1-60
// (at 3645b47). The traces move with every change to the tiered path (the
// s16 recovery's descriptor writes and object keys: 4 of seeds 8-20 [10 14
// 19 20], was 5); CI asks 4 within seeds 8-30, stopping at the fourth;
// make sim-bugs measures the rate.
func TestSimCatchesTierRemoteOffByOne(t *testing.T) {
	requireCatches(t, "TierRemoteOffByOne", 8, 30, 4, "", sampleOptions, nil)
}

// The replication checks (tier_replicated.go) catch a leader that counts
// its upload as remote once the Put answers, before its TIER_ADD commits:
// a replica's own compaction deleted local records no committed ADD
// covered when it decided it (10 of the 25 tiered seeds of 1-60: 12 14 24
// 27 30 32 38 43 49 51, make sim-bugs at 65fda3f; the others never decided
// a compaction inside the window between a Put and its ADD's commit, nor
// lost an ADD to a leader change the cursor outlived). Seeds 8-20 hold
// seven tiered seeds, two of them caught (12 14).
func TestSimCatchesTierUploadNotReplicated(t *testing.T) {
	requireCatches(t, "TierUploadNotReplicated", 8, 20, 2, "tier:", sampleOptions, func(o *Options) { o.StopAtFailure = true })
}
