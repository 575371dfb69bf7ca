package txnsvc

import (
	"github.com/strandlog/strand/engine/recordbatch"
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
	// Keyed is its place in its compacted log (groupsvc/keys.go).
	groupsvc.Keyed
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
		Keyed: groupsvc.NewKeyed(), InFlight: make(map[string]bool), LastExpire: now}
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
// snapshotEvery intervals of records from the high-water mark, and
// restores each later snapshot its replay meets (the log is compacted:
// groupsvc's doc, "A compacted log"). A catch-up that fails makes the
// coordinator fresh: the next one restores again.
func (co *Coordinator) CatchUp(log groupsvc.Log, snapshotEvery int) error {
	if co.Fresh {
		co.Fresh = false
		co.restoreSnapshot(log, 4*snapshotEvery)
	}
	err := groupsvc.ReadRecords(log, &co.Next, "transaction", func(off int64, key, value []byte) (int64, bool) {
		return co.applyRecord(log, off, key, value)
	})
	if err != nil {
		co.Fresh, co.State, co.Next, co.SinceSnapshot = true, txn.New(), log.LogStartOffset(), 0
		co.StartOver()
		return err
	}
	co.EndReplay()
	return nil
}

// SnapshotDue reports whether a snapshot is to be proposed: every
// commands applied since the last, and one of this coordinator's own read
// back (groupsvc's doc, "Order of snapshots").
func (co *Coordinator) SnapshotDue(every int) bool { return co.SinceSnapshot >= every && co.OwnApplied }

// Records are the records of cmd, marshalled as value, proposed by this
// coordinator at nowMs (groupsvc.Keyed.KeyedRecords).
func (co *Coordinator) Records(cmd *strandpb.TxnCommand, value []byte, nowMs int64) []recordbatch.Record {
	snap := cmd.GetSnapshot()
	return co.KeyedRecords(co.Term, cmd.GetRequestId(), snap != nil, snap.GetAsOf(), value, nowMs, nil)
}

// applyRecord applies the record at off and answers its command's wait. A
// tombstone only drops its key from Tombstoned; a record that is no
// command is skipped, identically on every leader; a snapshot a replay
// meets above the last restored is restored and the read goes on from its
// as_of (jump).
func (co *Coordinator) applyRecord(log groupsvc.Log, off int64, key, value []byte) (resume int64, jump bool) {
	if value == nil {
		co.Tombstoned.Tombstone(key)
		return 0, false
	}
	cmd, err := txn.DecodeCommand(value)
	if err != nil {
		log.Warn("skipping a record of the transaction log that is no command", err)
		return 0, false
	}
	if snap := cmd.GetSnapshot(); snap != nil && co.RestoresAt(off) && co.restore(log, snap, off) {
		return co.Next, true
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
	co.Applied(off, key, cmd.GetSnapshot() != nil, w != nil)
	if w != nil {
		w(Applied{Res: res, WasOpen: wasOpen})
	}
	return 0, false
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
// replays the partition from its log start, restoring each snapshot it
// meets.
func (co *Coordinator) restoreSnapshot(log groupsvc.Log, scanMax int) {
	co.StartReplay()
	snap, at, ok := groupsvc.FindSnapshot(log, scanMax, func(value []byte) (*strandpb.TxnSnapshot, bool) {
		cmd, err := txn.DecodeCommand(value)
		if err != nil || cmd.GetSnapshot() == nil {
			return nil, false
		}
		return cmd.GetSnapshot(), true
	})
	if ok {
		co.restore(log, snap, at)
	}
}

// restore replaces the state with snap, the snapshot record at offset at,
// and moves Next to its as_of; false when it does not restore (its tail
// is gone, it is no snapshot, or it does not decode).
func (co *Coordinator) restore(log groupsvc.Log, snap *strandpb.TxnSnapshot, at int64) bool {
	if snap.GetAsOf() < log.LogStartOffset() || snap.GetAsOf() > at {
		return false
	}
	st, err := txn.Restore(snap)
	if err != nil {
		log.Warn("transaction snapshot does not restore; replaying the log", err)
		return false
	}
	co.State, co.Next = st, snap.GetAsOf()
	co.Restored(snap.GetAsOf(), at)
	return true
}
