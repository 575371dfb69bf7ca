//go:build simbugs

package simnet

import "testing"

// txnOptions is the standard sample's seed with the transactional
// workload on (wire_txn.go), as in the seeds that draw it.
func txnOptions(t *testing.T, seed uint64, profile, bug string) Options {
	o := sampleOptions(t, seed, profile, bug)
	o.Txn = true
	return o
}

// The transactional workload's CheckTxn catches LSOPassesOpenTxn (the
// last stable offset is the newest open transaction's first offset, not
// the oldest's, so read_committed readers see an older open transaction's
// records): an aborted or intermediate read, or a non-atomic one.
func TestSimCatchesLSOPassesOpenTxn(t *testing.T) {
	requireCatches(t, "LSOPassesOpenTxn", 1, 50, 25, "txn:", txnOptions, nil)
}
