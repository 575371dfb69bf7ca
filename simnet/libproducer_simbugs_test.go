//go:build simbugs

package simnet

import "testing"

// The log check holds clientlib's producer to its definite failures: a
// record whose promise said "not written" (every error but a
// RetriesExhaustedError with MaybeWritten) must never be read. Planted
// LibExhaustedDefinite (a record whose retries ran out is failed as not
// written although an attempt's outcome was unknown) is caught as G1a, an
// aborted read: 30 of the sample's seeds 1-40 since one library producer
// in three draws few retries (2 of 20 before, when only a delivery
// timeout could fail a maybe-written batch), none when the simulator
// recorded every failure as indefinite. 44 of seeds 1-60 caught it once
// consumers' retry waits grew (121eb11). CI asks 8 catches within seeds
// 1-30 (the eighth comes at seed 10); make sim-bugs measures the rate.
func TestSimCatchesLibExhaustedDefinite(t *testing.T) {
	requireCatches(t, "LibExhaustedDefinite", 1, 30, 8, "from failed produce op", sampleOptions, nil)
}

// A library client gives a call up when its node stalls (clientlib's
// StallTimeout, two election timeouts in the simulator) and must report it
// sent, maybe written: the node may have applied it and only the answer
// was slow. Planted LibStallNotSent (the stall reported as not sent) makes
// the producers that retry nothing fail such records definitely, and the
// log check finds them read (G1a): 23 of seeds 1-30. The simulator once gave
// every call up at its own 300 ms transport timeout, before any stall
// bound, so no stall verdict ever ran in it. CI asks 8 catches within
// seeds 1-30 (the eighth comes at seed 10); make sim-bugs measures the rate.
func TestSimCatchesLibStallNotSent(t *testing.T) {
	requireCatches(t, "LibStallNotSent", 1, 30, 8, "from failed produce op", sampleOptions, nil)
}

// A node pauses a connection it throttled (throttle_ms, a quota), and
// clientlib holds its next requests until the throttle ends; a client
// that gave such a connection up would suspect a healthy node and
// reconnect unthrottled. Planted LibIgnoresThrottle (throttle_ms ignored)
// is caught by the check in libTransport.Close in the seeds with a quota
// on the workload's principal (Options.AppQuota): 7 of seeds 1-60, 27 of
// which drew one.
func TestSimCatchesLibIgnoresThrottle(t *testing.T) {
	requireCaught(t, "LibIgnoresThrottle", func(seed uint64) Options { return sampleOptions(t, seed, "mixed", "LibIgnoresThrottle") })
}
