package txnsvc

import (
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// sweepProposalsMax bounds the timeout aborts one sweep proposes.
const sweepProposalsMax = 256

// Propose is how the coordinator's side writes a command: the node proposes
// it to the coordinator's partition and calls done once with its outcome
// (node/txn.go: proposeTxn).
type Propose func(cmd *strandpb.TxnCommand, done func(Applied))

// Sweep is one sweep of a coordinator: what the node hands in from its
// clocks and configuration, and how it writes.
type Sweep struct {
	// Propose writes a command to the coordinator's partition.
	Propose Propose
	// DriveMarkers starts the marker writes of every decided transaction
	// not in flight yet (node/txn_markers.go: driveMarkers).
	DriveMarkers func()
	// RefillProducerIDs takes a block of producer ids from the metadata
	// group and grants it through the log (node/txn_sweep.go).
	RefillProducerIDs func()
	// NowMs is the wall clock (the transactions' timeouts); Now the tick
	// count (the ids' expiry interval, leader-local).
	NowMs int64
	Now   uint64
	// SnapshotEvery: a snapshot once this many commands applied since the
	// last one.
	SnapshotEvery int
	// ProducerIDBlock: a refill when fewer than half a block is left.
	ProducerIDBlock int32
	// IDRetentionMs: an id without a transaction this long is forgotten.
	IDRetentionMs int64
	// ExpireEvery is how many ticks apart id expiries are proposed.
	ExpireEvery uint64
}

// Run proposes what the leader's clock decides for co, at most one command
// in flight per key: the abort of transactions past their
// transaction.timeout.ms (at most sweepProposalsMax; an abort that
// prepared drives the markers), the markers of every prepared transaction
// not yet reported (so a new coordinator finishes what its predecessor
// decided), a snapshot every SnapshotEvery commands, a block of producer
// ids before the pool runs out, and the expiry of idle ids every
// ExpireEvery ticks.
func (s Sweep) Run(co *Coordinator) {
	propose := func(key string, cmd *strandpb.TxnCommand, applied func(txn.Result)) {
		if co.InFlight[key] {
			return
		}
		co.InFlight[key] = true
		s.Propose(cmd, func(a Applied) {
			delete(co.InFlight, key)
			if a.Err == nil && applied != nil {
				applied(a.Res)
			}
		})
	}
	for i, e := range co.State.Expired(s.NowMs) {
		if i >= sweepProposalsMax {
			break
		}
		cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_TimeoutAbort{TimeoutAbort: &strandpb.TxnTimeoutAbort{
			TransactionalId: e.ID, Producer: &strandpb.TxnProducer{ProducerId: e.Producer.ID, Epoch: int32(e.Producer.Epoch)}}}}
		propose("\x00timeout\x00"+e.ID, cmd, func(r txn.Result) {
			if r.Prepared {
				s.DriveMarkers()
			}
		})
	}
	s.DriveMarkers()
	if co.SnapshotDue(s.SnapshotEvery) {
		propose("\x00snapshot", &strandpb.TxnCommand{Body: &strandpb.TxnCommand_Snapshot{Snapshot: co.State.Snapshot(co.Next)}}, nil)
	}
	ids := len(co.State.IDs())
	if ids > 0 && co.State.ProducerIDsLeft() < int64(s.ProducerIDBlock)/2 {
		s.RefillProducerIDs()
	}
	if ids > 0 && s.Now >= co.LastExpire+s.ExpireEvery {
		co.LastExpire = s.Now
		propose("\x00expire-ids", &strandpb.TxnCommand{Body: &strandpb.TxnCommand_ExpireIdsRetentionMs{
			ExpireIdsRetentionMs: s.IDRetentionMs}}, nil)
	}
}
