// Package compact is log compaction for compacted topics (cleanup.policy=compact, issue 24) as a
// pure function: the compacted batch form, one compaction pass over a partition's log, and the
// topic settings that drive it. No I/O, clock, goroutine or randomness (the determinism guard holds
// it to an import allowlist): the node reads the log, calls Compact off its loop, writes what it
// emits.
//
// # Why a new batch form
//
// A raft entry's batch carries no offsets: Strand's form has none, the Kafka form (stored as sent,
// base offset zeroed) has per-record offset deltas that recordbatch requires to be 0, 1, 2, ...;
// offsets come from the entry's position (engine: offset → raft index). A compacted batch must
// keep each survivor's offset with gaps between them, outlive the raft entries it came from, and
// keep what idempotence and transactions need. So compacted batches get their own form, magic 2,
// in Strand's conventions (little-endian, CRC32C, minimal varints, canonical):
//
//	0  magic              u8   = Magic (2)
//	1  attributes         u8   0x10 transactional, 0x20 control; other bits zero (no compression)
//	2  reserved           u16  = 0
//	4  crc                u32  CRC32C of bytes [0, 4) then [8, end): all but itself (Checksum)
//	8  base_offset        i64  first offset of the original batch, ≥ 0
//	16 last_offset_delta  i32  the original batch covered [base, base+delta], ≥ 0
//	20 record_count       i32  survivors, 0 ≤ n ≤ delta+1 (0: a producer's kept last batch)
//	24 first_time_ms      i64  the original batch's base timestamp (record deltas are from it)
//	32 max_time_ms        i64  largest survivor timestamp; an empty batch keeps the original's
//	40 delete_horizon_ms  i64  -1, or when its tombstones / its marker may go (see Rules)
//	48 producer_id        i64  -1 without idempotence (epoch and sequence -1 then)
//	56 producer_epoch     i32
//	60 base_sequence      i32  the original batch's (-1 for a marker): sequences of the range
//	64 records_bytes      u32  length of the records section
//	68 records            record_count records, each:
//	     offset_delta       uvarint, strictly increasing, ≤ last_offset_delta
//	     timestamp_delta    zigzag varint, from first_time_ms
//	     key_length, key    zigzag varint (never -1: a data record has a key), bytes
//	     value_length, value zigzag varint (-1: a tombstone), bytes
//	     header_count       uvarint; each header: uvarint key length, key, zigzag value length, value
//
// Canonical: DecodeBatch accepts exactly what AppendBatch writes, so Encode(Decode(b)) == b and
// replicas that keep the same records write the same bytes. It also checks max_time_ms against
// the records, the horizon is set only on a batch holding a tombstone or a marker, producer fields
// (all -1 without a producer; a transaction needs one; a marker has sequence -1), a marker batch is
// one control record (Kafka's: key = version 0 and type 0 abort / 1 commit, value = version 0 and
// the coordinator epoch, big-endian) over one offset. Limits: a record ≤ recordbatch.RecordBytesMax;
// a batch ≤ BatchBytesMax (68 B + 16 MiB: a batch holds a subset of one original, whose Kafka form
// inflates to at most 16 MiB; the compacted framing is never longer than Kafka's and at most 3
// bytes a record longer than Strand's). Errors: ErrCorrupt / ErrBatchTooLarge, naming field and
// record (FuzzDecodeBatch). The header is 44 bytes longer than Strand's; a batch is never merged
// with another or split, so batch boundaries, producer sequence ranges and the Kafka view stay
// those of the original.
//
// Not compressed: compression output is not guaranteed identical across library versions, and
// replicas must write identical bytes (digests) even mid-upgrade. A topic produced compressed
// therefore takes its uncompressed size once compacted; the codec bits are reserved.
//
// # A pass
//
// Compact(log, decision, emit) runs Kafka's two passes. Log.Batches yields the partition's log in
// offset order: the compacted prefix [log start, FirstDirty) (compacted batches, gaps allowed)
// then the raft batches and marker entries from FirstDirty on (dense; Input carries an entry's
// producer, transactional flag, or Marker). Pass 1 hashes the keys of the dirty raft batches into
// the offset map (key hash → latest offset), stopping before the first batch that ends past the
// decision's CleanableEnd or would overflow the map; that batch boundary is Result.CleanedTo and
// MapFull says the map stopped it (Kafka: "compact only up to the last offset the map covered").
// Pass 2 reads everything below CleanedTo again, applies the rules and emits one compacted batch
// per batch with a survivor. The clean prefix's keys are not put in the map (they are already
// unique there), so the map is sized by the dirty section, not by the key count.
//
// The offset map is Kafka's SkimpyOffsetMap: Decision.OffsetMapBytes / SlotBytes (24) slots of a
// 128-bit key hash and an offset, open addressing, full at 90 %. The hash is SHA-256 truncated,
// not Kafka's MD5: a hash collision makes the older key's latest value disappear, and MD5
// collisions are cheap for a producer choosing keys. A batch with more records than the whole map
// holds is ErrOffsetMapTooSmall (no pass could pass it). Memory: the map, one batch, and a few
// words per producer id and per aborted transaction in the log.
//
// # Rules (Kafka's, each with a test that fails when it is broken)
//
//  1. Per key, only the latest record below CleanedTo survives: a record goes if the map holds a
//     later offset of its key. Offsets, timestamps, keys, values and headers of survivors are
//     unchanged. (TestLatestValueSurvives, TestCleanableEndBounds, TestMapFullPartialPass)
//  2. Tombstones (null value): the first pass that keeps a batch holding one stamps the batch's
//     delete horizon = decision time + delete.retention.ms (KIP-534: counted from the compaction
//     that first sees it, not from the write, so a tombstone compacted late still gets its full
//     retention); a later pass whose decision time is strictly past the horizon removes them. A
//     tombstone removes its key's older values at once, like any newer record.
//     (TestTombstoneHorizon, TestTombstoneHorizonFromFirstPass)
//  3. A data record without a key goes, as Kafka's cleaner drops it, and hides no value. A
//     produce to a compacted topic refuses one (INVALID_RECORD), so only a topic altered from
//     delete to compact has them, and they go at the first pass over them. (TestKeylessDropped)
//  4. Records of aborted transactions go, and are never put in the map (so they do not hide the
//     key's older committed value). Which batches are aborted comes from Log.Aborted (the engine's
//     aborted index: producer, first offset, marker offset), walked in offset order as Kafka's
//     cleaner walks its transaction index; a marker past the cleanable end is known that way.
//     (TestAbortedRemoved, TestAbortedSpansCleanableEnd)
//  5. A marker stays while a record of its transaction is in this pass's output, or until its
//     horizon (stamped like a tombstone's) has passed. Kafka decides "no record remains" from the
//     input and so keeps a marker one pass longer; deciding from the output is safe here because a
//     pass's output replaces the whole prefix at once, and it keeps passes idempotent.
//     Result.AbortedForgotten lists the aborted transactions whose marker went: the engine's
//     aborted index can drop them. (TestCommitMarkerKeptWhileRecordsRemain, TestAbortedRemoved)
//  6. Each producer's last data batch below CleanedTo is kept, empty if none of its records
//     survive, with its offset range, epoch and sequence, so producer state survives (Kafka's
//     rule), until the producer expires: an empty one whose newest timestamp is
//     ProducerExpirationMs (producer.id.expiration.ms, 24 h) before the decision's time goes, so
//     kept batches are bounded by the producers active within a day, not by every producer id
//     ever seen. (TestLastBatchOfProducerKept, TestExpiredProducerLastBatchDropped)
//  7. Deterministic: the same log and decision give the same bytes and Result.Digest (SHA-256 of
//     the emitted batches) on every machine; a second pass with the same decision over the output
//     gives it back unchanged (horizons are compared strictly, so a pass never removes what the
//     same decision stamped). No map iteration reaches the output. (TestCompactModel)
//  8. Retention (cleanup.policy=compact,delete, DeleteRecords): every batch wholly below
//     Decision.LogStart goes, from the prefix and the raft log alike (a producer's kept last batch
//     and a marker too; an abort's is then AbortedForgotten), and no key of it enters the map; a
//     batch the log start falls inside stays whole (its records below the log start are never
//     served: a fetch starts at the log start). LogStart is stamped by the engine when the COMPACT
//     applies (the log start then), not proposed, so every replica's pass drops the same batches
//     whenever it runs. (TestBelowLogStartDropped)
//
// # Replicas: a replicated decision, a deterministic pass
//
// The raft log is the partition's data log (DESIGN.md §2), so compaction must leave every replica
// with the same log. The design this package is built for:
//
//   - The leader proposes a COMPACT entry holding a Decision: Generation (one more than the last),
//     CleanableEnd = CleanableEnd(Bounds): the least of the last stable offset (every transaction
//     below has its marker), the leader's checkpointed offset (nothing a restart replays), the
//     active raft segment's base (the open segment is never compacted) and the first offset
//     appended within min.compaction.lag.ms; TimeMs (the leader's clock, the entry's append time:
//     the only time a pass sees); the topic's DeleteRetentionMs; and OffsetMapBytes (the leader's
//     log.cleaner.dedupe.buffer.size share), because where a full map stops must be the same on
//     every replica. Due(config, clean bytes, dirty bytes, ...) is the leader's trigger
//     (min.cleanable.dirty.ratio, max.compaction.lag.ms).
//   - Every replica, once it applied the entry and its log holds the raft batches below the
//     cleanable end, runs Compact off its loop over (its compacted prefix, its raft log from
//     FirstDirty) with that decision. By induction the inputs are identical, so the outputs are
//     byte-identical: a replica can check its Digest against the leader's (reported in a later
//     entry or in the replica's state), and a lagging or repaired replica can install the
//     compacted prefix from any replica whose digest for that generation matches.
//   - Passes run in generation order on every replica: skipping one would stamp some horizons later
//     and so change the bytes (a replica that missed one installs a later prefix instead). Log.Aborted
//     may be the engine's aborted index at the decision's apply or any time after: an abort applied
//     later belongs to a transaction that was open at the decision, so its records lie at or past
//     the cleanable end; entries a TRIM drops have their records below the log start.
//   - The new prefix is written beside the old and switched to atomically (a crash leaves the old
//     or the new set, never both or neither); only then does that replica drop its raft log below
//     CleanedTo (a replica-local raft compaction, as today's Compacted). Fetches below CleanedTo
//     are served from the compacted prefix, above it from the raft log, so a read never depends
//     on which replica compacted first: both views hold the latest value of every key.
//
// Rejected: the leader compacting alone and shipping segments (a second replication path beside
// raft, the live set over the network every pass); each replica compacting on its own schedule
// with no decision (replicas keep different tombstones and markers, digests cannot be compared, a
// reader switching leaders could see a removed tombstone come back); the compacted data inside the
// raft snapshot (a partition snapshot is engine state only, and every MsgSnap would carry the live
// set); rewriting raft entries in place (raft's entries are immutable and CRC-framed by index).
//
// # Next: node integration
//
// Built: the COMPACT and COMPACT_DONE entries and their apply (engine, compaction.go: the decision,
// the reported generation, cleaned-to offset and digest, RaftTrimBound); the compacted segment
// files, their sparse index (offset → position, running max timestamp) and atomic switch
// (raftlog/compacted; every segment synced at Commit, none before). Node side, built and tested:
// engine/metadata stores and checks every setting here (Config.Set/Validate) and takes compact and
// compact,delete; the node takes both (rule 8 cuts a prefix at a TRIM's log start);
// the produce path refuses a keyless record to a compacted topic (INVALID_RECORD), and a pass drops
// keyless records a topic altered to compact still holds (rule 3); the leader proposes COMPACT when
// decideCompaction finds a pass due (node's compaction_trigger.go; the clean side is its prefix,
// the dirty side the raft segments past what the prefix covers); every replica runs the pass of
// every decision it applies (node's compaction_replica.go): decisions noted at apply and, at open,
// from the engine's record, so a restart reruns a pass that had not switched; passes in generation
// order; the dirty section's raft entries gathered on the loop, bounded per tick; the pass
// (passLog, writePass into a raftlog/compacted Writer) as a storage job with no fsync, which the
// disk watchdog does not time, and the commit (fsyncs, the switch) as a timed one; Finish on the
// loop; the leader reports COMPACT_DONE (re-proposed while the record lacks its generation), every
// replica compares its own end and digest with the record, and a diverging report is counted (node
// Stats.CompactionsDiverged); raft-log compaction is capped at RaftTrimBound of the replica's own
// prefix end (see "Installing and trimming" below). Tests in node:
// TestReplicasPassAndReportSameDigest, TestPassCrashLeavesOldOrNewPrefix (all replicas crashed
// after the write before the switch, and after the switch before COMPACT_DONE, past a checkpoint),
// TestLaggingReplicaPassesInGenerationOrder, TestPassWriteNotTimedAsStall. Reads (node's compaction_fetch.go): a fetch below the replica's own
// prefix end is served from its prefix (the batches as stored: clientlib decodes them, the Kafka
// listener serves them through kafkaproto's AppendCompacted in Kafka's v2 form, a batch holding
// fewer records than its offset range), then from the raft log from the prefix end within the same
// byte budget; on the loop like raft-log reads, bounded by the fetch's max_bytes and 1024 batches
// and charged to the Process call's fetch read budget. read_committed serves the prefix whole (it
// lies below the LSO and holds no aborted record); the answer's aborted list leaves out a
// transaction whose abort marker rule 5 removed when the read covered the marker's offset (a Kafka
// read_committed consumer would otherwise drop its producer's later committed batches, waiting for
// a marker that is gone). ListOffsets by timestamp looks in the prefix first (the running maximum
// index, then the records), then in the raft log from its end. A stuck replica, or a prefix that
// fails a read, serves what its raft log still holds (below: trimmed). Test: node's
// TestFetchServesCompactedPrefix (native and Kafka reads through franz-go's fetch processing at
// both isolation levels, an aborted transaction whose marker went, ListOffsets by a removed
// record's timestamp) and node/server's
// TestKafkaCompactedTopicOverFranzGo (a real franz-go consumer over a real node).
//
// Installing and trimming (node's compaction_install.go, snapshot.go): a
// replica that cannot run a pass ("stuck": its raft log starts past its
// prefix after a raft snapshot, it missed a generation, its prefix does
// not open, a read found it damaged, or its end and digest differ from
// the record) asks the group's other voters in turn (PrefixRequest /
// PrefixChunk in the peer frame) for the prefix of the record's reported
// generation; a peer answers only from a current, unstuck generation
// that agrees with its own record; the chunks (whole batches, at most
// node.Config.PrefixChunkBytes) are appended beside the old generation by
// untimed storage jobs, and Commit checks the bytes against the record's
// digest before the switch (a wrong or unreadable prefix is removed first,
// manifest first). Then the raft log is trimmed up to the prefix:
// raft-log compaction, snapshot-driven included, is bounded by
// RaftTrimBound(least of the replica's own prefix end, the record's
// CleanedTo and the end a majority of the voters' prefixes hold: node's
// compaction_held.go), none further while stuck. The engine keeps the log start
// on a compacted partition: Compacted drops only the index entries the
// record covers, the digest leaves covered entries out (replicas trim at
// their own pace), and a raft snapshot's state (RaftSnapshotState) keeps
// the log start, the record and the index entries its record does not
// cover yet, inline; a follower restored from it is stuck until it
// installs a peer's prefix, and meanwhile answers a fetch it cannot serve
// with REPLICA_RECOVERING (retriable), never a later batch. Tests in node:
// TestReplicaWithOtherPrefixInstallsFromPeer,
// TestUnreadablePrefixInstallsFromPeer, TestCorruptPrefixInstalledAgain,
// TestRaftLogTrimmedUpToPrefix (every replica's raft log starts past
// offset 0 and at or below its prefix's end; a follower down meanwhile
// gets a raft snapshot and installs); engine's
// TestCompactedTrimKeepsLogStartAndDigest. Planted: PrefixInstallUnchecked
// (the switch after the first chunk, the digest unchecked).
//
// Memory: a pass gathers at most 8 times its decision's offset map of
// raft entries (node's passInputBytes; a function of the replicated
// decision and entry sizes, so every replica stops at the same batch) and
// cleans to there; the next decision goes on from its CleanedTo.
//
// I/O budget: node.Config.CompactionBytesPerSec (`strand serve
// --compaction-bytes-per-sec`, Kafka's log.cleaner.io.max.bytes.per.second;
// 0, the default, unlimited) bounds the bytes a node's passes read and
// write, all replicas together, on the Clock's monotonic time: the write
// runs as a Pass in steps of a tenth of a second of the budget, each a job,
// and each pass step (a gathering step, a write step, the commit job)
// starts only once the bytes charged so far are paid for, so a pass over N
// bytes at B a second takes at least N/B, the rate holds inside its write
// (to a step), and nothing else on the loop waits (node's passBudget;
// TestPassBudgetHoldsPassNotProduce).
// Each pass's bytes in and out and duration are kept per replica and
// summed per node (node's CompactionView, Stats.CompactionBytesIn/Out;
// /metrics, `topic describe`).
//
// compact,delete and DeleteRecords (Kafka takes it on compact,delete):
// a TRIM moves the log start inside or past the prefixes; rule 8 cuts
// every replica's next generation there. The engine keeps what a lagging
// replica's pass needs: on a partition with a record a TRIM drops no index
// entry and no aborted transaction (each replica's own raft-log trim drops
// the index entries its own prefix covers), and the decision records the
// log start. The leader's retention weighs the prefix first (node's
// prefixRetention: retention.ms at the first prefix batch whose running
// maximum timestamp is young, retention.bytes by prefix segments), then
// the raft segments past it. A topic altered from compact to delete gets
// drop passes (node's dropPass: cleanable end at the log start) while a
// batch no pass covers lies wholly below its log start. Tests in node:
// TestCompactDeleteTrimCutsPrefix (DeleteRecords inside the prefix, mid
// batch, then past it, then a restart), TestCompactAlteredToDeleteAndBack,
// TestCompactDeleteRetentionWeighsPrefix; engine's
// TestTrimKeepsUncoveredBatches. In the simulator: half the kv seeds are
// compact,delete (simnet's kvCompactDelete: retention drawn small,
// DeleteRecords now and then, an alter to compact when the writer is
// done); planted CompactDeleteUncut (one replica's passes ignore the log
// start).
//
// Still to do: the raft log's disk lags the prefix by up to a segment (whole segments go, and
// a segment goes only once a COMPACT_DONE covering it is applied);
// partition groups forward no proposals, so only the leader's outcome
// reaches the log (followers check theirs locally); dropping
// AbortedForgotten from the aborted index (through COMPACT_DONE, but only
// once no replica can still serve those records: one whose own pass lags
// reads them from its raft log, where read_committed needs the index to
// hide them; on a compacted partition a TRIM drops no aborted
// transaction either, so today the aborted index of a compacted log only
// grows; a replica stuck behind the record serves its raft log, where the
// aborted batches still are, so no rule on the record alone is safe: the
// voters' PrefixHeld reports, node's compaction_held.go, now tell the
// leader each voter's generation, from which a replicated drop could be
// decided once every voter is past the generation that forgot an entry);
// retention by
// bytes counts the prefix's segments and the raft log's, not the raft
// segments the prefix covers (a segment's lag); a topic altered from
// compact to delete keeps its prefix until retention takes it (Kafka's
// cleaned segments stay too); ListOffsets by timestamp on a stuck
// replica whose raft log starts past its prefix looks from its first
// batch. Built in the simulator: the key-value workload (simnet's
// wire_kv.go), every replica's prefix checked as a power loss would leave
// it at every durable step of a pass or an install (prefixes.go), crashes
// and power cuts inside passes (compaction_cuts.go), and issue 24's
// planted bugs: CompactKeepsOlder, TombstoneEarly and
// CompactDropsLastRecord here (bugs_simbugs.go), CompactSwitchNotAtomic in
// raftlog/compacted, CompactActiveSegment, PrefixInstallUnchecked and
// CompactDeleteUncut in node.
//
// # Tests
//
// batch_test.go (round trips, every canonical rule refused at encode and decode), FuzzDecodeBatch,
// FuzzCompact (a fuzzed compacted prefix under a pass: typed errors, determinism, idempotence),
// compact_test.go (one test per rule above, the Kafka form as input, the input contract),
// TestCompactModel (rapid: random keyed updates, tombstones, committed and aborted transactions in
// both raft forms, interleaved with passes of random decisions including small maps, against a
// model that scans every offset ever written: per key exactly the latest committed record below
// CleanedTo, kept unless a tombstone past its horizon; nothing at or past it touched; no aborted
// record; markers exactly per rule 5; producers' last batches; determinism and idempotence),
// config_test.go. Benchmark (make bench): BenchmarkCompact, 10,000 keys × 3 updates × 1 KiB (31
// MB of raft batches) in one pass: ≈ 33 ms of CPU a pass (≈ 0.9 GB/s a core; CRC32C, SHA-256 and
// the map lead the profile); BenchmarkRecompact, a 10,000-key prefix plus one more round.
package compact
