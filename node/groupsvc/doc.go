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
// replays the log from its start. FailWaits answers the waits of a replaced coordinator, in
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
// # What is still the node's (issue 22: not moved yet)
//
// Proposing a command (request id from the node's seeded source, time from its Clock, an acks=all
// produce, the read-back), the request handlers (node/groups_handle.go), the sweep's walk over the
// replicas, its snapshot and offsets-retention proposals and the removal of deleted topics' offsets
// after a metadata ReadIndex (node/groups_sweep.go), finding a group's coordinator (creating
// __strand_offsets through the metadata group) and the transactional offset commits
// (node/txn_offsets.go) are Core methods that read and write the Coordinator's leader-local
// fields (Live, RevokingSince, InFlight, Heartbeating) directly. Moving them here needs a host
// interface: propose to a partition, read the applied metadata (topics, ids, leaders, peer
// addresses), the clock and tick count, the seeded source, and the error mapping.
//
// Tests: coordinator_test.go (a Coordinator over an in-memory Log), sweep_test.go; the node's groups_test.go and
// the simulator's group checkers test it through the node.
package groupsvc
