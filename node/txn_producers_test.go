package node

import (
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

func describeProducersReq(parts ...TopicPartition) *strandpb.Request {
	r := &strandpb.DescribeProducersRequest{}
	for _, tp := range parts {
		r.Partitions = append(r.Partitions, &strandpb.DescribeProducersRequest_Partition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return &strandpb.Request{CorrelationId: 11, Body: &strandpb.Request_DescribeProducers{DescribeProducers: r}}
}

// TestDescribeProducers shows DescribeProducers (KIP-664) on a partition's
// leader: the transactional producer whose open transaction holds the last
// stable offset, with its first offset, epoch and last sequence; after the
// commit, its coordinator epoch and no open transaction. A follower
// answers NOT_LEADER with the leader, an unknown partition
// UNKNOWN_TOPIC_OR_PARTITION, each in request order.
func TestDescribeProducers(t *testing.T) {
	c := newCluster(t, 43, 3, replicated(3, "t", 1), txnTestConfig(PartitionMarkers{}))
	p := c.initTxn("app")
	t0 := TopicPartition{"t", 0}
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq := txnSeq{}
	if r := c.produceTxn("app", p, t0, seq, "a", 3); r.GetError() != nil {
		t.Fatalf("produce: %v", r)
	}
	lead := c.leader(t0)
	r, _ := c.handle(lead, describeProducersReq(t0, TopicPartition{"nope", 0}))
	parts := r.GetDescribeProducers().GetPartitions()
	if r.GetError() != nil || len(parts) != 2 || parts[0].GetError() != nil || len(parts[0].GetProducers()) != 1 {
		t.Fatalf("describe on the leader: %v", r)
	}
	got := parts[0].GetProducers()[0]
	if got.GetProducerId() != p.ID || got.GetProducerEpoch() != int32(p.Epoch) || got.GetLastSequence() != 2 ||
		got.GetTxnStartOffset() != 0 || got.GetCoordinatorEpoch() != -1 || got.GetLastTimestampMs() <= 0 {
		t.Fatalf("open transaction's producer: %v", got)
	}
	if code := parts[1].GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("unknown partition: %v", parts[1])
	}
	follower := c.ids[0]
	if follower == lead {
		follower = c.ids[1]
	}
	r, _ = c.handle(follower, describeProducersReq(t0))
	if e := r.GetDescribeProducers().GetPartitions()[0].GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NOT_LEADER || NodeID(e.GetLeaderId()) != lead {
		t.Fatalf("describe on a follower: %v", r)
	}
	if r := c.txnCall("app", endTxnReq("app", p, true)); r.GetError() != nil {
		t.Fatalf("commit: %v", r.GetError())
	}
	c.waitTxnState("app", "CompleteCommit")
	r, _ = c.handle(c.leader(t0), describeProducersReq(t0))
	got = r.GetDescribeProducers().GetPartitions()[0].GetProducers()[0]
	if got.GetTxnStartOffset() != -1 || got.GetCoordinatorEpoch() < 1 {
		t.Fatalf("committed producer: %v", got)
	}
}

// TestDescribeProducersAuthorization shows DescribeProducers refused per
// partition, as Kafka asks: READ on the topic. A caller with READ on one
// topic and not the other gets the one described and the other
// TOPIC_AUTHORIZATION_FAILED in its place; WRITE alone does not allow it.
func TestDescribeProducersAuthorization(t *testing.T) {
	specs := append(replicated(1, "t", 1), replicated(1, "u", 1)...)
	c := newCluster(t, 44, 1, specs, func(cfg *Config) {
		txnTestConfig(PartitionMarkers{})(cfg)
		cfg.Authorization = true
		cfg.SuperUsers = []Principal{Anonymous}
	})
	c.waitRegistered(1)
	if r, _ := c.handle(c.metaLeaderOf(), wrap(&strandpb.AlterAclsRequest{Add: []*strandpb.AclBinding{
		aclAllow("User:bob", "topic", "t", "read", "allow"), aclAllow("User:bob", "topic", "u", "write", "allow"),
	}})(t)); r.GetAlterAcls().GetAdded() != 2 {
		t.Fatalf("add ACLs: %v", r)
	}
	bob := Caller{Principal: "User:bob", Host: "127.0.0.1"}
	t0, u0 := TopicPartition{"t", 0}, TopicPartition{"u", 0}
	c.leader(t0)
	c.leader(u0)
	r := c.handleAs(1, bob, describeProducersReq(u0, t0))
	parts := r.GetDescribeProducers().GetPartitions()
	if r.GetError() != nil || len(parts) != 2 || parts[0].GetTopic() != "u" || parts[1].GetTopic() != "t" {
		t.Fatalf("describe as bob: %v", r)
	}
	if parts[0].GetError().GetCode() != codeTopic || parts[1].GetError() != nil {
		t.Fatalf("u refused and t described: %v", parts)
	}
	wantCode(t, "u alone", c.handleAs(1, bob, describeProducersReq(u0)), codeTopic)
}
