package groupsvc

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// OffsetsTopic is the internal topic whose partitions host the consumer-group
// coordinators: each record is one groups command, and the leader of a
// group's partition is the group's coordinator.
const OffsetsTopic = "__strand_offsets"

// Coordinator is the groups state of one __strand_offsets partition, as
// this node built it while leading in Term. It is a view of the
// partition's log: commands apply when read back after they were applied
// to the partition, in log order, so every leader builds the same state.
// The node's request handlers and liveness sweep (node/groups_handle.go,
// node/groups_sweep.go) still read and write its leader-local fields
// directly: they run on the node's goroutine, as this does.
type Coordinator struct {
	Term    uint64
	TopicID uint64
	State   *groups.State
	Next    int64 // the next offset of the partition to apply
	// Fresh: built in this term and not caught up yet; the first catch-up
	// starts from the newest snapshot in the log.
	Fresh bool
	// SinceSnapshot counts the commands applied since the last snapshot
	// record (or since this coordinator started).
	SinceSnapshot int
	// Keyed is its place in its compacted log (keys.go).
	Keyed
	// Live is the tick of each member's last successful heartbeat, by
	// LiveKey: leader-local, restarted on failover (the node's sweep).
	Live map[string]uint64 // lookup only
	// RevokingSince is the tick each member was first seen asked to
	// revoke, by LiveKey (leader-local, like Live).
	RevokingSince map[string]uint64 // lookup only
	// InFlight marks expiries and cleanups proposed and not answered.
	InFlight map[string]bool // lookup only
	// Heartbeating counts each member's heartbeats received and not yet
	// answered, by LiveKey: the sweep expires no member with one in flight.
	Heartbeating map[string]int // lookup only

	// Waits are the requests waiting for their command, by request id.
	Waits[Applied]
}

// New is a fresh coordinator of a partition led in term, whose log starts
// at logStart: the first CatchUp restores the newest snapshot, then
// replays the log.
func New(term, topicID uint64, logStart int64) *Coordinator {
	return &Coordinator{
		Term: term, TopicID: topicID, State: groups.New(), Next: logStart, Fresh: true, Keyed: NewKeyed(),
		Live: make(map[string]uint64), InFlight: make(map[string]bool),
		RevokingSince: make(map[string]uint64), Heartbeating: make(map[string]int),
	}
}

// Applied is the outcome of one applied command.
type Applied struct {
	Err error
	HB  groups.HeartbeatResult
	// Deleted is an offset delete's result per partition asked.
	Deleted []error
}

// LiveKey is the key of a member in the leader-local maps.
func LiveKey(group, member string) string { return group + "\x00" + member }

// FailWaits answers every wait of a replaced coordinator with err, in
// request-id order: their commands may still apply (maybe written).
func (co *Coordinator) FailWaits(err error) { co.FailWaitsWith(Applied{Err: err}) }

// TrackHeartbeat counts a heartbeat of the member at key as in flight until
// done runs. An expiry the sweep decided meanwhile would be written after
// the heartbeat and, when the heartbeat keeps the member's epoch (a static
// member's rejoin, any heartbeat in its epoch), apply after the answer
// that told the member what it owns: the member would be gone while it
// holds its partitions.
func (co *Coordinator) TrackHeartbeat(key string, done func(*strandpb.ConsumerGroupHeartbeatResponse, *strandpb.Error),
) func(*strandpb.ConsumerGroupHeartbeatResponse, *strandpb.Error) {
	co.Heartbeating[key]++
	return func(resp *strandpb.ConsumerGroupHeartbeatResponse, e *strandpb.Error) {
		if co.Heartbeating[key]--; co.Heartbeating[key] <= 0 {
			delete(co.Heartbeating, key)
		}
		done(resp, e)
	}
}

// CatchUp applies the partition's records from Next up to the high-water
// mark to State, answering the waits of the commands met. A fresh
// coordinator first restores the newest snapshot it finds within four
// snapshotEvery intervals of records from the high-water mark. A catch-up
// that fails makes the coordinator fresh: the next one restores again.
func (co *Coordinator) CatchUp(log Log, snapshotEvery int) error {
	if co.Fresh {
		co.Fresh = false
		co.restoreSnapshot(log, 4*snapshotEvery)
	}
	err := ReadRecords(log, &co.Next, "group", func(off int64, key, value []byte) (int64, bool) {
		return co.applyRecord(log, off, key, value)
	})
	if err != nil {
		co.startOver(log.LogStartOffset())
		return err
	}
	co.EndReplay()
	return nil
}

// startOver makes co fresh, with an empty state, from logStart.
func (co *Coordinator) startOver(logStart int64) {
	co.Fresh, co.State, co.Next, co.SinceSnapshot = true, groups.New(), logStart, 0
	co.StartOver()
}

// SnapshotDue reports whether a snapshot is to be proposed: every
// commands applied since the last, and one of this coordinator's own read
// back.
func (co *Coordinator) SnapshotDue(every int) bool { return co.SinceSnapshot >= every && co.OwnApplied }

// Records are the records of cmd, marshalled as value, proposed by this
// coordinator at nowMs: a command keyed by CommandKey; a snapshot keyed by
// SnapshotKey, followed by a tombstone for each command below its as_of
// that has none yet (doc.go, "Tombstones").
func (co *Coordinator) Records(cmd *strandpb.GroupCommand, value []byte, nowMs int64) []recordbatch.Record {
	snap := cmd.GetSnapshot()
	return co.KeyedRecords(co.Term, cmd.GetRequestId(), snap != nil, snap.GetAsOf(), value, nowMs,
		co.inFlightTombstones(nowMs)) // planted TombstoneInFlight (simbugs builds only)
}

// applyRecord applies the record at off and answers its command's wait. A
// tombstone only drops its key from Tombstoned. A record that is no
// command (written by a client that produced to the internal topic) is
// skipped, identically on every leader. A snapshot above the last one
// restored is restored when this coordinator replays from the log start
// (it never restored one, or restored an older one): the read goes on
// from its as_of (jump), as the commands below it may be compacted away.
func (co *Coordinator) applyRecord(log Log, off int64, key, value []byte) (resume int64, jump bool) {
	if value == nil {
		co.Tombstoned.Tombstone(key)
		return 0, false
	}
	var cmd strandpb.GroupCommand
	if err := proto.Unmarshal(value, &cmd); err != nil {
		log.Warn("skipping a record of the group log that is no command", err)
		return 0, false
	}
	if snap := cmd.GetSnapshot(); snap != nil && co.RestoresAt(off) {
		if co.restore(log, snap, off) {
			return co.Next, true
		}
	}
	res := Apply(co.State, &cmd)
	if cmd.GetSnapshot() != nil {
		co.SinceSnapshot = 0
	} else {
		co.SinceSnapshot++
	}
	w := co.TakeWait(cmd.GetRequestId())
	co.Applied(off, key, cmd.GetSnapshot() != nil, w != nil)
	if w != nil {
		w(res)
	}
	return 0, false
}

// Apply applies one command to s: pure.
func Apply(s *groups.State, cmd *strandpb.GroupCommand) Applied {
	now := cmd.GetNowMs()
	switch b := cmd.GetBody().(type) {
	case *strandpb.GroupCommand_Heartbeat:
		hb := HeartbeatFromWire(b.Heartbeat, now)
		r, err := s.Heartbeat(hb)
		return Applied{Err: err, HB: r}
	case *strandpb.GroupCommand_Commit:
		return Applied{Err: s.Commit(CommitFromWire(b.Commit, now))}
	case *strandpb.GroupCommand_Expire:
		e := b.Expire
		if !s.Expire(e.GetGroup(), e.GetMemberId(), e.GetMemberEpoch(), now) {
			return Applied{Err: groups.ErrUnknownMember}
		}
	case *strandpb.GroupCommand_DeleteGroup:
		return Applied{Err: s.DeleteGroup(b.DeleteGroup)}
	case *strandpb.GroupCommand_DeleteOffsets:
		deleted, err := s.DeleteOffsets(b.DeleteOffsets.GetGroup(), PartitionsFromWire(b.DeleteOffsets.GetPartitions()))
		return Applied{Err: err, Deleted: deleted}
	case *strandpb.GroupCommand_DeleteTopic:
		s.DeleteTopic(b.DeleteTopic)
	case *strandpb.GroupCommand_ExpireOffsetsRetentionMs:
		s.ExpireOffsets(now, b.ExpireOffsetsRetentionMs)
	case *strandpb.GroupCommand_TxnCommit:
		return Applied{Err: s.TxnCommit(TxnCommitFromWire(b.TxnCommit, now))}
	case *strandpb.GroupCommand_TxnMarker:
		return Applied{Err: s.TxnMarker(TxnMarkerFromWire(b.TxnMarker, now))}
	case *strandpb.GroupCommand_Snapshot:
		// Applied in order, the state already reflects it: only a new
		// coordinator starts from one (restoreSnapshot).
	default:
		return Applied{Err: fmt.Errorf("%w: empty command", groups.ErrInvalid)}
	}
	return Applied{}
}

// restoreSnapshot starts a new coordinator from the newest snapshot record
// of its partition: it reads back from the high-water mark (at most scanMax
// records) and, when it finds one whose as_of is still in the log,
// restores it and continues from as_of (the records between as_of and the
// snapshot are applied again; they were not in it). Without one, the
// coordinator replays the partition from its log start, restoring each
// snapshot it meets (replaying).
func (co *Coordinator) restoreSnapshot(log Log, scanMax int) {
	co.StartReplay()
	snap, at, ok := FindSnapshot(log, scanMax, func(value []byte) (*strandpb.GroupsSnapshot, bool) {
		var cmd strandpb.GroupCommand
		if proto.Unmarshal(value, &cmd) != nil || cmd.GetSnapshot() == nil {
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
// is gone, it is no snapshot, or it does not decode), the state then
// unchanged.
func (co *Coordinator) restore(log Log, snap *strandpb.GroupsSnapshot, at int64) bool {
	if snap.GetAsOf() < log.LogStartOffset() || snap.GetAsOf() > at {
		return false
	}
	st, err := groups.Restore(snap)
	if err != nil {
		log.Warn("group snapshot does not restore; replaying the log", err)
		return false
	}
	co.State, co.Next = st, snap.GetAsOf()
	co.Restored(snap.GetAsOf(), at)
	if bugRestoreSkipsTail {
		co.Next = at + 1 // planted: the commands in [as_of, at) are lost
	}
	return true
}
