package kafkaproto

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// describeProducers answers DescribeProducers (KIP-664) from the native
// one on this node: each partition's producers where this node leads,
// NOT_LEADER_OR_FOLLOWER where it does not (the admin client asks each
// partition's leader), UNKNOWN_TOPIC_OR_PARTITION, and, with ACLs on,
// TOPIC_AUTHORIZATION_FAILED without READ on the topic.
func (c *conn) describeProducers(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.DescribeProducersRequest)
	n := &strandpb.DescribeProducersRequest{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			n.Partitions = append(n.Partitions, &strandpb.DescribeProducersRequest_Partition{Topic: t.Topic, Partition: p})
		}
	}
	var k *call
	if len(n.Partitions) > 0 {
		k = c.submit(&strandpb.Request{Body: &strandpb.Request_DescribeProducers{DescribeProducers: n}})
	}
	return func() kmsg.Response {
		var whole *strandpb.Response
		answers := map[tp]*strandpb.DescribeProducersResponse_Partition{}
		if k != nil {
			if whole = c.wait(k); whole == nil {
				return nil
			}
			for _, a := range whole.GetDescribeProducers().GetPartitions() {
				answers[tp{a.GetTopic(), a.GetPartition()}] = a
			}
		}
		out := kmsg.NewPtrDescribeProducersResponse()
		out.SetVersion(r.Version)
		for _, t := range r.Topics {
			ot := kmsg.NewDescribeProducersResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				ot.Partitions = append(ot.Partitions, describedProducers(whole, answers[tp{t.Topic, p}], p))
			}
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
}

// describedProducers is one partition's answer: a is the node's (nil: the
// whole request failed, or the node left it out).
func describedProducers(whole *strandpb.Response, a *strandpb.DescribeProducersResponse_Partition, partition int32) kmsg.DescribeProducersResponseTopicPartition {
	op := kmsg.NewDescribeProducersResponseTopicPartition()
	op.Partition = partition
	e := partErr(whole, a.GetError())
	if a == nil && e == nil {
		e = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL, Message: "partition not in the answer"}
	}
	if op.ErrorCode = kafkaCode(e); op.ErrorCode != 0 {
		msg := e.GetMessage()
		op.ErrorMessage = &msg
		return op
	}
	for _, pr := range a.GetProducers() {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pr.GetProducerId(), pr.GetProducerEpoch(), pr.GetLastSequence()
		ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pr.GetLastTimestampMs(), pr.GetCoordinatorEpoch(), pr.GetTxnStartOffset()
		op.ActiveProducers = append(op.ActiveProducers, ap)
	}
	return op
}
