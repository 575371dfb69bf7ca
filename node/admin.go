package node

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// The special timestamps of a ListOffsets request, as Kafka's.
const (
	TimestampLatest   int64 = -1 // the high-water mark
	TimestampEarliest int64 = -2 // the log start offset
)

// ListOffsetsRequest asks one partition for an offset: the earliest
// (TimestampEarliest), the latest (TimestampLatest) or the offset of the
// first record whose timestamp is at or after TimestampMs, as Kafka's.
type ListOffsetsRequest struct {
	TopicPartition
	TimestampMs int64
	// Isolation: ReadCommitted answers TimestampLatest with the last
	// stable offset.
	Isolation engine.Isolation
}

// ListOffsetsResult is the answer to a ListOffsetsRequest, with the bounds of the
// partition at the read.
type ListOffsetsResult struct {
	Err    error
	Offset int64
	// TimestampMs is the timestamp of the record at Offset for a lookup
	// by timestamp that found one; -1 otherwise.
	TimestampMs    int64
	HighWatermark  int64
	LogStartOffset int64
	Leader         NodeID
}

// listOffsets answers on the leader through ReadIndex, like fetch, so the
// latest offset it gives covers every write acknowledged before the call.
// done runs once; it is queued for the caller's flush, as fetch's.
func (c *Core) listOffsets(req ListOffsetsRequest, done func(ListOffsetsResult)) {
	complete := func(res ListOffsetsResult) {
		c.completions = append(c.completions, func() { done(res) })
	}
	if req.TimestampMs < TimestampEarliest {
		complete(ListOffsetsResult{Err: fmt.Errorf("%w: timestamp %d", ErrInvalidRequest, req.TimestampMs), Offset: -1, HighWatermark: -1, LogStartOffset: -1})
		return
	}
	fail := func(err error, lead NodeID) {
		complete(ListOffsetsResult{Err: err, Offset: -1, TimestampMs: -1, HighWatermark: -1, LogStartOffset: -1, Leader: lead})
	}
	serve := func(g *group) {
		res := ListOffsetsResult{TimestampMs: -1, HighWatermark: g.part.HighWatermark(), LogStartOffset: g.part.LogStartOffset(), Leader: c.cfg.ID}
		switch req.TimestampMs {
		case TimestampLatest:
			res.Offset = g.part.ReadLimit(req.Isolation)
		case TimestampEarliest:
			res.Offset = res.LogStartOffset
		default:
			var err error
			if res.Offset, res.TimestampMs, err = c.offsetForTimestamp(g, req.TimestampMs); err != nil {
				fail(err, c.cfg.ID)
				return
			}
		}
		complete(res)
	}
	c.readPartition(req.TopicPartition, serve, fail)
}

// Bounds of the record scan behind a timestamp lookup: the index finds the
// first batch whose running maximum timestamp reaches the target, but
// producer timestamps need not be ordered, so the first record at or after
// it may sit some batches later. Kafka scans forward from its time index
// the same way.
const (
	timestampScanBatchesMax = 64
	timestampScanBytesMax   = 4 << 20
)

// offsetForTimestamp is the offset and timestamp of the first record at or
// after the log start whose timestamp is at or after timestampMs (-1 for
// the timestamp when it found none): the index narrows
// it to a batch, the batches are read and their records scanned. With no
// such record it is the high-water mark. If the scan's bounds run out
// first, it is the offset where the scan stopped: every record before it
// is older than timestampMs, so a consumer starting there misses nothing.
func (c *Core) offsetForTimestamp(g *group, timestampMs int64) (int64, int64, error) {
	hwm, logStart := g.part.HighWatermark(), g.part.LogStartOffset()
	from := g.part.OffsetForTimestamp(timestampMs)
	if s := c.servedPrefix(g); s != nil {
		// The compacted prefix first: the engine's index still counts the
		// records a pass removed (compaction_fetch.go).
		offset, ts, found, err := c.prefixOffsetForTimestamp(g, s, timestampMs)
		switch {
		case err != nil:
			c.prefixFailed(g, err) // the raft log still holds it all
		case found:
			return offset, ts, nil
		default:
			from = max(from, s.End())
		}
	}
	if from >= hwm {
		return hwm, -1, nil
	}
	if c.remoteBelow(g, from) {
		// tier_read.go: below the raft log of a tiered partition the
		// manifest answered at segment granularity (every record before
		// the segment is older), unscanned, as when the scan's bounds run
		// out; below it and not remote, another replica may answer.
		if _, ok := g.part.TierLocate(from); !ok {
			return -1, -1, fmt.Errorf("%w: offset %d is below this replica's raft log and not remote", ErrReplicaRecovering, from)
		}
		return from, -1, nil
	}
	locs, err := g.part.Locate(from, timestampScanBatchesMax)
	if err != nil {
		return -1, -1, fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
	}
	batches, _, _, err := c.readBatches(g, locs, from, timestampScanBytesMax, false, true, nil)
	if err != nil {
		return -1, -1, err
	}
	next := from
	for _, b := range batches {
		it := recordbatch.NewIterator(b.Batch)
		for it.Next() {
			offset := b.BaseOffset + int64(it.Index())
			if ts := it.Record().TimestampMs; offset >= logStart && ts >= timestampMs {
				return offset, ts, nil
			}
		}
		if err := it.Err(); err != nil {
			return -1, -1, c.storageFailed(g, fmt.Errorf("%w: %s/%d batch at %d: %w", ErrStorage, g.tp.Topic, g.tp.Partition, b.BaseOffset, err))
		}
		next = b.BaseOffset + int64(batchRecordCount(b.Batch))
	}
	return min(max(next, from), hwm), -1, nil
}

// handleListOffsets answers once every partition's offset is read.
func (c *Core) handleListOffsets(req *strandpb.ListOffsetsRequest, answer func(*strandpb.Response)) {
	parts := req.GetPartitions()
	if len(parts) > handlePartitionsMax {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: too many partitions in one list offsets"))
		return
	}
	if !validIsolation(req.GetIsolationLevel()) {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, fmt.Sprintf("node: isolation level %d is not 0 or 1", req.GetIsolationLevel())))
		return
	}
	out := make([]*strandpb.ListOffsetsResponse_Partition, len(parts))
	pending := len(parts)
	finish := func() {
		answer(&strandpb.Response{Body: &strandpb.Response_ListOffsets{ListOffsets: &strandpb.ListOffsetsResponse{Partitions: out}}})
	}
	if pending == 0 {
		finish()
		return
	}
	for i, p := range parts {
		tp := TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		done := func(res ListOffsetsResult) {
			out[i] = &strandpb.ListOffsetsResponse_Partition{
				Topic: tp.Topic, Partition: tp.Partition, Error: c.wireError(res.Err, res.Leader, &tp),
				Offset: res.Offset, HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset,
				TimestampMs: res.TimestampMs,
			}
			if pending--; pending == 0 {
				finish()
			}
		}
		if err := c.checkTopicID(tp, p.GetTopicId()); err != nil {
			res := ListOffsetsResult{Err: err, Offset: -1, TimestampMs: -1, HighWatermark: -1, LogStartOffset: -1}
			c.completions = append(c.completions, func() { done(res) })
			continue
		}
		c.listOffsets(ListOffsetsRequest{TopicPartition: tp, TimestampMs: p.GetTimestampMs(), Isolation: engine.Isolation(req.GetIsolationLevel())}, done)
	}
}

// metaError maps a metadata command's refusal to its wire form, its code
// the one the metadata sentinel carries. These answers come from the
// metadata group itself, so a missing topic is the definite TOPIC_NOT_FOUND
// (metadata.ErrUnknownTopic's code), not the UNKNOWN_TOPIC_OR_PARTITION of
// a node that may lag.
func metaError(err error) *strandpb.Error {
	if err == nil {
		return nil
	}
	return &strandpb.Error{Message: err.Error(), Code: strandpb.CodeOf(err)}
}

// checkReplicationFactor refuses, before proposing, a factor the cluster
// can never meet: above its size (Config.Nodes, when known). A factor
// above the nodes registered so far is the metadata group's to refuse,
// retriably.
func (c *Core) checkReplicationFactor(rf int32) *strandpb.Error {
	if n := c.clusterSize(); n > 0 && int(rf) > n {
		return &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR,
			Message: fmt.Sprintf("node: replication factor %d, but the cluster has %d nodes", rf, n)}
	}
	return nil
}

// adminPreflight answers requests that need the metadata group when it
// has no leader, or when this node was removed from it (its proposals
// would only time out, and a client whose cached controller it is would
// retry it forever): NOT_CONTROLLER, so the client refreshes its metadata
// and asks another node; nothing is proposed. It reports whether the
// request may go on.
func (c *Core) adminPreflight(answer func(*strandpb.Response)) bool {
	if lead, _ := c.metaLeader(); lead == 0 || c.selfRemoved() {
		answer(&strandpb.Response{Error: c.wireError(ErrNotController, 0, nil)})
		return false
	}
	return true
}

// topicCommand is one topic of a create or delete: its command bytes, or
// the error refusing it before proposing.
type topicCommand struct {
	name string
	data []byte
	err  *strandpb.Error
}

// runTopicCommands proposes each command, in request order, and answers
// with every topic's outcome once all applied here or timed out.
func (c *Core) runTopicCommands(cmds []topicCommand, timeoutMs int32, answer func([]*strandpb.TopicResult)) {
	out := make([]*strandpb.TopicResult, len(cmds))
	pending := len(cmds)
	done := func(i int, e *strandpb.Error) {
		out[i] = &strandpb.TopicResult{Name: cmds[i].name, Error: e}
		if pending--; pending == 0 {
			answer(out)
		}
	}
	if pending == 0 {
		answer(out)
		return
	}
	timeout := c.msToTicks(timeoutMs, uint64(c.cfg.RequestTimeoutTicks))
	for i, cmd := range cmds {
		if cmd.err != nil {
			c.completions = append(c.completions, func() { done(i, cmd.err) })
			continue
		}
		c.proposeMeta(cmd.data, timeout, func(res metadata.Result, err error) {
			if err != nil {
				done(i, c.wireError(err, 0, nil))
				return
			}
			done(i, metaError(res.Err))
		})
	}
}

// checkTopicName refuses a bad or repeated name before proposing.
func checkTopicName(name string, seen map[string]bool) *strandpb.Error {
	if err := metadata.ValidateTopicName(name); err != nil {
		return &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: err.Error()}
	}
	if seen[name] {
		return &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: fmt.Sprintf("node: topic %q named twice in one request", name)}
	}
	seen[name] = true
	return nil
}

// replicationFactorDefault is a create's replication factor when the
// request leaves it 0 or -1: 3, or the cluster's size (Config.Nodes) when
// smaller. Not the registered count: a create right after start must not
// quietly get fewer replicas because a node has not registered yet (it
// gets NOT_ENOUGH_REPLICAS, retriable, instead).
const replicationFactorDefault = 3

// handleCreateTopics creates each topic through the metadata group.
// partitions 0 or -1 means 1; replication_factor 0 or -1 means
// replicationFactorDefault.
func (c *Core) handleCreateTopics(req *strandpb.CreateTopicsRequest, answer func(*strandpb.Response)) {
	if !c.adminPreflight(answer) || !c.checkCount(len(req.GetTopics()), answer) {
		return
	}
	seen := map[string]bool{} // lookup only
	var cmds []topicCommand
	for _, t := range req.GetTopics() {
		cmd := topicCommand{name: t.GetName(), err: checkTopicName(t.GetName(), seen)}
		if cmd.err == nil {
			partitions, rf := t.GetPartitions(), t.GetReplicationFactor()
			if partitions == 0 || partitions == -1 {
				partitions = 1
			}
			if rf == 0 || rf == -1 {
				rf = int32(max(1, min(replicationFactorDefault, c.clusterSize())))
			}
			configs := make([]metadata.ConfigEntry, len(t.GetConfigs()))
			for i, e := range t.GetConfigs() {
				configs[i] = metadata.ConfigEntry{Name: e.GetName(), Value: e.GetValue()}
			}
			data, err := metadata.EncodeCreateTopic(t.GetName(), partitions, rf, configs)
			if err == nil {
				err = c.gateTiering(configs)
			}
			cmd.data, cmd.err = data, metaError(err)
			if cmd.err == nil {
				cmd.err = c.checkReplicationFactor(rf)
			}
		}
		cmds = append(cmds, cmd)
	}
	c.runTopicCommands(cmds, req.GetTimeoutMs(), func(out []*strandpb.TopicResult) {
		answer(&strandpb.Response{Body: &strandpb.Response_CreateTopics{CreateTopics: &strandpb.CreateTopicsResponse{Topics: out}}})
	})
}

// handleDeleteTopics deletes each topic through the metadata group; the
// hosting nodes stop the replicas when they apply it.
func (c *Core) handleDeleteTopics(req *strandpb.DeleteTopicsRequest, answer func(*strandpb.Response)) {
	if !c.adminPreflight(answer) || !c.checkCount(len(req.GetNames()), answer) {
		return
	}
	ids := req.GetTopicIds()
	if len(ids) > 0 && len(ids) != len(req.GetNames()) {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: delete topics: topic ids not one per name"))
		return
	}
	seen := map[string]bool{} // lookup only
	var cmds []topicCommand
	for i, name := range req.GetNames() {
		cmd := topicCommand{name: name, err: checkTopicName(name, seen)}
		if cmd.err == nil {
			// A named id is checked when the delete applies: a delete
			// held and proposed late refuses a newer topic of the name.
			var data []byte
			var err error
			switch {
			case len(ids) == 0 || len(ids[i]) == 0:
				data, err = metadata.EncodeDeleteTopic(name)
			default:
				if u, ok := metadata.UUIDFromBytes(ids[i]); ok {
					data, err = metadata.EncodeDeleteTopicID(name, u)
				} else {
					err = fmt.Errorf("%w: topic id of %d bytes", ErrInvalidRequest, len(ids[i]))
				}
			}
			cmd.data, cmd.err = data, metaError(err)
		}
		cmds = append(cmds, cmd)
	}
	c.runTopicCommands(cmds, req.GetTimeoutMs(), func(out []*strandpb.TopicResult) {
		answer(&strandpb.Response{Body: &strandpb.Response_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsResponse{Topics: out}}})
	})
}

// checkCount refuses a request naming too many topics.
func (c *Core) checkCount(n int, answer func(*strandpb.Response)) bool {
	if n > handlePartitionsMax {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: too many topics in one request"))
		return false
	}
	return true
}

// handleDescribeTopics answers from the metadata state after a ReadIndex
// on the metadata group (forwarded to its leader from a follower), so a
// describe sees every create and delete acknowledged before it.
func (c *Core) handleDescribeTopics(req *strandpb.DescribeTopicsRequest, answer func(*strandpb.Response)) {
	names := req.GetNames()
	if !c.checkCount(len(names), answer) {
		return
	}
	describe := func() {
		answer(&strandpb.Response{Body: &strandpb.Response_DescribeTopics{DescribeTopics: c.describeTopics(names)}})
	}
	lead, term := c.metaLeader()
	if lead == 0 {
		answer(&strandpb.Response{Error: c.wireError(ErrNotController, 0, nil)})
		return
	}
	if c.meta.live >= c.cfg.PendingRequestsMax {
		answer(&strandpb.Response{Error: c.wireError(ErrBusy, 0, nil)})
		return
	}
	c.readIndex(c.meta.group, term, func(*group) { describe() }, func(err error, _ NodeID) {
		if errors.Is(err, ErrTimeout) {
			err = fmt.Errorf("%w (metadata read)", ErrTimeout)
		}
		answer(&strandpb.Response{Error: c.wireError(err, 0, nil)})
	})
}

// configCap is the value this node enforces for topic config key when a
// node-wide cap (Config.SegmentBytesMax, SegmentAgeMax) is below the
// topic's own; "" when it enforces the topic's value.
func (c *Core) configCap(cfg metadata.TopicConfig, key string) string {
	switch key {
	case metadata.ConfigSegmentBytes:
		if limit := c.cfg.SegmentBytesMax; limit > 0 && limit < cfg.SegmentBytes {
			return strconv.FormatInt(limit, 10)
		}
	case metadata.ConfigSegmentMs:
		if limit := c.cfg.SegmentAgeMax.Milliseconds(); limit > 0 && limit < cfg.SegmentMs {
			return strconv.FormatInt(limit, 10)
		}
	}
	return ""
}

// describeTopics describes the named topics (none: all), sorted as asked.
func (c *Core) describeTopics(names []string) *strandpb.DescribeTopicsResponse {
	topics := c.clusterTopics()
	resp := &strandpb.DescribeTopicsResponse{}
	add := func(t metadata.Topic) {
		wt := &strandpb.DescribeTopicsResponse_Topic{Name: t.Name, Partitions: t.Partitions(), ReplicationFactor: t.ReplicationFactor}
		for _, e := range t.Config.Entries() {
			wt.Configs = append(wt.Configs, &strandpb.ConfigEntry{Name: e.Name, Value: e.Value, NodeCap: c.configCap(t.Config, e.Name)})
		}
		resp.Topics = append(resp.Topics, wt)
	}
	if len(names) == 0 {
		for _, t := range topics {
			add(t)
		}
		return resp
	}
	for _, name := range names {
		i := indexTopic(topics, name)
		if i < 0 {
			resp.Topics = append(resp.Topics, &strandpb.DescribeTopicsResponse_Topic{Name: name, Error: &strandpb.Error{
				Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, Message: fmt.Sprintf("node: unknown topic %q", name)}})
			continue
		}
		add(topics[i])
	}
	return resp
}

// handleInitProducerID allocates one fresh producer id through the
// metadata group; its epoch is 0.
func (c *Core) handleInitProducerID(answer func(*strandpb.Response)) {
	if !c.adminPreflight(answer) {
		return
	}
	data, err := metadata.EncodeAllocateProducerIDs(1)
	if err != nil {
		panic(fmt.Sprintf("node: encode producer id allocation: %v", err))
	}
	c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(res metadata.Result, err error) {
		switch {
		case err != nil:
			answer(&strandpb.Response{Error: c.wireError(err, 0, nil)})
		case res.Err != nil:
			answer(&strandpb.Response{Error: metaError(res.Err)})
		default:
			answer(&strandpb.Response{Body: &strandpb.Response_InitProducerId{InitProducerId: &strandpb.InitProducerIdResponse{ProducerId: res.FirstProducerID}}})
		}
	})
}
