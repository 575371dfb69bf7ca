// Package engine holds Strand's pure state machines: they apply committed raft entries and return
// state and results, doing no I/O, reading no clock, starting no goroutine and drawing no
// randomness. This package is the partition's; engine/metadata, engine/groups and
// engine/recordbatch hold the others and the batch format.
//
// # Raft entry
//
// strandpb.Entry (flat): kind (PRODUCE, TRIM, TXN_BEGIN, TXN_MARKER, COMPACT, COMPACT_DONE, TIER_ADD),
// append_time_ms (the leader's clock: the only time the engine sees), producer id/epoch/base
// sequence, trim offset, node-local proposal id, transactional, commit, coordinator epoch, the
// compaction fields (generation, offset, delete retention, offset map bytes, digest), batch, the
// tier fields (an uploaded segment's base, end, bytes, max timestamp, term, CRC).
// engine.DecodeEntry reads it with protowire without copying (differentially fuzzed against
// proto.Unmarshal).
//
// # Offsets, high-water mark, log start
//
// The produce entry at raft index i with a valid batch of n records gets offsets [next, next+n).
// Every applied entry is committed, so the high-water mark is next (R10). The index holds one
// BatchLocation{BaseOffset, RecordCount, RaftIndex, AppendTimeMs, MaxTimestampMs} per retained
// batch in a slice with an amortised O(1) dropped prefix; Locate(offset) binary searches it.
// Invariants (checked on restore and under invariants): batches dense and in raft-index order, the
// first holds the log start, the last ends at the high-water mark, MaxTimestampMs a running maximum
// (so OffsetForTimestamp binary searches, Kafka's time index at batch granularity). The log start
// moves only forward: by a replicated TRIM (clamped to the high-water mark) or by the replica-local
// Compacted(raftIndex) that builds a compaction snapshot (package node, "Raft log compaction and
// snapshots"). Compacted keeps a timestamp seed (the running max timestamp of the last dropped
// batch) so the next batch's MaxTimestampMs equals the other replicas'; the next batch or a TRIM to
// the high-water mark clears it.
//
// # Producer expiry
//
// A TRIM forgets a producer only when all its batches are below the new log start and its last
// batch is ProducerExpirationMs (24 h, Kafka's producer.id.expiration.ms) older than the TRIM's
// append time, so the table stays bounded by producers active in the last day. Rejected: Kafka's
// "forget once the log start passes its last batch" (the simulator found a trimmed batch retried at
// sequence 0, accepted as new, and written twice).
//
// # Idempotent producers (R15, Kafka's rules)
//
//   - producer unknown, base_sequence ≠ 0: ErrUnknownProducer
//   - epoch < recorded: ErrProducerFenced
//   - epoch > recorded: must start at sequence 0, else ErrOutOfOrderSequence
//   - same epoch, (sequence, count) equals one of the last 5 batches: duplicate: answered with that
//     batch's offset
//   - same epoch, sequence = last + 1: accepted
//   - otherwise: ErrOutOfOrderSequence
//
// Sequences wrap modulo 2^31. Five batches, as Kafka, because a producer pipelines five requests.
//
// # Transactions (issue 23, partition side; the coordinator is engine/txn)
//
// Commands (entries the node proposes; encoders in entry.go):
//
//   - EncodeTxnBeginEntry(producer id, epoch): the producer joined a transaction that includes this
//     partition. KIP-890's verification made a replicated fact: the leader proposes it once the
//     coordinator's Verify (AddPartitionsToTxn verify-only) said yes, before the transaction's first
//     write here, pipelined with it. Refused: an epoch older than the partition knows
//     (ErrProducerFenced), a transaction of another epoch still open (ErrInvalidTxnState). A resend
//     at the open transaction's epoch is a no-op. It takes no offset.
//   - EncodeTransactionalProduceEntry: a produce entry flagged transactional (Kafka's transactional
//     attribute bit; Entry.transactional). Accepted only with a transaction begun here at exactly its
//     epoch, else ErrInvalidTxnState (no hanging transaction can form); an older epoch is
//     ErrProducerFenced; then the idempotence rules below apply as to any producer. The first
//     accepted batch opens the transaction for the LSO. A plain batch from a producer whose
//     transaction is open is ErrInvalidTxnState.
//   - EncodeTxnMarkerEntry(Marker{producer id, epoch, coordinator epoch, commit}): the coordinator's
//     commit or abort (WriteTxnMarkers). Refused: an epoch below the partition's
//     (ErrProducerFenced), a coordinator epoch below the producer's last marker's
//     (ErrCoordinatorFenced). It ends the open transaction and records the marker's epochs (KIP-890:
//     the marker's bumped epoch fences the transaction's own). If the transaction wrote here the
//     marker takes one offset (a control record, indexed as a one-record BatchLocation; the fetch
//     path tells it from a batch by the entry's kind and reads it with EntryMarker) and an abort
//     enters the aborted index; otherwise (begun without writes, a resend, no transaction) it takes
//     no offset.
//     The coordinator epoch is the host's to choose (say the coordinator partition leader's raft
//     term); it must never decrease for a producer id. An operator's abort of a hanging transaction
//     (KIP-664, `strand txn abort`) is a marker like any other.
//
// Every replica reaches the same outcome; a refused entry changes nothing but the applied index.
// A producer's transactional record (epoch, coordinator epoch, open, first offset, last append
// time) exists only once it sent a begin or a marker, so producers without transactions behave,
// snapshot and digest byte for byte as before.
//
// Queries: LastStableOffset (the first offset of the oldest open transaction that wrote here, else
// the high-water mark, never below the log start); ReadLimit(iso) and AppendReadable(dst, offset,
// max, iso), a read that stops at the LSO for ReadCommitted (an offset in (LSO, high-water mark] is
// valid and gets no batches, as in Kafka; the LSO is always a batch boundary);
// AppendAbortedTxns(dst, from, to), the aborted transactions (producer id, first offset, marker
// offset) overlapping [from, to) in marker order: a Kafka fetch's AbortedTransactions for the
// batches it returned; AppendOpenTxns (first-offset order: DescribeProducers, metrics, LSO lag);
// TxnOpen(producer id) (whether a leader must propose a begin before a transactional write).
// read_committed readers get aborted batches with the list and skip them, as Kafka consumers do;
// the engine does not filter.
//
// Retention and delete-records, as Kafka: a TRIM may pass an open transaction's first offset; the
// transaction stays open and its marker still ends it, and the LSO is then the log start (Kafka's
// first unstable offset is bounded below by the log start). A TRIM drops the aborted entries whose
// marker lies below its offset (Kafka deletes them with the segment holding the marker), forgets a
// transactional record idle a day (ProducerExpirationMs) with no open transaction and no
// idempotence record, and never forgets the idempotence record of a producer whose transaction is
// open. All three depend on the TRIM entry alone, never on the replica-local log start that
// Compacted moves, so replicas agree and TailDigest covers the transactional state.
//
// Not here: building a Kafka control batch for a marker (kafkaproto), accepting Kafka batches with
// the transactional attribute (recordbatch refuses them today with ErrUnsupported; the native
// produce sets Entry.transactional, node/txn_produce.go; the Kafka form needs recordbatch to
// accept the bit), mapping ErrInvalidTxnState / ErrCoordinatorFenced to wire codes (node/produce.go
// produceResult, node/txn_write.go), and the
// node's own append-only checkpoint of the offset index, which needs no change (markers are
// ordinary BatchLocations).
//
// # Compaction (issue 24; compaction.go, the pass is engine/compact)
//
// A compacted topic's partition records what every replica must agree on; the compacted prefix
// itself is replica-local (raftlog/compacted). Commands, neither taking an offset:
//
//   - EncodeCompactEntry(compact.Decision): the leader's decision of the next pass (generation,
//     cleanable end, delete.retention.ms, offset map bytes; its time is the entry's append time).
//     Refused: a generation other than the last + 1 (ErrCompactionGeneration: passes run in
//     generation order everywhere), fields compact.Decision.Check refuses, a cleanable end below the
//     last decision's (the next pass would be refused everywhere) or past the last stable offset (a
//     pass takes a transaction with no abort in the index as committed; an honest leader's bound
//     is below its LSO, and a transaction opened since starts past it) (ErrInvalidEntry).
//   - EncodeCompactDoneEntry(generation, cleaned-to, digest): the outcome of a replica's pass (the
//     leader's, node integration), so every replica can check its own prefix against it and a
//     lagging one knows which digest to install. Accepted for a decided generation after the last
//     reported, cleaned-to between the last reported and the decision's cleanable end; the reported
//     generation again is a no-op if equal, else ErrCompactionDiverged (passes are deterministic:
//     a bug or a damaged prefix); older is ErrCompactionGeneration.
//
// Compaction() returns the record (last decision; last reported generation, cleaned-to, digest).
// RaftTrimBound(prefixEnd) is the highest raft index a replica whose own prefix ends at prefixEnd may
// drop from its raft log: records not in its prefix live only there. The record is in both
// snapshot forms (PartitionSnapshot.compaction, proto/compactpart.proto) and both digests; absent
// until a COMPACT applies, so a partition that never compacted keeps its bytes and digests
// (TestNoCompactionKeepsFormat). Not here yet: the pass's AbortedForgotten leaving the aborted
// index. It must come through a replicated entry (COMPACT_DONE's natural payload: the markers'
// offsets), and it is safe only where reads come from a prefix of that generation: a replica
// whose own pass lags still serves those aborted records from its raft log, and without their
// index entries a read_committed reader would take them as committed; so a replica (a new leader)
// must serve offsets below the reported cleaned-to only from its own prefix of that generation
// or later. Nor is the log start kept below the first indexed batch on a compacted partition
// (Compacted moves it today; there the prefix serves the offsets below).
//
// # Tiered storage (issue 27; tiering.go, the rules are engine/tier)
//
// The partition keeps tier.Manifest, the list of its segments in object storage, as replicated
// state: TIER_ADD (EncodeTierAddEntry) applies tier.Manifest.Add — the first upload starts the
// remote log at its base, later ones must extend it without a gap or overlap — and is refused
// (ErrInvalidEntry) past the last stable offset; Result.Tier says Added, Duplicate (a retried
// proposal) or Stale (a lost race: the uploader deletes its object). Once active, every TRIM moves
// the remote start too and answers the segments wholly below it in Result.TierDropped, for the
// leader to delete. TIER_RESTORE (EncodeTierRestoreEntry; `strand topic recover`) carries a
// manifest read from the bucket: on an empty partition (nothing appended, trimmed, compacted,
// uploaded, no producer) the log starts at its start and ends at its end, every offset remote;
// any other partition refuses it (ErrInvalidEntry). An inactive manifest ignores trims and stays out of the snapshot and the
// digest, so a partition that never tiered has the state it had before tiering. Not yet: the node
// side (uploads, local deletion bounded by tier.Manifest.LocalRemote, remote reads) and a
// replicated log start for reads of remote offsets (Compacted moves the local one).
//
// # Snapshot
//
// strandpb.PartitionSnapshot, deterministic marshal, version 1: applied index, high-water mark, log
// start, the retained index, producers sorted by id (with their last append time), the timestamp
// seed, the transactional records sorted by id and the retained aborted index in marker order
// (proto/txnpart.proto; the open-transaction list is rebuilt from the records). StateSnapshot
// carries the transactional state too: its size grows with the retained aborted transactions
// (rare; an append-only form like the index's is the step if they ever dominate).
// RestorePartition runs the full invariant check, so a bad snapshot is ErrInvalidSnapshot, never a
// later panic. New zero-defaulting fields need no version bump; a change of meaning does.
//
// # Index ordinals
//
// For append-only checkpoints: the n-th batch ever indexed has ordinal n forever, so the node
// persists the index append-only: IndexOrdinals(), IndexSince(from), StateSnapshot() (version 2:
// scalars, ordinal range and producer table, no batches) and RestorePartitionIndexed(state, index);
// each restore refuses the other version with ErrInvalidSnapshot.
//
// # Tests
//
// Scripted scenarios (engine/testdata/partition/*.txt; transactions.txt tells the transactional
// story), TestPartitionModel (rapid, against a trivial model that knows trims, the timestamp seed
// and producer expiry; replay-without-compaction equivalence), transactions_test.go (one test per
// transactional rule), compaction_test.go (one test per compaction rule), TestTxnModel (rapid: begins, transactional and plain writes, markers, trims,
// compactions and both snapshot-restores against a linear model of open transactions, LSO and
// aborted list; replay equivalence), FuzzValidate, FuzzDecode, FuzzApply (from a partition with
// transactions), FuzzRestore, FuzzDecodeEntry. Planted bugs (-tags simbugs, SetTxnBugs):
// bugLSOPassesOpenTxn (the LSO from the newest open transaction) and bugDropAbortOnRestore (a
// restore loses the newest abort), each required to make TestTxnModel fail by
// TestBugLSOPassesOpenTxn and TestBugDropAbortOnRestore. Benchmarks (make bench): apply ≈ 15 M
// records/s (100 × 100 B), ≈ 3.4 M records/s (100 × 1 KiB, CRC-bound), 0 allocations; Locate over
// 1 M batches ≈ 1–3 µs.
package engine
