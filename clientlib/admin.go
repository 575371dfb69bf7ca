package clientlib

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// Node is one cluster node.
type Node struct {
	ID      uint64
	Address string
	Rack    string
	// DiskFull: the node answering said its own disk is below its
	// free-space floor (it refuses produce). Only the answering node's
	// entry can say so.
	DiskFull bool
	// DiskStalled: the node answering said a storage job of its own disk
	// has hung past its stall threshold (it leads nothing and refuses
	// produce). Only the answering node's entry can say so.
	DiskStalled bool
}

// PartitionInfo is one partition's leadership, as Metadata reports it.
type PartitionInfo struct {
	Partition  int32
	LeaderID   uint64 // 0: no leader known
	LeaderTerm uint64
	Replicas   []uint64
	// TargetReplicas is the target of a move in progress (nil: none).
	TargetReplicas []uint64
	Err            strandpb.ErrorCode
}

// TopicMetadata is one topic's partitions and leaders.
type TopicMetadata struct {
	Name string
	// ID is the topic's id (16 bytes; nil when the node names none).
	ID         []byte
	Partitions []PartitionInfo
	Err        error
}

// ClusterInfo is a metadata answer: nodes, the metadata group's leader, and
// topics with their partitions' leaders and replicas, all sorted.
type ClusterInfo struct {
	// ClusterID is the cluster's id (16 bytes; nil when unknown).
	ClusterID    []byte
	Nodes        []Node
	ControllerID uint64
	Topics       []TopicMetadata
}

// TopicDetail is one topic's settings.
type TopicDetail struct {
	Name              string
	Partitions        int32
	ReplicationFactor int32
	Configs           map[string]string
	// NodeCaps holds, per config key, the value the answering node
	// enforces instead of Configs' when a node-wide cap is lower (strand
	// dev caps segment.bytes and segment.ms); keys it enforces as set are
	// absent.
	NodeCaps map[string]string
	Err      error
}

// ListedOffset is one partition's answer to ListOffsets.
type ListedOffset struct {
	Topic          string
	Partition      int32
	Offset         int64
	HighWatermark  int64
	LogStartOffset int64
	Err            error
}

// withRetries runs fn until it succeeds, fails with a non-retriable
// error, runs out of MaxRetries, or ctx ends; retriable failures refresh
// metadata when ClassifyErr says so and back off.
func (c *Client) withRetries(ctx context.Context, fn func() error) error {
	return c.withRetriesPaced(ctx, func(attempt int, _ error) time.Duration { return c.backoffDelay(attempt) }, nil, fn)
}

// withRetriesUnsure is withRetries for a call that changes state: unsure
// is the call's one record that an attempt may have been applied, which
// fn hands to controllerRequest and anyRequestUnsure (a node that took
// the request and did not answer before another node did) and reads
// itself (a per-item answer, MovePartitions'); see withRetriesPaced.
func (c *Client) withRetriesUnsure(ctx context.Context, unsure *bool, fn func() error) error {
	return c.withRetriesPaced(ctx, func(attempt int, _ error) time.Duration { return c.backoffDelay(attempt) }, unsure, fn)
}

// withRetriesPaced is withRetries waiting delay(attempt, err) before each
// retry.
//
// An attempt whose outcome is unknown (its answer lost: it may have been
// applied) is not forgotten when a later one fails definitely: the call
// then fails with a *RetriesExhaustedError that is MaybeWritten, wrapping
// the last error. Before, only the last attempt's error came back, and a
// DeleteGroup whose first attempt deleted the group failed "definitely"
// when its retry's connection was refused authentication
// (TestSimMoves seed 2: the operator's read-back found the offsets gone).
// The record is *unsure when unsure is not nil (withRetriesUnsure): an
// attempt that asked one node, lost its answer and was then answered by
// another node counts too (before, controllerRequest and anyRequest gave
// the last node's answer alone, and a CreateTopic applied by a node that
// then went silent failed "topic exists", definitely).
func (c *Client) withRetriesPaced(ctx context.Context, delay func(attempt int, err error) time.Duration, unsure *bool,
	fn func() error) error {
	if unsure == nil {
		unsure = new(bool)
	}
	var err error
	for attempt := 1; ; attempt++ {
		err = fn()
		if err != nil && (ClassifyErr(err).MaybeWritten || MaybeWritten(err)) {
			*unsure = true
		}
		if err == nil || !IsRetriable(err) || attempt > c.cfg.retriesMax || ctx.Err() != nil {
			return maybeApplied(err, *unsure, attempt)
		}
		if ClassifyErr(err).RefreshMetadata {
			c.RefreshMetadata(ctx)
		}
		if !c.sleep(ctx, delay(attempt, err)) {
			return maybeApplied(err, *unsure, attempt)
		}
	}
}

// maybeApplied is err, the last of attempts, as the call's error: a
// *RetriesExhaustedError that is MaybeWritten when unsure (an attempt may
// have been applied) and err does not say so itself.
func maybeApplied(err error, unsure bool, attempts int) error {
	if err != nil && unsure && !ClassifyErr(err).MaybeWritten && !MaybeWritten(err) {
		return &RetriesExhaustedError{Attempts: attempts, MaybeWritten: true, Err: err}
	}
	return err
}

// controllerRequest sends req to the metadata group's leader when known,
// else (and when the leader fails) to every node in turn, as anyRequest,
// which forwards it. When unsure is not nil it is set if a node's attempt
// failed with its outcome unknown (it may have been applied) before
// another node answered: the answer or error returned is the last
// node's, which cannot say so (withRetriesUnsure).
func (c *Client) controllerRequest(ctx context.Context, req *strandpb.Request, unsure *bool) (*strandpb.Response, error) {
	c.mu.Lock()
	id := c.meta.ControllerID()
	addr, ok := c.meta.Address(id)
	c.mu.Unlock()
	if id != 0 && ok {
		resp, err := c.request(ctx, addr, req, 0)
		if err == nil {
			return resp, nil
		}
		noteUnsure(unsure, err)
	}
	resp, _, err := c.anyRequestUnsure(ctx, req, "", unsure)
	return resp, err
}

// noteUnsure sets *unsure (when unsure is not nil) if err leaves its
// attempt's outcome unknown: the request may have been applied.
func noteUnsure(unsure *bool, err error) {
	if unsure != nil && ClassifyErr(err).MaybeWritten && !bugUnsureForgotten() {
		*unsure = true
	}
}

// Metadata fetches the cluster's nodes, topics and leaders.
func (c *Client) Metadata(ctx context.Context) (ClusterInfo, error) {
	var resp *strandpb.Response
	var addr string
	err := c.withRetries(ctx, func() error {
		var err error
		resp, addr, err = c.anyRequestAt(ctx, &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		return err
	})
	if err != nil {
		return ClusterInfo{}, err
	}
	m := resp.GetMetadata()
	c.mu.Lock()
	err = c.checkClusterLocked(m.GetClusterId(), addr)
	if err == nil {
		c.meta.ApplyMetadata(m)
	}
	c.mu.Unlock()
	if err != nil {
		return ClusterInfo{}, err
	}
	info := ClusterInfo{ClusterID: m.GetClusterId(), ControllerID: m.GetControllerId()}
	for _, n := range m.GetNodes() {
		info.Nodes = append(info.Nodes, Node{ID: n.GetId(), Address: n.GetAddress(), Rack: n.GetRack(), DiskFull: n.GetDiskFull(),
			DiskStalled: n.GetDiskStalled()})
	}
	sort.Slice(info.Nodes, func(i, j int) bool { return info.Nodes[i].ID < info.Nodes[j].ID })
	for _, t := range m.GetTopics() {
		tm := TopicMetadata{Name: t.GetName(), ID: t.GetTopicId(), Err: errorFromWire(t.GetError())}
		for _, p := range t.GetPartitions() {
			tm.Partitions = append(tm.Partitions, PartitionInfo{Partition: p.GetPartition(), LeaderID: p.GetLeaderId(),
				LeaderTerm: p.GetLeaderTerm(), Replicas: p.GetReplicas(), TargetReplicas: p.GetTargetReplicas(),
				Err: p.GetError().GetCode()})
		}
		sort.Slice(tm.Partitions, func(i, j int) bool { return tm.Partitions[i].Partition < tm.Partitions[j].Partition })
		info.Topics = append(info.Topics, tm)
	}
	sort.Slice(info.Topics, func(i, j int) bool { return info.Topics[i].Name < info.Topics[j].Name })
	return info, nil
}

// ListTopics lists the names of every topic, sorted.
func (c *Client) ListTopics(ctx context.Context) ([]string, error) {
	info, err := c.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range info.Topics {
		if t.Err == nil {
			names = append(names, t.Name)
		}
	}
	return names, nil
}

// CreateTopic creates a topic through the metadata group and refreshes
// metadata. A retried create whose first attempt succeeded unseen fails
// with ErrTopicExists; callers that retry on their own should accept it.
func (c *Client) CreateTopic(ctx context.Context, name string, partitions, replicationFactor int32, configs map[string]string) error {
	t := &strandpb.CreateTopicsRequest_Topic{Name: name, Partitions: partitions, ReplicationFactor: replicationFactor}
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Configs = append(t.Configs, &strandpb.ConfigEntry{Name: k, Value: configs[k]})
	}
	req := &strandpb.CreateTopicsRequest{Topics: []*strandpb.CreateTopicsRequest_Topic{t},
		TimeoutMs: int32(c.cfg.requestTimeout.Milliseconds())}
	return c.topicAdmin(ctx, name, &strandpb.Request{Body: &strandpb.Request_CreateTopics{CreateTopics: req}},
		func(resp *strandpb.Response) []*strandpb.TopicResult { return resp.GetCreateTopics().GetTopics() }, nil)
}

// topicAdmin sends a create or delete of topic name to the metadata
// group's leader with retries, picks name's result out of the answer, and
// refreshes metadata after a success. mapErr, when set, turns name's
// result error into the one returned (and retried when retriable).
func (c *Client) topicAdmin(ctx context.Context, name string, req *strandpb.Request,
	results func(*strandpb.Response) []*strandpb.TopicResult, mapErr func(error) error) error {
	var unsure bool
	err := c.withRetriesUnsure(ctx, &unsure, func() error {
		resp, err := c.controllerRequest(ctx, req, &unsure)
		if err != nil {
			return err
		}
		if err := errorFromWire(resp.GetError()); err != nil {
			return err
		}
		for _, r := range results(resp) {
			if r.GetName() == name {
				err := errorFromWire(r.GetError())
				if err != nil && mapErr != nil {
					err = mapErr(err)
				}
				return err
			}
		}
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "answer lacks topic " + name}
	})
	if err == nil {
		c.RefreshMetadata(ctx)
	}
	return err
}

// DeleteTopic deletes a topic through the metadata group. When the
// client's metadata knows the topic's id, the delete names it, and the
// metadata group deletes the topic only while it has that id: a retry of
// a delete whose first attempt went through unseen cannot delete a topic
// created again under the name since. A topic that now has another id (it
// was deleted and re-created since this client's metadata saw it) is not
// deleted: DeleteTopic fails with a *TopicIDChangedError (matching
// ErrUnknownTopicID). A topic the client never saw is deleted by name.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	req := &strandpb.DeleteTopicsRequest{Names: []string{name}, TimeoutMs: int32(c.cfg.requestTimeout.Milliseconds())}
	id := bytes.Clone(c.topicID(name))
	if len(id) > 0 {
		req.TopicIds = [][]byte{id}
	}
	return c.topicAdmin(ctx, name, &strandpb.Request{Body: &strandpb.Request_DeleteTopics{DeleteTopics: req}},
		func(resp *strandpb.Response) []*strandpb.TopicResult { return resp.GetDeleteTopics().GetTopics() },
		func(err error) error {
			if len(id) == 0 || !errors.Is(err, ErrUnknownTopicID) {
				return err
			}
			// Best effort: name the id the topic has now.
			_ = c.refreshTopic(ctx, name)
			var now []byte
			if t := c.cachedTopic(name); t != nil && !bytes.Equal(t.ID, id) {
				now = bytes.Clone(t.ID)
			}
			return &TopicIDChangedError{Topic: name, ID: id, NewID: now, Err: err}
		})
}

// DescribeTopics gives the named topics' settings (none named: every
// topic), in the order asked (by name when none is named). A missing topic
// has Err matching ErrUnknownTopic.
func (c *Client) DescribeTopics(ctx context.Context, names ...string) ([]TopicDetail, error) {
	var resp *strandpb.Response
	err := c.withRetries(ctx, func() error {
		var err error
		resp, err = c.anyRequest(ctx, &strandpb.Request{Body: &strandpb.Request_DescribeTopics{
			DescribeTopics: &strandpb.DescribeTopicsRequest{Names: names}}})
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []TopicDetail
	for _, t := range resp.GetDescribeTopics().GetTopics() {
		d := TopicDetail{Name: t.GetName(), Partitions: t.GetPartitions(), ReplicationFactor: t.GetReplicationFactor(),
			Configs: map[string]string{}, Err: errorFromWire(t.GetError())}
		for _, e := range t.GetConfigs() {
			d.Configs[e.GetName()] = e.GetValue()
			if e.GetNodeCap() != "" {
				if d.NodeCaps == nil {
					d.NodeCaps = map[string]string{}
				}
				d.NodeCaps[e.GetName()] = e.GetNodeCap()
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// ListOffsets asks each partition's leader for an offset: OffsetEarliest
// (the log start), OffsetLatest (the high-water mark), OffsetLastStable
// (the last stable offset, where read_committed reads end) or OffsetAtTimestamp
// (the first record at or after it); OffsetExact is returned as given.
// partitions nil means every partition of topic. Each answer carries the
// high-water mark and log start; per-partition failures are in Err.
func (c *Client) ListOffsets(ctx context.Context, topic string, partitions []int32, at Offset) ([]ListedOffset, error) {
	if err := c.ensureMetadata(ctx); err != nil {
		return nil, err
	}
	if partitions == nil {
		c.mu.Lock()
		info := c.meta.Topic(topic)
		c.mu.Unlock()
		if info == nil || len(info.Partitions) == 0 {
			return nil, &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, Message: "topic " + topic}
		}
		for p := range info.Partitions {
			partitions = append(partitions, int32(p))
		}
	}
	out := make([]ListedOffset, 0, len(partitions))
	for _, p := range partitions {
		lo, err := c.listOffset(ctx, topic, p, at)
		if err != nil {
			lo = ListedOffset{Topic: topic, Partition: p, Err: err}
		}
		if err == nil && at.kind == offsetExact {
			lo.Offset = at.at
		}
		out = append(out, lo)
	}
	return out, nil
}

// listOffset asks one partition's leader, retrying leader changes. A
// partition that does not exist fails at once (checkPartition).
func (c *Client) listOffset(ctx context.Context, topic string, partition int32, at Offset) (ListedOffset, error) {
	return c.listOffsetID(ctx, topic, partition, at, nil)
}

// listOffsetID is listOffset naming the topic id the caller resolved (nil:
// unchecked); another id fails with UNKNOWN_TOPIC_ID.
func (c *Client) listOffsetID(ctx context.Context, topic string, partition int32, at Offset, topicID []byte) (ListedOffset, error) {
	var lo ListedOffset
	if err := c.checkPartition(ctx, topic, partition); err != nil {
		return lo, err
	}
	err := c.withRetries(ctx, func() error {
		node, _, ok := c.leader(topic, partition)
		if !ok {
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, Message: "no leader known"}
		}
		req := &strandpb.ListOffsetsRequest{Partitions: []*strandpb.ListOffsetsRequest_Partition{
			{Topic: topic, Partition: partition, TimestampMs: at.wireTimestamp(), TopicId: topicID}},
			IsolationLevel: at.wireIsolation()}
		resp, err := c.requestNode(ctx, node, &strandpb.Request{Body: &strandpb.Request_ListOffsets{ListOffsets: req}}, 0)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return err
		}
		for _, a := range resp.GetListOffsets().GetPartitions() {
			if a.GetTopic() == topic && a.GetPartition() == partition {
				if err := errorFromWire(a.GetError()); err != nil {
					c.applyNotLeader(topic, partition, err)
					return err
				}
				lo = ListedOffset{Topic: topic, Partition: partition, Offset: a.GetOffset(),
					HighWatermark: a.GetHighWatermark(), LogStartOffset: a.GetLogStartOffset()}
				return nil
			}
		}
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "answer lacks the partition"}
	})
	return lo, err
}

// checkPartition fails, without retries, a partition metadata says does
// not exist: a number at or past the topic's partition count, or a topic
// still missing after UnknownTopicRetries fresh metadata answers (room
// for a node that has not applied a create yet). Its error matches
// ErrUnknownTopic and is not retriable.
func (c *Client) checkPartition(ctx context.Context, topic string, partition int32) error {
	for answers := 0; ; answers++ {
		if err := c.ensureMetadata(ctx); err != nil {
			return err
		}
		c.mu.Lock()
		info := c.meta.Topic(topic)
		n := 0
		if info != nil {
			n = len(info.Partitions)
		}
		c.mu.Unlock()
		switch {
		case n > 0 && (partition < 0 || int(partition) >= n):
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND,
				Message: fmt.Sprintf("topic %q has no partition %d (partitions 0..%d)", topic, partition, n-1)}
		case n > 0:
			return nil
		case c.cfg.unknownTopicRetries >= 0 && answers >= c.cfg.unknownTopicRetries:
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND, Message: fmt.Sprintf("topic %q does not exist", topic)}
		}
		if !c.sleep(ctx, c.backoffDelay(answers+1)) {
			return ctx.Err()
		}
		if err := c.RefreshMetadata(ctx); err != nil {
			return err
		}
	}
}
