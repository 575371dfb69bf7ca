package txnsvc

import (
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// TransactionsTopic is the internal topic whose partitions host the
// transaction coordinators (engine/txn): each record is one TxnCommand, and
// the leader of a transactional id's partition is its coordinator, the
// way __strand_offsets hosts the group coordinators (node/groupsvc).
const TransactionsTopic = "__strand_transactions"

// Coordinator is the engine/txn state of one __strand_transactions
// partition, as this node built it while leading in Term: a view of the
// partition's log, applied in log order when read back, so every leader
// builds the same state. The node's request handlers, sweep and marker
// writes still read and write its leader-local fields directly: they run
// on the node's goroutine, as this does.
type Coordinator struct {
	Term    uint64
	TopicID uint64
	State   *txn.State
	Next    int64 // the next offset of the partition to apply
	// Fresh: built in this term and not caught up yet; the first catch-up
	// starts from the newest snapshot in the log.
	Fresh bool
	// SinceSnapshot counts the commands applied since the last snapshot
	// record (or since this coordinator started).
	SinceSnapshot int
	// RestoredFrom is the offset of the snapshot this coordinator started
	// from, -1 when it replayed the log from its start.
	RestoredFrom int64
	// InFlight marks sweep proposals, marker writes and refills in flight
	// (leader-local).
	InFlight map[string]bool // lookup only
	// LastExpire is the tick of the last proposed id expiry (leader-local).
	LastExpire uint64

	// Waits are the requests waiting for their command, by request id.
	groupsvc.Waits[Applied]
}

// New is a fresh coordinator of a partition led in term, whose log starts
// at logStart, at tick now: the first CatchUp restores the newest
// snapshot, then replays the log.
func New(term, topicID uint64, logStart int64, now uint64) *Coordinator {
	return &Coordinator{Term: term, TopicID: topicID, State: txn.New(), Next: logStart, Fresh: true,
		RestoredFrom: -1, InFlight: make(map[string]bool), LastExpire: now}
}

// Applied is the outcome of one command: Err when it did not apply (or
// may not have: a timeout, a lost leadership), else the engine's Result.
type Applied struct {
	Err error
	Res txn.Result
	// WasOpen: the command's transactional id had a transaction open
	// before it applied (for the node's counters).
	WasOpen bool
}

// FailWaits answers every wait of a replaced coordinator with err, in
// request-id order: their commands may still apply (maybe written).
func (co *Coordinator) FailWaits(err error) { co.FailWaitsWith(Applied{Err: err}) }

// CatchUp applies the partition's records from Next up to the high-water
// mark to State, answering the waits of the commands met. A fresh
// coordinator first restores the newest snapshot it finds within four
// snapshotEvery intervals of records from the high-water mark.
func (co *Coordinator) CatchUp(log groupsvc.Log, snapshotEvery int) error {
	if co.Fresh {
		co.Fresh = false
		co.restoreSnapshot(log, 4*snapshotEvery)
	}
	return groupsvc.ReadCommitted(log, &co.Next, "transaction", func(value []byte) { co.applyRecord(log, value) })
}

// applyRecord applies one record's command and answers its wait. A
// record that is no command is skipped, identically on every leader.
func (co *Coordinator) applyRecord(log groupsvc.Log, value []byte) {
	cmd, err := txn.DecodeCommand(value)
	if err != nil {
		log.Warn("skipping a record of the transaction log that is no command", err)
		return
	}
	w := co.TakeWait(cmd.GetRequestId())
	var wasOpen bool
	if id := commandID(cmd); w != nil && id != "" {
		st, _ := co.State.StateOf(id)
		wasOpen = st == txn.Ongoing
	}
	res := co.State.Apply(cmd)
	if cmd.GetSnapshot() != nil {
		co.SinceSnapshot = 0
	} else {
		co.SinceSnapshot++
	}
	if w != nil {
		w(Applied{Res: res, WasOpen: wasOpen})
	}
}

// commandID is the transactional id a command acts on ("" for the
// coordinator-wide ones).
func commandID(cmd *strandpb.TxnCommand) string {
	switch b := cmd.GetBody().(type) {
	case *strandpb.TxnCommand_AddPartitions:
		return b.AddPartitions.GetTransactionalId()
	case *strandpb.TxnCommand_AddOffsets:
		return b.AddOffsets.GetTransactionalId()
	}
	return ""
}

// restoreSnapshot starts a new coordinator from the newest snapshot record
// of its partition (groupsvc.FindSnapshot, at most scanMax records back
// from the high-water mark): when its as_of is still in the log it
// restores it and continues from as_of (the records between as_of and the
// snapshot apply again: they were not in it). Without one, the coordinator
// replays the partition from its log start.
func (co *Coordinator) restoreSnapshot(log groupsvc.Log, scanMax int) {
	snap, at, ok := groupsvc.FindSnapshot(log, scanMax, func(value []byte) (*strandpb.TxnSnapshot, bool) {
		cmd, err := txn.DecodeCommand(value)
		if err != nil || cmd.GetSnapshot() == nil {
			return nil, false
		}
		return cmd.GetSnapshot(), true
	})
	if !ok {
		return
	}
	if snap.GetAsOf() < log.LogStartOffset() || snap.GetAsOf() > at {
		return // its tail is gone (or it is not one): replay from the log start
	}
	st, err := txn.Restore(snap)
	if err != nil {
		log.Warn("transaction snapshot does not restore; replaying the log", err)
		return
	}
	co.State, co.Next, co.RestoredFrom = st, snap.GetAsOf(), at
}
