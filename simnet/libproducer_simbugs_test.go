//go:build simbugs

package simnet

import "testing"

// The log check holds clientlib's producer to its definite failures: a
// record whose promise said "not written" (every error but a
// RetriesExhaustedError with MaybeWritten) must never be read. Planted
// LibExhaustedDefinite (a record whose retries ran out is failed as not
// written although an attempt's outcome was unknown) is caught as G1a, an
// aborted read: 9 of the sample's seeds 1-30, none when the simulator
// recorded every failure as indefinite (before this check).
func TestSimCatchesLibExhaustedDefinite(t *testing.T) {
	requireCatches(t, "LibExhaustedDefinite", 1, 20, 3, "from failed produce op", sampleOptions, nil)
}
