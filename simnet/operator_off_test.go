package simnet

import "testing"

// TestSimWithoutOperator runs standard-sample seeds with the operator actor
// off (the planted authorization bugs' tests run a seed so to show the bug
// unseen without it): every check passes. Seeds 1, 5 and 6 failed when a
// transactional seed's nodes made __strand_offsets at the node's default
// partition count, which the checks did not number.
func TestSimWithoutOperator(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		o := sampleOptions(t, seed, "mixed", "")
		o.Operator = false
		if res := runSeed(t, o, ""); res.Failed() {
			t.Errorf("seed %d without the operator: %s", seed, firstLine(res.Failures[0]))
		}
	}
}
