package engine

import "slices"

// ActiveProducer is one producer's state on this partition as Kafka's
// DescribeProducers (KIP-664) reports it: an idempotent or transactional
// producer the partition remembers. Fields without a value are -1.
type ActiveProducer struct {
	ProducerID int64
	Epoch      int32
	// LastSequence is the sequence of the newest accepted batch's last
	// record (-1: the producer only has a transactional record).
	LastSequence int32
	// LastTimestampMs is the append time of its newest entry here (ms).
	LastTimestampMs int64
	// CoordinatorEpoch is the coordinator epoch of its last marker here.
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset its open transaction wrote here.
	TxnStartOffset int64
}

// AppendProducers appends every producer the partition remembers, in
// producer id order: the partition leader's answer to DescribeProducers,
// the operator's view of who holds the last stable offset back.
func (p *Partition) AppendProducers(dst []ActiveProducer) []ActiveProducer {
	ids := make([]int64, 0, len(p.producers)+len(p.txns))
	for id := range p.producers {
		ids = append(ids, id)
	}
	for id := range p.txns {
		if p.producers[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		dst = append(dst, p.activeProducer(id))
	}
	return dst
}

// activeProducer merges id's idempotence and transactional records.
func (p *Partition) activeProducer(id int64) ActiveProducer {
	a := ActiveProducer{ProducerID: id, Epoch: -1, LastSequence: -1, LastTimestampMs: -1, CoordinatorEpoch: -1, TxnStartOffset: -1}
	if st := p.producers[id]; st != nil {
		a.Epoch, a.LastSequence, a.LastTimestampMs = st.epoch, st.newest().lastSequence(), st.lastAppendMs
	}
	if rec := p.txns[id]; rec != nil {
		a.Epoch = max(a.Epoch, rec.epoch)
		a.LastTimestampMs = max(a.LastTimestampMs, rec.lastAppendMs)
		if rec.coordinatorEpoch > 0 { // coordinator epochs are raft terms: 0 is no marker yet
			a.CoordinatorEpoch = rec.coordinatorEpoch
		}
		if rec.open && rec.firstOffset >= 0 {
			a.TxnStartOffset = rec.firstOffset
		}
	}
	return a
}
