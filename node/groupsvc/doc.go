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
// (the records between as_of and the snapshot apply again: they were not in it); without one it
// replays the log from its start (log.go: ReadCommitted and FindSnapshot, the reading both
// coordinators do; node/txnsvc uses them over the same Log). FailWaits answers the waits of a replaced coordinator, in
// request-id order, with the error the node hands in (their commands may still apply).
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
// Tests: coordinator_test.go (a Coordinator over an in-memory Log), sweep_test.go, handle_test.go
// (a Service over a fake Host); the node's groups_test.go and the simulator's group checkers test
// it through the node.
package groupsvc
