package txn

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// DecodeCommand parses a record value of the coordinator's log. Bytes that
// are not a TxnCommand with a body are an ErrInvalid error; the host skips
// such a record (as every replica does, so they stay equal).
func DecodeCommand(b []byte) (*strandpb.TxnCommand, error) {
	var cmd strandpb.TxnCommand
	if err := proto.Unmarshal(b, &cmd); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if cmd.GetBody() == nil {
		return nil, fmt.Errorf("%w: command without a body", ErrInvalid)
	}
	return &cmd, nil
}

// EncodeCommand marshals cmd deterministically.
func EncodeCommand(cmd *strandpb.TxnCommand) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
}

// Apply applies one command of the coordinator's log. A snapshot command
// is not applied here: the host restores it (Restore) when it starts from
// it, and a running state has the same contents already.
func (s *State) Apply(cmd *strandpb.TxnCommand) Result {
	now := cmd.GetNowMs()
	switch b := cmd.GetBody().(type) {
	case *strandpb.TxnCommand_InitProducerId:
		c := b.InitProducerId
		init := InitProducerID{ID: c.GetTransactionalId(), TimeoutMs: c.GetTimeoutMs(), MaxTimeoutMs: c.GetMaxTimeoutMs(), NowMs: now}
		if c.GetExpected() != nil {
			p, err := producerFromWire(c.GetExpected())
			if err != nil {
				return refuse(err)
			}
			init.Expected = &p
		}
		return s.InitProducerID(init)
	case *strandpb.TxnCommand_AddPartitions:
		return s.applyAddPartitions(b.AddPartitions, now)
	case *strandpb.TxnCommand_AddOffsets:
		p, err := producerFromWire(b.AddOffsets.GetProducer())
		if err != nil {
			return refuse(err)
		}
		return s.AddOffsets(AddOffsets{ID: b.AddOffsets.GetTransactionalId(), Producer: p, Group: b.AddOffsets.GetGroup(), NowMs: now})
	case *strandpb.TxnCommand_EndTxn:
		p, err := producerFromWire(b.EndTxn.GetProducer())
		if err != nil {
			return refuse(err)
		}
		return s.EndTxn(EndTxn{ID: b.EndTxn.GetTransactionalId(), Producer: p, Commit: b.EndTxn.GetCommit(),
			KeepEpoch: b.EndTxn.GetKeepEpoch(), NowMs: now})
	case *strandpb.TxnCommand_MarkerWritten:
		return s.applyMarker(b.MarkerWritten, now)
	case *strandpb.TxnCommand_TimeoutAbort:
		p, err := producerFromWire(b.TimeoutAbort.GetProducer())
		if err != nil {
			return refuse(err)
		}
		return s.TimeoutAbort(TimeoutAbort{ID: b.TimeoutAbort.GetTransactionalId(), Producer: p, NowMs: now})
	case *strandpb.TxnCommand_AdminAbort:
		return s.AdminAbort(AdminAbort{ID: b.AdminAbort.GetTransactionalId(), NowMs: now})
	case *strandpb.TxnCommand_GrantProducerIds:
		return s.GrantProducerIDs(b.GrantProducerIds.GetFirst(), b.GrantProducerIds.GetCount())
	case *strandpb.TxnCommand_ExpireIdsRetentionMs:
		return s.ExpireIDs(now, b.ExpireIdsRetentionMs)
	case *strandpb.TxnCommand_Snapshot:
		return Result{}
	}
	return refuse(fmt.Errorf("%w: command without a body", ErrInvalid))
}

// applyAddPartitions decodes and applies an AddPartitionsToTxn.
func (s *State) applyAddPartitions(c *strandpb.TxnAddPartitions, now int64) Result {
	p, err := producerFromWire(c.GetProducer())
	if err != nil {
		return refuse(err)
	}
	tps, err := partitionsFromWire(c.GetTopics())
	if err != nil {
		return refuse(err)
	}
	return s.AddPartitions(AddPartitions{ID: c.GetTransactionalId(), Producer: p, Partitions: tps, NowMs: now})
}

// applyMarker decodes and applies a marker report.
func (s *State) applyMarker(c *strandpb.TxnMarkerWritten, now int64) Result {
	p, err := producerFromWire(c.GetMarker())
	if err != nil {
		return refuse(err)
	}
	return s.MarkerWritten(MarkerWritten{ID: c.GetTransactionalId(), Marker: p,
		Partition: TopicPartition{Topic: c.GetTopic(), Partition: c.GetPartition()}, Group: c.GetGroup(), NowMs: now})
}

// producerFromWire reads a producer id and epoch; an epoch outside int16
// is ErrInvalid.
func producerFromWire(p *strandpb.TxnProducer) (Producer, error) {
	if p == nil {
		return noProducer, fmt.Errorf("%w: no producer id and epoch", ErrInvalid)
	}
	if p.GetEpoch() < -1 || p.GetEpoch() > math.MaxInt16 {
		return noProducer, fmt.Errorf("%w: epoch %d", ErrInvalid, p.GetEpoch())
	}
	return Producer{ID: p.GetProducerId(), Epoch: int16(p.GetEpoch())}, nil
}

// producerToWire is the inverse of producerFromWire.
func producerToWire(p Producer) *strandpb.TxnProducer {
	return &strandpb.TxnProducer{ProducerId: p.ID, Epoch: int32(p.Epoch)}
}

// partitionsFromWire flattens per-topic lists, bounded by PartitionsMax.
func partitionsFromWire(in []*strandpb.TxnPartitions) ([]TopicPartition, error) {
	var out []TopicPartition
	for _, tp := range in {
		if len(out)+len(tp.GetPartitions()) > PartitionsMax {
			return nil, fmt.Errorf("%w: more than %d partitions", ErrInvalid, PartitionsMax)
		}
		for _, p := range tp.GetPartitions() {
			out = append(out, TopicPartition{Topic: tp.GetTopic(), Partition: p})
		}
	}
	return out, nil
}

// partitionsToWire groups sorted partitions by topic.
func partitionsToWire(ps []TopicPartition) []*strandpb.TxnPartitions {
	var out []*strandpb.TxnPartitions
	for _, p := range ps {
		if n := len(out); n == 0 || out[n-1].Topic != p.Topic {
			out = append(out, &strandpb.TxnPartitions{Topic: p.Topic})
		}
		last := out[len(out)-1]
		last.Partitions = append(last.Partitions, p.Partition)
	}
	return out
}
