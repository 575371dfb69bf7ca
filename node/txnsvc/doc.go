// Package txnsvc is the transaction coordinator's view of its log and its request handling: one
// Coordinator per __strand_transactions partition the node leads, built by reading the partition
// back through groupsvc.Log (the same narrow read the group coordinator uses: log start,
// high-water mark, reads of committed batches, the node's storage error, a logger). Every leader
// builds the same engine/txn State, because commands apply only when read back, in log order. It
// holds no *Core, reads no clock, draws no randomness and never touches raft; it runs on the
// node's goroutine.
//
// # Catch-up and snapshots (coordinator.go)
//
// CatchUp applies the partition's records from Next up to the high-water mark
// (groupsvc.ReadCommitted: at most 65,536 reads of 4 MiB, Next moved past each record before the
// next, so a wait answered mid-catch-up sees it) and answers the wait of each command it meets
// (Wait, TakeWait: the node registers a wait when it proposes), with the engine's Result and
// WasOpen (the id had a transaction open before: the node counts its own commands' begun
// transactions by it). A record that is no command is skipped, identically on every leader. A
// fresh coordinator (new in its term) first scans back from the high-water mark, at most four
// snapshot intervals of records (groupsvc.FindSnapshot), for the newest snapshot command; when
// its as_of is still in the log it restores it and replays from as_of, else it replays the log
// from its start, restoring each snapshot it meets. FailWaits answers the waits of a replaced
// coordinator, in request-id order, with the error the node hands in (their commands may still
// apply). __strand_transactions is compacted exactly as __strand_offsets (groupsvc's doc, "A
// compacted log": Coordinator embeds groupsvc.Keyed; Records keys a command by term and request
// id, a snapshot by "s" with a tombstone for each command below its as_of; a snapshot only once
// a command of its own was read back, SnapshotDue). Producer epochs, the producer-id pool and
// every open or prepared transaction are in the snapshot, so fencing survives a restore from the
// compacted log (keys_test.go; the simulator's restore check, simnet/offsets_replay.go).
//
// # The sweep (sweep.go)
//
// Once a second the node catches each coordinator up and runs a Sweep with its wall clock, tick
// count, configuration and writers: the abort of every transaction past its
// transaction.timeout.ms (at most 256 per sweep; one that prepared drives the markers), the
// markers of every prepared transaction not yet reported (so a new coordinator finishes what its
// predecessor decided), a snapshot every SnapshotEvery commands, a producer-id refill below half
// a block, and the expiry of idle ids every ExpireEvery ticks (an hour). At most one proposal per
// key is in flight (Coordinator.InFlight, leader-local).
//
// # Markers (markers.go)
//
// DriveMarkers lists, for every Pending transaction (its partitions', then its groups'), each
// Marker whose key is not in flight, marks it in flight and hands it to the node's write, at most
// 256 per call; the node adds the coordinator epoch (its partition's raft term) and writes it
// through its TxnMarkerWriter, and the write's completion (the node's markerDone) ends the flight,
// so a failed write is retried on the next sweep.
//
// # Requests (handle.go)
//
// Service serves InitProducerId (a timeout over transaction.max.timeout.ms refused before any
// write; refused for want of producer ids, it refills once and proposes again), AddPartitionsToTxn
// (every partition must exist in the applied metadata and be no coordinator's topic, else nothing
// is added) and its verify-only read, AddOffsetsToTxn, EndTxn (answered once the decision is
// applied, then the markers are driven), ListTransactions (the coordinators this node leads),
// DescribeTransactions and AbortTransaction (an operator's AdminAbort) over a Host: the node
// finds the id's coordinator and binds it to its Replica (Propose: an acks=all write answered
// once read back; Read: the state after a ReadIndex; DriveMarkers; RefillProducerIDs; the
// MarkersBeforeDecision planted-bug hook). Without a marker writer (MarkersEnabled false) no
// transaction opens or is decided.
//
// # What is still the node's (issue 22: not moved yet)
//
// node/txn.go: finding an id's coordinator (txnCoordinatorOf, txnCoordinatorFor: the replica,
// its leadership and term) and creating __strand_transactions through the metadata group;
// proposing a command (proposeTxn: a request id from the node's seeded source, the Clock's wall
// time, an acks=all produce, the read-back, the Stats counters). node/txn_handle.go: the
// dispatch (each request flushes after it), FindCoordinator for transactional ids (the leader
// table, peer addresses), the ReadIndex (readTxn, readTxnCoordinator, also used by transactional
// produce and TxnOffsetCommit), the Host and Replica over the Core. node/txn_sweep.go: the walk
// over the replicas and the producer-id refill (a metadata proposal). node/txn_markers.go: the
// marker writes and their reports (TxnMarkerWriter takes the *Core; markerDone proposes
// MarkerWritten). The partition side (txn_write.go, txn_peer.go,
// txn_produce.go, txn_fetch.go, txn_offsets.go, txn_producers.go) is not the coordinator's and
// stays. Moving the rest needs the raft host's replica seam (leadership, produce, ReadIndex as an
// interface rather than *group) and an error table outside package node.
//
// Tests: coordinator_test.go (a Coordinator over an in-memory log), sweep_test.go,
// markers_test.go, handle_test.go (a Service over a fake Host); the node's txn_test.go and the simulator's
// transaction checkers test it through the node.
package txnsvc
