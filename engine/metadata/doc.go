// Package metadata is the pure state machine of Strand's metadata raft group: one group over all
// nodes (like KRaft) whose committed entries register nodes, create, alter and delete topics, place
// their replicas and hand out producer ids (R1, R8, R26, R28). Every node applies the same entries
// and reaches the same state; nodes start and stop their partition replicas by watching it
// (Version, HostedPartitions).
//
// Like the partition engine it does no I/O, reads no clock, starts no goroutine and draws no
// randomness; map iteration order never reaches a result or a snapshot.
//
// Cluster metadata lives in its own raft group over the nodes, like KRaft (R26). metadata.State is
// pure: nodes in a slice sorted by id, topics in a map plus a sorted name slice, so reads and
// snapshots come out in one order.
//
//   - nodes {ID, Address, Rack, Fenced, KafkaAddress}: at most 1024; KafkaAddress empty without a
//     Kafka listener
//   - topics {ID, ReplicationFactor, Config, Replicas [][]uint64}: Replicas[p][0] is the preferred
//     leader
//   - topic id counter: never reused: a re-created topic is a new incarnation
//   - producer id counter: blocks handed out in order, never reused
//   - version: +1 for every command that changed something; nodes reconcile only when it moves
//
// # Identity
//
// A 16-byte cluster id, fixed by the first applied command that carries a cluster_seed (16 bytes
// from the proposing node's seeded randomness; nodes attach one while the applied state has no id).
// A 16-byte topic id per topic: SHA-256(cluster id ‖ raft index of the create ‖ attempt) cut to 16
// bytes and marked as a version-8 UUID, so a re-created topic and a replaced cluster's topics get
// new ids, identically on every node; the engine draws nothing itself. A uint64 topic sequence
// number names replica directories and raft traffic. Leader table: per partition the leader and
// term from ReportLeaders, taken only for the live incarnation, from a replica, with a strictly
// higher term; reports do not bump the version. Rejected: a counter id plus a cluster id (two
// things to compare everywhere; one UUID is Kafka's KIP-516).
//
// Configs (Kafka-style text pairs, parsed strictly), all enforced by the nodes: retention.ms (7
// days), retention.bytes (-1), segment.bytes (64 MiB — what raftlog always rolled at; Kafka's 1 GiB
// would keep up to 1 GiB per partition past retention.bytes on a node with thousands), segment.ms
// (7 days, at least 100 ms), cleanup.policy=delete, max.message.bytes (1 MiB, also its maximum: a
// leader refuses a batch, as sent, longer than a smaller value); the compaction settings
// (engine/compact.Config: min.cleanable.dirty.ratio 0.5, min.compaction.lag.ms 0,
// max.compaction.lag.ms max int64, delete.retention.ms 1 day — Kafka's defaults and ranges, and
// min.compaction.lag.ms ≤ max.compaction.lag.ms checked after every change), stored and described
// whatever the policy, as Kafka does (absent from an older snapshot: the defaults). Only what runs
// may be set: a max.message.bytes above 1 MiB is refused; cleanup.policy delete, compact and
// compact,delete are all taken and enforced (Enforced(key, value) lets topic describe mark
// stored values that have no effect). Tiered storage's keys, KIP-405's: remote.storage.enable
// (false; refused on a compacted topic, never turned off once on; refused by the node without an
// object store and, until tiered storage is finished, without node.Config.TieredStorageUnfinished),
// local.retention.ms and local.retention.bytes (-2: the total's; refused above it; stored, not yet
// enforced).
// Rejected: warn-and-accept (the user would believe the setting applies).
//
// Commands (strandpb.MetadataCommand with a proposal id): RegisterNode, SetNodeFenced, CreateTopic,
// DeleteTopic (with a topic UUID, only the topic that has it: ErrUnknownTopicID otherwise, so a delete
// proposed late cannot remove a newer topic of the name), AlterTopicConfig, CreatePartitions (grow to a new total, never shrink; new
// partitions placed as a create would, continuing the rotation; validate-only changes nothing;
// refused for __strand_offsets, whose count maps groups to coordinators), AllocateProducerIDs,
// ReportLeaders (batched partition leader reports). Nodes open new partitions' replicas in the same
// reconcile that opens a new topic's. Each refusal is a typed sentinel; a refused command changes
// nothing; error texts are deterministic.
//
// # Placement
//
// Load-aware greedy, deterministic and rack-aware. Preferred leader = the node with fewest
// preferred leaderships (ties: fewer replicas, less loaded rack, rotation from (topicID + p) mod
// n); each follower = the node whose rack holds fewest replicas of this partition (ties: fewer
// replicas, more leaderships, rotation). Property tests over 1–16 nodes: preferred-leader counts
// differ by at most 1 always; replica counts by at most 1 with one replication factor and even
// racks. Rejected: Kafka's per-topic round robin — starts per topic random-walk apart across
// topics.
//
// # Security and moves
//
// The group also holds SCRAM credentials, ACL bindings and quotas (security.go, acl.go; their use
// is in package node's "Security" and node/server's doc) and per partition a move target and
// bootstrap set (moves.go); the pure planners for decommission and rebalance are in plan.go
// (package node, "Membership and partition moves").
//
// # Snapshot
//
// Deterministic MetadataSnapshot, version-checked, Checked on restore. Tests: per-command units, a
// rapid model test over every command with restarts from snapshots, placement properties,
// FuzzApply.
package metadata
