package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// TestRefuseKeyless shows the compacted-topic produce check: a batch with
// a record whose key is null is ErrInvalidRecord (wire INVALID_RECORD,
// definite) with Kafka's message naming the partition and the record; an
// empty key is a key, as in Kafka.
func TestRefuseKeyless(t *testing.T) {
	tp := TopicPartition{Topic: "kv", Partition: 3}
	batch, err := recordbatch.Encode(nil, []recordbatch.Record{
		{TimestampMs: 1, Key: []byte("a"), Value: []byte("1")},
		{TimestampMs: 1, Value: []byte("keyless")},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = refuseKeyless(tp, batch)
	if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), "Compacted topic cannot accept message without key in topic partition kv-3") ||
		!strings.Contains(err.Error(), "record 1") {
		t.Fatalf("keyless: %v", err)
	}
	if code := strandpb.CodeOf(err); code != strandpb.ErrorCode_ERROR_CODE_INVALID_RECORD || !code.Info().Definite() {
		t.Fatalf("code %v, want a definite INVALID_RECORD", code)
	}
	keyed, err := recordbatch.Encode(nil, []recordbatch.Record{
		{TimestampMs: 1, Key: []byte("a"), Value: []byte("1")},
		{TimestampMs: 1, Key: []byte{}, Value: nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := refuseKeyless(tp, keyed); err != nil {
		t.Fatalf("keyed batch (an empty key, a tombstone) refused: %v", err)
	}
}

// alterTopic sends one AlterConfigs of topic name and returns its error.
func (c *cluster) alterTopic(id NodeID, name string, sets map[string]string) *strandpb.Error {
	c.t.Helper()
	t := &strandpb.AlterConfigsRequest_Topic{Name: name}
	for k, v := range sets {
		t.Sets = append(t.Sets, &strandpb.ConfigEntry{Name: k, Value: v})
	}
	resp, _ := c.handle(id, &strandpb.Request{CorrelationId: 8, Body: &strandpb.Request_AlterConfigs{
		AlterConfigs: &strandpb.AlterConfigsRequest{Topics: []*strandpb.AlterConfigsRequest_Topic{t}}}})
	if resp.GetError() != nil {
		return resp.GetError()
	}
	return resp.GetAlterConfigs().GetTopics()[0].GetError()
}

// TestCleanupPolicyTaken shows a node takes every cleanup.policy on a
// create and an alter (compact,delete included: no gate), refuses
// DeleteRecords on a compact-only topic (Kafka's POLICY_VIOLATION) and
// takes it on a compact,delete one, and checks the compaction settings.
// Before the fix compact,delete was refused as "not enforced yet".
func TestCleanupPolicyTaken(t *testing.T) {
	c := newMetaCluster(t, 21, 3, nil)
	lead := c.metaLeaderOf()
	c.createTopicWith(lead, "both", 1, 3, map[string]string{"cleanup.policy": "compact,delete"})
	c.createTopicWith(lead, "kv", 1, 3, map[string]string{"cleanup.policy": "compact"})
	c.tick(20) // the leaders learn the topics' configs
	deleteAll := func(topic string) *strandpb.Error {
		del, _ := c.handle(c.leader(TopicPartition{Topic: topic}), &strandpb.Request{CorrelationId: 8, Body: &strandpb.Request_DeleteRecords{DeleteRecords: &strandpb.DeleteRecordsRequest{
			Partitions: []*strandpb.DeleteRecordsRequest_Partition{{Topic: topic, BeforeOffset: -1}}}}})
		return del.GetDeleteRecords().GetPartitions()[0].GetError()
	}
	if e := deleteAll("kv"); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Fatalf("delete records of a compacted topic: %v", e)
	}
	if e := deleteAll("both"); e != nil {
		t.Fatalf("delete records of a compact,delete topic: %v", e)
	}
	c.createTopic(lead, "d", 1, 3)
	for _, policy := range []string{"delete,compact", "compact", "delete", "compact,delete", "delete"} {
		if e := c.alterTopic(lead, "d", map[string]string{"cleanup.policy": policy}); e != nil {
			t.Fatalf("alter to %s: %v", policy, e)
		}
	}
	if e := c.alterTopic(lead, "d", map[string]string{"delete.retention.ms": "1000", "min.cleanable.dirty.ratio": "0.1"}); e != nil {
		t.Fatalf("compaction settings refused: %v", e)
	}
	if e := c.alterTopic(lead, "d", map[string]string{"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "4"}); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_CONFIG ||
		!strings.Contains(e.GetMessage(), "greater than") {
		t.Fatalf("min lag over max lag: %v", e)
	}
}

// TestKeylessProduceToCompactedTopic shows a produce with a keyless
// record to it is refused with INVALID_RECORD and nothing is written, a
// keyed one goes in, and a delete topic still takes keyless records.
func TestKeylessProduceToCompactedTopic(t *testing.T) {
	c := newMetaCluster(t, 22, 3, nil)
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact"})
	c.createTopic(c.metaLeaderOf(), "plain", 1, 3)
	keyless, err := recordbatch.Encode(nil, []recordbatch.Record{{TimestampMs: 1, Key: []byte("k"), Value: []byte("v")}, {TimestampMs: 1, Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	kv := TopicPartition{Topic: "kv"}
	res := c.produce(c.leader(kv), ProduceRequest{TopicPartition: kv, Acks: AcksAll, ProducerID: -1, Batch: keyless})
	if !errors.Is(res.Err, ErrInvalidRecord) || !strings.Contains(res.Err.Error(), "without key in topic partition kv-0") {
		t.Fatalf("keyless to compacted: %+v", res)
	}
	res = c.produce(c.leader(kv), ProduceRequest{TopicPartition: kv, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "k", 3)})
	if res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("keyed to compacted: %+v (the refused batch must not have taken offsets)", res)
	}
	plain := TopicPartition{Topic: "plain"}
	if res := c.produce(c.leader(plain), ProduceRequest{TopicPartition: plain, Acks: AcksAll, ProducerID: -1, Batch: keyless}); res.Err != nil {
		t.Fatalf("keyless to a delete topic: %+v", res)
	}
}

// TestCompactDeleteKeepsRetention shows cleanup.policy=compact,delete
// keeps time and size retention (Kafka's meaning of the pair): the
// leader trims a compact,delete topic to retention.bytes as it trims a
// delete one, and a compact-only topic is never trimmed.
func TestCompactDeleteKeepsRetention(t *testing.T) {
	c := newMetaCluster(t, 23, 3, func(cfg *Config) {
		retentionConfig(cfg)
	})
	sizes := map[string]string{"segment.bytes": "4096", "retention.bytes": "12288", "retention.ms": "-1"}
	for topic, policy := range map[string]string{"both": "compact,delete", "compact": "compact"} {
		configs := map[string]string{"cleanup.policy": policy}
		for k, v := range sizes {
			configs[k] = v
		}
		c.createTopicWith(c.metaLeaderOf(), topic, 1, 3, configs)
	}
	both, compactOnly := TopicPartition{Topic: "both"}, TopicPartition{Topic: "compact"}
	c.fillPartition(both, 100)
	c.fillPartition(compactOnly, 100)
	c.tick(30)
	if st := statusOf(c.cores[c.leader(both)], both); st.LogStartOffset == 0 {
		t.Fatalf("compact,delete: log start %d, want trimmed to about retention.bytes", st.LogStartOffset)
	}
	if st := statusOf(c.cores[c.leader(compactOnly)], compactOnly); st.LogStartOffset != 0 {
		t.Fatalf("compact only: log start %d, want 0 (no size retention)", st.LogStartOffset)
	}
}
