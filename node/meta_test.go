package node

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"github.com/strandlog/strand/engine/recordbatch"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/cryptotest"
	"time"

	"pgregory.net/rapid"

	"github.com/strandlog/strand/proto/strandpb"
)

// addressOf is node id's client address in the metadata tests.
func addressOf(id NodeID) string { return fmt.Sprintf("10.0.0.%d:9092", id) }

// newMetaCluster starts n nodes running the metadata group over all of
// them, each in its own rack, and waits until every node has applied the
// registration of every node.
func newMetaCluster(t *testing.T, seed uint64, n int, config func(*Config)) *cluster {
	t.Helper()
	c := newCluster(t, seed, n, nil, config)
	c.waitRegistered(n)
	return c
}

// waitRegistered ticks until every live node has applied n registrations.
func (c *cluster) waitRegistered(n int) {
	c.t.Helper()
	for range 300 {
		all := true
		for _, id := range c.ids {
			if core := c.cores[id]; core != nil {
				nodes, _ := core.MetadataNodes()
				all = all && len(nodes) == n
			}
		}
		if all {
			return
		}
		c.tick(1)
	}
	c.t.Fatalf("nodes did not register")
}

// handle sends req to node id and settles and ticks until it is answered.
func (c *cluster) handle(id NodeID, req *strandpb.Request) (*strandpb.Response, int) {
	c.t.Helper()
	var resp *strandpb.Response
	calls := 0
	c.cores[id].handleAnonymous(req, func(r *strandpb.Response) {
		calls++
		resp = r
	})
	ticks := 0
	for ; resp == nil && ticks < 500; ticks++ {
		c.settle()
		if resp == nil {
			c.tick(1)
		}
	}
	if resp == nil {
		c.t.Fatalf("request %d on node %d never answered", req.GetCorrelationId(), id)
	}
	c.settle()
	if calls != 1 {
		c.t.Fatalf("request answered %d times", calls)
	}
	if resp.GetCorrelationId() != req.GetCorrelationId() {
		c.t.Fatalf("correlation id %d, want %d", resp.GetCorrelationId(), req.GetCorrelationId())
	}
	return resp, ticks
}

// metaLeaderOf returns the metadata leader all live nodes agree on.
func (c *cluster) metaLeaderOf() NodeID {
	c.t.Helper()
	for range 200 {
		var lead NodeID
		agreed := true
		for _, id := range c.ids {
			if core := c.cores[id]; core != nil {
				st, _ := core.MetadataStatus()
				agreed = agreed && st.Leader != 0 && (lead == 0 || st.Leader == lead)
				lead = st.Leader
			}
		}
		if agreed && lead != 0 && c.cores[lead] != nil {
			return lead
		}
		c.tick(1)
	}
	c.t.Fatalf("no metadata leader")
	return 0
}

// createTopic creates topic through node id and fails the test on error.
func (c *cluster) createTopic(id NodeID, name string, partitions, rf int32) {
	c.t.Helper()
	resp, _ := c.handle(id, &strandpb.Request{CorrelationId: 7, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: name, Partitions: partitions, ReplicationFactor: rf}},
	}}})
	if resp.GetError() != nil || len(resp.GetCreateTopics().GetTopics()) != 1 || resp.GetCreateTopics().GetTopics()[0].GetError() != nil {
		c.t.Fatalf("create %s: %v", name, resp)
	}
}

// hosted lists the partitions node id runs, from its Status.
func (c *cluster) hosted(id NodeID) []TopicPartition {
	var out []TopicPartition
	for _, st := range c.cores[id].Status() {
		out = append(out, st.TopicPartition)
	}
	return out
}

// produceReq is a one-partition acks=all produce request.
func produceReq(corr uint64, tp TopicPartition, batch []byte) *strandpb.Request {
	return &strandpb.Request{CorrelationId: corr, Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{
		Acks: -1, Partitions: []*strandpb.ProduceRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, ProducerId: -1, Batch: batch}},
	}}}
}

// fetchReq is a one-partition long-poll fetch request.
func fetchReq(corr uint64, tp TopicPartition, offset int64, minBytes, maxWaitMs int32) *strandpb.Request {
	return &strandpb.Request{CorrelationId: corr, Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
		MinBytes: minBytes, MaxWaitMs: maxWaitMs, MaxBytes: 1 << 20,
		Partitions: []*strandpb.FetchRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, MaxBytes: 1 << 20}},
	}}}
}

// A 3-node cluster elects a metadata leader and registers every node;
// CreateTopics through a follower places replicas and preferred leaders
// evenly and the hosting nodes start exactly their replicas; a produce
// through Handle on the leader is fetched back byte for byte.
func TestMetaCreateTopicPlacesAndStartsReplicas(t *testing.T) {
	c := newMetaCluster(t, 11, 3, nil)
	metaLead := c.metaLeaderOf()
	follower := c.ids[(slices.Index(c.ids, metaLead)+1)%3]
	nodes, _ := c.cores[follower].MetadataNodes()
	for i, n := range nodes {
		if n.ID != uint64(i+1) || n.Address != addressOf(NodeID(i+1)) || n.Rack != fmt.Sprintf("rack-%d", i+1) {
			t.Fatalf("registered node %d: %+v", i, n)
		}
	}
	c.createTopic(follower, "events", 6, 2)
	c.tick(1)

	leaders := map[uint64]int{}
	for _, id := range c.ids {
		_, topics := c.cores[id].MetadataNodes()
		if len(topics) != 1 || topics[0].Name != "events" || topics[0].Partitions() != 6 {
			t.Fatalf("node %d topics %+v", id, topics)
		}
		var want []TopicPartition
		for p, r := range topics[0].Replicas {
			if slices.Contains(r, uint64(id)) {
				want = append(want, TopicPartition{Topic: "events", Partition: int32(p)})
			}
			if id == 1 {
				leaders[r[0]]++
			}
		}
		if got := c.hosted(id); len(want) != 4 || !slices.Equal(got, want) {
			t.Fatalf("node %d hosts %v, want 4 replicas %v", id, got, want)
		}
	}
	for _, id := range c.ids {
		if leaders[uint64(id)] != 2 {
			t.Fatalf("preferred leaders per node %v, want 2 each", leaders)
		}
	}

	tp := TopicPartition{Topic: "events", Partition: 0}
	lead := c.leader(tp)
	batch := testBatch(t, "k", 3)
	resp, _ := c.handle(lead, produceReq(21, tp, batch))
	pr := resp.GetProduce().GetPartitions()
	if len(pr) != 1 || pr[0].GetError() != nil || pr[0].GetBaseOffset() != 0 {
		t.Fatalf("produce: %v", resp)
	}
	resp, _ = c.handle(lead, fetchReq(22, tp, 0, 1, 100))
	fr := resp.GetFetch().GetPartitions()
	if len(fr) != 1 || fr[0].GetError() != nil || fr[0].GetHighWatermark() != 3 || len(fr[0].GetBatches()) != 1 ||
		!bytes.Equal(fr[0].GetBatches()[0].GetRecords(), batch) {
		t.Fatalf("fetch: %v", resp)
	}
	// Metadata names the leader of a hosted partition with its term.
	resp, _ = c.handle(lead, &strandpb.Request{CorrelationId: 23, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	md := resp.GetMetadata()
	if len(md.GetNodes()) != 3 || md.GetControllerId() != uint64(metaLead) || len(md.GetTopics()) != 1 ||
		md.GetTopics()[0].GetPartitions()[0].GetLeaderId() != uint64(lead) {
		t.Fatalf("metadata: %v", md)
	}
}

// A long-poll fetch at the high-water mark parks, is woken by a produce
// before max_wait and returns the new batch; with nothing produced it
// answers empty after max_wait_ms (in ticks of TickDuration), not before.
func TestHandleLongPoll(t *testing.T) {
	c := newMetaCluster(t, 12, 3, nil)
	c.createTopic(1, "poll", 1, 3)
	tp := TopicPartition{Topic: "poll", Partition: 0}
	lead := c.leader(tp)

	var resp *strandpb.Response
	c.cores[lead].handleAnonymous(fetchReq(31, tp, 0, 1, 1000), func(r *strandpb.Response) { resp = r })
	c.tick(5)
	if resp != nil {
		t.Fatalf("fetch answered before any data: %v", resp)
	}
	batch := testBatch(t, "late", 2)
	if pr, _ := c.handle(lead, produceReq(32, tp, batch)); pr.GetProduce().GetPartitions()[0].GetError() != nil {
		t.Fatalf("produce: %v", pr)
	}
	if resp == nil {
		t.Fatalf("parked fetch not woken by the produce")
	}
	fr := resp.GetFetch().GetPartitions()
	if len(fr) != 1 || len(fr[0].GetBatches()) != 1 || !bytes.Equal(fr[0].GetBatches()[0].GetRecords(), batch) {
		t.Fatalf("woken fetch: %v", resp)
	}

	// Nothing comes: 300 ms at 10 ms per tick is 30 ticks.
	resp2, ticks := c.handle(lead, fetchReq(33, tp, 2, 1, 300))
	fr = resp2.GetFetch().GetPartitions()
	if len(fr) != 1 || fr[0].GetError() != nil || len(fr[0].GetBatches()) != 0 || fr[0].GetHighWatermark() != 2 {
		t.Fatalf("timed-out fetch: %v", resp2)
	}
	if ticks < 29 || ticks > 32 {
		t.Fatalf("long poll answered after %d ticks, want about 30", ticks)
	}
	// min_bytes 0 answers at once, even with no data.
	if _, ticks := c.handle(lead, fetchReq(34, tp, 2, 0, 1000)); ticks > 2 {
		t.Fatalf("min_bytes 0 waited %d ticks", ticks)
	}
}

// ListOffsets gives the earliest offset, the latest (linearizable: right
// after an acknowledged produce) and an offset by timestamp.
func TestHandleListOffsets(t *testing.T) {
	c := newMetaCluster(t, 13, 3, nil)
	c.createTopic(2, "lo", 1, 3)
	tp := TopicPartition{Topic: "lo", Partition: 0}
	lead := c.leader(tp)
	for i := range 3 {
		c.handle(lead, produceReq(uint64(40+i), tp, testBatch(t, "x", 2)))
	}
	resp, _ := c.handle(lead, &strandpb.Request{CorrelationId: 45, Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
		Partitions: []*strandpb.ListOffsetsRequest_Partition{
			{Topic: "lo", Partition: 0, TimestampMs: -2},
			{Topic: "lo", Partition: 0, TimestampMs: -1},
			{Topic: "lo", Partition: 0, TimestampMs: 1000},
			{Topic: "lo", Partition: 0, TimestampMs: 5000},
			{Topic: "nope", Partition: 0, TimestampMs: -1},
		},
	}}})
	got := resp.GetListOffsets().GetPartitions()
	want := []int64{0, 6, 0, 6}
	for i, w := range want {
		if got[i].GetError() != nil || got[i].GetOffset() != w || got[i].GetHighWatermark() != 6 {
			t.Fatalf("list offsets %d: %v, want offset %d", i, got[i], w)
		}
	}
	if got[4].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("unknown topic: %v", got[4])
	}
}

// ListOffsets by timestamp answers the first record at or after the
// timestamp, not the first offset of the batch holding it (Kafka's answer;
// the batch's base offset made a consumer seeking by time re-read older
// records), and scans on past a batch whose running maximum reaches the
// target while its own records do not (timestamps out of order).
func TestListOffsetsByTimestampFindsTheRecord(t *testing.T) {
	c := newMetaCluster(t, 15, 3, nil)
	c.createTopic(2, "ts", 1, 3)
	tp := TopicPartition{Topic: "ts", Partition: 0}
	lead := c.leader(tp)
	batches := [][]int64{{100, 200, 300}, {250, 260}, {50, 400}}
	for i, stamps := range batches {
		records := make([]recordbatch.Record, len(stamps))
		for j, ts := range stamps {
			records[j] = recordbatch.Record{TimestampMs: ts, Value: []byte("v")}
		}
		batch, err := recordbatch.Encode(nil, records)
		if err != nil {
			t.Fatal(err)
		}
		c.handle(lead, produceReq(uint64(60+i), tp, batch))
	}
	// Offsets: 0..2 = 100 200 300, 3..4 = 250 260, 5..6 = 50 400.
	stamps := map[int64]int64{0: 100, 1: 200, 2: 300, 6: 400, 7: -1}
	cases := []struct{ ts, want int64 }{
		{0, 0}, {100, 0}, {150, 1}, {200, 1}, {201, 2}, {300, 2}, {301, 6}, {400, 6}, {401, 7},
	}
	for i, tc := range cases {
		resp, _ := c.handle(lead, &strandpb.Request{CorrelationId: uint64(70 + i), Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
			Partitions: []*strandpb.ListOffsetsRequest_Partition{{Topic: "ts", Partition: 0, TimestampMs: tc.ts}}}}})
		got := resp.GetListOffsets().GetPartitions()[0]
		if got.GetError() != nil || got.GetOffset() != tc.want {
			t.Errorf("timestamp %d: offset %d (%v), want %d", tc.ts, got.GetOffset(), got.GetError(), tc.want)
		}
		if wantTS := stamps[tc.want]; got.GetTimestampMs() != wantTS {
			t.Errorf("timestamp %d: record timestamp %d, want %d", tc.ts, got.GetTimestampMs(), wantTS)
		}
	}
}

// A describe answer says when the node enforces a lower node-wide cap
// than the topic's segment.bytes or segment.ms (strand dev caps both, and
// topic describe showed the uncapped 64 MiB and 7 days as if they ruled),
// and says nothing when the topic's value is the lower one.
func TestDescribeShowsNodeCaps(t *testing.T) {
	c := newMetaCluster(t, 16, 3, func(cfg *Config) {
		cfg.SegmentBytesMax = 1 << 20
		cfg.SegmentAgeMax = 10 * time.Second
	})
	c.createTopic(2, "capped", 1, 3)
	resp, _ := c.handle(2, &strandpb.Request{CorrelationId: 80, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: "small", Partitions: 1, ReplicationFactor: 3,
			Configs: []*strandpb.ConfigEntry{{Name: "segment.bytes", Value: "65536"}, {Name: "segment.ms", Value: "1000"}}}}}}})
	if e := resp.GetCreateTopics().GetTopics()[0].GetError(); e != nil {
		t.Fatalf("create small: %v", e)
	}
	resp, _ = c.handle(2, &strandpb.Request{CorrelationId: 81, Body: &strandpb.Request_DescribeTopics{DescribeTopics: &strandpb.DescribeTopicsRequest{Names: []string{"capped", "small"}}}})
	want := map[string]map[string]string{
		"capped": {"segment.bytes": "1048576", "segment.ms": "10000"},
		"small":  {},
	}
	for _, dt := range resp.GetDescribeTopics().GetTopics() {
		got := map[string]string{}
		for _, e := range dt.GetConfigs() {
			if e.GetNodeCap() != "" {
				got[e.GetName()] = e.GetNodeCap()
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want[dt.GetName()]) {
			t.Errorf("%s: node caps %v, want %v", dt.GetName(), got, want[dt.GetName()])
		}
	}
}

// Create refusals are typed; describe gives partitions, replication factor
// and the full config; delete stops the replicas on every node and removes
// their files, and later requests see the topic unknown. A replication
// factor over the cluster's size is the definite INVALID_REPLICATION_FACTOR
// and a delete of a missing topic the definite TOPIC_NOT_FOUND (both were
// retriable codes, which clients retried for ~13 s: issue 7, finding 5).
func TestHandleAdminDescribeDelete(t *testing.T) {
	c := newMetaCluster(t, 14, 3, nil)
	resp, _ := c.handle(3, &strandpb.Request{CorrelationId: 50, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{
			{Name: "a", Partitions: 3, ReplicationFactor: 3, Configs: []*strandpb.ConfigEntry{{Name: "max.message.bytes", Value: "1048576"}}},
			{Name: "a", Partitions: 1},
			{Name: "big", Partitions: 1, ReplicationFactor: 4},
			{Name: "cfg", Partitions: 1, Configs: []*strandpb.ConfigEntry{{Name: "retention.ms", Value: "soon"}}},
			{Name: "bad/name", Partitions: 1},
		},
	}}})
	codes := []strandpb.ErrorCode{
		strandpb.ErrorCode_ERROR_CODE_NONE, strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR,
		strandpb.ErrorCode_ERROR_CODE_INVALID_CONFIG, strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
	}
	for i, res := range resp.GetCreateTopics().GetTopics() {
		if res.GetError().GetCode() != codes[i] {
			t.Fatalf("create %d: %v, want %v", i, res, codes[i])
		}
	}
	c.createTopic(1, "b", 1, 1)
	resp, _ = c.handle(2, &strandpb.Request{CorrelationId: 51, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: "a", Partitions: 1, ReplicationFactor: 1}},
	}}})
	if resp.GetCreateTopics().GetTopics()[0].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS {
		t.Fatalf("create existing: %v", resp)
	}

	resp, _ = c.handle(2, &strandpb.Request{CorrelationId: 52, Body: &strandpb.Request_DescribeTopics{DescribeTopics: &strandpb.DescribeTopicsRequest{Names: []string{"a", "zz"}}}})
	dt := resp.GetDescribeTopics().GetTopics()
	if len(dt) != 2 || dt[0].GetPartitions() != 3 || dt[0].GetReplicationFactor() != 3 || len(dt[0].GetConfigs()) != 13 ||
		dt[0].GetConfigs()[5].GetName() != "max.message.bytes" || dt[0].GetConfigs()[5].GetValue() != "1048576" ||
		dt[1].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("describe: %v", resp)
	}

	tp := TopicPartition{Topic: "a", Partition: 1}
	lead := c.leader(tp)
	c.handle(lead, produceReq(53, tp, testBatch(t, "gone", 1)))
	_, topics := c.cores[1].MetadataNodes()
	dir := managedDir("a", topics[0].ID, 1) + "/log"
	if names, _ := c.disks[lead].List(dir); len(names) == 0 {
		t.Fatalf("no log files in %s before delete", dir)
	}
	resp, _ = c.handle(1, &strandpb.Request{CorrelationId: 54, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"a", "zz"}}}})
	dr := resp.GetDeleteTopics().GetTopics()
	if dr[0].GetError() != nil || dr[1].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND {
		t.Fatalf("delete: %v", resp)
	}
	c.tick(2)
	for _, id := range c.ids {
		for _, got := range c.hosted(id) {
			if got.Topic == "a" {
				t.Fatalf("node %d still hosts %v after delete", id, got)
			}
		}
		if names, _ := c.disks[id].List(dir); len(names) != 0 {
			t.Fatalf("node %d still has files %v", id, names)
		}
	}
	resp, _ = c.handle(lead, produceReq(55, tp, testBatch(t, "gone", 1)))
	if resp.GetProduce().GetPartitions()[0].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("produce to deleted topic: %v", resp)
	}
	// Re-created under the same name, it is a new, empty group.
	c.createTopic(2, "a", 1, 3)
	tp = TopicPartition{Topic: "a", Partition: 0}
	resp, _ = c.handle(c.leader(tp), fetchReq(56, tp, 0, 0, 0))
	if fr := resp.GetFetch().GetPartitions()[0]; fr.GetError() != nil || fr.GetHighWatermark() != 0 {
		t.Fatalf("re-created topic: %v", fr)
	}
}

// InitProducerId hands out distinct ids from every node, the metadata
// leader and followers alike.
func TestHandleInitProducerIDDistinct(t *testing.T) {
	c := newMetaCluster(t, 15, 3, nil)
	seen := map[int64]bool{}
	for i := range 6 {
		id := c.ids[i%3]
		resp, _ := c.handle(id, &strandpb.Request{CorrelationId: uint64(60 + i), Body: &strandpb.Request_InitProducerId{InitProducerId: &strandpb.InitProducerIdRequest{}}})
		pid := resp.GetInitProducerId().GetProducerId()
		if resp.GetError() != nil || pid <= 0 || seen[pid] {
			t.Fatalf("init producer id on node %d: %v (seen %v)", id, resp, seen)
		}
		seen[pid] = true
	}
}

// A follower answers a produce with NOT_LEADER naming the leader's id and
// address; a request needing the metadata group before it has a leader is
// NOT_CONTROLLER; Hello is not Handle's.
func TestHandleRefusals(t *testing.T) {
	var nodes []Peer
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, Peer{ID: NodeID(i), Address: addressOf(NodeID(i))})
	}
	c := newCluster(t, 16, 3, nil, func(cfg *Config) { cfg.Nodes = nodes })
	resp, _ := c.handle(1, &strandpb.Request{CorrelationId: 70, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: "t", Partitions: 1}},
	}}})
	if resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER {
		t.Fatalf("create without a metadata leader: %v", resp)
	}
	c.waitRegistered(3)
	c.createTopic(1, "t", 1, 3)
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	follower := c.ids[(slices.Index(c.ids, lead)+1)%3]
	resp, _ = c.handle(follower, produceReq(71, tp, testBatch(t, "f", 1)))
	e := resp.GetProduce().GetPartitions()[0].GetError()
	if e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NOT_LEADER || e.GetLeaderId() != uint64(lead) || e.GetLeaderAddress() != addressOf(lead) {
		t.Fatalf("produce on a follower: %v", e)
	}
	resp, _ = c.handle(follower, fetchReq(72, tp, 0, 1, 100))
	if e := resp.GetFetch().GetPartitions()[0].GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NOT_LEADER || e.GetLeaderAddress() != addressOf(lead) {
		t.Fatalf("fetch on a follower: %v", e)
	}
	resp, _ = c.handle(lead, fetchReq(73, tp, 5, 1, 100))
	if e := resp.GetFetch().GetPartitions()[0].GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE || e.GetHighWatermark() != 0 || e.GetLogStartOffset() != 0 {
		t.Fatalf("fetch past the end: %v", e)
	}
	resp, _ = c.handle(lead, &strandpb.Request{CorrelationId: 74, Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{}}})
	if resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Fatalf("hello: %v", resp)
	}
}

// Crashing every node and restarting them recovers the metadata (from
// checkpoints and log) and the partitions with their records, and the
// cluster takes new topics and writes.
func TestMetaCrashRestartRecovers(t *testing.T) {
	c := newMetaCluster(t, 17, 3, func(cfg *Config) { cfg.CheckpointEntries = 4 })
	c.createTopic(1, "keep", 2, 3)
	c.createTopic(2, "tmp", 1, 2)
	tp := TopicPartition{Topic: "keep", Partition: 1}
	var want [][]byte
	for i := range 6 {
		b := testBatch(t, fmt.Sprintf("r%d", i), 1)
		want = append(want, b)
		resp, _ := c.handle(c.leader(tp), produceReq(uint64(80+i), tp, b))
		if resp.GetProduce().GetPartitions()[0].GetError() != nil {
			t.Fatalf("produce: %v", resp)
		}
	}
	resp, _ := c.handle(3, &strandpb.Request{CorrelationId: 90, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"tmp"}}}})
	if resp.GetDeleteTopics().GetTopics()[0].GetError() != nil {
		t.Fatalf("delete: %v", resp)
	}
	c.tick(2)
	before := map[NodeID][]TopicPartition{}
	for _, id := range c.ids {
		before[id] = c.hosted(id)
		c.crash(id)
	}
	for _, id := range c.ids {
		c.start(id)
		if got := c.hosted(id); !slices.Equal(got, before[id]) {
			t.Fatalf("node %d hosts %v after restart, want %v", id, got, before[id])
		}
	}
	c.metaLeaderOf()
	_, topics := c.cores[2].MetadataNodes()
	if len(topics) != 1 || topics[0].Name != "keep" {
		t.Fatalf("topics after restart: %+v", topics)
	}
	fetched, hwm := c.fetchAll(c.leader(tp), tp)
	checkFetched(t, fetched, hwm, want, []int64{1, 1, 1, 1, 1, 1})
	c.createTopic(3, "after", 1, 3)
	tp2 := TopicPartition{Topic: "after", Partition: 0}
	if resp, _ := c.handle(c.leader(tp2), produceReq(95, tp2, testBatch(t, "n", 1))); resp.GetProduce().GetPartitions()[0].GetError() != nil {
		t.Fatalf("produce after restart: %v", resp)
	}
}

// A one-node cluster (strand dev --nodes 1) runs the metadata group alone;
// a long poll over two partitions with min_bytes above one batch stays
// parked after a produce to the first and answers once the second brings
// the total over min_bytes, with both partitions' batches.
func TestHandleLongPollMinBytesAcrossPartitions(t *testing.T) {
	c := newMetaCluster(t, 18, 1, nil)
	c.createTopic(1, "two", 2, 1)
	tp0, tp1 := TopicPartition{Topic: "two", Partition: 0}, TopicPartition{Topic: "two", Partition: 1}
	c.leader(tp0)
	c.leader(tp1)
	b0, b1 := testBatch(t, "first", 1), testBatch(t, "second", 1)
	req := &strandpb.Request{CorrelationId: 100, Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
		MinBytes: int32(len(b0) + 1), MaxWaitMs: 5000, Partitions: []*strandpb.FetchRequest_Partition{
			{Topic: "two", Partition: 0, MaxBytes: 1 << 20}, {Topic: "two", Partition: 1, MaxBytes: 1 << 20},
		},
	}}}
	var resp *strandpb.Response
	c.cores[1].handleAnonymous(req, func(r *strandpb.Response) { resp = r })
	c.tick(3)
	c.handle(1, produceReq(101, tp0, b0))
	c.tick(3)
	if resp != nil {
		t.Fatalf("answered below min_bytes: %v", resp)
	}
	c.handle(1, produceReq(102, tp1, b1))
	if resp == nil {
		t.Fatalf("not answered once min_bytes were in")
	}
	fr := resp.GetFetch().GetPartitions()
	if len(fr) != 2 || len(fr[0].GetBatches()) != 1 || len(fr[1].GetBatches()) != 1 ||
		!bytes.Equal(fr[0].GetBatches()[0].GetRecords(), b0) || !bytes.Equal(fr[1].GetBatches()[0].GetRecords(), b1) {
		t.Fatalf("fetch: %v", resp)
	}
}

// Two runs of one seed through registration, create, produce, fetch,
// delete and a crash send byte-identical frames in the same order: no map
// order, clock or unseeded randomness reaches the wire.
func TestMetaDeterministic(t *testing.T) {
	run := func() []byte {
		h := sha256.New()
		c := newCluster(t, 19, 3, nil, nil)
		c.trace = h
		for _, id := range c.ids {
			c.cores[id].Close()
		}
		var nodes []Peer
		for i := 1; i <= 3; i++ {
			nodes = append(nodes, Peer{ID: NodeID(i), Address: addressOf(NodeID(i))})
		}
		c.config = func(cfg *Config) { cfg.Nodes, cfg.CheckpointEntries = nodes, 8 }
		for _, id := range c.ids {
			c.start(id)
		}
		c.waitRegistered(3)
		c.createTopic(2, "d", 3, 2)
		tp := TopicPartition{Topic: "d", Partition: 2}
		for i := range 5 {
			c.handle(c.leader(tp), produceReq(uint64(110+i), tp, testBatch(t, "d", 2)))
		}
		c.handle(c.leader(tp), fetchReq(120, tp, 0, 1, 50))
		c.handle(1, &strandpb.Request{CorrelationId: 121, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"d"}}}})
		c.crash(3)
		c.tick(5)
		c.start(3)
		c.metaLeaderOf()
		c.createTopic(1, "e", 2, 3)
		return h.Sum(nil)
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Fatalf("two runs of one seed differ: %x vs %x", a, b)
	}
}

// Under a lossy, duplicating, reordering network with crashes (torn
// writes), random creates, deletes, producer-id requests and produces
// through Handle on random nodes: every request is answered exactly once,
// no producer id is handed out twice, and once healed every node holds the
// same metadata (byte-identical snapshots) and runs exactly the replicas
// it places on itself, of the right topic incarnation.
func TestRapidMetaChaos(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cryptotest.SetGlobalRandom(t, rapid.Uint64().Draw(rt, "raftSeed"))
		seed := rapid.Uint64().Draw(rt, "seed")
		ch := &chaos{
			cluster: startCluster(rt, rand.New(rand.NewPCG(seed, 1)), 3, nil,
				func(cfg *Config) { cfg.CheckpointEntries, cfg.RequestTimeoutTicks = 3, 15 }),
			net: rand.New(rand.NewPCG(seed, 2)),
		}
		ch.waitRegistered(3)
		answers := map[uint64]int{}
		pids := map[int64]bool{}
		sent := uint64(0)
		crashes := map[NodeID]int{}
		type sentTo struct {
			node    NodeID
			crashes int
			req     *strandpb.Request
		}
		sentBy := map[uint64]sentTo{}
		send := func(id NodeID, req *strandpb.Request) {
			sent++
			req.CorrelationId = sent
			sentBy[sent] = sentTo{id, crashes[id], req}
			ch.cores[id].handleAnonymous(req, func(r *strandpb.Response) {
				answers[r.GetCorrelationId()]++
				if pid := r.GetInitProducerId().GetProducerId(); pid != 0 {
					if pids[pid] {
						rt.Fatalf("producer id %d handed out twice", pid)
					}
					pids[pid] = true
				}
			})
		}
		names := []string{"a", "b", "c"}
		steps := rapid.IntRange(50, 250).Draw(rt, "steps")
		for range steps {
			id := ch.ids[rapid.IntRange(0, 2).Draw(rt, "node")]
			live := ch.cores[id] != nil
			switch action := rapid.IntRange(0, 99).Draw(rt, "action"); {
			case action < 8 && live:
				send(id, &strandpb.Request{Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
					Topics: []*strandpb.CreateTopicsRequest_Topic{{
						Name:              rapid.SampledFrom(names).Draw(rt, "name"),
						Partitions:        rapid.Int32Range(1, 3).Draw(rt, "partitions"),
						ReplicationFactor: rapid.Int32Range(1, 3).Draw(rt, "rf"),
					}},
				}}})
			case action < 12 && live:
				send(id, &strandpb.Request{Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{
					Names: []string{rapid.SampledFrom(names).Draw(rt, "name")},
				}}})
			case action < 16 && live:
				send(id, &strandpb.Request{Body: &strandpb.Request_InitProducerId{InitProducerId: &strandpb.InitProducerIdRequest{}}})
			case action < 30 && live:
				tp := TopicPartition{Topic: rapid.SampledFrom(names).Draw(rt, "name"), Partition: rapid.Int32Range(0, 2).Draw(rt, "p")}
				send(id, produceReq(0, tp, testBatch(rt, "m", 1)))
			case action < 34 && live:
				tp := TopicPartition{Topic: rapid.SampledFrom(names).Draw(rt, "name"), Partition: 0}
				send(id, fetchReq(0, tp, 0, 1<<20, 50))
			case action < 60:
				ch.deliver()
			case action < 95:
				for _, id := range ch.ids {
					if core := ch.cores[id]; core != nil {
						core.Tick()
					}
				}
				ch.deliver()
			case action < 98:
				if live {
					ch.crash(id)
					crashes[id]++
				}
			default:
				if !live {
					ch.start(id)
				}
			}
		}
		for _, id := range ch.ids {
			if ch.cores[id] == nil {
				ch.start(id)
			}
		}
		ch.queue = nil
		ch.cluster.t = rt
		checkMetaConverges(rt, ch.cluster)
		ch.tick(16) // past every request timeout (15 ticks)
		for corr := uint64(1); corr <= sent; corr++ {
			// A request to a node that crashed since may go unanswered
			// (its connection is gone); every other is answered once.
			to := sentBy[corr]
			if answers[corr] > 1 || (answers[corr] == 0 && crashes[to.node] == to.crashes) {
				rt.Fatalf("request %d to node %d answered %d times: %v", corr, to.node, answers[corr], to.req)
			}
		}
	})
}

// checkMetaConverges ticks a healed cluster until every node applied the
// same metadata, then checks each runs exactly the replicas placed on it.
func checkMetaConverges(rt *rapid.T, c *cluster) {
	for range 400 {
		c.tick(1)
		ref := c.cores[1].meta.meta.Snapshot()
		same := true
		for _, id := range c.ids[1:] {
			same = same && bytes.Equal(c.cores[id].meta.meta.Snapshot(), ref)
		}
		lead, _ := c.cores[1].metaLeader()
		if nodes, _ := c.cores[1].MetadataNodes(); same && lead != 0 && len(nodes) == len(c.ids) {
			st, _ := c.cores[lead].MetadataStatus()
			if st.AppliedIndex == st.CommitIndex {
				break
			}
		}
	}
	ref := c.cores[1].meta.meta.Snapshot()
	for _, id := range c.ids {
		core := c.cores[id]
		if !bytes.Equal(core.meta.meta.Snapshot(), ref) {
			rt.Fatalf("node %d metadata differs after healing", id)
		}
		hosted := core.meta.meta.HostedPartitions(uint64(id))
		parts := core.partitionGroups()
		if len(parts) != len(hosted) {
			rt.Fatalf("node %d runs %d replicas, metadata places %d", id, len(parts), len(hosted))
		}
		for i, ref := range hosted {
			g := parts[i]
			if g.tp.Topic != ref.Topic || g.tp.Partition != ref.Partition || g.topicID != ref.TopicID {
				rt.Fatalf("node %d runs %v (topic id %d), metadata places %+v", id, g.tp, g.topicID, ref)
			}
		}
	}
}

// A parked long poll on the leader is answered by the same Process call
// that applies the produce waking it: the re-read relies on the read index
// its session already confirmed and takes no further heartbeat round.
func TestHandleLongPollWakeNeedsNoReadIndexRound(t *testing.T) {
	c := newMetaCluster(t, 14, 3, nil)
	c.createTopic(1, "wake", 1, 3)
	tp := TopicPartition{Topic: "wake", Partition: 0}
	lead := c.leader(tp)
	var fetched, produced *strandpb.Response
	c.cores[lead].handleAnonymous(fetchReq(41, tp, 0, 1, 5000), func(r *strandpb.Response) { fetched = r })
	c.tick(2)
	if fetched != nil {
		t.Fatalf("fetch answered before any data: %v", fetched)
	}
	batch := testBatch(t, "wake", 2)
	c.cores[lead].handleAnonymous(produceReq(42, tp, batch), func(r *strandpb.Response) { produced = r })
	for range 100 {
		for _, id := range c.ids {
			if err := c.cores[id].Process(); err != nil {
				t.Fatal(err)
			}
			c.runJobs(c.cores[id])
		}
		if produced != nil {
			break
		}
		queue := c.queue
		c.queue = nil
		for _, e := range queue {
			c.cores[e.to].Receive(e.frame)
		}
	}
	if produced == nil || produced.GetProduce().GetPartitions()[0].GetError() != nil {
		t.Fatalf("produce: %v", produced)
	}
	if fetched == nil {
		t.Fatalf("woken fetch not answered with the apply that woke it")
	}
	fr := fetched.GetFetch().GetPartitions()
	if len(fr) != 1 || len(fr[0].GetBatches()) != 1 || !bytes.Equal(fr[0].GetBatches()[0].GetRecords(), batch) || fr[0].GetHighWatermark() != 2 {
		t.Fatalf("woken fetch: %v", fetched)
	}
}
