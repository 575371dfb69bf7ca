// Package node is a Strand node: it hosts many partition replicas, one etcd raft group each
// (multi-raft), drives their Ready cycles and serves produce and fetch. The core does no I/O of its
// own: it reaches the world through Clock, raftlog.Disk and Network, and draws randomness from a
// source handed in, so the simulator runs the code production runs (though not all of its
// configuration: see package node/server). Goroutines, sockets and real time live in package
// node/server. Which file holds what is mapped in DESIGN.md.
//
// node.Core hosts the metadata group and every partition replica placed on this node, one etcd
// RawNode each, and answers every client request through HandleAs. Loops over groups run over a slice
// sorted by (topic, partition); maps are only looked up. The shape is RawNode's one level up: Tick,
// Receive, HandleAs, Process. One mode: Open always runs the metadata group over Config.Nodes and
// hosts what it places here, in tests and the simulator too. Rejected: a static mode for tests (two
// paths drift).
//
// # State machines and services
//
// Each group (a replica: raft log, RawNode, waits, pipeline state) hosts one stateMachine
// (statemachine.go): partitionSM, a partition's engine, or metadataSM, the cluster metadata. The
// host (open, process, checkpoint, snapshot, receive) applies entries, checkpoints and restores
// through it and never asks which kind a group holds; where the host's behaviour differs it reads a
// named field of the state machine's replicaPolicy (quiesces, repairable, raftSnapshots, control,
// ...). The next state machines (transaction coordinator, tiered-storage metadata) implement the
// same interface. Tick advances the groups' raft clocks and runs the subsystems registered in
// services.go, in their fixed order.
//
// # Replicas and raft configuration
//
// A replica lives in p/<topic>@<topicID>/<partition>/ (raft log in log/, checkpoints in
// checkpoint/); raft messages carry <topic>@<topicID>, so a lagging node can never feed an old
// incarnation's entries to a re-created topic. An empty log is bootstrapped over the replica set
// sorted by id, so every replica writes identical entries. raft.Config: PreVote and CheckQuorum on,
// MaxSizePerMsg 1 MiB, MaxInflightMsgs 256, MaxCommittedSizePerReady 8 MiB,
// MaxUncommittedEntriesSize 64 MiB, ReadOnlySafe, Applied = the index the restored engine reflects.
// MaxInflightBytes 4 MiB per follower per group, so a catch-up never queues hundreds of MB in one
// round.
//
// # The Ready cycle (pipelined)
//
// Raft runs with AsyncStorageWrites: a Ready's writes come as a MsgStorageAppend (entries, hard
// state, and the messages that may leave only once they are durable: MsgAppResp, MsgVoteResp, the
// leader's self-ack), its committed entries as a MsgStorageApply; Advance is never called.
// Process() runs rounds until no group has a Ready and nothing was written (at most 64). One round:
//
//  1. take each group's Ready in group order; appends go to the group's queue, applies are kept for
//     step 3, every other message goes to its node's frame at once — except one carrying a term the
//     log has not synced (pre-votes excepted), which waits behind the append that writes that term;
//  2. send the frames: a leader's MsgApps leave before its own write (Raft thesis §10.2.1). With RF
//     3 the two followers' acks can commit an entry before the leader's fsync ends; acks=all still
//     never completes before the leader's own fsync, because etcd raft hands an entry to apply only
//     once it is stable locally too (maxAppliableIndex in raft's log.go; applyUnstableEntries is
//     false under AsyncStorageWrites);
//  3. apply committed entries, note read states, check leadership, serve reads, wake long polls,
//     prepare a due checkpoint (its writes are storage jobs: checkpoint_job.go);
//  4. per group with queued appends and no sync in flight: hand them to its log in order
//     (Log.SaveSome, which only encodes them as pending writes: the write system call runs in the
//     sync job, before its fsync; it stops where the segment rolls, the rest waiting at the queue's
//     front for the sync that makes the sealed segment durable, so a roll's fsync is a storage job
//     too; Save, written on the loop, with Config.WAL), and if any needs durability
//     (raft.MustSync; a commit-only hard state does not) start a sync (StartSync: the job writes
//     the group's pending records, one WriteAt per segment, then fsyncs) and hold the responses
//     and acks=1 waits for it; otherwise release them at once (a commit-only hard state stays
//     pending until the group's next job: it needs no durability);
//  5. send.
//
// The syncs are SyncJobs the host (the server's storage pool, the simulator, node's test cluster) takes with
// Core.TakeSyncJobs after each Process, runs on any goroutine (SyncJob.Run touches only files; a log
// sync's is two phases, RunWrite then RunSync, which the simulator runs as two events), and
// reports with Core.SyncDone(token, err): the held responses are then stepped or sent and acks=1
// produces complete; an error is fatal (the next Process returns it: fail-stop), except a write
// refused for space (raftlog.WriteFailed and ErrNoSpace), which reopens the replica from its files
// as a failed write on the loop did ("Full disks" below). Until a job's write completes, its entries
// are read from the log's memory (raftlog: the tail cache keeps every entry not on file), so raft's
// reads (MsgApp to followers, entries to apply), apply and fetch never read a record not yet
// written; raft itself steps the self-ack, and so treats them as stable, only at SyncDone. At most one sync
// per group is in flight; appends arriving meanwhile queue and share the next fsync (group commit
// per log). A checkpoint waits for a round with no sync of its group in flight, first writes the
// queued appends and, unless the commit it covers is durable, starts the group's sync; its write
// and trim then run as SyncJobs too (see Checkpoints below). Callbacks run at the end of the public call, so they may re-enter the Core.
// Rejected: the synchronous round (the loop waited for every fsync, ~70% of its time; removed, so
// tests, benchmarks, the simulator and the server all run the one storage path); Ready/Advance with only the leader's MsgApps sent early (re-implements by
// hand the ordering AsyncStorageWrites gives); a node-wide queue of write batches (a slow log holds
// back every other log's acks); writing a log while its fsync runs (needs locking, buys nothing);
// one goroutine per job (bursts of thousands at 2,000 partitions).
//
// # Node-wide write-ahead log (wal.go, raftlog/wal; opt-in)
//
// Opt-in: serve --wal, Config.WAL. Each round every group's appends go to its own log without an
// fsync and, just before, the same bytes as a record of one node-wide log; one SyncJob for the node
// makes the round durable and releases every group's held responses (group commit per node;
// raft.MustSync still decides whether a round syncs). Every WALLogFlushBytes (1 MiB) a log is
// written it is fsynced in the background through handles of its own (Log.Flush; RocksDB's
// bytes_per_sync). Past WALBytesMax (64 MiB) the WAL rolls, the dirty logs are flushed one at a
// time, then a job unlinks the old segments and syncs the directory (wal.StartRemoveOld); none of
// it on the loop or ahead of an acknowledgement (an unlink of 64 MiB takes ~100 ms; 64 MiB of logs
// fsynced at once queue the WAL's fsyncs behind them). e2e with --wal, 5,000 msgs/s, 6 partitions:
// p99 20–42 ms, p999 49–61 ms (16–21 / 21–27 between rotations). Every fsync a log makes on its own
// (roll, truncation, checkpoint, snapshot) first syncs the WAL (raftlog.Options.BeforeSync), so a
// log never durably holds what the WAL could lose; a reset record voids a log's past before a
// snapshot install, repair or delete. Recovery folds each log's records into the tail they describe
// and applies it once (a record-by-record replay lets an old record cut back newer page-cache
// writes; TestReplayModel), then syncs, before any replica opens. A node started without --wal
// replays and removes a WAL a previous run left, and syncs the WAL directory even when it lists
// empty (a killed removal's unlinks; TestDroppedWALSurvivesKillAnywhere). Proven: rapid crash and replay models,
// FuzzOpenWAL, TestSimWAL (-sim.wal; the durability audit counts a promise kept once the WAL holds
// it; the simulator flushes logs every 32 KiB and rotates every 256 KiB, so crashes land between
// every step), planted WALAckBeforeFsync caught at seed 1. Off by default: one stream of writes and
// fsyncs is slower than a log each (produce 92–98k vs 148–159k msgs/s, quiet machine), though e2e
// at 5,000 msgs/s over 6 partitions is better (p50 5.6–7.2 vs 7.7–10.9 ms) for the fewer fsyncs.
// Rejected: syncfs(2) per round (flushes the whole file system; measured worse); one shared segment
// stream as the only log (every read and compaction would need a per-group index over shared
// files). Gap: damage inside the WAL stops the node.
//
// # Produce and acks (R12)
//
// Definite refusals before proposing: unknown partition, not leader (with the leader it knows),
// invalid or oversized batch, a client produce to __strand_offsets (INVALID_REQUEST); retriable:
// NOT_ENOUGH_SPACE on a full node, BUSY past PendingRequestsMax (resent to the same leader with no
// metadata refresh; Kafka's REQUEST_TIMED_OUT). acks=0 completes at propose,
// acks=1 after the leader's synced append, acks=all at apply with the engine's offset (an
// idempotent duplicate gets the original). A wait is matched by (index, term). A proposal orphaned
// by a leadership change, Close or the request timeout ends with ErrLeadershipLost,
// ErrStoppedWaiting or ErrTimeout — all indefinite (TIMEOUT on the wire); NOT_LEADER only ever
// means "refused before proposing" (answering orphans with it would let the client write a batch
// twice).
//
// # Reads: linearizable fetch through ReadIndex
//
// Only the leader serves a fetch, after ReadIndex (ReadOnlySafe) confirms leadership and the
// replica applied that index: Locate gives raft indexes, entries are read and their batch bytes
// sliced out — no re-encoding (R3). Long polls park per group and are re-read when the high-water
// mark passes; a wake on a leader that has held leadership since the session's last confirmed read
// is served from applied state without another ReadIndex. ListOffsets (earliest, latest, timestamp)
// also goes through ReadIndex. Shared read index (leader only): a read arriving while an earlier
// one's ReadIndex is still unconfirmed and nothing was applied since that call takes its index —
// the leader fixed it at the call and acknowledges a write only once applied, so every write
// acknowledged before the later read began is at or below it, and the confirmation still comes
// after the later read arrived (1,000 tailing groups cost 2,000 heartbeat rounds per wake
// otherwise). A woken long poll reads only the batches after those it holds. Read budget: one
// Process call reads at most FetchReadBytesPerProcess (4 MiB) for fetches; the rest are served
// first thing in the next call, so produces never queue behind hundreds of MiB of reads. Cold
// reads (fetch_cold.go): entries the log's tail cache does not hold are read by a storage job
// (raftlog StartRead on the loop copies what the read needs, Read.Run reads and CRC-checks off it,
// FinishRead on the loop), and the job's completion serves the fetch again from the state then
// (at or past its read index) with those entries; a segment retired under a job fails it
// cleanly (raft.ErrCompacted: served again, out of range or a new job), damage is a storage
// failure as before; at most 64 read jobs a node, 3 a fetch (then on the loop). Still read on the
// loop: the group and transaction coordinators' loads, ListOffsets by timestamp, a compacted
// prefix, raft's own reads. Rejected: lease reads (need bounded clock drift, which the simulator
// deliberately breaks); a reader goroutine owning the logs (two owners of every log).
//
// # Checkpoints and restart
//
// Checkpoints are append-only, so their cost is amortised O(1) per applied entry. Every
// CheckpointEntries (1024) applied entries a replica writes a header checkpoint/<raft index, 20
// digits> (magic SCK2, CRC32C: raft index, conf state, the ordinal range [index_start, index_end)
// of the live index, engine.StateSnapshot()) and the batches indexed since the last one into
// append-only index chunks checkpoint/index/<first ordinal> (65,536 fixed 40-byte records, each
// with its CRC32C).
//
// Write order (the Disk has no rename): sync the raft log (the durable commit must be ≥ the
// checkpoint's index, or raft panics on Applied > commit), when the chunks must be cleared (their
// numbering unknown) remove the older headers and SyncDir, then the chunks; write and sync the new
// records, SyncDir when a chunk was begun (its first write, wherever in the chunk it lands), write
// and sync the header, SyncDir; only then remove older headers and chunks wholly below
// index_start. Every header on disk names only records that a crash keeps. On open, the newest header at or below the durable commit whose
// CRCs, records and engine invariants check out is restored — unless the raft snapshot is newer,
// which is then restored instead; otherwise an older one; otherwise the snapshot plus a replay (a
// checkpoint is an optimisation, never the only copy). A checkpoint may still index batches below
// the log's first index until the replay passes the TRIM; no read is served before that
// (ReadIndex), and readBatch answers OFFSET_OUT_OF_RANGE for a compacted entry rather than
// fail-stop. The checkpoint's fsyncs (the log, the chunk, its directory, the header, the directory
// again: 4–6 every 1,024 applied entries per replica) run off the loop (checkpoint_job.go): the loop
// encodes the header and the new index records in memory, the group's log sync (when the commit is
// not durable yet) then a write job (records, header, their syncs, in the order above) run as
// SyncJobs; only the write's completion makes the checkpoint count, and a trim job then removes the
// older headers and chunks. One checkpoint per group is in flight; a replica whose files are removed
// cancels its checkpoint jobs first (a guard held while a job runs), so a stale header never lands
// in a directory placed again later. The watchdog times these jobs like any other. The metadata group writes SCK1 (every item inline; no per-batch index).
// TestCheckpointSurvivesPowerCutAnywhere cuts the power after each disk operation of a run and
// checks the restored state against a full replay. Rejected: per-segment summaries in raftlog (a
// second index under raftlog's truncation rules), one growing index file (a trim could never free
// its prefix), delta records (restore would replay them). After the engine is restored, openRaft
// calls VerifyFrom(applied+1): damage in the tail raft will replay fails open and the replica is
// repaired. Damage raft meets later, reading old entries for a lagging follower, turns into
// corruptFound (the replica is rebuilt, REPLICA_RECOVERING) instead of a panic inside raft; a bit
// flipped in a sealed segment nobody reads again is found only if it is read (no background scrub
// yet).
//
// # The metadata group
//
// Always the first group; raft messages carry topic @metadata. Any node proposes (raft forwards
// MsgProp and MsgReadIndex for this group only, with sanity checks). A proposal carries a 64-bit id
// drawn from a PCG seeded by Config.Rand and a persisted boot count, so an old run's forwarded
// proposal never completes a new request. Nodes register themselves (address, rack) on Tick while
// the applied state lacks them. After a round in which the metadata version moved, reconcile stops
// groups no longer placed here (a synced deleted tombstone first, then the files, so a node
// replaying an older metadata checkpoint never hosts that incarnation again empty; checkpoint
// headers before the index chunks they name, and every directory synced even when it lists empty,
// since a killed removal's unlinks may still be in the page cache) and opens new
// ones in order. Once a restarted node's metadata group has applied as far as its log reached at
// Open, the sweep (sweep.go) removes every replica directory the state does not place here: a node
// stopped between a removal's entry becoming durable and its reconcile left those files behind;
// a tombstone it finds is made durable before the files go (a kill may have left it in the page
// cache only: TestSweepMakesTheTombstoneDurableFirst).
//
// # Leaders of every partition
//
// A replica that becomes leader is queued; once per Tick a node proposes one ReportLeaders of up to
// 4096 queued partitions whose term the applied metadata does not yet record (one proposal in
// flight per node; a failed one requeues). Every node then answers Metadata with the recorded
// leader of every partition, unless its own replica knows a newer term (then its own view): an
// answer never names a leader older than the answering node knows. Rejected: gossip (its own
// dissemination and versioning, where the metadata log already orders everything), clients probing
// nodes (a client must never guess).
//
// # Topic ids on requests
//
// Fetch, ListOffsets and Produce may name the topic id the client resolved; a mismatch with the
// hosted replica's (else the applied metadata's) topic is UNKNOWN_TOPIC_ID, and a long poll parked
// on a topic that gets deleted answers the same. Core.ClusterID() feeds the server's Hello answer.
// A consumer that meets UNKNOWN_TOPIC_ID, or an unknown topic on a fetch naming its id, asks
// metadata about the topic by name (a full listing keeps a deleted topic in the client's cache) and
// stops with TopicRecreatedError when the topic is gone or has another id. Group offsets carry the
// topic id: the coordinator stamps each commit with its metadata's id for the topic and refuses
// (UNKNOWN_TOPIC_ID) one naming another; OffsetFetch leaves out offsets of another id (Kafka
// removes a deleted topic's offsets), and the sweep removes them once the topic is gone. A group
// member stops with TopicRecreatedError on every later Poll when its topic goes, even after the
// coordinator took the partitions away, and commits nothing of it.
//
// # HandleAs, per request
//
// HandleAs answers exactly once, through the completion queue. An error's wire code
// is the one its sentinel carries (node's, engine/metadata's and engine/groups' sentinels are
// strandpb.NewSentinel; strandpb.CodeOf finds the code through wrapping), INTERNAL (maybe written)
// when no sentinel explains it, on every path (wireError, metaError, groupError); each code's
// meaning (retriable, maybe written, refresh) is the one table in proto/strandpb/errorcode.go
// (package clientlib, "Errors"). Metadata: from this node's applied
// state (metadata_version says how far), leaders as above. Produce: per partition, acks 0/1/-1.
// Fetch: long poll with min_bytes, max_wait_ms, max_bytes (the first batch always whole).
// ListOffsets (by timestamp: the index finds the batch, then its records are scanned for the first
// at or after it, up to 64 batches / 4 MiB, else the offset the scan reached).
// CreateTopics/DeleteTopics: one metadata command each, answered when applied here; a DeleteTopics
// naming topic ids (one per name, as Kafka's v6 does) deletes only the topic that has the id when the
// command applies (UNKNOWN_TOPIC_ID otherwise), so a delete held or retried past a re-create cannot
// remove the new topic (simnet seed 516). DescribeTopics:
// a ReadIndex on the metadata group, so it sees every acknowledged create and delete.
// InitProducerId: AllocateProducerIDs(1). AlterConfigs: one AlterTopicConfig per topic, answered
// with the configuration as applied. DeleteRecords: the leader proposes TRIM(before) (-1: the
// high-water mark; past it OFFSET_OUT_OF_RANGE) and answers once its applied log start reaches it
// (TIMEOUT, indefinite, after the request timeout). DescribePartitions: each leader from applied
// state (log start, high-water mark, bytes and count of segments, oldest record time, snapshot
// index). Group requests: "Consumer-group coordinators" below. No metadata leader known:
// NOT_CONTROLLER, nothing proposed. A replication factor above the cluster's size is refused before
// proposing with the definite INVALID_REPLICATION_FACTOR (a factor above the nodes registered *so
// far* stays NOT_ENOUGH_REPLICAS, retriable); a delete of a missing topic is TOPIC_NOT_FOUND
// (definite; a lagging node's UNKNOWN_TOPIC_OR_PARTITION is not). A fetch's max_bytes is clamped to
// frame.FetchBytesMax (7 MiB), so an answer always fits the 9 MiB frame limit.
//
// # Retention and segment rolls (retention.go)
//
// Each replica reads its topic's config again when the metadata version moves and sets the log's
// roll size (segment.bytes, capped by Config.SegmentBytesMax); rollByAge rolls the active segment
// past segment.ms (capped by Config.SegmentAgeMax; measured on the node's monotonic Clock from when
// the replica first saw the segment, so a restart only delays deletion). strand dev caps them at 1
// MiB and 10 s. A roll by age fsyncs off the loop, as a roll by size does: raftlog's SealActive
// leaves the seal pending, the group's sync job writes and fsyncs it, and the next append (or, on
// an idle partition, the next check) creates the next segment (with --wal the roll stays inline). Every RetentionCheckTicks (100 ≈ 1 s) the leader walks its segments oldest first
// (never the active one, never one holding unapplied entries) and drops each whose newest record
// timestamp (the running MaxTimestampMs through it: Kafka's rule) is older than retention.ms, or
// without which the log still holds retention.bytes. The new log start is the first offset of the
// first segment kept; above the current one it proposes a TRIM (one in flight per group). The
// offset is decided once, on the leader; replicas' segment boundaries differ and never matter.
// Besides the periodic check, a replica is checked on the next tick after a TRIM applies (it can
// compact) and after a compaction finishes, and the leader as soon as retention.bytes lets its
// oldest sealed segment go; a running compaction does not hold up trims. Under 25–57 MiB/s of
// produce a replica stays at 8.6–10.5 MB with retention.bytes = 4 MiB and 1 MiB segments; a check
// only every second let it reach 30×. Rejected: each replica deleting by its own clock (replicas
// would disagree on the log start); cutting a segment at the exact offset (a rewrite, R5).
// Retention runs when the topic's cleanup.policy deletes (delete, compact,delete). On a topic whose
// policy compacts (issue 24: compact and compact,delete; engine/compact's doc says what is left)
// the same check lets the leader propose a COMPACT
// (compaction_trigger.go: engine/compact's decision from LSO, its checkpoint, its open segment and
// min.compaction.lag.ms by the clock), and every replica runs the pass of each decision it applied
// (compaction_replica.go): in generation order, the dirty section's raft entries gathered on the
// loop (4096 entries / 8 MiB a tick), the pass into <replica>/compacted (raftlog/compacted) as a
// storage job without fsync that the watchdog does not time, the commit (fsyncs, the switch) as a
// timed job, Finish on the loop, COMPACT_DONE from the leader, and each replica's end and digest
// compared with the record. A crash before the switch reopens the old generation and the pass
// reruns (the decision is picked up from the engine's record at open); after it, the new one, which
// the leader reports. A replica that cannot run a pass (a raft snapshot past its log, a missed
// generation, a prefix that does not open, is damaged or differs from the record) is stuck and
// installs the record's generation from a peer (compaction_install.go: PrefixRequest/PrefixChunk
// in the peer frame, one voter at a time, chunks appended beside the old generation by untimed
// storage jobs, Commit checking the record's digest before the switch). compact,delete and
// DeleteRecords: a TRIM moves the log start inside or past the prefix; COMPACT's apply stamps
// the decision with the log start, a pass drops every batch wholly below it (engine/compact's
// rule 8), and a TRIM drops no index entry of a compacted partition (each replica's own raft-log
// trim does, bounded by its own prefix), so a pass lagging the record still finds its input and
// every replica cuts its next generation alike; a first pass starts at the batch holding the
// decision's log start, a prefix below a batch the log start falls inside. Retention weighs the
// prefix first (retention.go prefixRetention: retention.ms at the first prefix batch whose
// running maximum timestamp is young, retention.bytes by its segments, oldest first), then the
// raft segments past it. A topic altered from compact to delete gets drop passes (dropPass)
// while a batch no pass covers lies wholly below its log start. Reads
// (compaction_fetch.go): a fetch below the replica's own prefix end is served from the prefix (the
// compacted batches as stored; the Kafka listener serves them in Kafka's v2 form, fewer records
// than the offset range), then from the raft log from the prefix end within the same budget; on
// the loop, bounded by max_bytes and fetchBatchesMax and charged to the fetch read budget, as
// raft-log reads are; the aborted list leaves out a transaction whose abort marker a pass removed
// when the read covered its offset (a Kafka read_committed consumer would wait for that marker and
// drop the producer's later committed batches); ListOffsets by timestamp looks in the prefix first.
// The raft log is trimmed up to the prefix: raft-log compaction (below) is bounded by engine's
// RaftTrimBound of the least of the replica's own prefix end, the record's CleanedTo (nothing
// further while stuck) and the end a majority of the voters' prefixes hold, so a replica's disk is
// its prefix plus the raft log past it (up to a segment behind: whole segments go) once the others
// passed too. The majority bound (compaction_held.go) is what makes a compacted record as durable
// as a raft entry: a prefix is state a raft snapshot does not carry, so a follower that installs
// one past its own prefix holds neither the prefix nor the raft log below it until it installs a
// peer's; trimmed up to one replica's prefix alone, the records below could live on that replica
// only, and one disk replacement would lose them (the simulator's seed 230, session 13). Every
// replica reports its prefix's generation and end (0 while stuck, damaged or installing) to the
// other voters at each retention check (PrefixHeld, RaftFrame field 57, one frame per peer a
// check); each keeps its voters' reports for a request timeout and four checks, and trims no raft
// entry whose batches do not lie wholly below the majority-th largest end. So at any time every
// record below a raft log's start is in the prefixes of a majority, and every record on a
// majority, prefix or raft log: a single disk replacement loses none. A generation switch needs
// no bound (a replica's next generation covers what its current one did). Rejected, as Kafka and
// Redpanda tie safety to the ISR or a raft majority, never to every replica: keeping each
// generation (or the raft log) until every voter holds it (one voter down for days would pin every
// replica's disk at the whole history); shipping the prefix in MsgSnap (the live set in every
// snapshot); the reports as raft entries (followers do not propose; an entry per report on every
// disk). TestRaftTrimWaitsForMajorityPrefix; simnet's prefixheld.go; planted PrefixTrimUnheld. A stuck replica, or one whose prefix fails a read, serves
// what its raft log holds; below that a fetch is REPLICA_RECOVERING (retriable), never the next
// batch. A produce to such a topic with a keyless record is INVALID_RECORD (produce.go).
//
// # Raft log compaction and snapshots (snapshot.go)
//
// After a TRIM applies, each replica compacts the whole segments below its first retained batch R:
// S = CompactionPoint(R−1). The snapshot data is the engine state as the log defines it at S (next
// offset, producer table, applied index; index empty, log start = next offset:
// Partition.Compacted(S); on a compacted topic the log start and the compaction record stay and
// only the index entries the record covers go, the others travel inline: RaftSnapshotState), a
// version-2 StateSnapshot built by a compactor that restores the
// previous raft snapshot (or an empty engine) and replays the entries up to S into a scratch
// engine, at most 4096 entries / 8 MiB per tick, then CreateSnapshot (durable before any segment
// goes). Why the state at S and not at the TRIM's index T: a follower installing it must then apply
// S+1… exactly as the others do; it differs only in index entries below the agreed log start until
// it applies the TRIM. Sending: raft asks Storage.Snapshot() when a follower's next index is below
// the first index; the MsgSnap travels in the peer frame (no batches: small) and
// ReportSnapshot(Finish) follows at once (a lost one is resent). saneMessage accepts MsgSnap only
// for a partition group, from its voters, with data that restores at the snapshot's index.
// Without Config.WAL the snapshot is written by a storage job (snapshot_job.go:
// StartCreateSnapshot on the loop encodes it, the job writes and syncs the file, the completion
// installs it and compacts; a leader's snapshot waits in the queue meanwhile). Installing:
// ApplySnapshot (durable when it returns; its fsyncs still on the loop), engine restored,
// checkpoint index chunks marked for rewrite. The segments a compaction or an install retired
// (renamed to .del) are unlinked by a SyncJob nothing waits for (startTrash; a failure is logged,
// the next recovery removes them). Crashes in either path are
// raftlog's recovery rules 4–5. Rejected: snapshot at T shipping the batches between R and T (as
// big as a segment, over the frame limit); the real engine state at S with its index (a replica
// would index entries it never had); the newest checkpoint ≤ S as the base (only the newest
// checkpoint header is kept, almost always > S).
//
// # Disk loss: wiped-disk rejoin (rejoin.go)
//
// A replica that lost its state ("recovering") stores and acknowledges what a leader sends but
// sends and grants no vote or pre-vote until (1) probing: ceil(n/2) *other* replicas that never
// lost state told it the highest term (floor) and last index (until) — any quorum it voted or acked
// in meets them (during a move, ceil(n/2) of each replica set it is in: the current replicas, the
// target, and all the nodes it talks to; a new learner witnesses nothing); (2) catching up: its commit reached until, or it committed an entry of a term
// above floor. Then (done) it votes only in terms above floor, forever. Each phase is written
// durably to <replica>/rejoin/state (two slots, magic SRJ2, sequence number, CRC32C, so a torn
// write leaves the other slot) before it takes effect, so a crash resumes recovery and such a
// replica never trusts itself again. Wipe or new cluster? A node with an empty metadata log starts
// its metadata group *undecided* and probes every node: any trusted answer with a term above 1 or a
// log beyond the bootstrap means the cluster exists; a majority answering "fresh" means a new
// cluster. A joining node (Config.Join or its meta/joined marker) cannot tell a first join from a
// lost disk and needs not: its cluster exists, so it starts probing, hearing from its Config.Nodes
// (the registered nodes; its group has no replicas before its log names them). So joins are one at
// a time while a registered node is lost for good: two joiners catching up at once with one node
// lost are three of five untrusted, and each waits for the other's answer forever (the simulator
// seed 22; simnet's joinFits keeps its joins inside the assumption below, as an operator must). Undecided, a wiped
// joined node counted itself a majority of no peers, decided "new cluster", voted at once and
// reopened its replicas as new ones (TestWipedJoinedNodeRecovers). Partition replicas opened while
// the metadata group is not done open recovering too.
// Probes (RaftFrame 50/51) go every 10 ticks, batched per peer. A leader drops a rejected append
// whose hint is below the follower's (pre-wipe) match and, when a probe shows the asker below its
// match, hands leadership to its most caught-up other replica (raft never lowers a match, so it
// would resend the same append forever). Assumption: at most a minority of a group lost state at
// once. Rejected: rejoin as a learner promoted by conf change (replica sets are fixed); an operator
// format step; a floor without the catch-up condition (loses an entry the old leader and the wiped
// node committed — TestWipedNodeDoesNotElectStaleLeader).
//
// # Replica repair, full disks, catch-up throttle
//
//   - Repair (repair.go): a partition replica whose committed data fails the CRC check (at Open or
//     on a fetch's read) does not stop the node: that replica alone writes its rejoin file, removes
//     its log and checkpoints, and reopens empty and recovering, so it is rebuilt from the leader a
//     majority of never-damaged replicas elected. Waiting fetches get the retriable
//     REPLICA_RECOVERING. Metadata-group corruption stays fatal; corruption raft itself reads (old
//     entries for a lagging follower) repairs the replica the same way. Rejected: discarding only
//     the damaged suffix (those entries may be in a commit it acked: a rebuild anyway); fetching
//     entries from peers outside raft (a second replication protocol).
//   - Full disks (diskfull.go): every 10 ticks FreeBytes is checked against Config.MinFreeBytes; a
//     node below it, or whose log write just failed with ErrNoSpace, is full: its leaders refuse
//     produce before proposing (NOT_ENOUGH_SPACE, retriable), its followers drop appends carrying
//     data (empty entries pass, so a new leader can commit its first entry), checkpoints are
//     skipped; reads and the metadata group go on. It leaves the state when the floor (plus 1 MiB
//     after a failed write) is free again. A failed write reopens that replica from its files (what
//     a kill leaves); a failed Sync stays fatal (fsyncgate). A full node hands its leaderships on:
//     every check, each partition it leads transfers (raft TransferLeader) to the voter that is up,
//     has space (the liveness frames carry each node's disk state) and holds the most of the log,
//     a voter of the incoming configuration first (in a joint one, an outgoing-only voter may have
//     applied the leave the leader has not: unpromotable); while full and while such a replica exists it does not take a leadership back (its partition
//     followers do not tick, so never campaign, until they saw no leader for two election timeouts:
//     then it alone may hold the newest entry, so it campaigns and hands on once leading; MsgTimeoutNow
//     to it is dropped; cluster leaders --balance skips it). With no replica with space it keeps leading, so reads go on; once space
//     returns it campaigns and takes transfers again, and strand cluster leaders --balance restores
//     preferred leaders. A full disk never stops a node: a metadata-group write refused for space
//     turns the node full and reopens the metadata log in place, keeping the applied state (a new
//     RawNode from the durable hard state, Applied where the state is: with asynchronous storage
//     writes raft applies only stable entries); the replica is a follower that takes no appends and
//     never campaigns until space returns, then catches up from the leader. A node restarted on a
//     full disk opens, replays its metadata and answers from it (TestMetaWriteOnFullDiskKeepsNode);
//     not yet with Config.WAL (serve --wal), whose recovery replays the write-ahead log into the
//     logs and fails for want of space (nothing is lost; the next start with space recovers).
//     strand cluster marks full nodes (DISK FULL, from the metadata leader's view). Rejected:
//     refusing only the replica whose write failed (the disk is shared); a reserve file (hides the
//     problem); exiting on a metadata write failure (a restart on the same disk fails the same way,
//     and the node could still serve reads).
//   - Disk stalls (stall.go; pebble's disk-health checker, CockroachDB's max_sync_duration): with
//     AsyncSyncs a hung fsync leaves the loop, heartbeats and follower acks healthy, so a stalled
//     leader kept its partitions while applying nothing (raft applies only entries stable on the
//     leader), and no election ever fixed that. Each SyncJob is stamped with the tick the host
//     took it; every raft tick a job older than Config.DiskSlowAfter (default half an election
//     timeout) is logged once with its file, and while one is older than DiskStallAfter (default
//     one election timeout; serve --disk-stall-after) the node is stalled: for leadership it is a
//     node that cannot write (the full-disk path: every group it leads, the metadata group too,
//     hands off; no campaigning; transfers to it dropped; diskStateStalled in its liveness
//     frames), and produce is refused with ErrDiskStalled (NOT_ENOUGH_SPACE, Kafka's
//     KAFKA_STORAGE_ERROR). It leaves the state once no job is that old. Ages are ticks, so a
//     paused process never blames its disk. Stop leading, not fail-stop: a process stuck in an
//     uninterruptible fsync may not even exit, a restart meets the same device, and reads and
//     metadata would go too; /readyz says not ready (strand_disk_stalled,
//     strand_storage_job_oldest_seconds) for a supervisor, and the metadata and members answers
//     carry disk_stalled (`strand cluster` prints DISK STALLED, as /api/cluster and the console). A sync that fails stays fatal. Not
//     watched: the loop's own synchronous writes (a truncation, an install, a roll by age, all of
//     them with Config.WAL; a hang there stops the loop and its heartbeats, so the followers elect
//     elsewhere anyway). The appends' writes are in the sync jobs, so a device that blocks writes
//     (not only fsyncs) is timed too. Proven: TestStalledLeaderHandsOffLeadership, the
//     simulator's disk stalls, TestDiskStallMovesLeaders (real processes, -tags faultinject:
//     leaders moved 1.05 s after the stall) and TestDiskStallFrozenDevice (the data directory on a
//     FUSE device whose writes and fsyncs the test freezes in the kernel: leaders moved 1.10 s
//     after, /readyz 503 naming the file; with --disk-stall-after 1h none moved in 15 s).
//   - Catch-up throttle (throttle.go): Config.CatchUpBytesPerSec bounds, per destination node, the
//     entry bytes of appends made only of committed entries (an x/time/rate bucket on tick time,
//     burst 0.1 s, debt allowed so one message of any size passes); over the rate the append is not
//     sent and raft is told the follower is unreachable. Appends with uncommitted entries are never
//     throttled, so no commit waits on it. Rejected: MaxInflightBytes alone (a window, not a rate);
//     throttling in the transport (cannot tell catch-up from live replication).
//
// # Consumer-group coordinators (groups*.go; package node/groupsvc)
//
// __strand_offsets is an ordinary topic created through the metadata group on first use
// (Config.Groups.OffsetsPartitions, default 8; RF min(3, nodes)); a group maps to FNV-1a(group) mod
// partitions, and that partition's leader is its coordinator (FindCoordinator answers from the
// leader table; a removed node that still runs answers COORDINATOR_NOT_AVAILABLE, its table frozen
// and stale: coordinatorLeader). Every write (heartbeat that changes something, commit, expiry, delete, cleanup) is
// a GroupCommand record produced to that partition at acks=all, with a random request id and the
// proposer's wall clock. The coordinator is a view of the partition's log: once applied, the leader
// reads the new records in offset order into its groups.State and answers the request whose id it
// meets; commands are validated at apply, so everything is linearizable and survives failover. A
// new leader starts from the newest GroupsSnapshot record (written every SnapshotEvery = 1000
// commands; it reads back at most four intervals), else from the log start. The topic is
// cleanup.policy=compact: commands are keyed, a snapshot's batch tombstones the commands below it
// (groupsvc's doc, "A compacted log"; offsetsTopicConfig). That view (catch-up,
// snapshot restore, apply, the waits) is package node/groupsvc's Coordinator, reading the replica
// through coordinatorLog; so are the request handlers (groupsvc.Service over groupHost) and the
// members' liveness sweep; finding coordinators, proposing and FindCoordinator stay
// here (groupsvc's doc lists what is left). Reads (OffsetFetch,
// DescribeGroups, ListGroups) and unchanged heartbeats (HeartbeatUnchanged: answered from state, no
// write) run after a ReadIndex, so a deposed leader never answers. Liveness is leader-local, as in
// Kafka: a sweep once a second proposes Expire(group, member, epoch) for members silent past the
// session timeout (45 s) or holding revocations past the rebalance timeout (5 min), expires empty
// groups' offsets (7 days) and removes deleted topics (after a ReadIndex on the metadata group). It
// skips a member with a heartbeat in flight, and an unchanged heartbeat racing a proposed expiry is
// written instead of read, so an expiry never lands after an answer that kept the member's epoch (a
// static rejoin keeps it; Expire's epoch guard cannot tell). A new coordinator starts every timer
// afresh: failover delays an expiry by at most a session, never expires early. Wire: arms 40–46, codes 50–57 (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
// UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH, GROUP_NOT_EMPTY, GROUP_NOT_FOUND,
// STALE_HEARTBEAT). Rejected: a hook in the apply loop or a second raft group type (a parallel path
// through Ready, checkpoints and placement); groups in the metadata group (one log for every
// heartbeat); replicated liveness (a write per heartbeat for a timer only the leader reads).
//
// # Transaction coordinators (txn*.go; package node/txnsvc)
//
// engine/txn is hosted exactly as groups are: __strand_transactions is created on first use
// (Config.Txn.Partitions, default 8; RF min(3, nodes); compacted as __strand_offsets, retention off, produce and CreatePartitions
// refused as for __strand_offsets: isCoordinatorTopic); a transactional id maps to FNV-1a(id) mod
// partitions and the leader of that partition is its coordinator (FindCoordinator with
// transactional_id). Every write is a TxnCommand record at acks=all, applied by the leader when read
// back (txnCatchUp), so it is linearizable and survives failover; a new leader starts from the
// newest TxnSnapshot record (every SnapshotEvery commands), else the log start. That view, the
// sweep's decisions and the request handlers are package node/txnsvc (Coordinator over
// coordinatorLog, Sweep, Service over txnServiceHost and txnReplica); finding coordinators,
// proposing, the marker writes and the refill stay here (txnsvc's doc lists what is left). Requests (Request
// arms 90–95): TxnInitProducerId (timeout 1..Config.Txn.MaxTimeout, 15 min, else
// INVALID_TRANSACTION_TIMEOUT before any write; an empty producer-id pool takes a block of
// ProducerIDBlock ids from the metadata group, grants it through the log and proposes once more),
// AddPartitionsToTxn (partitions must exist; verify_only is a read: engine/txn Verify),
// AddOffsetsToTxn, EndTxn (answered once PrepareCommit/PrepareAbort is durable, with the next
// epoch), ListTransactions (the partitions this node leads), DescribeTransactions; reads after a
// ReadIndex. DescribeProducers (arm 99, txn_producers.go): each partition's producers from its
// leader's applied engine state (engine AppendProducers), NOT_LEADER elsewhere, as Kafka's leader
// answers from its producer state. Markers: a TxnMarkerWriter (Config.Txn.Markers; txn_markers.go) is asked for each
// partition and group of every Pending transaction not in flight, after the decision and on every
// sweep, so a new leader finishes what its predecessor decided; each reported marker is proposed as
// MarkerWritten and the last completes the transaction. Without a writer the node opens and
// decides no transaction (AddPartitions, AddOffsets and EndTxn refused TRANSACTIONS_NOT_ENABLED,
// code 99), so none can hang in Prepare*. The sweep (once a second on the tick clock) proposes
// TimeoutAbort for Expired(leader's wall clock), a snapshot, a producer-id refill below half a
// block, and (hourly) ExpireIDs. Proven: TestTxnInitFencesOlderEpochs, TestTxnEndResumesAfter
// CoordinatorCrash, TestTxnTimeoutAborts, TestTxnRestoreFromSnapshotEqualsReplay,
// TestTxnNotEnabledWithoutMarkerWriter.
//
// The partition side (txn_write.go, txn_peer.go, txn_produce.go, txn_fetch.go). PartitionMarkers is
// the writer of production and the simulator: a partition marker is a TXN_MARKER entry
// (engine/doc.go "Transactions") proposed where this node leads the partition, else asked of its
// leader with WriteTxnMarkers (Request arm 96, node to node only: carried marshalled in
// RaftFrame.txn_requests/txn_responses, calls keyed by random ids and failed ErrTimeout after
// RequestTimeoutTicks; the sweep asks again). The coordinator epoch is the coordinator
// partition's raft term. A marker refused PRODUCER_FENCED is done (a newer epoch ended the
// transaction there); an older coordinator epoch is TRANSACTION_COORDINATOR_FENCED (code 95).
// A group's marker is a GroupTxnMarker command on the group's coordinator, proposed here or asked of
// the offsets partition's leader with WriteTxnMarkers (marker.group). TxnOffsetCommit (Request arm
// 97, txn_offsets.go) is taken by the group's coordinator only after the id's coordinator confirmed
// the group is in the producer's open transaction (AddOffsetsToTxn verify_only, node to node, or
// read locally); the offsets stay pending (engine/groups "Transactional offsets") until the marker;
// OffsetFetch.require_stable lists partitions with pending offsets. Proven:
// TestTxnOffsetsVisibleWithTheCommit, TestTxnOffsetsFenceStaleGeneration,
// TestTxnOffsetsSurviveCoordinatorCrash. Transactional produce
// (ProduceRequest.transactional_id, Partition.transactional): a leader with no transaction of the
// producer open at the batch's epoch verifies with the id's coordinator (AddPartitionsToTxn
// verify-only, node to node, or read locally) and proposes TXN_BEGIN right before the write;
// a refusal refuses the write. Reads skip marker entries unless FetchRequest.include_markers
// (the Kafka listener's, for control batches: each marker a Batch with marker set and no records,
// at its one offset); FetchRequest.isolation_level (0
// read_uncommitted default, 1 read_committed: below the LSO) and ListOffsetsRequest's (latest is
// the LSO at read_committed); every fetch partition answers last_stable_offset and the aborted
// transactions overlapping the batches read, and a native read_committed fetch drops aborted
// batches itself, answering next_offset (past the last batch it served or dropped, and past
// the markers it skipped after it, at either level) so a reader whose read held only aborted
// batches or markers moves on, to the high-water mark when the log ends in a marker (a long poll
// for min_bytes counts skipped markers as a served one); clientlib's consumer asks for markers
// (include_markers) and moves past them. Proven: TestTxnMarkersReachEveryPartition,
// TestTxnProduceIsVerified, TestTxnReadCommitted, TestTxnCommitSurvivesCoordinatorCrash,
// TestTxnCommitSurvivesPartitionLeaderCrash, TestTxnFetchIncludeMarkers,
// TestTxnFetchPastTrailingMarker. A marker whose partition
// the coordinator's metadata lacks is done once a ReadIndex on the metadata group confirms the
// topic deleted (Kafka drops a deleted partition from the transaction; this node's metadata alone
// may lag a create, and a committed transaction's marker must not be skipped):
// TestTxnMarkerForDeletedTopic. A topic deleted and re-created under the same name before the
// marker is written gets the marker in its new incarnation (harmless: the producer has no
// transaction open there).
//
// Operators (txnsvc.Service.AbortTransaction; txn_admin.go: counters). AbortTransactionRequest (strand txn abort, clientlib's
// AbortTransactionByID) ends a hanging transaction by transactional id on its coordinator, which
// proposes engine/txn's AdminAbort: the abort is prepared at epoch + 1, fencing the producer as a
// timeout does, answered once applied, and its markers written to every partition and group.
// Kafka's kafka-transactions.sh abort instead sends WriteTxnMarkers straight to a partition's
// leader for a producer the coordinator may not know (a hanging transaction of a pre-KIP-890
// broker); Strand verifies every transactional write with the coordinator first, so a
// transaction open on a partition is always one its coordinator holds, and aborting through the
// coordinator keeps its state and the partitions in step. It needs ALTER on the cluster or WRITE
// on the id. An id being aborted answers already; none open or committing INVALID_TXN_STATE.
// Test: TestTxnAdminAbort (records never visible at read_committed, LSO up to the high-water
// mark, old producer fenced). Stats counts the decisions the node's coordinators proposed
// (TxnBegun, TxnCommitted, TxnAborted, TxnTimedOut) and TxnMarkerRetries; AdminView.Txn the
// open transactions, ReplicaView.LastStableOffset each replica's LSO (node/server's /metrics).
//
// Authorization of transactions: package node/authz (txn.go).
//
// # Membership and partition moves (members.go, moves.go; R28)
//
// # Nodes
//
// A registered node is active, decommissioning (fenced: nothing new placed) or removed (final; the
// id is never reused). serve --join / node add pre-register a node fenced; it unfences itself once
// it runs in the metadata group. Config.Join opens the metadata group empty, never bootstrapped (a
// durable meta/joined marker, so a joined node restarted after a crash never starts a cluster of
// its own). The metadata leader alone changes the metadata group, one single-change ConfChangeV2 at
// a time, in order: remove a removed member; add an active node as learner; promote a learner with
// Match ≥ commit while active voters < 5 (more nodes stay observers, as KRaft brokers); demote a
// decommissioning voter while ≥ 3 active voters remain; a step concerning the leader first
// transfers leadership. A removed node is dropped from the group only once it has caught up (so it
// learns its removal and stops hosting, even if it was down while dropped), or after 30 election
// timeouts. A member that missed a join (down, cut off, or wiped and restarted over its static
// peers) still takes the joined node's messages once it leads: the metadata group admits any node
// not known as removed, and a peer's Hello names its address, so the transport can answer a node it
// has no registration for yet (peer_address). The metadata log is never compacted, so a joiner
// replays from index 1; membership lives in the log and checkpoints' conf state. The transport
// learns peers from registrations (copy-on-write peer map). Rejected: joint consensus for single
// changes (a one-voter change is safe as a simple one); the joiner proposing its own change (it
// knows no leader until it is a member).
//
// # Partition moves
//
// The metadata records per partition a target (ReassignPartition; a resend of the move in progress
// succeeds; a redirect to the current replicas cancels) and the bootstrap set; every node of
// replicas ∪ target ∪ leaving hosts the partition. The partition's leader drives the move from
// raft's own configuration every 5 ticks: add the target's missing nodes as learners; once each
// replicates with match ≥ commit (through the catch-up throttle), one joint ConfChangeV2 promoting
// them and removing the others (explicit leave); a leader outside the target first transfers
// leadership to the most caught-up incoming voter (StepDownOnRemoval as backstop); once the applied
// configuration is exactly the target, no earlier conf change can still land and the leader's
// synced hard state commits the leave (a leader restarted short of it would be back in the joint
// configuration, needing the leavers it let go), propose CompletePartitionMove (the target in the operator's order becomes the replica list), after which
// the nodes left out stop the replica (tombstone first). Nothing lives outside raft's configuration
// and the metadata record, so a new leader after any crash continues. A node moved back later
// starts the replica afresh with a vote floor: the tombstone carries the highest term the removed
// replica may have voted in, so it votes only above it and needs no peer (probing like a wiped
// replica made a moved-back and a rebuilding replica of one group wait for each other forever); an
// older tombstone without a floor still probes. It votes only once its applied configuration, past
// the bootstrap entries, stops naming it a voter (its removal or its re-adding as a learner): its
// fresh log starts with the bootstrap configuration, which names a node of the bootstrap set a
// voter, and two such nodes moved back together elected each other on it. Compaction snapshots carry the group's current
// configuration. Rejected: a move coordinator in the metadata group (it would need every
// partition's raft progress); recording the phase in the metadata (the configuration is the phase).
// Planners (engine/metadata/plan.go, pure, rapid-tested): decommission gives each place to the
// least rack-used, least-loaded eligible node; rebalance moves one replica at a time from a most-
// to a least-loaded node (loads differing by ≥ 2) without losing a distinct rack, then evens
// preferred leaders by reordering. Preferred leaders: ElectLeaders makes each leader TransferLeader
// to its first replica when that one is caught up.
//
// # Receive and message batching
//
// All messages of a round go to each peer in RaftFrames of at most 2 MiB (so thousands of
// heartbeats are one frame, and a catch-up several bounded ones), built with protowire
// (byte-identical to deterministic proto.Marshal). Receive parses with protowire and applies sanity
// checks that every correct peer passes but that keep a damaged message from breaking raft's
// invariants (sender is a replica, consecutive entries, heartbeat commit ≤ our last index, conf
// changes only of the bootstrap's shape, MsgSnap as in "Raft log compaction"). FuzzReceive.
//
// # Logging
//
// Config.Logger is a *slog.Logger handed in (nil discards). The core hands records to the handler
// directly with a zero time (slog.Logger's methods call time.Now); the server's handler stamps it.
// Records carry node and topic/partition (or group=metadata). Logged: leadership changes (info),
// registration, rejoin and repair progress, storage failures and fail-stops (error). etcd raft's
// output goes through an adapter (Debug/Info at debug, Fatal/Panic log then panic: raft relies on
// them not returning).
//
// # Authorization (package node/authz; auth.go, security_admin.go)
//
// HandleAs(caller, req, respond) checks the caller's ACLs before anything is proposed (Kafka's
// StandardAuthorizer rules; bindings, credentials and quotas live in the metadata group). The rules
// are package node/authz, a function of the applied metadata; auth.go is the Core's side: the
// switches (Config.Authorization, Config.SuperUsers), the planted-bug hooks, and confirmThenHandle:
// a refusal is decided only on metadata at least as new as a metadata ReadIndex started after the
// request arrived, so it holds every ACL change acknowledged before the request was sent (an allow
// stands on the applied state as it is). A request the applied ACLs would refuse, in whole or in
// part, any kind of either protocol, is parked like a linearizable read: a ReadIndex on the
// metadata group (forwarded to its leader from a follower), then, once this replica applied up to
// it and Process reconciled it, the request is authorized and handled again from the start. A
// follower hears the leader's commit index only from what reaches it, so without this it refused
// on a state lacking a grant the leader had committed and acknowledged (simnet seed 45 without
// features: confirmed once per term, as it was, was not enough; TestAuthorizationConfirmsAfterGrant).
// The wait is bounded: no metadata leader known answers UNAVAILABLE at once, too many waits BUSY, a
// read not served within the request timeout UNAVAILABLE, all retriable, never a refusal; a
// replica rebuilding from its peers (a lost disk) answers UNAVAILABLE even when confirmed. The
// whole security design (TLS, SASL, ACLs, quotas, negative tests) is in package node/server's doc;
// the simulator turns authorization on in two seeds of three (simnet's operator actor).
//
// # Planted bugs
//
// The simulator proves its checkers by planting known bugs, compiled only with -tags simbugs
// (pebble's invariants pattern): in a default build node/bugs.go has empty embedded types and
// constant-false hooks, so no production struct, format or flag carries a bug switch;
// node/bugs_simbugs.go documents each (also in raftlog, simnet and engine/groups). Each has a unit
// test (TestBug*) and must be caught by the simulator within 200 seeds (TestSimCatchesPlantedBugs,
// TestSimCatchesGroupBugs; make test runs both with the tag). QuiescedNeverWake is caught by the
// quiet liveness probe (simnet/probe.go), which heals without restarting anyone.
//
// # Thousands of groups (ready.go, quiesce.go)
//
//   - Ready marks: a group can become ready only through a call into its RawNode, so the core marks
//     a group when it steps, proposes, ticks or reads into it (and keeps a group that had a Ready
//     marked for one more round); a round polls only the marked groups, in group order. Rule: every
//     new RawNode call is followed by markReady(g) (or touch(g) for a request). With -tags
//     invariants a Process that ran out of work panics if any group is still ready.
//   - Raft ticks every TicksPerRaftTick Core ticks (the server: 10 ms ticks, raft every 100 ms,
//     election 10 and heartbeat 1 raft ticks — the same ~1 s and 100 ms; the simulator ticks raft
//     every tick).
//   - A new partition elects at once (elect.go): its preferred replica (the metadata's first),
//     having seen no election (term 1) on a node that never lost its state, campaigns at the first
//     Core tick after its bootstrap configuration applies and again each raft tick while it knows
//     no leader (at most 5 times: peers drop votes for a replica they have not opened yet),
//     instead of every replica waiting out a randomized election timeout. The first produce after
//     topic create went from 1.0–1.3 s to 20–35 ms on strand dev, and new partitions start on
//     their preferred leaders.
//   - Quiescence (CockroachDB's): a leader whose followers all match its log, with nothing waiting
//     or to send, sends a last heartbeat whose context is eight zero bytes (etcd raft reads a
//     heartbeat context as a ReadIndex count: zero confirms nothing) and stops ticking the group; a
//     follower that steps it from its leader, in its term, with exactly the committed log, stops
//     ticking (so it cannot campaign). Any proposal, read or raft message wakes the group. Every
//     node sends every peer an empty frame each raft tick; a node silent for an election timeout
//     wakes the quiesced followers of its groups; so does a new incarnation in its frames (drawn at
//     each Open: a node back within an election timeout, full and so never campaigning, left its
//     groups leaderless). The metadata group never quiesces. Planted bugs QuiescedNeverWake,
//     RestartNeverWakes. Rejected: coalesced heartbeats per node pair (CPU stays linear in groups);
//     a longer heartbeat interval (slower failover).
//   - Tail caches share a node budget (256 MiB over all logs; a fixed 8 MiB per log would be 16 GiB
//     at 2,000 replicas). A fetch reads its whole batch range with one raftlog call. Still linear:
//     one fsync per written log unless the opt-in node-wide WAL runs (above), and each log's write
//     buffer (up to 16 MiB kept).
//   - Per-tick scans skip idle groups: Tick walks the groups' waits only once nextWaitExpiry (at
//     most the earliest pending deadline) passed, and retentionTick skips, between its periodic
//     checks, a group with nothing applied since it last looked and no delete, compaction or due
//     flag (only time moved, which the check covers). Still walks of every group: each tick, the
//     raft tick of the non-quiesced ones; and each round of every Process, writeAppends
//     (pipeline.go, and its WAL twin in wal.go) looking for queued appends.
//
// # Tiered storage (tier*.go; issue 27)
//
// tier.go holds the design (uploads, deletion, local retention); what is remote is the replicated
// manifest only (TIER_ADD entries): a leader uploads once it applied an entry of its own term, and
// a replica deletes a local raft segment only when an applied ADD covers its records
// (tierLocalLimit). simnet/tier_replicated.go checks both as they happen (every compaction decided
// and finished, every Put). tier_view.go is what describe and /metrics show per replica: local
// and remote bytes, remote objects and offsets, the upload lag (bytes of the local segments
// holding records not yet remote, the active one included; age of the oldest such record) and
// read/upload counters since the node opened the replica. tier_throttle.go: uploads share a
// node-wide bytes/s budget (Config.TierUploadBytesPerSec, `strand serve
// --tier-upload-bytes-per-sec`) timed by the Clock; an upload is charged its object when it ends,
// and none starts while the budget is in debt. local.retention.* are enforced on tiered topics
// only; describe says they have no effect elsewhere (metadata.LocalRetentionNote).
package node
