package node

import (
	"fmt"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// handleAlterConfigs changes each topic's configuration through the
// metadata group (one AlterTopicConfig command per topic, all or nothing
// per topic) and answers with the configuration as applied on this node.
func (c *Core) handleAlterConfigs(req *strandpb.AlterConfigsRequest, answer func(*strandpb.Response)) {
	if !c.adminPreflight(answer) || !c.checkCount(len(req.GetTopics()), answer) {
		return
	}
	topics := req.GetTopics()
	out := make([]*strandpb.AlterConfigsResponse_Topic, len(topics))
	pending := len(topics)
	finish := func(i int, t *strandpb.AlterConfigsResponse_Topic) {
		out[i] = t
		if pending--; pending == 0 {
			answer(&strandpb.Response{Body: &strandpb.Response_AlterConfigs{AlterConfigs: &strandpb.AlterConfigsResponse{Topics: out}}})
		}
	}
	if pending == 0 {
		answer(&strandpb.Response{Body: &strandpb.Response_AlterConfigs{AlterConfigs: &strandpb.AlterConfigsResponse{}}})
		return
	}
	timeout := c.msToTicks(req.GetTimeoutMs(), uint64(c.cfg.RequestTimeoutTicks))
	seen := map[string]bool{} // lookup only
	for i, t := range topics {
		name := t.GetName()
		if e := checkTopicName(name, seen); e != nil {
			c.completions = append(c.completions, func() { finish(i, &strandpb.AlterConfigsResponse_Topic{Name: name, Error: e}) })
			continue
		}
		sets := make([]metadata.ConfigEntry, len(t.GetSets()))
		for j, e := range t.GetSets() {
			sets[j] = metadata.ConfigEntry{Name: e.GetName(), Value: e.GetValue()}
		}
		data, err := metadata.EncodeAlterTopicConfig(name, sets, t.GetDeletes())
		if err == nil {
			err = c.gateTiering(sets)
		}
		if err != nil {
			e := metaError(err)
			c.completions = append(c.completions, func() { finish(i, &strandpb.AlterConfigsResponse_Topic{Name: name, Error: e}) })
			continue
		}
		c.proposeMeta(data, timeout, func(res metadata.Result, err error) {
			r := &strandpb.AlterConfigsResponse_Topic{Name: name}
			switch {
			case err != nil:
				r.Error = c.wireError(err, 0, nil)
			case res.Err != nil:
				r.Error = metaError(res.Err)
			default:
				for _, e := range res.Topic.Config.Entries() {
					r.Configs = append(r.Configs, &strandpb.ConfigEntry{Name: e.Name, Value: e.Value})
				}
			}
			finish(i, r)
		})
	}
}

// handleDeleteRecords moves each partition's log start to before_offset
// (Kafka's DeleteRecords) by proposing a TRIM on its leader, and answers
// with the log start once the trim applied here. An offset past the
// high-water mark is OFFSET_OUT_OF_RANGE; one at or below the log start is
// answered at once; a topic whose cleanup.policy is compact (without
// delete) is INVALID_REQUEST, as Kafka refuses it (POLICY_VIOLATION).
func (c *Core) handleDeleteRecords(req *strandpb.DeleteRecordsRequest, answer func(*strandpb.Response)) {
	parts := req.GetPartitions()
	if len(parts) > handlePartitionsMax {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: too many partitions in one delete records"))
		return
	}
	out := make([]*strandpb.DeleteRecordsResponse_Partition, len(parts))
	pending := len(parts)
	finish := func() {
		answer(&strandpb.Response{Body: &strandpb.Response_DeleteRecords{DeleteRecords: &strandpb.DeleteRecordsResponse{Partitions: out}}})
	}
	if pending == 0 {
		finish()
		return
	}
	timeout := c.msToTicks(req.GetTimeoutMs(), uint64(c.cfg.RequestTimeoutTicks))
	for i, p := range parts {
		tp := TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		done := func(logStart int64, err error, lead NodeID) {
			out[i] = &strandpb.DeleteRecordsResponse_Partition{Topic: tp.Topic, Partition: tp.Partition,
				Error: c.wireError(err, lead, &tp), LogStartOffset: logStart}
			if pending--; pending == 0 {
				finish()
			}
		}
		c.deleteRecords(tp, p.GetTopicId(), p.GetBeforeOffset(), timeout, done)
	}
}

// deleteRecords is one partition of handleDeleteRecords.
func (c *Core) deleteRecords(tp TopicPartition, topicID []byte, before int64, timeout uint64, done func(int64, error, NodeID)) {
	fail := func(err error, lead NodeID) {
		c.completions = append(c.completions, func() { done(-1, err, lead) })
	}
	if err := c.checkTopicID(tp, topicID); err != nil {
		fail(err, 0)
		return
	}
	g := c.byTP[tp]
	if g == nil {
		fail(ErrUnknownTopicPartition, 0)
		return
	}
	lead, _, leading := g.leadership()
	if !leading {
		fail(ErrNotLeader, lead)
		return
	}
	if p := g.ret.config.CleanupPolicy; g.ret.configKnown && p.Compacts() && !p.Deletes() {
		// As Kafka (its POLICY_VIOLATION): a compacted topic keeps every
		// key's latest value. compact,delete takes it (engine/compact's
		// rule 8 cuts the compacted prefix at the new log start).
		fail(fmt.Errorf("%w: records cannot be deleted from %s: its cleanup.policy is compact", ErrInvalidRequest, tp.Topic), lead)
		return
	}
	hwm, logStart := g.part.HighWatermark(), g.part.LogStartOffset()
	if before == -1 {
		before = hwm
	}
	if before < 0 || before > hwm {
		fail(fmt.Errorf("%w: delete records before %d: the log holds [%d, %d)", ErrOffsetOutOfRange, before, logStart, hwm), lead)
		return
	}
	if before <= logStart {
		c.completions = append(c.completions, func() { done(logStart, nil, lead) })
		return
	}
	if len(g.ret.deletes) >= c.cfg.PendingRequestsMax {
		fail(ErrBusy, lead)
		return
	}
	if err := c.proposeTrim(g, before); err != nil {
		fail(ErrNotLeader, lead)
		return
	}
	g.ret.deletes = append(g.ret.deletes, &deleteWait{offset: before, deadline: c.ticks + timeout,
		done: func(logStart int64, err error) { done(logStart, err, lead) }})
}

// handleDescribePartitions describes the logs of the named partitions this
// node leads (none named: every one it leads) from its applied state.
func (c *Core) handleDescribePartitions(req *strandpb.DescribePartitionsRequest, answer func(*strandpb.Response)) {
	parts := req.GetPartitions()
	if len(parts) > handlePartitionsMax {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: too many partitions in one describe"))
		return
	}
	resp := &strandpb.DescribePartitionsResponse{}
	if len(parts) == 0 {
		for _, g := range c.partitionGroups() {
			if _, _, leading := g.leadership(); leading {
				resp.Partitions = append(resp.Partitions, c.describePartition(g))
			}
		}
	}
	for _, p := range parts {
		tp := TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		g := c.byTP[tp]
		if g == nil {
			resp.Partitions = append(resp.Partitions, &strandpb.DescribePartitionsResponse_Partition{
				Topic: tp.Topic, Partition: tp.Partition, Error: c.wireError(ErrUnknownTopicPartition, 0, &tp)})
			continue
		}
		if lead, _, leading := g.leadership(); !leading {
			resp.Partitions = append(resp.Partitions, &strandpb.DescribePartitionsResponse_Partition{
				Topic: tp.Topic, Partition: tp.Partition, Error: c.wireError(ErrNotLeader, lead, &tp)})
			continue
		}
		resp.Partitions = append(resp.Partitions, c.describePartition(g))
	}
	answer(&strandpb.Response{Body: &strandpb.Response_DescribePartitions{DescribePartitions: resp}})
}

// describePartition is the leader's view of g's log.
func (c *Core) describePartition(g *group) *strandpb.DescribePartitionsResponse_Partition {
	snap, _ := g.log.Snapshot()
	var cv *strandpb.PartitionCompaction
	if v := c.compactionView(g); v.Compacts || v.Decided > 0 {
		cv = &strandpb.PartitionCompaction{Compacts: v.Compacts, Decided: v.Decided, DecidedTimeMs: v.DecidedTimeMs,
			CleanableEnd: v.CleanableEnd, Done: v.Done, CleanedTo: v.CleanedTo, PrefixGeneration: v.PrefixGeneration,
			PrefixEnd: v.PrefixEnd, PrefixBytes: v.PrefixBytes, DirtyBytes: v.DirtyBytes, Stuck: v.Stuck,
			LastPassBytesIn: v.LastPassBytesIn, LastPassBytesOut: v.LastPassBytesOut, LastPassDurationMs: v.LastPassDuration.Milliseconds()}
	}
	return &strandpb.DescribePartitionsResponse_Partition{
		Topic: g.tp.Topic, Partition: g.tp.Partition,
		LogStartOffset:    g.part.LogStartOffset(),
		HighWatermark:     g.part.HighWatermark(),
		SizeBytes:         g.log.SizeBytes(),
		OldestTimestampMs: g.part.OldestTimestampMs(),
		Segments:          int32(len(g.log.Segments(nil))),
		SnapshotIndex:     snap.GetMetadata().GetIndex(),
		MoveTarget:        idsUint64(g.targetOrder),
		MoveProgress:      wireMoveProgress(c.moveProgress(g)),
		LaggingReplicas:   c.laggingFollowers(g),
		Compaction:        cv,
		Tier:              wireTierView(c.tierView(g)),
	}
}

// wireTierView is v on the wire; nil when the partition is not tiered.
func wireTierView(v TierView) *strandpb.PartitionTier {
	if !v.Tiered {
		return nil
	}
	return &strandpb.PartitionTier{LocalBytes: v.LocalBytes, RemoteBytes: v.RemoteBytes, RemoteSegments: int32(v.RemoteSegments),
		RemoteStart: v.RemoteStart, RemoteEnd: v.RemoteEnd, UploadLagBytes: v.UploadLagBytes,
		UploadLagMs: int64(v.UploadLagSeconds * 1000)}
}
