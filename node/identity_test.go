package node

import (
	"bytes"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// metadataOf asks node id for the cluster's metadata through Handle.
func (c *cluster) metadataOf(id NodeID) *strandpb.MetadataResponse {
	c.t.Helper()
	resp, _ := c.handle(id, &strandpb.Request{CorrelationId: 90, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	return resp.GetMetadata()
}

// missingLeaders lists the partitions of md's topic whose answer names no
// leader, or another leader than the one the replicas agree on now.
func (c *cluster) missingLeaders(md *strandpb.MetadataResponse, topic string) []int32 {
	agreed := map[int32]NodeID{} // partition -> leader all live replicas agree on; 0: none
	for _, id := range c.ids {
		if c.cores[id] == nil {
			continue
		}
		for _, st := range c.cores[id].Status() {
			if st.Topic != topic {
				continue
			}
			if lead, seen := agreed[st.Partition]; st.Leader == 0 || (seen && lead != st.Leader) || c.cores[st.Leader] == nil {
				agreed[st.Partition] = 0
			} else if !seen {
				agreed[st.Partition] = st.Leader
			}
		}
	}
	var missing []int32
	for _, mt := range md.GetTopics() {
		if mt.GetName() != topic {
			continue
		}
		for _, p := range mt.GetPartitions() {
			lead := agreed[p.GetPartition()]
			if p.GetLeaderId() == 0 || p.GetLeaderId() != uint64(lead) {
				missing = append(missing, p.GetPartition())
			}
		}
	}
	return missing
}

// waitLeadersNamed ticks until every node's metadata answer names the
// current leader of every partition of topic, and fails after a bound.
func (c *cluster) waitLeadersNamed(topic string, partitions int) {
	c.t.Helper()
	for range 300 {
		done := true
		for _, id := range c.ids {
			if c.cores[id] == nil {
				continue
			}
			md := c.metadataOf(id)
			if len(md.GetTopics()) == 0 || len(md.GetTopics()[0].GetPartitions()) != partitions || len(c.missingLeaders(md, topic)) > 0 {
				done = false
			}
		}
		if done {
			return
		}
		c.tick(1)
	}
	for _, id := range c.ids {
		if c.cores[id] != nil {
			c.t.Fatalf("node %d: no or wrong leader for partitions %v", id, c.missingLeaders(c.metadataOf(id), topic))
		}
	}
}

// waitLeadersRecorded ticks until node id's metadata state records a
// leader for every partition of topic, as leader reports deliver them.
func (c *cluster) waitLeadersRecorded(id NodeID, topic string, partitions int) {
	c.t.Helper()
	for range 300 {
		recorded := 0
		for p := range partitions {
			if rec, ok := c.cores[id].meta.meta.Leader(topic, int32(p)); ok && rec.Node != 0 {
				recorded++
			}
		}
		if recorded == partitions {
			return
		}
		c.tick(1)
	}
	c.t.Fatalf("node %d: the metadata does not record every leader of %s", id, topic)
}

// In a 5-node cluster with replication factor 3, each node hosts only some
// partitions; yet every node's metadata answer names the current leader
// of every partition, because leaders report to the metadata group (issue
// 7, finding 4: before, non-hosted partitions showed leader 0 forever).
// After a leader crashes, the answers move to the new leaders.
func TestMetadataNamesLeadersOfUnhostedPartitions(t *testing.T) {
	c := newMetaCluster(t, 31, 5, nil)
	c.createTopic(1, "wide", 10, 3)
	for p := range int32(10) {
		c.leader(TopicPartition{Topic: "wide", Partition: p})
	}
	unhosted := 0
	for p := range int32(10) {
		if !slices.Contains(c.hosted(1), TopicPartition{Topic: "wide", Partition: p}) {
			unhosted++
		}
	}
	if unhosted == 0 {
		t.Fatal("node 1 hosts every partition: the test shows nothing")
	}
	c.waitLeadersNamed("wide", 10)

	victim := c.leader(TopicPartition{Topic: "wide", Partition: 0})
	if victim == c.metaLeaderOf() {
		victim = c.leader(TopicPartition{Topic: "wide", Partition: 1})
	}
	c.crash(victim)
	for p := range int32(10) {
		c.leader(TopicPartition{Topic: "wide", Partition: p})
	}
	c.waitLeadersNamed("wide", 10)
}

// The answer never names a leader older than the answering replica knows:
// a recorded leader of an earlier term yields to the local one, and a
// recorded leader of a newer term wins over a lagging local view.
func TestPartitionLeaderPrefersNewerTerm(t *testing.T) {
	c := newMetaCluster(t, 32, 3, nil)
	c.createTopic(1, "t", 1, 3)
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	other := c.ids[(slices.Index(c.ids, lead)+1)%3]
	core := c.cores[lead]
	var term uint64
	for _, st := range core.Status() {
		term = st.Term
	}
	_, topics := core.MetadataNodes()
	top := topics[0]
	top.Leaders[0] = metadata.Leader{Node: uint64(other), Term: term - 1} // the metadata lags a term
	if got, gotTerm := core.partitionLeader(top, 0); got != lead || gotTerm != term {
		t.Fatalf("leader %d term %d, want the local %d in term %d", got, gotTerm, lead, term)
	}
	top.Leaders[0] = metadata.Leader{Node: uint64(other), Term: term + 1} // this replica lags
	if got, gotTerm := core.partitionLeader(top, 0); got != other || gotTerm != term+1 {
		t.Fatalf("leader %d term %d, want the recorded %d in term %d", got, gotTerm, other, term+1)
	}
}

// A request naming the topic id of a deleted topic is refused with
// UNKNOWN_TOPIC_ID once the name is re-created (fetch, list offsets,
// produce), and a long poll parked on the topic is answered so when the
// topic is deleted: a consumer never reads the new topic's log at the old
// topic's offsets (issue 7, finding 2). Every node answers the same
// 16-byte cluster id.
func TestTopicIDRefusesRecreatedTopic(t *testing.T) {
	c := newMetaCluster(t, 33, 3, nil)
	c.createTopic(1, "hello", 1, 3)
	tp := TopicPartition{Topic: "hello", Partition: 0}
	lead := c.leader(tp)
	md := c.metadataOf(lead)
	oldID := md.GetTopics()[0].GetTopicId()
	cluster := md.GetClusterId()
	if len(oldID) != 16 || len(cluster) != 16 {
		t.Fatalf("topic id %x, cluster id %x: want 16 bytes each", oldID, cluster)
	}
	for _, id := range c.ids {
		if got := c.metadataOf(id).GetClusterId(); !bytes.Equal(got, cluster) || !bytes.Equal(c.cores[id].ClusterID().Bytes(), cluster) {
			t.Fatalf("node %d cluster id %x, want %x", id, got, cluster)
		}
	}
	c.handle(lead, produceReq(1, tp, testBatch(t, "old", 3)))

	parked := fetchReq(2, tp, 3, 1, 5000)
	parked.GetFetch().GetPartitions()[0].TopicId = oldID
	var parkedResp *strandpb.Response
	c.cores[lead].handleAnonymous(parked, func(r *strandpb.Response) { parkedResp = r })
	c.tick(2)
	if parkedResp != nil {
		t.Fatalf("fetch at the high-water mark answered at once: %v", parkedResp)
	}
	c.handle(2, &strandpb.Request{CorrelationId: 3, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"hello"}}}})
	c.tick(2)
	if code := parkedResp.GetFetch().GetPartitions()[0].GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
		t.Fatalf("parked fetch of a deleted topic: %v, want UNKNOWN_TOPIC_ID", parkedResp)
	}

	c.createTopic(3, "hello", 1, 3)
	lead = c.leader(tp)
	c.handle(lead, produceReq(4, tp, testBatch(t, "new", 5)))
	newID := c.metadataOf(lead).GetTopics()[0].GetTopicId()
	if len(newID) != 16 || bytes.Equal(newID, oldID) {
		t.Fatalf("re-created topic id %x, old %x", newID, oldID)
	}
	for _, id := range c.ids { // the leader, and followers (NOT_LEADER is not enough)
		fetch := fetchReq(5, tp, 3, 0, 0)
		fetch.GetFetch().GetPartitions()[0].TopicId = oldID
		resp, _ := c.handle(id, fetch)
		if code := resp.GetFetch().GetPartitions()[0].GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
			t.Fatalf("node %d: fetch with the old topic id: %v", id, resp)
		}
	}
	list := &strandpb.Request{CorrelationId: 6, Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
		Partitions: []*strandpb.ListOffsetsRequest_Partition{{Topic: tp.Topic, Partition: 0, TimestampMs: -1, TopicId: oldID}}}}}
	resp, _ := c.handle(lead, list)
	if code := resp.GetListOffsets().GetPartitions()[0].GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
		t.Fatalf("list offsets with the old topic id: %v", resp)
	}
	produce := produceReq(7, tp, testBatch(t, "stale", 1))
	produce.GetProduce().GetPartitions()[0].TopicId = oldID
	resp, _ = c.handle(lead, produce)
	if code := resp.GetProduce().GetPartitions()[0].GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
		t.Fatalf("produce with the old topic id: %v", resp)
	}
	fetch := fetchReq(8, tp, 0, 0, 0)
	fetch.GetFetch().GetPartitions()[0].TopicId = newID
	resp, _ = c.handle(lead, fetch)
	if fr := resp.GetFetch().GetPartitions()[0]; fr.GetError() != nil || fr.GetHighWatermark() != 5 {
		t.Fatalf("fetch with the new topic id: %v", fr)
	}
}

// A produce or fetch naming its topic by id alone (Kafka's v13, which
// names no topic) reaches the topic with that id, answered under its name;
// the id of a deleted topic is refused with UNKNOWN_TOPIC_ID, as is an id
// no topic ever had.
func TestTopicNamedByIDAlone(t *testing.T) {
	c := newMetaCluster(t, 34, 3, nil)
	c.createTopic(1, "hello", 1, 3)
	tp := TopicPartition{Topic: "hello", Partition: 0}
	lead := c.leader(tp)
	id := c.metadataOf(lead).GetTopics()[0].GetTopicId()
	produce := produceReq(2, tp, testBatch(t, "by-id", 2))
	produce.GetProduce().GetPartitions()[0].Topic, produce.GetProduce().GetPartitions()[0].TopicId = "", id
	resp, _ := c.handle(lead, produce)
	if p := resp.GetProduce().GetPartitions()[0]; p.GetError() != nil || p.GetTopic() != "hello" || p.GetBaseOffset() != 0 {
		t.Fatalf("produce by id: %v", resp)
	}
	fetch := fetchReq(3, tp, 0, 0, 0)
	fetch.GetFetch().GetPartitions()[0].Topic, fetch.GetFetch().GetPartitions()[0].TopicId = "", id
	resp, _ = c.handle(lead, fetch)
	if p := resp.GetFetch().GetPartitions()[0]; p.GetError() != nil || p.GetTopic() != "hello" || p.GetHighWatermark() != 2 {
		t.Fatalf("fetch by id: %v", resp)
	}
	for i, stale := range [][]byte{bytes.Repeat([]byte{9}, 16), id} {
		if i == 1 {
			c.handle(2, &strandpb.Request{CorrelationId: 4, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"hello"}}}})
			c.tick(2)
			c.createTopic(3, "hello", 1, 3)
			lead = c.leader(tp)
		}
		fetch.GetFetch().GetPartitions()[0].TopicId = stale
		resp, _ = c.handle(lead, fetch)
		if code := resp.GetFetch().GetPartitions()[0].GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
			t.Fatalf("fetch by stale id %x: %v", stale, resp)
		}
		produce.GetProduce().GetPartitions()[0].TopicId = stale
		resp, _ = c.handle(lead, produce)
		if code := resp.GetProduce().GetPartitions()[0].GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
			t.Fatalf("produce by stale id %x: %v", stale, resp)
		}
	}
}

// Leader reports are batched: with 600 partitions over three nodes, the
// metadata state records every partition's leader after a few
// ReportLeaders entries (one per node per tick at most, never one per
// partition). (The nodes host every partition, so their metadata answers
// name the leaders before the reports land: the test waits for the
// records themselves.)
func TestLeaderReportsBatchManyPartitions(t *testing.T) {
	const partitions = 600
	reports := 0
	c := newMetaCluster(t, 34, 3, func(cfg *Config) {
		cfg.Observer = func(tp TopicPartition, _, _, _ uint64, data []byte) {
			var cmd strandpb.MetadataCommand
			if tp.Topic == metaTopic && cfg.ID == 1 && proto.Unmarshal(data, &cmd) == nil && cmd.GetReportLeaders() != nil {
				reports++
			}
		}
	})
	c.createTopic(1, "many", partitions, 3)
	c.waitLeadersNamed("many", partitions)
	c.waitLeadersRecorded(1, "many", partitions)
	if reports == 0 || reports > partitions/10 {
		t.Fatalf("%d ReportLeaders entries for %d partitions: want a few batches", reports, partitions)
	}
	t.Logf("%d ReportLeaders entries for %d partitions", reports, partitions)
}
