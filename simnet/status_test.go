package simnet

import "testing"

// TestStatusSeqCoversStatus runs standard-sample seeds (the fault
// profiles' draws, the features', the WAL's and the joins' included)
// reading every node's statuses after every Process (CheckStatusSeq):
// they never change while node.Core.StatusSeq stands still, so process
// may skip reading them then.
func TestStatusSeqCoversStatus(t *testing.T) {
	seeds := uint64(8)
	if testing.Short() {
		seeds = 3
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		o := sampleOptions(t, seed, "mixed", "")
		o.CheckStatusSeq = true
		if res := runSeed(t, o, ""); res.Failed() {
			t.Errorf("seed %d: %s", seed, firstLine(res.Failures[0]))
		}
	}
}
