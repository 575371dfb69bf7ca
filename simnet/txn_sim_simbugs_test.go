//go:build simbugs

package simnet

import "testing"

// The transactional workload's CheckTxn catches LSOPassesOpenTxn (the
// last stable offset is the newest open transaction's first offset, not
// the oldest's, so read_committed readers see an older open transaction's
// records): an aborted or intermediate read, or a non-atomic one. The
// reader that follows the partitions while transactions run catches it;
// the reads after the heal alone (nothing open then) caught it in no seed
// of 1-10.
func TestSimCatchesLSOPassesOpenTxn(t *testing.T) {
	requireCatches(t, "LSOPassesOpenTxn", 1, 50, 25, "txn:", txnOptions, nil)
}
