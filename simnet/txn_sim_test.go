package simnet

import (
	"flag"
	"runtime/debug"
	"testing"
)

var flagTxnSeeds = flag.Int("sim.txn-seeds", 10, "seeds of TestSimTxn")

// txnOptions is the standard sample's seed with the transactional
// workload on (wire_txn.go), as in the seeds that draw it.
func txnOptions(t *testing.T, seed uint64, profile, bug string) Options {
	o := WithTxn(sampleOptions(t, seed, profile, bug))
	o.CompactCoordinators = true
	return o
}

// TestSimTxn runs the transactional workload in every seed (the sample
// draws it in seven of ten): CheckTxn finds no anomaly and the workload
// commits, aborts, fences and reads at read_committed in each.
func TestSimTxn(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	n := *flagTxnSeeds
	if testing.Short() {
		n = min(n, 3)
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		res := runSeed(t, txnOptions(t, seed, "mixed", ""), "")
		if res.Failed() {
			t.Errorf("seed %d failed:\n%s", seed, res.Failures)
		}
		t.Logf("seed %d: committed=%d aborted=%d fenced=%d zombie=%d crash=%d read-committed=%d checked=%d; session: committed=%d aborted=%d read-txn=%d exactly-once=%d", seed,
			res.Coverage.Count("txn/committed"), res.Coverage.Count("txn/aborted"), res.Coverage.Count("txn/fenced"),
			res.Coverage.Count("txn/zombie"), res.Coverage.Count("txn/crash"), res.Coverage.Count("txn/read-committed"),
			res.Coverage.Count("txn/checked"), res.Coverage.Count("txn/session-committed"), res.Coverage.Count("txn/session-aborted"),
			res.Coverage.Count("txn/session-read-txn"), res.Coverage.Count("txn/session-exactly-once"))
		t.Logf("seed %d restores: checked=%d after-compaction=%d; coordinators' compactions=%d", seed,
			res.Coverage.Count("txn/restore-checked"), res.Coverage.Count("txn/restore-after-compaction"),
			res.Coverage.Count("coordinator/compactions"))
	}
}

// Seed 202 of the standard sample: after the overtime's heal node 3, the
// transaction coordinator, stayed dead (its flipped disk), and clientlib
// sent every InitProducerId retry to it, each ending at the client's own
// deadline, until the drain's grace ran out; clientlib now looks the
// coordinator up again after a TIMEOUT (coordinatorLost,
// TestSimulatedTransactionalTimeoutFindsCoordinatorAgain).
func TestSimTxnCoordinatorTimeoutLooksUpAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulator seed")
	}
	if res := runSeed(t, sampleOptions(t, 202, "mixed", ""), ""); res.Failed() {
		t.Fatalf("seed 202 failed: %s", firstLine(res.Failures[0]))
	}
}
