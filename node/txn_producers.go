package node

import (
	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/proto/strandpb"
)

// handleDescribeProducers answers Kafka's DescribeProducers (KIP-664) and
// strand txn producers: per partition, the producers its engine remembers
// (idempotent and transactional, with the open transaction's first
// offset), read from this node's applied state where it leads, as Kafka's
// partition leader answers from its producer state. A partition led
// elsewhere is NOT_LEADER with the leader; one that does not exist,
// UNKNOWN_TOPIC_OR_PARTITION. Each partition is answered in request order.
func (c *Core) handleDescribeProducers(req *strandpb.DescribeProducersRequest, answer func(*strandpb.Response)) {
	parts := req.GetPartitions()
	if len(parts) > handlePartitionsMax {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: too many partitions in one describe"))
		return
	}
	resp := &strandpb.DescribeProducersResponse{}
	var scratch []engine.ActiveProducer
	for _, p := range parts {
		tp := TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		out := &strandpb.DescribeProducersResponse_Partition{Topic: tp.Topic, Partition: tp.Partition}
		resp.Partitions = append(resp.Partitions, out)
		g := c.byTP[tp]
		if g == nil || g.part == nil {
			out.Error = c.wireError(ErrUnknownTopicPartition, 0, &tp)
			continue
		}
		if lead, _, leading := g.leadership(); !leading {
			out.Error = c.wireError(ErrNotLeader, lead, &tp)
			continue
		}
		scratch = g.part.AppendProducers(scratch[:0])
		for _, a := range scratch {
			out.Producers = append(out.Producers, &strandpb.DescribeProducersResponse_Producer{
				ProducerId: a.ProducerID, ProducerEpoch: a.Epoch, LastSequence: a.LastSequence,
				LastTimestampMs: a.LastTimestampMs, CoordinatorEpoch: a.CoordinatorEpoch, TxnStartOffset: a.TxnStartOffset,
			})
		}
	}
	answer(&strandpb.Response{Body: &strandpb.Response_DescribeProducers{DescribeProducers: resp}})
}
