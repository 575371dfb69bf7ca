package simnet

import "testing"

// With Options.AddPartitions, seeds that draw a partition grow of the main topic (wire_partitions.go)
// apply it under their faults and pass every check with the new
// partitions' groups in them: seed 2 grows 4 -> 6 partitions at op 220
// (the new groups then held 124 and 148 records), seed 9 5 -> 6 at op 680
// after an attempt whose answer was lost (the retry met
// INVALID_PARTITIONS, which counts as done only after such an attempt).
func TestSimAddPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("two simulator seeds")
	}
	for _, seed := range []uint64{2, 9} {
		o := seedOptions(t, seed, "mixed", "")
		o.AddPartitions = true
		res := runSeed(t, o, "")
		if res.Failed() {
			t.Fatalf("seed %d failed: %s", seed, firstLine(res.Failures[0]))
		}
		if n := res.Coverage.Count("event/partitions-added"); n != 1 {
			t.Fatalf("seed %d: partitions added %d times, want once (the seed no longer draws a grow?)", seed, n)
		}
	}
}
