// Package txn is the transaction coordinator's state machine (Kafka's KIP-98 transactions with
// KIP-890's "transactions v2" epoch bump): transactional ids, their producer ids and epochs, the
// open transaction's partitions and groups, and the two-phase end (decide, then write markers). It
// is pure, like engine/groups: every input is a command taken from a replicated log (a TxnCommand,
// proto/txn.proto), applied in log order; time is the proposer's NowMs in the command; ids are
// walked through a sorted slice; no map order reaches output.
//
// What is replicated: per transactional id its state, producer id and epoch, timeout, the open
// transaction's start time, partitions and groups, the markers still to write, the ids the last
// InitProducerId bump started from and the ids the last EndTxn came with (so resends get the same
// answer), and a producer id reserved for a rotation; per coordinator the pool of unused producer
// ids and the end of everything granted. Snapshot/Restore carry all of it (TxnSnapshot, version 1;
// Restore refuses other versions and runs Check).
//
// # States
//
//	(none) --InitProducerId--> Empty
//	Empty, CompleteCommit, CompleteAbort --InitProducerId--> Empty (epoch + 1)
//	Empty, Ongoing, Complete* --AddPartitions/AddOffsets--> Ongoing (records start time on entry)
//	Ongoing --EndTxn(commit)--> PrepareCommit      (epoch + 1: KIP-890; kept with KeepEpoch)
//	Ongoing --EndTxn(abort)--> PrepareAbort         (epoch + 1; kept with KeepEpoch)
//	Ongoing --TimeoutAbort, AdminAbort, InitProducerId (fence)--> PrepareAbort (epoch + 1, always)
//
// KeepEpoch is Kafka's transactions v1 (EndTxn below v5, every client before Kafka 4.0): the
// client cannot learn a new epoch, so its next transaction runs at the same one, as Kafka 4.0
// serves such a client; fencing a zombie is then InitProducerId's bump alone.
//
//	Prepare* --MarkerWritten for the last partition and group--> Complete*
//	Empty, Complete* --ExpireIDs (idle transactional.id.expiration.ms)--> removed (Kafka's Dead)
//
// A prepared transaction is decided: the decision is durable in the coordinator's log before any
// marker is written, so a coordinator that fails over finishes it (Pending lists every prepared
// transaction with the partitions and groups still waiting, and the producer id and epoch the
// markers carry). Markers are written by the host, one report per partition (or group, for
// AddOffsetsToTxn's offsets); a duplicate or stale report (another epoch) is refused as ErrStale and
// changes nothing.
//
// # Fencing
//
// InitProducerId with a transactional id returns the id's producer id at a new epoch: every request
// of an older epoch (AddPartitions, AddOffsets, EndTxn, the partition's Verify) is then refused
// ErrProducerFenced (PRODUCER_FENCED; Kafka answers INVALID_PRODUCER_EPOCH to a produce), so a zombie
// never adds to or decides a transaction. On an Ongoing id it fences and aborts at once: the abort
// is prepared at epoch + 1 (its markers fence the old epoch in every partition) and the answer is
// CONCURRENT_TRANSACTIONS (Result.Fenced); the client resends and gets epoch + 2 once the markers are
// written. Every EndTxn bumps the epoch (KIP-890), so the next transaction runs at the epoch EndTxn
// answered and the old epoch is fenced by the markers. A resend of the EndTxn that decided (same
// producer id and epoch) gets CONCURRENT_TRANSACTIONS while markers are written and then the same
// answer; the other decision is INVALID_TXN_STATE. An InitProducerId carrying (KIP-360) the ids the
// last bump started from gets that bump's answer again; any other expected ids are fenced. An EndTxn
// without an open transaction is INVALID_TXN_STATE; an unknown id or another producer id is
// INVALID_PRODUCER_ID_MAPPING; during Prepare*, the next transaction's requests get
// CONCURRENT_TRANSACTIONS. Epochs stay ≤ math.MaxInt16: at EpochExhausted the id moves to a fresh
// producer id at epoch 0 (at InitProducerId, or reserved at EndTxn, answered at once and taken on
// completion).
//
// # Timeouts
//
// transaction.timeout.ms comes with InitProducerId and must lie in 1..transaction.max.timeout.ms (the
// proposer's maximum is data in the command, default DefaultMaxTimeoutMs, 15 minutes; outside:
// INVALID_TRANSACTION_TIMEOUT). Expired(now) is pure: the open transactions whose start is more than
// their timeout before now. The host proposes a TimeoutAbort for each; it applies only if the
// transaction is still the same one and still past its timeout at the command's NowMs, and prepares
// the abort at epoch + 1, fencing the producer.
//
// # Producer ids
//
// Producer ids come from the metadata group (engine/metadata's AllocateProducerIDs). The host asks
// for a block and proposes it (GrantProducerIDs); a block must lie above every block granted before,
// so no id is handed out twice. With the pool empty, InitProducerId (and an EndTxn that must rotate)
// is refused ErrProducerIDsNeeded (COORDINATOR_NOT_AVAILABLE: retriable); ProducerIDsLeft lets the
// host refill before that.
//
// # Reads
//
// Describe (DescribeTransactions; unknown: TRANSACTIONAL_ID_NOT_FOUND), IDs (ListTransactions),
// Pending (fail-over), Expired (timeouts), Verify (AddPartitionsToTxn verify-only: a partition leader
// accepts a transactional write only into a partition of the producer's open transaction, so no
// hanging transaction forms), VerifyGroup (AddOffsetsToTxn verify-only: a group coordinator takes a
// TxnOffsetCommit only for a group of the producer's open transaction), ProducerIDsLeft, Digest.
//
// # Not here
//
// The host (node/txn*.go: the coordinator on __strand_transactions' partitions, proposing
// commands, driving markers through node.TxnMarkerWriter and reporting them), the partition side
// (control records, last stable offset, aborted-transaction index), TxnOffsetCommit in the group
// coordinator, the Kafka handlers and the client. Tests: txn_test.go (one per transition and refusal), TestModel (rapid, against a reference
// model, with fail-overs and replay), FuzzApply, FuzzRestore. Planted bug (-tags simbugs):
// bugSkipFence, authorize's epoch check skipped (TestBugSkipFence; simnet's TxnSkipsFence).
package txn
