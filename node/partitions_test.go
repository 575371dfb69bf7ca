package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// createPartitionsReq grows topics through Handle.
func createPartitionsReq(corr uint64, validateOnly bool, counts ...any) *strandpb.Request {
	req := &strandpb.CreatePartitionsRequest{ValidateOnly: validateOnly}
	for i := 0; i+1 < len(counts); i += 2 {
		req.Topics = append(req.Topics, &strandpb.CreatePartitionsRequest_Topic{Name: counts[i].(string), Partitions: int32(counts[i+1].(int))})
	}
	return &strandpb.Request{CorrelationId: corr, Body: &strandpb.Request_CreatePartitions{CreatePartitions: req}}
}

// CreatePartitions through a follower grows a topic: the answer gives the
// count applied and how many were added, every node hosts exactly its
// replicas of the old and new partitions (the reconcile that opens a new
// topic's replicas opens them), a new partition elects a leader and takes
// a produce, Metadata lists it, and old partitions keep their records.
func TestHandleCreatePartitionsHostsNewPartitions(t *testing.T) {
	c := newMetaCluster(t, 31, 3, nil)
	follower := c.ids[(slices.Index(c.ids, c.metaLeaderOf())+1)%3]
	c.createTopic(follower, "grow", 2, 2)
	old := TopicPartition{Topic: "grow", Partition: 0}
	if resp, _ := c.handle(c.leader(old), produceReq(2, old, testBatch(t, "old", 2))); resp.GetProduce().GetPartitions()[0].GetError() != nil {
		t.Fatalf("produce before the grow: %v", resp)
	}
	resp, _ := c.handle(follower, createPartitionsReq(3, false, "grow", 5))
	got := resp.GetCreatePartitions().GetTopics()
	if resp.GetError() != nil || len(got) != 1 || got[0].GetError() != nil || got[0].GetPartitions() != 5 || got[0].GetAdded() != 3 {
		t.Fatalf("create partitions: %v", resp)
	}
	c.tick(1)
	for _, id := range c.ids {
		_, topics := c.cores[id].MetadataNodes()
		if len(topics) != 1 || topics[0].Partitions() != 5 {
			t.Fatalf("node %d topics %+v", id, topics)
		}
		var want []TopicPartition
		for p, r := range topics[0].Replicas {
			if slices.Contains(r, uint64(id)) {
				want = append(want, TopicPartition{Topic: "grow", Partition: int32(p)})
			}
		}
		if hosted := c.hosted(id); !slices.Equal(hosted, want) {
			t.Fatalf("node %d hosts %v, want %v", id, hosted, want)
		}
	}
	tp := TopicPartition{Topic: "grow", Partition: 4}
	lead := c.leader(tp)
	if resp, _ := c.handle(lead, produceReq(4, tp, testBatch(t, "new", 3))); resp.GetProduce().GetPartitions()[0].GetError() != nil {
		t.Fatalf("produce to a new partition: %v", resp)
	}
	resp, _ = c.handle(lead, &strandpb.Request{CorrelationId: 5, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: []string{"grow"}}}})
	if md := resp.GetMetadata().GetTopics(); len(md) != 1 || len(md[0].GetPartitions()) != 5 {
		t.Fatalf("metadata after the grow: %v", resp)
	}
	if _, hwm := c.fetchAll(c.leader(old), old); hwm != 2 {
		t.Fatalf("old partition's high-water mark %d after the grow, want 2", hwm)
	}
}

// Refusals are typed and definite, each saying what to do: a shrink or
// an equal count is INVALID_PARTITIONS, a missing topic TOPIC_NOT_FOUND,
// the offsets topic and a repeated name INVALID_REQUEST; validate-only
// answers the count it would reach and changes nothing.
func TestHandleCreatePartitionsRefusals(t *testing.T) {
	c := newMetaCluster(t, 32, 3, nil)
	c.createTopic(1, "t", 3, 3)
	resp, _ := c.handle(2, createPartitionsReq(6, false, "t", 2, "t", 9, "nope", 4, "u", 0, OffsetsTopic, 9))
	want := []struct {
		code strandpb.ErrorCode
		text string
	}{
		{strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, "can only be added"},
		{strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "named twice"},
		{strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND, `"nope"`},
		{strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, "above its current count"},
		{strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "internal"},
	}
	got := resp.GetCreatePartitions().GetTopics()
	if len(got) != len(want) {
		t.Fatalf("answer %v", resp)
	}
	for i, w := range want {
		if e := got[i].GetError(); e.GetCode() != w.code || !strings.Contains(e.GetMessage(), w.text) || !e.GetCode().Info().Definite() {
			t.Fatalf("topic %d: %v, want %v %q (definite)", i, got[i], w.code, w.text)
		}
	}
	resp, _ = c.handle(3, createPartitionsReq(7, true, "t", 6))
	if r := resp.GetCreatePartitions().GetTopics(); len(r) != 1 || r[0].GetError() != nil || r[0].GetPartitions() != 6 || r[0].GetAdded() != 3 {
		t.Fatalf("validate-only: %v", resp)
	}
	c.tick(1)
	for _, id := range c.ids {
		if _, topics := c.cores[id].MetadataNodes(); topics[0].Partitions() != 3 || len(c.hosted(id)) != 3 {
			t.Fatalf("node %d after validate-only: %d partitions, hosts %v", id, topics[0].Partitions(), c.hosted(id))
		}
	}
}

// Nodes restarted after a grow host the grown topic's partitions again
// once their metadata group commits again (a node's durable commit index
// may trail what it applied before the crash; the log holds the command)
// and the new partitions keep their records.
func TestCreatePartitionsSurvivesRestart(t *testing.T) {
	c := newMetaCluster(t, 33, 3, func(cfg *Config) { cfg.CheckpointEntries = 4 })
	c.createTopic(1, "r", 1, 3)
	if resp, _ := c.handle(1, createPartitionsReq(8, false, "r", 3)); resp.GetCreatePartitions().GetTopics()[0].GetError() != nil {
		t.Fatalf("grow: %v", resp)
	}
	tp := TopicPartition{Topic: "r", Partition: 2}
	var batches [][]byte
	for i := range 3 {
		b := testBatch(t, fmt.Sprint("v", i), 1)
		batches = append(batches, b)
		if resp, _ := c.handle(c.leader(tp), produceReq(uint64(9+i), tp, b)); resp.GetProduce().GetPartitions()[0].GetError() != nil {
			t.Fatalf("produce: %v", resp)
		}
	}
	before := map[NodeID][]TopicPartition{}
	for _, id := range c.ids {
		before[id] = c.hosted(id)
		c.crash(id)
	}
	for _, id := range c.ids {
		c.start(id)
	}
	c.metaLeaderOf()
	c.tick(20)
	for _, id := range c.ids {
		if got := c.hosted(id); !slices.Equal(got, before[id]) || len(got) != 3 {
			t.Fatalf("node %d hosts %v after restart, want %v", id, got, before[id])
		}
	}
	fetched, hwm := c.fetchAll(c.leader(tp), tp)
	checkFetched(t, fetched, hwm, batches, []int64{1, 1, 1})
}
