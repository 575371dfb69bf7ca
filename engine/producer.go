package engine

import (
	"fmt"
	"math"

	"github.com/strandlog/strand/engine/compact"
)

// producerBatchesMax is how many recent batches a producer's record keeps,
// as Kafka does: a producer may have 5 batches in flight, and any of them
// may come back as a retry after the later ones were written.
const producerBatchesMax = 5

// ProducerExpirationMs is how long after its last batch a producer's
// record may be forgotten once retention has deleted all its batches (24
// hours, Kafka's producer.id.expiration.ms). Forgetting it as soon as the
// log start passes its last batch, as Kafka does, lets a retry of a batch
// that was written and then deleted be written a second time, after its
// successors: the simulator found exactly that with short retention.
// Compaction drops an expired producer's kept last batch by the same
// figure (engine/compact's rule 6).
const ProducerExpirationMs = compact.ProducerExpirationMs

// producerBatch is one accepted batch of an idempotent producer.
type producerBatch struct {
	baseSequence int32
	recordCount  int32
	baseOffset   int64
}

// endOffset is the offset after the batch's last record.
func (b *producerBatch) endOffset() int64 { return b.baseOffset + int64(b.recordCount) }

// lastSequence is the sequence number of the batch's last record.
func (b *producerBatch) lastSequence() int32 {
	return nextSequence(b.baseSequence, b.recordCount-1)
}

// producerState is the idempotence record of one producer (R15).
type producerState struct {
	epoch int32
	// lastAppendMs is the append time of the entry of the newest batch.
	lastAppendMs int64
	// batches holds the last accepted batches of this epoch, oldest first;
	// batches[count-1] is the newest.
	batches [producerBatchesMax]producerBatch
	count   int
}

// newest is the last accepted batch.
func (s *producerState) newest() *producerBatch { return &s.batches[s.count-1] }

// accept records a batch accepted at epoch. A new epoch forgets the
// batches of the old one.
func (s *producerState) accept(epoch int32, b producerBatch) {
	if epoch != s.epoch {
		s.epoch, s.count = epoch, 0
	}
	if s.count == producerBatchesMax {
		copy(s.batches[:], s.batches[1:])
		s.count--
	}
	s.batches[s.count] = b
	s.count++
}

// nextSequence adds increment (possibly negative) to a sequence number
// modulo 2^31: past math.MaxInt32 it wraps to 0, as Kafka's producer
// sequences do.
func nextSequence(sequence, increment int32) int32 {
	return int32((int64(sequence) + int64(increment)) & math.MaxInt32)
}

// screenProducer applies Kafka's idempotence rules to a valid batch of
// recordCount records from producer e.ProducerID. It returns the state to
// update if the batch is accepted, or the earlier batch it duplicates, or
// the error refusing it. It changes nothing itself.
func (p *Partition) screenProducer(e *EntryFields, recordCount int32) (*producerState, *producerBatch, error) {
	if e.ProducerEpoch < 0 || e.BaseSequence < 0 {
		return nil, nil, fmt.Errorf("%w: producer %d epoch %d sequence %d",
			ErrInvalidEntry, e.ProducerID, e.ProducerEpoch, e.BaseSequence)
	}
	st := p.producers[e.ProducerID]
	if st == nil {
		if e.BaseSequence != 0 {
			return nil, nil, fmt.Errorf("%w: producer %d epoch %d sequence %d",
				ErrUnknownProducer, e.ProducerID, e.ProducerEpoch, e.BaseSequence)
		}
		return &producerState{epoch: e.ProducerEpoch}, nil, nil
	}
	if e.ProducerEpoch > st.epoch {
		if e.BaseSequence != 0 {
			return nil, nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, want 0",
				ErrOutOfOrderSequence, e.ProducerID, e.ProducerEpoch, e.BaseSequence)
		}
		return st, nil, nil
	}
	if e.ProducerEpoch < st.epoch {
		return nil, nil, fmt.Errorf("%w: producer %d epoch %d, current epoch %d",
			ErrProducerFenced, e.ProducerID, e.ProducerEpoch, st.epoch)
	}
	for i := 0; i < st.count; i++ {
		if b := &st.batches[i]; b.baseSequence == e.BaseSequence && b.recordCount == recordCount {
			return nil, b, nil
		}
	}
	if want := nextSequence(st.newest().lastSequence(), 1); e.BaseSequence != want {
		return nil, nil, fmt.Errorf("%w: producer %d epoch %d sequence %d, want %d",
			ErrOutOfOrderSequence, e.ProducerID, e.ProducerEpoch, e.BaseSequence, want)
	}
	return st, nil, nil
}

// check verifies a producer record's invariants: 1 to producerBatchesMax
// batches with consecutive sequences at increasing offsets.
func (s *producerState) check() error {
	if s.epoch < 0 || s.count < 1 || s.count > producerBatchesMax {
		return fmt.Errorf("epoch %d with %d batches", s.epoch, s.count)
	}
	for i := 0; i < s.count; i++ {
		b := &s.batches[i]
		if b.recordCount <= 0 || b.baseSequence < 0 || b.baseOffset < 0 {
			return fmt.Errorf("batch %d: sequence %d, %d records at offset %d", i, b.baseSequence, b.recordCount, b.baseOffset)
		}
		if i == 0 {
			continue
		}
		prev := &s.batches[i-1]
		if b.baseSequence != nextSequence(prev.lastSequence(), 1) || b.baseOffset < prev.baseOffset+int64(prev.recordCount) {
			return fmt.Errorf("batch %d (sequence %d, offset %d) does not follow batch %d (sequence %d, offset %d)",
				i, b.baseSequence, b.baseOffset, i-1, prev.baseSequence, prev.baseOffset)
		}
	}
	return nil
}
