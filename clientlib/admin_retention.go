package clientlib

import (
	"context"
	"sort"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// AlterTopicConfig sets and resets (deletes: back to the default) keys of a
// topic's configuration through the metadata group, all or none, and
// returns the whole configuration as applied.
func (c *Client) AlterTopicConfig(ctx context.Context, name string, sets map[string]string, deletes []string) (map[string]string, error) {
	t := &strandpb.AlterConfigsRequest_Topic{Name: name, Deletes: deletes}
	keys := make([]string, 0, len(sets))
	for k := range sets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Sets = append(t.Sets, &strandpb.ConfigEntry{Name: k, Value: sets[k]})
	}
	req := &strandpb.Request{Body: &strandpb.Request_AlterConfigs{AlterConfigs: &strandpb.AlterConfigsRequest{
		Topics: []*strandpb.AlterConfigsRequest_Topic{t}, TimeoutMs: int32(c.cfg.requestTimeout.Milliseconds())}}}
	var applied map[string]string
	var unsure bool
	err := c.withRetriesUnsure(ctx, &unsure, func() error {
		resp, err := c.controllerRequest(ctx, req, &unsure)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return err
		}
		for _, r := range resp.GetAlterConfigs().GetTopics() {
			if r.GetName() != name {
				continue
			}
			if err := errorFromWire(r.GetError()); err != nil {
				return err
			}
			applied = map[string]string{}
			for _, e := range r.GetConfigs() {
				applied[e.GetName()] = e.GetValue()
			}
			return nil
		}
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "answer lacks topic " + name}
	})
	return applied, err
}

// DeleteRecords deletes every record of one partition below before (-1:
// below the high-water mark), Kafka's DeleteRecords: the partition's leader
// proposes the new log start and answers once it is applied. It returns the
// log start after the call; an offset past the high-water mark fails with
// an error matching ErrOffsetOutOfRange.
func (c *Client) DeleteRecords(ctx context.Context, topic string, partition int32, before int64) (int64, error) {
	if err := c.checkPartition(ctx, topic, partition); err != nil {
		return -1, err
	}
	logStart := int64(-1)
	err := c.withRetries(ctx, func() error {
		node, _, ok := c.leader(topic, partition)
		if !ok {
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, Message: "no leader known"}
		}
		req := &strandpb.DeleteRecordsRequest{TimeoutMs: int32(c.cfg.requestTimeout.Milliseconds()),
			Partitions: []*strandpb.DeleteRecordsRequest_Partition{{Topic: topic, Partition: partition, BeforeOffset: before}}}
		resp, err := c.requestNode(ctx, node, &strandpb.Request{Body: &strandpb.Request_DeleteRecords{DeleteRecords: req}}, 0)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return err
		}
		for _, a := range resp.GetDeleteRecords().GetPartitions() {
			if a.GetTopic() == topic && a.GetPartition() == partition {
				if err := errorFromWire(a.GetError()); err != nil {
					c.applyNotLeader(topic, partition, err)
					return err
				}
				logStart = a.GetLogStartOffset()
				return nil
			}
		}
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "answer lacks the partition"}
	})
	return logStart, err
}

// PartitionLog is a partition leader's view of its log.
type PartitionLog struct {
	Topic          string
	Partition      int32
	LogStartOffset int64
	HighWatermark  int64
	// SizeBytes is the size of the leader's raft log segments; Segments
	// their number.
	SizeBytes int64
	Segments  int32
	// OldestTimestampMs is the newest record timestamp of the oldest
	// retained batch, what retention.ms ages (-1: the log is empty).
	OldestTimestampMs int64
	// MoveTarget is the target of a move in progress (nil: none) and
	// MoveProgress how far each replica it adds caught up.
	MoveTarget   []uint64
	MoveProgress []MoveProgress
	// LaggingReplicas are the followers the leader sees out of step:
	// probing, more than 256 entries behind, or on a node silent for three
	// election timeouts (under-replicated when not empty).
	LaggingReplicas []uint64
	// Compaction is the leader's compaction state; nil when the topic
	// does not compact and never did.
	Compaction *PartitionCompaction
	// Tier is the leader's two tiers; nil when the topic is not tiered
	// (remote.storage.enable) on the leader's node.
	Tier *PartitionTier
	Err  error
}

// PartitionTier is a partition leader's two tiers (issue 27): LocalBytes
// its raft log on disk, RemoteBytes and RemoteSegments the objects the
// replicated manifest lists, [RemoteStart, RemoteEnd) the remote log's
// offsets (both -1 while nothing was uploaded), and the upload lag:
// UploadLagBytes of local segments holding records not yet remote (the
// active segment among them), UploadLag the age of the oldest such record.
type PartitionTier struct {
	LocalBytes             int64
	RemoteBytes            int64
	RemoteSegments         int32
	RemoteStart, RemoteEnd int64
	UploadLagBytes         int64
	UploadLag              time.Duration
}

func tierFromWire(w *strandpb.PartitionTier) *PartitionTier {
	if w == nil {
		return nil
	}
	return &PartitionTier{LocalBytes: w.GetLocalBytes(), RemoteBytes: w.GetRemoteBytes(), RemoteSegments: w.GetRemoteSegments(),
		RemoteStart: w.GetRemoteStart(), RemoteEnd: w.GetRemoteEnd(), UploadLagBytes: w.GetUploadLagBytes(),
		UploadLag: time.Duration(w.GetUploadLagMs()) * time.Millisecond}
}

// PartitionCompaction is a partition leader's compaction state (issue 24).
type PartitionCompaction struct {
	// Compacts: the topic's cleanup.policy includes compact.
	Compacts bool
	// Decided is the last compaction decision's generation (0: none),
	// taken at DecidedTimeMs over the offsets below CleanableEnd.
	Decided       uint64
	DecidedTimeMs int64
	CleanableEnd  int64
	// Done is the last generation a replica reported compacted and
	// CleanedTo its prefix's end: below it, only each key's latest record.
	Done      uint64
	CleanedTo int64
	// PrefixGeneration, PrefixEnd and PrefixBytes are the leader's own
	// compacted prefix (PrefixBytes: what its last pass wrote);
	// DirtyBytes the raft log's bytes past it, what the next pass reads.
	PrefixGeneration uint64
	PrefixEnd        int64
	PrefixBytes      int64
	DirtyBytes       int64
	// Stuck says why the leader runs no pass ("" when it can).
	Stuck string
	// LastPassBytesIn, LastPassBytesOut and LastPassDuration are the
	// leader's last pass (since it opened): the bytes it read and wrote and
	// how long it took, from gathering its input to its switch (all 0:
	// none).
	LastPassBytesIn  int64
	LastPassBytesOut int64
	LastPassDuration time.Duration
}

// DirtyRatio is DirtyBytes / (PrefixBytes + DirtyBytes), what
// min.cleanable.dirty.ratio is compared with (0 when both are 0).
func (pc PartitionCompaction) DirtyRatio() float64 {
	total := pc.PrefixBytes + pc.DirtyBytes
	if total <= 0 {
		return 0
	}
	return float64(pc.DirtyBytes) / float64(total)
}

func compactionFromWire(w *strandpb.PartitionCompaction) *PartitionCompaction {
	if w == nil {
		return nil
	}
	return &PartitionCompaction{Compacts: w.GetCompacts(), Decided: w.GetDecided(), DecidedTimeMs: w.GetDecidedTimeMs(),
		CleanableEnd: w.GetCleanableEnd(), Done: w.GetDone(), CleanedTo: w.GetCleanedTo(),
		PrefixGeneration: w.GetPrefixGeneration(), PrefixEnd: w.GetPrefixEnd(), PrefixBytes: w.GetPrefixBytes(),
		DirtyBytes: w.GetDirtyBytes(), Stuck: w.GetStuck(),
		LastPassBytesIn: w.GetLastPassBytesIn(), LastPassBytesOut: w.GetLastPassBytesOut(),
		LastPassDuration: time.Duration(w.GetLastPassDurationMs()) * time.Millisecond}
}

// DescribePartitionLogs asks each partition's leader for the state of its
// log; per-partition failures are in Err.
func (c *Client) DescribePartitionLogs(ctx context.Context, topic string, partitions []int32) ([]PartitionLog, error) {
	out := make([]PartitionLog, 0, len(partitions))
	for _, p := range partitions {
		pl, err := c.describePartitionLog(ctx, topic, p)
		if err != nil {
			pl = PartitionLog{Topic: topic, Partition: p, Err: err}
		}
		out = append(out, pl)
	}
	return out, nil
}

// describePartitionLog asks one partition's leader, retrying leader changes.
func (c *Client) describePartitionLog(ctx context.Context, topic string, partition int32) (PartitionLog, error) {
	var pl PartitionLog
	if err := c.checkPartition(ctx, topic, partition); err != nil {
		return pl, err
	}
	err := c.withRetries(ctx, func() error {
		node, _, ok := c.leader(topic, partition)
		if !ok {
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, Message: "no leader known"}
		}
		req := &strandpb.DescribePartitionsRequest{Partitions: []*strandpb.DescribePartitionsRequest_Partition{{Topic: topic, Partition: partition}}}
		resp, err := c.requestNode(ctx, node, &strandpb.Request{Body: &strandpb.Request_DescribePartitions{DescribePartitions: req}}, 0)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return err
		}
		for _, a := range resp.GetDescribePartitions().GetPartitions() {
			if a.GetTopic() == topic && a.GetPartition() == partition {
				if err := errorFromWire(a.GetError()); err != nil {
					c.applyNotLeader(topic, partition, err)
					return err
				}
				pl = PartitionLog{Topic: topic, Partition: partition, LogStartOffset: a.GetLogStartOffset(),
					HighWatermark: a.GetHighWatermark(), SizeBytes: a.GetSizeBytes(), Segments: a.GetSegments(),
					OldestTimestampMs: a.GetOldestTimestampMs(), MoveTarget: a.GetMoveTarget(),
					MoveProgress: moveProgressFromWire(a.GetMoveProgress()), LaggingReplicas: a.GetLaggingReplicas(),
					Compaction: compactionFromWire(a.GetCompaction()), Tier: tierFromWire(a.GetTier())}
				return nil
			}
		}
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "answer lacks the partition"}
	})
	return pl, err
}
