package clientlib

import (
	"context"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// ActiveProducer is one producer a partition remembers (Kafka's
// DescribeProducers): its id and epoch, the last sequence it wrote, and,
// for a transactional producer, its last marker's coordinator epoch and
// the first offset of its open transaction here.
type ActiveProducer struct {
	ProducerID int64
	Epoch      int32
	// LastSequence is the newest batch's last sequence (-1: none).
	LastSequence int32
	// LastWrite is when its newest entry was appended (zero: unknown).
	LastWrite time.Time
	// CoordinatorEpoch is its last transaction marker's (-1: none).
	CoordinatorEpoch int32
	// TxnStartOffset is where its open transaction began on this
	// partition (-1: none open): the last stable offset waits for it.
	TxnStartOffset int64
}

// PartitionProducers is one partition's producers, or Err.
type PartitionProducers struct {
	Topic     string
	Partition int32
	Producers []ActiveProducer
	Err       error
}

// DescribeProducers asks each partition's leader for the producers it
// remembers, the way to find who holds a last stable offset back (a
// transaction left open); per-partition failures are in Err.
func (c *Client) DescribeProducers(ctx context.Context, topic string, partitions []int32) []PartitionProducers {
	out := make([]PartitionProducers, 0, len(partitions))
	for _, p := range partitions {
		pp, err := c.describeProducers(ctx, topic, p)
		if err != nil {
			pp = PartitionProducers{Topic: topic, Partition: p, Err: err}
		}
		out = append(out, pp)
	}
	return out
}

// describeProducers asks one partition's leader, retrying leader changes.
func (c *Client) describeProducers(ctx context.Context, topic string, partition int32) (PartitionProducers, error) {
	pp := PartitionProducers{Topic: topic, Partition: partition}
	if err := c.checkPartition(ctx, topic, partition); err != nil {
		return pp, err
	}
	err := c.withRetries(ctx, func() error {
		node, _, ok := c.leader(topic, partition)
		if !ok {
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, Message: "no leader known"}
		}
		req := &strandpb.DescribeProducersRequest{Partitions: []*strandpb.DescribeProducersRequest_Partition{{Topic: topic, Partition: partition}}}
		resp, err := c.requestNode(ctx, node, &strandpb.Request{Body: &strandpb.Request_DescribeProducers{DescribeProducers: req}}, 0)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return err
		}
		parts := resp.GetDescribeProducers().GetPartitions()
		if len(parts) != 1 || parts[0].GetTopic() != topic || parts[0].GetPartition() != partition {
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "answer lacks the partition"}
		}
		if err := errorFromWire(parts[0].GetError()); err != nil {
			c.applyNotLeader(topic, partition, err)
			return err
		}
		pp.Producers = producersFromWire(parts[0].GetProducers())
		return nil
	})
	return pp, err
}

// producersFromWire converts a partition's described producers.
func producersFromWire(ps []*strandpb.DescribeProducersResponse_Producer) []ActiveProducer {
	out := make([]ActiveProducer, 0, len(ps))
	for _, p := range ps {
		a := ActiveProducer{ProducerID: p.GetProducerId(), Epoch: p.GetProducerEpoch(), LastSequence: p.GetLastSequence(),
			CoordinatorEpoch: p.GetCoordinatorEpoch(), TxnStartOffset: p.GetTxnStartOffset()}
		if ms := p.GetLastTimestampMs(); ms > 0 {
			a.LastWrite = time.UnixMilli(ms)
		}
		out = append(out, a)
	}
	return out
}
