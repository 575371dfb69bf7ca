//go:build simbugs

package simnet

import "testing"

// A fetch answer is written as its envelope with the stored batches spliced
// in (frame.AppendSpliced), and the simulator's native fetch answers are
// written that way: with SpliceStaleHead planted (a batch after the first
// of a partition written with the head piece of the one before it, its
// base offset and append time) readers file records at the wrong offsets,
// and the linearizability check catches it (seed 1: 2,571 anomalies).
func TestSimCatchesSpliceStaleHead(t *testing.T) {
	requireCaught(t, "SpliceStaleHead", func(seed uint64) Options { return seedOptions(t, seed, "mixed", "SpliceStaleHead") })
}
