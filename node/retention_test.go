package node

import (
	"errors"
	"slices"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// createTopicWith creates a topic with configs through node id.
func (c *cluster) createTopicWith(id NodeID, name string, partitions, rf int32, configs map[string]string) {
	c.t.Helper()
	topic := &strandpb.CreateTopicsRequest_Topic{Name: name, Partitions: partitions, ReplicationFactor: rf}
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		topic.Configs = append(topic.Configs, &strandpb.ConfigEntry{Name: k, Value: configs[k]})
	}
	resp, _ := c.handle(id, &strandpb.Request{CorrelationId: 7, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{topic},
	}}})
	if resp.GetError() != nil || resp.GetCreateTopics().GetTopics()[0].GetError() != nil {
		c.t.Fatalf("create %s: %v", name, resp)
	}
}

// fillPartition produces n batches of 8 records through the leader.
func (c *cluster) fillPartition(tp TopicPartition, n int) {
	c.t.Helper()
	for i := range n {
		lead := c.leader(tp)
		res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(c.t, "r", 8)})
		if res.Err != nil {
			c.t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
}

// retentionConfig runs retention every 5 ticks and keeps the raft log's
// segments small.
func retentionConfig(cfg *Config) { cfg.RetentionCheckTicks = 5 }

// A topic with retention.bytes keeps about that much: the leader proposes
// TRIMs at segment boundaries, every replica applies the same log start and
// compacts whole segments behind a raft snapshot, fetch below the log start
// is OFFSET_OUT_OF_RANGE naming it, and a follower that was down while the
// log moved past its position catches up by installing the snapshot, then
// holds the same state as the others; after a restart it still does.
func TestRetentionTrimsAndLaggingFollowerInstallsSnapshot(t *testing.T) {
	c := newMetaCluster(t, 11, 3, retentionConfig)
	c.createTopicWith(c.metaLeaderOf(), "r", 1, 3, map[string]string{
		"segment.bytes": "4096", "retention.bytes": "12288", "retention.ms": "-1",
	})
	tp := TopicPartition{Topic: "r", Partition: 0}
	lead := c.leader(tp)
	follower := c.ids[(slices.Index(c.ids, lead)+1)%len(c.ids)]
	c.fillPartition(tp, 4)
	c.crash(follower)
	c.fillPartition(tp, 200)
	c.tick(30)
	lead = c.leader(tp)
	st := statusOf(c.cores[lead], tp)
	if st.LogStartOffset == 0 || c.cores[lead].Stats().TrimsProposed == 0 || c.cores[lead].Stats().Compactions == 0 {
		t.Fatalf("leader log start %d, stats %+v: nothing trimmed or compacted", st.LogStartOffset, c.cores[lead].Stats())
	}
	res := c.fetch(lead, FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20})
	if !errors.Is(res.Err, ErrOffsetOutOfRange) || res.LogStartOffset != st.LogStartOffset {
		t.Fatalf("fetch below the log start: %v (log start %d), want out of range naming %d", res.Err, res.LogStartOffset, st.LogStartOffset)
	}
	if size := c.cores[lead].byTP[tp].log.SizeBytes(); size > 12288+2*4096 {
		t.Fatalf("leader log holds %d bytes, want about retention.bytes", size)
	}

	c.start(follower)
	c.tick(60)
	if c.cores[follower].Stats().SnapshotsInstalled == 0 {
		t.Fatalf("follower installed no snapshot: %+v", c.cores[follower].Stats())
	}
	t.Logf("leader %+v log start %d; follower %+v", c.cores[lead].Stats(), st.LogStartOffset, c.cores[follower].Stats())
	c.checkSameState(tp)
	c.crash(follower)
	c.start(follower)
	c.fillPartition(tp, 20)
	c.tick(30)
	c.checkSameState(tp)
	lead = c.leader(tp)
	batches, hwm := c.fetchFrom(lead, tp, statusOf(c.cores[lead], tp).LogStartOffset)
	if want := int64(224 * 8); hwm != want || len(batches) == 0 {
		t.Fatalf("high-water mark %d with %d batches retained, want %d", hwm, len(batches), want)
	}
}

// checkSameState fails unless every replica of tp applied the same index
// with the same log start, high-water mark and digest.
func (c *cluster) checkSameState(tp TopicPartition) {
	c.t.Helper()
	var first GroupStatus
	for i, id := range c.ids {
		st := statusOf(c.cores[id], tp)
		if i == 0 {
			first = st
			continue
		}
		if st.AppliedIndex != first.AppliedIndex || st.LogStartOffset != first.LogStartOffset ||
			st.HighWatermark != first.HighWatermark || st.Digest != first.Digest {
			c.t.Fatalf("node %d: %+v, node %d: %+v", id, st, c.ids[0], first)
		}
	}
}

// fetchFrom reads tp from offset to the high-water mark on node id.
func (c *cluster) fetchFrom(id NodeID, tp TopicPartition, offset int64) ([]FetchedBatch, int64) {
	c.t.Helper()
	var out []FetchedBatch
	for range 1000 {
		res := c.fetch(id, FetchRequest{TopicPartition: tp, Offset: offset, MaxBytes: 1 << 20})
		if res.Err != nil {
			c.t.Fatalf("fetch %v at %d: %v", tp, offset, res.Err)
		}
		for _, b := range res.Batches {
			if b.BaseOffset+int64(batchRecordCount(b.Batch)) <= offset {
				continue
			}
			out = append(out, b)
			offset = b.BaseOffset + int64(batchRecordCount(b.Batch))
		}
		if offset >= res.HighWatermark {
			return out, res.HighWatermark
		}
	}
	c.t.Fatalf("fetch did not reach the high-water mark")
	return nil, 0
}

// A partition produced to faster than the retention check interval stays
// within retention.bytes plus a few segments on every replica: a TRIM's
// apply, a finished compaction and the leader's log growing a segment past
// retention.bytes each trigger the next step at once instead of at the next
// periodic check (every 100 ticks here, while 2 batches of 8 records come
// per tick). Before, the log grew by everything written between checks.
func TestRetentionKeepsUpBetweenChecks(t *testing.T) {
	const segment, retention = 4096, 12288
	c := newMetaCluster(t, 13, 3, func(cfg *Config) { cfg.RetentionCheckTicks = 100 })
	c.createTopicWith(c.metaLeaderOf(), "r", 1, 3, map[string]string{
		"segment.bytes": "4096", "retention.bytes": "12288", "retention.ms": "-1",
	})
	tp := TopicPartition{Topic: "r", Partition: 0}
	var largest int64
	for i := range 300 {
		c.fillPartition(tp, 2)
		c.tick(1)
		for _, id := range c.ids {
			largest = max(largest, c.cores[id].byTP[tp].log.SizeBytes())
		}
		if i == 299 {
			t.Logf("node %d: %+v", c.ids[0], c.cores[c.ids[0]].Stats())
		}
	}
	if bound := int64(retention + 3*segment); largest > bound {
		t.Fatalf("a replica's log reached %d bytes, want at most %d (retention.bytes + 3 segments)", largest, bound)
	}
	c.tick(5)
	c.checkSameState(tp)
	lead := c.leader(tp)
	batches, hwm := c.fetchFrom(lead, tp, statusOf(c.cores[lead], tp).LogStartOffset)
	if hwm != 600*8 || len(batches) == 0 {
		t.Fatalf("high-water mark %d with %d batches retained, want %d", hwm, len(batches), 600*8)
	}
}
