package kafkaproto

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// DescribeProducers is one native DescribeProducers of every partition
// asked; each partition gets its own answer in the request's shape: the
// producers (all six fields), NOT_LEADER_OR_FOLLOWER, or
// TOPIC_AUTHORIZATION_FAILED with the node's message; a whole-request
// refusal is every partition's; no partition asks the node nothing.
func TestDescribeProducersTranslation(t *testing.T) {
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}, {Topic: "u", Partitions: []int32{2}}}
	node := &strandpb.Response{Body: &strandpb.Response_DescribeProducers{DescribeProducers: &strandpb.DescribeProducersResponse{
		Partitions: []*strandpb.DescribeProducersResponse_Partition{
			{Topic: "t", Partition: 0, Producers: []*strandpb.DescribeProducersResponse_Producer{
				{ProducerId: 7, ProducerEpoch: 2, LastSequence: 9, LastTimestampMs: 1234, CoordinatorEpoch: 3, TxnStartOffset: 40},
				{ProducerId: 8, ProducerEpoch: 0, LastSequence: 4, LastTimestampMs: 1300, CoordinatorEpoch: -1, TxnStartOffset: -1}}},
			{Topic: "t", Partition: 1, Error: txnErr(strandpb.ErrorCode_ERROR_CODE_NOT_LEADER)},
			{Topic: "u", Partition: 2, Error: txnErr(strandpb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED)}}}}}
	b := answerWith(node)
	got := roundTrip(t, b, req).(*kmsg.DescribeProducersResponse)
	wantNative(t, b, &strandpb.Request{Body: &strandpb.Request_DescribeProducers{DescribeProducers: &strandpb.DescribeProducersRequest{
		Partitions: []*strandpb.DescribeProducersRequest_Partition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "u", Partition: 2}}}}})
	if len(got.Topics) != 2 || len(got.Topics[0].Partitions) != 2 || len(got.Topics[1].Partitions) != 1 {
		t.Fatalf("shape: %+v", got)
	}
	p0 := got.Topics[0].Partitions[0]
	if p0.ErrorCode != 0 || len(p0.ActiveProducers) != 2 {
		t.Fatalf("t/0: %+v", p0)
	}
	if a := p0.ActiveProducers[0]; a.ProducerID != 7 || a.ProducerEpoch != 2 || a.LastSequence != 9 || a.LastTimestamp != 1234 ||
		a.CoordinatorEpoch != 3 || a.CurrentTxnStartOffset != 40 {
		t.Fatalf("producer 7: %+v", a)
	}
	if a := p0.ActiveProducers[1]; a.ProducerID != 8 || a.CoordinatorEpoch != -1 || a.CurrentTxnStartOffset != -1 {
		t.Fatalf("producer 8: %+v", a)
	}
	if p := got.Topics[0].Partitions[1]; p.Partition != 1 || p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("t/1: %+v", p)
	}
	if p := got.Topics[1].Partitions[0]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code || p.ErrorMessage == nil {
		t.Fatalf("u/2: %+v", p)
	}
	whole := &strandpb.Response{Error: txnErr(strandpb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED)}
	got = roundTrip(t, answerWith(whole), req).(*kmsg.DescribeProducersResponse)
	for _, tp := range got.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
				t.Fatalf("whole refusal: %s/%d %+v", tp.Topic, p.Partition, p)
			}
		}
	}
	empty := answerWith(nil)
	if got := roundTrip(t, empty, kmsg.NewPtrDescribeProducersRequest()).(*kmsg.DescribeProducersResponse); len(got.Topics) != 0 || len(empty.got) != 0 {
		t.Fatalf("empty request: %+v, node asked %v", got, empty.got)
	}
}
