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
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// OffsetsTopic is the internal topic whose partitions host the consumer-group
// coordinators (package groupsvc).
const OffsetsTopic = groupsvc.OffsetsTopic

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
	// OffsetsTopicConfig are topic configs __strand_offsets is created
	// with beyond its own (offsetsTopicConfig: compact, never trimmed):
	// segment.bytes, segment.ms, min.cleanable.dirty.ratio and the like.
	OffsetsTopicConfig []metadata.ConfigEntry
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
	coords map[TopicPartition]*groupsvc.Coordinator // lookup only; walked through Core.groups
	// creating: a CreateTopic of __strand_offsets is in flight.
	creating bool
	// lastSweep is the tick of the last liveness sweep.
	lastSweep uint64
}

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
	data, err := metadata.EncodeCreateTopic(OffsetsTopic, c.groupsConfig().OffsetsPartitions, rf, coordinatorTopicConfig(c.cfg.Groups.OffsetsTopicConfig))
	if err != nil {
		panic(fmt.Sprintf("node: encode the create of %s: %v", OffsetsTopic, err))
	}
	c.coord.creating = true
	c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(metadata.Result, error) { c.coord.creating = false })
	return metadata.Topic{}, false
}

// coordinatorTopicConfig is what __strand_offsets and __strand_transactions
// are created with: compacted (groupsvc/doc.go, "A compacted log"), its tombstones gone at the pass
// after the one that sees them (no restore reads one), segments of 16 MiB
// or an hour (so the head a pass cannot clean stays small), never trimmed by
// retention (the coordinators' state is the log itself, whatever the
// defaults), then extra (GroupsConfig.OffsetsTopicConfig,
// TxnConfig.TopicConfig), which may override any but the policy and
// retention.
func coordinatorTopicConfig(extra []metadata.ConfigEntry) []metadata.ConfigEntry {
	cfg := []metadata.ConfigEntry{
		{Name: metadata.ConfigCleanupPolicy, Value: "compact"},
		{Name: metadata.ConfigDeleteRetentionMs, Value: "0"},
		// A pass never cleans the active segment: these bound the
		// uncleaned head (Kafka's offsets.topic.segment.bytes is 100 MiB,
		// which 100,000 commits never fill, so nothing would compact).
		{Name: metadata.ConfigSegmentBytes, Value: "16777216"},
		{Name: metadata.ConfigSegmentMs, Value: "3600000"},
		{Name: metadata.ConfigRetentionMs, Value: "-1"},
		{Name: metadata.ConfigRetentionBytes, Value: "-1"},
	}
	for _, e := range extra {
		switch e.Name {
		case metadata.ConfigCleanupPolicy, metadata.ConfigRetentionMs, metadata.ConfigRetentionBytes:
			continue
		}
		if i := slices.IndexFunc(cfg, func(c metadata.ConfigEntry) bool { return c.Name == e.Name }); i >= 0 {
			cfg[i] = e
		} else {
			cfg = append(cfg, e)
		}
	}
	return cfg
}

// coordinatorOf returns the replica and coordinator of group, if this
// node coordinates it.
func (c *Core) coordinatorOf(group string) (*group, *groupsvc.Coordinator, error) {
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
func (c *Core) coordinatorFor(g *group) (*groupsvc.Coordinator, error) {
	_, term, leading := g.leadership()
	if !leading {
		return nil, fmt.Errorf("%w: this node does not lead %s/%d", ErrNotCoordinator, g.tp.Topic, g.tp.Partition)
	}
	if c.coord.coords == nil {
		c.coord.coords = make(map[TopicPartition]*groupsvc.Coordinator)
	}
	co := c.coord.coords[g.tp]
	if co == nil || co.Term != term || co.TopicID != g.topicID {
		if co != nil {
			co.FailWaits(ErrLeadershipLost) // their commands may still apply (maybe written)
		}
		co = groupsvc.New(term, g.topicID, g.part.LogStartOffset())
		c.bugCoordinatorFromEnd(g, co) // planted MoveRacesRebalance (simbugs builds only)
		c.coord.coords[g.tp] = co
	}
	return co, nil
}

// catchUp brings co up to g's high-water mark (groupsvc.Coordinator.CatchUp
// over coordinatorLog).
// A fresh coordinator's state is shown to Config.CoordinatorRestored.
func (c *Core) catchUp(g *group, co *groupsvc.Coordinator) error {
	fresh := co.Fresh
	if err := co.CatchUp(coordinatorLog{c: c, g: g}, c.groupsConfig().SnapshotEvery); err != nil {
		return err
	}
	if fresh && c.cfg.CoordinatorRestored != nil {
		c.cfg.CoordinatorRestored(g.tp, g.topicID, co.Next, co.State.Snapshot(co.Next))
	}
	return nil
}

// coordinatorLog is a coordinator's read of its replica g of
// __strand_offsets or __strand_transactions (groupsvc.Log).
type coordinatorLog struct {
	c *Core
	g *group
	// probe: a checker's throwaway restore (probeRestore), which must not
	// spend the fetch read budget clients' fetches are served from.
	probe bool
}

func (l coordinatorLog) LogStartOffset() int64 { return l.g.part.LogStartOffset() }
func (l coordinatorLog) HighWatermark() int64  { return l.g.part.HighWatermark() }

func (l coordinatorLog) Read(offset int64, maxBytes int32) ([]groupsvc.Batch, error) {
	req := FetchRequest{TopicPartition: l.g.tp, Offset: offset, MaxBytes: maxBytes}
	var res FetchResult
	if l.probe {
		res = l.c.readNow(l.g, req, nil)
	} else {
		res = l.c.read(l.g, req)
	}
	if res.Err != nil {
		return nil, res.Err
	}
	out := make([]groupsvc.Batch, len(res.Batches))
	for i, b := range res.Batches {
		out[i] = groupsvc.Batch{BaseOffset: b.BaseOffset, Data: b.Batch}
	}
	return out, nil
}

// Damaged is ErrStorage naming the partition, then what.
func (l coordinatorLog) Damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s/%d"+format, append([]any{ErrStorage, l.g.tp.Topic, l.g.tp.Partition}, args...)...)
}

func (l coordinatorLog) Warn(msg string, err error) {
	l.g.logs.log(slog.LevelWarn, msg, slog.Any("err", err))
}

// proposeGroup appends cmd to g's log and calls done with its outcome once
// this coordinator applied it, or with the error that kept it from
// applying (ErrTimeout and ErrLeadershipLost: it may still apply).
func (c *Core) proposeGroup(g *group, co *groupsvc.Coordinator, cmd *strandpb.GroupCommand, done func(groupsvc.Applied)) {
	id := c.rand.Uint64()
	for id == 0 || co.Waiting(id) {
		id = c.rand.Uint64()
	}
	now := c.cfg.Clock.Realtime().UnixMilli()
	cmd.RequestId, cmd.NowMs = id, now
	value, err := proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
	if err != nil {
		panic(fmt.Sprintf("node: marshal a group command: %v", err))
	}
	batch, err := recordbatch.Encode(nil, co.Records(cmd, value, now))
	if err != nil {
		done(groupsvc.Applied{Err: fmt.Errorf("%w: %w", ErrInvalidRequest, err)})
		return
	}
	co.Wait(id, done)
	c.produce(ProduceRequest{TopicPartition: g.tp, Acks: AcksAll, ProducerID: -1, Batch: batch}, func(res ProduceResult) {
		if !co.Waiting(id) {
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
		w := co.TakeWait(id)
		if w == nil {
			return
		}
		if res.Err == nil {
			res.Err = ErrLeadershipLost // applied, but this coordinator was replaced before reading it back
		}
		w(groupsvc.Applied{Err: res.Err})
	})
}
