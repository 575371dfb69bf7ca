package node

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// OffsetsTopic is the internal topic whose partitions host the consumer-group
// coordinators: each record is one groups command, and the leader of a
// group's partition is the group's coordinator.
const OffsetsTopic = "__strand_offsets"

// GroupsConfig configures the consumer-group coordinators. Zero fields take
// the defaults below.
type GroupsConfig struct {
	// OffsetsPartitions is the partition count __strand_offsets is created
	// with (default 8); groups map to partitions by GroupPartition.
	OffsetsPartitions int32
	// SessionTimeout: a member silent this long is removed (default 45 s).
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told to heartbeat at
	// (default 5 s).
	HeartbeatInterval time.Duration
	// OffsetsRetention: a group empty this long is forgotten, offsets
	// included (default 7 days).
	OffsetsRetention time.Duration
	// SnapshotEvery: a coordinator writes a snapshot of its state to its
	// log every this many commands (default 1000), so a new coordinator
	// replays only what follows the newest one.
	SnapshotEvery int
	// RebalanceTimeout: a member asked to revoke partitions that still
	// holds them this long is removed, so one stuck member cannot hold a
	// partition back from the group forever (default 5 min, Kafka's
	// max.poll.interval).
	RebalanceTimeout time.Duration
}

// Defaults of GroupsConfig.
const (
	OffsetsPartitionsDefault = 8
	SessionTimeoutDefault    = 45 * time.Second
	HeartbeatIntervalDefault = 5 * time.Second
	OffsetsRetentionDefault  = 7 * 24 * time.Hour
	RebalanceTimeoutDefault  = 5 * time.Minute
)

// Bounds of the coordinator's work.
const (
	// catchUpReadsMax bounds the log reads of one catch-up.
	catchUpReadsMax = 1 << 16
	// groupReadBytes is the read size of a catch-up.
	groupReadBytes = 4 << 20
	// sweepProposalsMax bounds the expiries one sweep proposes.
	sweepProposalsMax = 256
	// snapshotEveryDefault is GroupsConfig.SnapshotEvery's default.
	snapshotEveryDefault = 1000
)

// groupsConfig is Config.Groups with defaults filled in.
func (c *Core) groupsConfig() GroupsConfig {
	g := c.cfg.Groups
	if g.OffsetsPartitions <= 0 {
		g.OffsetsPartitions = OffsetsPartitionsDefault
	}
	if g.SessionTimeout <= 0 {
		g.SessionTimeout = SessionTimeoutDefault
	}
	if g.HeartbeatInterval <= 0 {
		g.HeartbeatInterval = HeartbeatIntervalDefault
	}
	if g.OffsetsRetention <= 0 {
		g.OffsetsRetention = OffsetsRetentionDefault
	}
	if g.SnapshotEvery <= 0 {
		g.SnapshotEvery = snapshotEveryDefault
	}
	if g.RebalanceTimeout <= 0 {
		g.RebalanceTimeout = RebalanceTimeoutDefault
	}
	return g
}

// GroupPartition is the __strand_offsets partition of a group: FNV-1a of the
// id modulo the partition count, stable across versions and nodes.
func GroupPartition(group string, partitions int32) int32 {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int32(h.Sum32() % uint32(max(partitions, 1)))
}

// coordHost is the Core's consumer-group side: one coordinator per
// __strand_offsets partition this node leads.
type coordHost struct {
	coords map[TopicPartition]*coordinator // lookup only; walked through Core.groups
	// creating: a CreateTopic of __strand_offsets is in flight.
	creating bool
	// lastSweep is the tick of the last liveness sweep.
	lastSweep uint64
}

// coordinator is the groups state of one __strand_offsets partition, as
// this node built it while leading in term. It is a view of the partition's
// log: commands apply when read back after they were applied to the
// partition, in log order, so every leader builds the same state.
type coordinator struct {
	tp      TopicPartition
	term    uint64
	topicID uint64
	state   *groups.State
	next    int64 // the next offset of the partition to apply
	// fresh: built in this term and not caught up yet; the first catch-up
	// starts from the newest snapshot in the log.
	fresh bool
	// sinceSnapshot counts the commands applied since the last snapshot
	// record (or since this coordinator started).
	sinceSnapshot int
	// restoredFrom is the offset of the snapshot this coordinator started
	// from, -1 when it replayed the log from its start.
	restoredFrom int64
	// waits are the requests waiting for their command, by request id.
	waits map[uint64]func(groupApplied) // lookup only
	// live is the tick of each member's last successful heartbeat, by
	// liveKey: leader-local, restarted on failover (see sweep).
	live map[string]uint64 // lookup only
	// revokingSince is the tick each member was first seen asked to
	// revoke, by liveKey (leader-local, like live).
	revokingSince map[string]uint64 // lookup only
	// inFlight marks expiries and cleanups proposed and not answered.
	inFlight map[string]bool // lookup only
	// heartbeating counts each member's heartbeats received and not yet
	// answered, by liveKey: the sweep expires no member with one in flight.
	heartbeating map[string]int // lookup only
}

// groupApplied is the outcome of one applied command.
type groupApplied struct {
	err error
	hb  groups.HeartbeatResult
	// deleted is an offset delete's result per partition asked.
	deleted []error
}

func liveKey(group, member string) string { return group + "\x00" + member }

// Errors of the coordinator side.
var (
	// ErrNotCoordinator: this node does not lead the group's partition.
	ErrNotCoordinator = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, "node: not the group's coordinator")
	// ErrCoordinatorNotAvailable: the internal topic is being created or
	// the group's partition has no leader yet.
	ErrCoordinatorNotAvailable = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, "node: group coordinator not available yet")
)

// groupError is err on the wire, by its sentinel's code, except that a
// group's partition led elsewhere or not hosted here means the coordinator
// moved: NOT_COORDINATOR, so the member finds it again.
func (c *Core) groupError(err error) *strandpb.Error {
	switch strandpb.CodeOf(err) {
	case strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION:
		return &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, Message: err.Error()}
	}
	return c.wireError(err, 0, nil)
}

// offsetsTopic returns the applied metadata's __strand_offsets, asking the
// metadata group to create it when it does not exist yet.
func (c *Core) offsetsTopic() (metadata.Topic, bool) {
	if t, ok := c.meta.meta.Topic(OffsetsTopic); ok {
		return t, true
	}
	if c.coord.creating {
		return metadata.Topic{}, false
	}
	if lead, _ := c.metaLeader(); lead == 0 {
		return metadata.Topic{}, false
	}
	rf := int32(max(1, min(replicationFactorDefault, c.clusterSize())))
	// The coordinators' state is the log itself: retention must never
	// delete it (a new coordinator replays it), whatever the defaults.
	keep := []metadata.ConfigEntry{{Name: metadata.ConfigRetentionMs, Value: "-1"}, {Name: metadata.ConfigRetentionBytes, Value: "-1"}}
	data, err := metadata.EncodeCreateTopic(OffsetsTopic, c.groupsConfig().OffsetsPartitions, rf, keep)
	if err != nil {
		panic(fmt.Sprintf("node: encode the create of %s: %v", OffsetsTopic, err))
	}
	c.coord.creating = true
	c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(metadata.Result, error) { c.coord.creating = false })
	return metadata.Topic{}, false
}

// coordinatorOf returns the replica and coordinator of group, if this
// node coordinates it.
func (c *Core) coordinatorOf(group string) (*group, *coordinator, error) {
	if group == "" || len(group) > groups.NameMax {
		return nil, nil, fmt.Errorf("%w: group id of %d bytes, want 1..%d", ErrInvalidRequest, len(group), groups.NameMax)
	}
	t, ok := c.offsetsTopic()
	if !ok {
		return nil, nil, ErrCoordinatorNotAvailable
	}
	tp := TopicPartition{Topic: OffsetsTopic, Partition: GroupPartition(group, t.Partitions())}
	g := c.byTP[tp]
	if g == nil || g.topicID != t.ID {
		return nil, nil, fmt.Errorf("%w: partition %d of %s has no replica here", ErrNotCoordinator, tp.Partition, OffsetsTopic)
	}
	co, err := c.coordinatorFor(g)
	return g, co, err
}

// coordinatorFor returns the coordinator of replica g while it leads, a
// fresh one (built from the log by the next catch-up) when its term moved.
func (c *Core) coordinatorFor(g *group) (*coordinator, error) {
	_, term, leading := g.leadership()
	if !leading {
		return nil, fmt.Errorf("%w: this node does not lead %s/%d", ErrNotCoordinator, g.tp.Topic, g.tp.Partition)
	}
	if c.coord.coords == nil {
		c.coord.coords = make(map[TopicPartition]*coordinator)
	}
	co := c.coord.coords[g.tp]
	if co == nil || co.term != term || co.topicID != g.topicID {
		if co != nil {
			co.failWaits()
		}
		co = &coordinator{
			tp: g.tp, term: term, topicID: g.topicID, state: groups.New(), next: g.part.LogStartOffset(), fresh: true, restoredFrom: -1,
			waits: make(map[uint64]func(groupApplied)), live: make(map[string]uint64), inFlight: make(map[string]bool),
			revokingSince: make(map[string]uint64), heartbeating: make(map[string]int),
		}
		c.bugCoordinatorFromEnd(g, co) // planted MoveRacesRebalance (simbugs builds only)
		c.coord.coords[g.tp] = co
	}
	return co, nil
}

// failWaits answers every wait of a replaced coordinator: their commands may
// still apply (maybe written), so ErrTimeout.
func (co *coordinator) failWaits() {
	ids := make([]uint64, 0, len(co.waits))
	for id := range co.waits {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w := co.waits[id]
		delete(co.waits, id)
		w(groupApplied{err: ErrLeadershipLost})
	}
}

// catchUp applies the partition's records from co.next up to the
// high-water mark to co.state, answering the waits of the commands met.
func (c *Core) catchUp(g *group, co *coordinator) error {
	if co.fresh {
		co.fresh = false
		c.restoreSnapshot(g, co)
	}
	for i := 0; co.next < g.part.HighWatermark(); i++ {
		if i >= catchUpReadsMax {
			return fmt.Errorf("%w: %s/%d: catch-up of the group log made no progress", ErrStorage, g.tp.Topic, g.tp.Partition)
		}
		res := c.read(g, FetchRequest{TopicPartition: g.tp, Offset: co.next, MaxBytes: groupReadBytes})
		if res.Err != nil {
			return res.Err
		}
		if len(res.Batches) == 0 {
			return fmt.Errorf("%w: %s/%d: no batch at offset %d below the high-water mark", ErrStorage, g.tp.Topic, g.tp.Partition, co.next)
		}
		for _, b := range res.Batches {
			it := recordbatch.NewIterator(b.Batch)
			for it.Next() {
				if off := b.BaseOffset + int64(it.Index()); off >= co.next {
					c.applyGroupRecord(g, co, it.Record().Value)
					co.next = off + 1
				}
			}
			if it.Err() != nil {
				return fmt.Errorf("%w: %s/%d batch at %d: %w", ErrStorage, g.tp.Topic, g.tp.Partition, b.BaseOffset, it.Err())
			}
		}
	}
	return nil
}

// applyGroupRecord applies one record's command and answers its wait. A
// record that is no command (written by a client that produced to the
// internal topic) is skipped, identically on every leader.
func (c *Core) applyGroupRecord(g *group, co *coordinator, value []byte) {
	var cmd strandpb.GroupCommand
	if err := proto.Unmarshal(value, &cmd); err != nil {
		g.logs.log(slog.LevelWarn, "skipping a record of the group log that is no command", slog.Any("err", err))
		return
	}
	res := applyGroupCommand(co.state, &cmd)
	if cmd.GetSnapshot() != nil {
		co.sinceSnapshot = 0
	} else {
		co.sinceSnapshot++
	}
	if w := co.waits[cmd.GetRequestId()]; w != nil {
		delete(co.waits, cmd.GetRequestId())
		w(res)
	}
}

// applyGroupCommand applies one command to s: pure.
func applyGroupCommand(s *groups.State, cmd *strandpb.GroupCommand) groupApplied {
	now := cmd.GetNowMs()
	switch b := cmd.GetBody().(type) {
	case *strandpb.GroupCommand_Heartbeat:
		hb := heartbeatFromWire(b.Heartbeat, now)
		r, err := s.Heartbeat(hb)
		return groupApplied{err: err, hb: r}
	case *strandpb.GroupCommand_Commit:
		return groupApplied{err: s.Commit(commitFromWire(b.Commit, now))}
	case *strandpb.GroupCommand_Expire:
		e := b.Expire
		if !s.Expire(e.GetGroup(), e.GetMemberId(), e.GetMemberEpoch(), now) {
			return groupApplied{err: groups.ErrUnknownMember}
		}
	case *strandpb.GroupCommand_DeleteGroup:
		return groupApplied{err: s.DeleteGroup(b.DeleteGroup)}
	case *strandpb.GroupCommand_DeleteOffsets:
		deleted, err := s.DeleteOffsets(b.DeleteOffsets.GetGroup(), partitionsFromWire(b.DeleteOffsets.GetPartitions()))
		return groupApplied{err: err, deleted: deleted}
	case *strandpb.GroupCommand_DeleteTopic:
		s.DeleteTopic(b.DeleteTopic)
	case *strandpb.GroupCommand_ExpireOffsetsRetentionMs:
		s.ExpireOffsets(now, b.ExpireOffsetsRetentionMs)
	case *strandpb.GroupCommand_TxnCommit:
		return groupApplied{err: s.TxnCommit(txnCommitFromWire(b.TxnCommit, now))}
	case *strandpb.GroupCommand_TxnMarker:
		return groupApplied{err: s.TxnMarker(txnMarkerFromWire(b.TxnMarker, now))}
	case *strandpb.GroupCommand_Snapshot:
		// Applied in order, the state already reflects it: only a new
		// coordinator starts from one (restoreSnapshot).
	default:
		return groupApplied{err: fmt.Errorf("%w: empty command", groups.ErrInvalid)}
	}
	return groupApplied{}
}

// proposeGroup appends cmd to g's log and calls done with its outcome once
// this coordinator applied it, or with the error that kept it from
// applying (ErrTimeout and ErrLeadershipLost: it may still apply).
func (c *Core) proposeGroup(g *group, co *coordinator, cmd *strandpb.GroupCommand, done func(groupApplied)) {
	id := c.rand.Uint64()
	for id == 0 || co.waits[id] != nil {
		id = c.rand.Uint64()
	}
	now := c.cfg.Clock.Realtime().UnixMilli()
	cmd.RequestId, cmd.NowMs = id, now
	value, err := proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
	if err != nil {
		panic(fmt.Sprintf("node: marshal a group command: %v", err))
	}
	batch, err := recordbatch.Encode(nil, []recordbatch.Record{{TimestampMs: now, Value: value}})
	if err != nil {
		done(groupApplied{err: fmt.Errorf("%w: %w", ErrInvalidRequest, err)})
		return
	}
	co.waits[id] = done
	c.produce(ProduceRequest{TopicPartition: g.tp, Acks: AcksAll, ProducerID: -1, Batch: batch}, func(res ProduceResult) {
		w := co.waits[id]
		if w == nil {
			return // answered by a catch-up or a replacement
		}
		if res.Err == nil && c.coord.coords[g.tp] == co {
			if err := c.catchUp(g, co); err != nil {
				// Committed, so it applies whatever this read says: the
				// outcome is unknown here, never a refusal (a member told
				// "unavailable" takes its commit as not made).
				res.Err = fmt.Errorf("%w: committed, then reading the group log back failed: %v", ErrTimeout, err)
			}
		}
		if w = co.waits[id]; w == nil {
			return
		}
		delete(co.waits, id)
		if res.Err == nil {
			res.Err = ErrLeadershipLost // applied, but this coordinator was replaced before reading it back
		}
		w(groupApplied{err: res.Err})
	})
}

// restoreSnapshot starts a new coordinator from the newest snapshot record
// of its partition: it reads back from the high-water mark (at most four
// snapshot intervals of records) and, when it finds one whose as_of is still in
// the log, restores it and continues from as_of (the records between as_of
// and the snapshot are applied again; they were not in it). Without one,
// the coordinator replays the partition from its log start.
func (c *Core) restoreSnapshot(g *group, co *coordinator) {
	logStart, scanMax := g.part.LogStartOffset(), 4*c.groupsConfig().SnapshotEvery
	at, scanned := g.part.HighWatermark()-1, 0
	for at >= logStart && scanned < scanMax {
		res := c.read(g, FetchRequest{TopicPartition: g.tp, Offset: at, MaxBytes: 1})
		if res.Err != nil || len(res.Batches) == 0 {
			return
		}
		b := res.Batches[0]
		var values [][]byte
		it := recordbatch.NewIterator(b.Batch)
		for it.Next() && b.BaseOffset+int64(it.Index()) <= at {
			values = append(values, it.Record().Value)
		}
		for i := len(values) - 1; i >= 0; i-- {
			scanned++
			var cmd strandpb.GroupCommand
			if proto.Unmarshal(values[i], &cmd) != nil || cmd.GetSnapshot() == nil {
				continue
			}
			snap := cmd.GetSnapshot()
			if snap.GetAsOf() < logStart || snap.GetAsOf() > b.BaseOffset+int64(i) {
				return // its tail is gone (or it is not one): replay from the log start
			}
			st, err := groups.Restore(snap)
			if err != nil {
				g.logs.log(slog.LevelWarn, "group snapshot does not restore; replaying the log", slog.Any("err", err))
				return
			}
			co.state, co.next, co.restoredFrom = st, snap.GetAsOf(), b.BaseOffset+int64(i)
			return
		}
		at = b.BaseOffset - 1
	}
}
