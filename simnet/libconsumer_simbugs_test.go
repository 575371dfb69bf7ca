//go:build simbugs

package simnet

import "testing"

// The clientlib plain consumers catch LibSeekSkipsTarget (a Seek to an
// exact offset lands one past it) in at least half of the standard
// sample's 200 seeds: a record handed out where the position was the seek
// target, or a Position past what was handed out. Before the consumers ran
// clientlib's Consumer it was caught in no seed: nothing else the
// simulator runs calls Consumer.Seek. CI asks 10 catches within seeds 1-60
// (53 of them caught it; the tenth comes at seed 11): a floor, whose wide
// window keeps a shift of the traces from failing it; make sim-bugs
// measures the rate over the 200.
func TestSimCatchesLibSeekSkipsTarget(t *testing.T) {
	requireCatches(t, "LibSeekSkipsTarget", 1, 60, 10, "consumer(lib):", sampleOptions, nil)
}
