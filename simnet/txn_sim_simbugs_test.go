//go:build simbugs

package simnet

import "testing"

// The transactional workload's CheckTxn catches LSOPassesOpenTxn (the
// last stable offset is the newest open transaction's first offset, not
// the oldest's, so read_committed readers see an older open transaction's
// records): an aborted or intermediate read, or a non-atomic one. The
// reader that follows the partitions while transactions run catches it;
// the reads after the heal alone (nothing open then) caught it in no seed
// of 1-10. CI asks 10 catches within seeds 1-50 (25 of seeds 1-29 caught
// it; the tenth comes at seed 12); make sim-bugs measures the rate.
func TestSimCatchesLSOPassesOpenTxn(t *testing.T) {
	requireCatches(t, "LSOPassesOpenTxn", 1, 50, 10, "txn:", txnOptions, nil)
}

// The marker-order check (wire_txn_decisions.go) catches
// MarkersBeforeDecision (an EndTxn's markers written as it arrives,
// before the coordinator's decision is durable) at the first marker that
// applies before its decision: 16 of seeds 1-16. The read checks alone
// caught it only when the decision then differed (3 of seeds 1-10).
func TestSimCatchesMarkersBeforeDecision(t *testing.T) {
	requireCatches(t, "MarkersBeforeDecision", 1, 10, 7, "txn:", txnOptions, nil)
}

// CheckTxn catches TxnSkipsFence (the coordinator lets an older epoch act
// on the transaction): a paused zombie's EndTxn commits its successor's
// open transaction (an aborted or intermediate read; the zombie's own
// writes, aborted by the fence, a lost committed write) or its own (a
// zombie write). 14 of seeds 1-16; 5 of 10 when zombies went on at once.
// Re-pinned to seeds 31-40 when the trace moved (clientlib looks a
// coordinator up again after a TIMEOUT): 5 of seeds 1-10 then, 26 of 1-40
// with and without that change, 9 of 31-40.
func TestSimCatchesTxnSkipsFence(t *testing.T) {
	requireCatches(t, "TxnSkipsFence", 31, 40, 6, "txn:", txnOptions, nil)
}

// The digest comparison of restored state (digests.go) catches
// DropAbortOnRestore (a restore loses the newest aborted transaction) at
// the first checkpoint of a workload partition that holds an abort: 16 of
// seeds 1-16 since such seeds checkpoint every 16 or 32 entries (WithTxn),
// 0 of 50 before (their partitions never checkpointed).
func TestSimCatchesDropAbortOnRestore(t *testing.T) {
	requireCatches(t, "DropAbortOnRestore", 1, 10, 7, "digest:", txnOptions, nil)
}

// The session members' exactly-once check (wire_txn_session_check.go)
// catches TxnOffsetsOnAbort (an abort marker commits the transaction's
// pending offsets, as a commit would): the group's committed offset
// passes input whose only transactions aborted, input that then has no
// committed output. The standard sample caught it in 62 of seeds 1-100
// (62 of the 69 that drew the transactional workload); most of the rest
// hit the run's 60 s time limit before the final checks, which such
// seeds skip whatever the bug. Pinned in pinnedCatch
// (bugs_simbugs_test.go).
func TestSimCatchesTxnOffsetsOnAbort(t *testing.T) {
	requireCaught(t, "TxnOffsetsOnAbort", func(seed uint64) Options { return txnOptions(t, seed, "mixed", "TxnOffsetsOnAbort") })
}

// The transactional producers, on clientlib's Client since they left the
// simulator's raw client (wire_txn.go), catch LibCommitSkipsFlush
// (CommitTransaction sends EndTxn(commit) without waiting for the
// transaction's records): a record that landed after the commit markers
// is a lost committed write, or an aborted or out-of-order read. Half of
// the producers' transactions commit right after their last Produce, so
// records are still buffered or in flight at the commit. Before the move
// no simulated client called CommitTransaction without its own Flush
// first (TransactSession.End flushes), so nothing could catch it: 0 of
// the 69 seeds of 1-100 that drew the workload, measured with the bug
// planted in the old tree; now 139 of the 139 of seeds 1-200 that drew it
// (TestSimCatchRate). Pinned in pinnedCatch (bugs_simbugs_test.go).
func TestSimCatchesLibCommitSkipsFlush(t *testing.T) {
	requireCaught(t, "LibCommitSkipsFlush", func(seed uint64) Options { return txnOptions(t, seed, "mixed", "LibCommitSkipsFlush") })
}
