// Package groups is the consumer-group coordinator's state machine: groups, members and their
// epochs, the target assignment, KIP-848 incremental reconciliation and committed offsets. It is
// pure, like the partition engine: every input is a command taken from a replicated log, applied in
// log order; it reads no clock (a command carries the proposer's time as data), draws no randomness
// and never lets map order reach its output.
//
// Liveness is not here: which member stopped heart-beating is decided by the coordinator's own
// clock, which then proposes an Expire command.
//
// Pure, under the same law as engine/ (time only as NowMs data in commands; groups walked through a
// sorted id slice, members sorted by id; offsets exported through a sorted key list). A group:
// members (client-chosen id, epoch, instance id, rack, subscriptions, assigned, revoking, target,
// last heartbeat sequence), a group epoch, the target's epoch, the subscribed topics' partition
// counts, committed offsets. Commands: Heartbeat, Commit, Expire, DeleteGroup, DeleteTopic,
// ExpireOffsets; reads Fetch, Describe, GroupIDs, Topics; Check; Snapshot/ Restore
// (GroupsSnapshot).
//
// # Classic members
//
// A Heartbeat with a Classic step is a classic member's JoinGroup, SyncGroup or Heartbeat
// (kafkaproto, classic.go here). The member is an ordinary member plus a ClassicView: the
// generation its last join answered, the assignment the join gave, what it may still hold (given ∪
// owned at the join), synced, protocol, client id and host. Join heartbeats at the member's
// current epoch in one command and records the view; Sync answers the view's assignment (Rejoin
// without a view, ErrFencedMemberEpoch in another generation) and marks it synced; Heartbeat is the
// KIP-848 heartbeat the view stands for (at the member's epoch, owning what it holds, its own
// subscriptions) and answers Rejoin when the epoch or assignment moved. A commit with
// ClassicGeneration commits in the member's epoch when its generation is the view's. The view is
// replicated state, in snapshots (MemberSnapshot.classic; a snapshot without it restores the member
// without a view, which a classic client's next step answers with Rejoin): a coordinator fail-over
// keeps classic members and their generations. Session and rebalance deadlines stay the
// coordinator's own clock (node's sweep), restarted by a new coordinator, never early. The node feeds it from __strand_offsets (package node, "Consumer-group
// coordinators").
//
// Target assignment (uniform, sticky): keep each previous target partition with its owner while it
// subscribes; give unowned ones to the eligible member with fewest; then move from a most-loaded
// member with at least two more than the least-loaded, so only over-quota members give anything up
// (an 11th member joining 10 over 100 partitions moves exactly 9). Rack-aware as a tie-break: an
// unowned partition goes to a least-loaded member in a rack holding a replica; balance always wins.
// Rejected: range/round-robin (not sticky); min-cost flow (code size).
//
// Reconciliation (KIP-848), per member at each heartbeat: what it was asked to revoke stays its own
// until a heartbeat reports it gone; when the target moved on it is asked to revoke what the new
// target takes away, and its epoch reaches the target's only with nothing left to revoke; then it
// gets each target partition no other member holds. So a partition moves only after the old owner
// revoked it, left, expired, or rejoined at epoch 0. Check: no partition held twice, nothing both
// assigned and revoking, member epoch ≤ target epoch ≤ group epoch.
//
// # Fencing
//
// A heartbeat above the member's epoch is FENCED_MEMBER_EPOCH; below, accepted only at the previous
// epoch owning a subset of its assignment (a lost answer). A commit below is STALE_MEMBER_EPOCH,
// above fenced, an unknown member UNKNOWN_MEMBER_ID; a memberless commit only while the group is
// empty (GROUP_NOT_EMPTY). Heartbeat sequence numbers (not in Kafka, where one TCP connection
// orders a member's requests): a heartbeat not newer than the last applied is STALE_HEARTBEAT,
// since a resent old heartbeat owning nothing would otherwise count as a revocation. Static
// members: a join with a known instance id replaces the old member (its epoch and assignment, no
// rebalance); Kafka's KIP-848 answers UNRELEASED_INSTANCE_ID instead, which defeats "a restarted
// member gets its partitions back". Empty groups' offsets expire after 7 days. Tests: scenarios,
// FuzzCommands, a rapid TestModel (no partition owned by two clients following the protocol,
// commits land in the member's epoch, replay equality, convergence to balance).
//
// # Transactional offsets (KIP-447)
//
// TxnCommit (a TxnOffsetCommit the transaction coordinator confirmed: the group is in the
// producer's open transaction) stores offsets as the producer id's pending ones, invisible to Fetch;
// Unstable lists the partitions with pending offsets (OffsetFetch require_stable answers
// UNSTABLE_OFFSET_COMMIT for them). The member is fenced as a Commit's (stale or fenced epoch,
// unknown member; an instance id another member holds is FENCED_INSTANCE_ID); an empty member id is
// not checked (producers before KIP-447). TxnMarker, the transaction's group marker (epoch: the
// transaction's + 1, KIP-890, or its own when kept), commits the pending offsets into the committed
// ones or aborts them; pending offsets of an older epoch (a fenced producer's) are dropped even by a
// commit, and a marker older than the pending offsets (a late duplicate) changes nothing. Each
// producer keeps a fence, the newest marker or pending epoch: a TxnCommit below it is
// PRODUCER_FENCED, so a commit verified before the transaction ended and applied after its marker
// never lingers. A plain Commit of a partition drops its pending offsets (the later write wins,
// as Kafka keeps the offset appended last). A fence without offsets is forgotten an offsets retention after its last update
// (ExpireOffsets), or evicted oldest-first when a group has ProducersMax producers; a group with
// pending offsets never expires. Pending offsets and fences are in snapshots (GroupSnapshot.pending). Tests:
// scenarios, TestTxnModel (rapid: committed offsets are exactly the committed transactions', zombies
// and duplicate markers never show, replay through a snapshot), FuzzCommands, FuzzRestorePending.
package groups
