// Package groupsvc is the consumer-group coordinator's view of its log: one Coordinator per
// __strand_offsets partition the node leads, built by reading the partition back through a narrow
// Log (log start, high-water mark, reads of committed batches, the node's storage error, a
// logger). Every leader builds the same state, because commands apply only when read back, in log
// order (Apply, over engine/groups' pure State). It holds no *Core, reads no clock, draws no
// randomness and never touches raft; it runs on the node's goroutine.
//
// # Catch-up and snapshots
//
// CatchUp applies the partition's records from Next up to the high-water mark, at most 65,536
// reads of 4 MiB, and answers the wait of each command it meets (Wait, TakeWait: the node
// registers a wait when it proposes). A record that is no command (a client produced to the
// internal topic) is skipped, identically on every leader. A fresh coordinator (new in its term)
// first scans back from the high-water mark, at most four snapshot intervals of records, for the
// newest snapshot command whose as_of is still in the log, restores it and replays from as_of
// (the records between as_of and the snapshot apply again: they were not in it) (log.go:
// ReadCommitted and FindSnapshot, the reading both coordinators do; node/txnsvc uses them over
// the same Log). FailWaits answers the waits of a replaced coordinator, in request-id order, with
// the error the node hands in (their commands may still apply). A catch-up that fails (a read
// error) makes the coordinator fresh again: its next catch-up restores, never resumes over a log
// a compaction may have changed below it.
//
// # A compacted log (keys.go)
//
// __strand_offsets is created cleanup.policy=compact (node/groups.go offsetsTopic,
// coordinatorTopicConfig), so its disk
// use is bounded by the live groups, not by the commits ever made. The records stay commands
// (Apply, in log order, at read-back): Kafka's keys — a group's metadata by group, an offset by
// (group, topic, partition), the latest value the state — need the state computed when a record
// is written (Kafka's coordinator applies a write to its in-memory timeline before it is
// committed and reverts it on failure), and this coordinator applies only what it reads back, so
// a commit refused at apply (a fenced epoch) would supersede the valid commit before it. Instead
// the snapshot, which already holds the whole state at as_of, is what compaction keeps:
//
//   - Keys. A command's record is keyed 'c' + term (8 bytes) + request id (8 bytes, big-endian):
//     unique, as a partition has one leader per term and a coordinator never reuses a request id
//     in flight (CommandKey). A snapshot's record is keyed "s" (SnapshotKey): only the newest
//     survives compaction. A tombstone (a null value) keyed like a command removes that command.
//   - Values. A command's value is its GroupCommand as before; a snapshot's is a GroupCommand
//     holding a GroupsSnapshot (the state of every group, members, epochs, assignments, offsets
//     and pending transactional offsets, as of as_of); a tombstone's is null.
//   - Tombstones. The coordinator remembers the key and offset of every command it applied and
//     whose tombstone it has not applied (Pending). A snapshot is written as one batch: the
//     snapshot record, then a tombstone for each pending command below as_of (at most
//     TombstonesMax; the rest wait for the next snapshot). Invariant: when a snapshot with as_of
//     A is in the log, every command below A is tombstoned by its batch or an earlier one. By
//     induction: the writer restored from the snapshot before (as_of R, whose batch covered
//     everything below R) or replayed from the log start, and has applied every command in
//     [R, A). So compaction removes only commands below the newest snapshot's as_of, and a
//     restore from it is exact. A tombstone, once applied, drops its key from Pending.
//   - Order of snapshots. A snapshot proposed by a leader whose read-back has not reached its
//     own term could land after one of the previous term with a larger as_of, and being the
//     newest "s" it would survive while the commands between the two were tombstoned. So a
//     coordinator proposes a snapshot only once it has read back a command of its own
//     (OwnApplied): every record of earlier terms is then below its Next, and snapshots' as_of
//     grow in log order.
//   - Restore from latest value per key. A fresh coordinator restores the newest snapshot the
//     back-scan finds and replays from its as_of: every command at or above as_of is still there
//     (the invariant), tombstones apply as nothing but the drop from Pending, older snapshots
//     were removed or lie below. Without one in the scanned tail (the scan also stops at a gap a
//     compaction left: reads go only forward) it replays from the log start,
//     and restores at every snapshot record it meets whose offset is above the last one it
//     restored (RestoredFrom), continuing from that snapshot's as_of: on a compacted log the
//     commands below are gone, on an uncompacted one the restore equals the replay. Generation
//     and fencing state (group and member epochs, classic generations, static members, the
//     transactional producers' epochs) is in the snapshot; only the leader-local timers (Live,
//     RevokingSince) are not, and they restart on failover as before.
//   - delete.retention.ms. No restore reads a tombstone: it marks a command below a snapshot,
//     which no restore replays. __strand_offsets is created with delete.retention.ms=0, so
//     tombstones go at the pass after the one that first sees them; min.compaction.lag.ms stays
//     0. A coordinator that is behind the high-water mark across calls (its catch-up failed) is
//     made fresh, so it never applies a log a pass thinned below its Next.
//   - The old format. A data directory written before keys holds keyless commands and snapshots
//     and a __strand_offsets created cleanup.policy=delete with infinite retention: it is read
//     as before (a record's key does not matter to Apply) and stays uncompacted (nothing alters
//     it; the node compacts only a coordinator topic whose policy says compact). Altering it to
//     compact by hand is unsafe until every partition has a keyed snapshot above its last keyless
//     command (a pass drops keyless records): not guarded, recorded here.
//
// Rejected: deleting records below the newest snapshot's as_of (DeleteRecords, simpler and as
// bounded, but the topic would not be a compacted topic a reader can inspect by key, and the
// issue asks the coordinators to use compaction); per-group snapshots keyed by group (restore
// would need a consistent cut across groups: partition-wide commands such as DeleteTopic and
// ExpireOffsets touch them all); keys recycled from a ring (a duplicate within the ring after a
// failover drops a needed command). __strand_transactions (node/txnsvc) is the same: its
// Coordinator embeds Keyed, its records are keyed the same way, the topic is created the same
// (node: coordinatorTopicConfig). Left: the snapshot is the whole partition's state, rewritten
// every SnapshotEvery commands (as before), so the write cost of a snapshot grows with the live
// state, not only the disk; Kafka's per-key records would make it incremental.
//
// # The liveness sweep (sweep.go)
//
// Liveness is leader-local, as in Kafka. Once a second the node catches each coordinator up and
// runs a Sweep over it with Timers from its clocks (ticks for the members' timers, the wall clock
// for groups' empty-since stamps): a member's timer starts when this coordinator first sees it, a
// member silent past the session or holding revocations past the rebalance timeout is expired, a
// member with a heartbeat in flight is skipped (its answer restarts the timer), timers of members
// gone are pruned. Sweep.Propose writes through the node (Propose): at most one command in flight
// per key and 256 per sweep; an applied expiry drops the member's timer, a failed snapshot waits
// another interval.
//
// # Requests (handle.go)
//
// Service serves ConsumerGroupHeartbeat (KIP-848 and classic members' heartbeats), OffsetCommit,
// OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and OffsetDelete over a Host: the node
// finds the group's coordinator and binds it to its Replica (Propose: an acks=all write answered
// once read back; Read: the state after a ReadIndex), maps errors to the wire, stamps topic ids on
// commits, and hands in its applied metadata and tick count. Writes are answered once their command is
// applied and read back; reads, and heartbeats that change nothing (answered from the state
// without a write), after a ReadIndex, so both are linearizable. A heartbeat racing an expiry
// proposed and not applied is written, not read, so the expiry applies before it.
//
// # What is still the node's (issue 22: not moved yet)
//
// node/groups.go: finding a group's coordinator (coordinatorOf, coordinatorFor: the replica, its
// leadership and term, the MoveRacesRebalance planted-bug hook) and creating __strand_offsets
// through the metadata group (offsetsTopic); proposing a command (proposeGroup: a request id from
// the node's seeded source, the Clock's wall time, an acks=all produce, the read-back); the error
// mapping (groupError, over the node's error table). node/groups_handle.go: FindCoordinator (the
// leader table, peer addresses, transactional ids), the walk over the replicas ListGroups reads
// (LedCoordinators), the ReadIndex (readCoordinator), topic-id stamping (stampTopicIDs, shared
// with TxnOffsetCommit).
// node/groups_sweep.go: the walk over the replicas once a second, the snapshot and
// offsets-retention proposals, the removal of deleted topics' offsets after a metadata ReadIndex.
// node/txn_offsets.go: transactional offset commits and their markers. Moving these needs the
// raft host's replica seam (leadership, produce, ReadIndex as an interface rather than *group) and
// an error table outside package node.
//
// Tests: coordinator_test.go (a Coordinator over an in-memory Log; its keyless records are the
// old format), keys_test.go (a compacted log restores the writer's state; snapshot order;
// tombstones), disk_test.go (TestOffsetsDiskBoundedByLiveGroups: 100,000 commits by 10 groups,
// 16.3 MB written, 210 KB after engine/compact's passes), sweep_test.go, handle_test.go (a
// Service over a fake Host); the node's groups_test.go and the simulator's group checkers and
// restore check (simnet/offsets_replay.go) test it through the node.
package groupsvc
