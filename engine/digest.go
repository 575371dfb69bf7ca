package engine

import "fmt"

// The digest of a partition's state lets the simulator compare replicas
// whole, at every applied index, instead of by a summary such as the
// high-water mark: a replica whose restore forgot a producer or an index
// entry differs at the first index it is compared.
//
// It is a function of the state alone (never of the history that built it),
// so a restored partition and one that applied every entry agree. The
// offset index and the producer table are multisets summed modulo 2^64 of
// a strong 64-bit hash per element: Apply, trim and Compacted add and
// subtract the elements they touch (O(1) per batch), RestorePartition sums
// them once, and check (the invariants build) recomputes the sums.
//
// Rejected: a running hash of applied entries (a restore cannot rebuild
// it); hashing Snapshot's bytes at every index (O(state) per entry); XOR
// instead of a sum (two equal elements would cancel).

// digestMix is splitmix64's finalizer: a bijection that spreads every input
// bit over the output.
func digestMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// digestChain folds values into h in order.
func digestChain(h uint64, values ...uint64) uint64 {
	for _, v := range values {
		h = digestMix(h ^ digestMix(v+0x9e3779b97f4a7c15))
	}
	return h
}

// Tags keep the element kinds apart.
const (
	digestTagPartition uint64 = 0x5061727469 // "Parti"
	digestTagBatch     uint64 = 0x4261746368 // "Batch"
	digestTagProducer  uint64 = 0x50726f64   // "Prod"
)

// batchDigest is one offset index entry's hash.
func batchDigest(b *BatchLocation) uint64 {
	return digestChain(digestTagBatch, uint64(b.BaseOffset), uint64(int64(b.RecordCount)), b.RaftIndex,
		uint64(b.AppendTimeMs), uint64(b.MaxTimestampMs))
}

// producerDigest is one producer record's hash.
func producerDigest(id int64, st *producerState) uint64 {
	h := digestChain(digestTagProducer, uint64(id), uint64(int64(st.epoch)), uint64(st.count), uint64(st.lastAppendMs))
	for i := 0; i < st.count; i++ {
		b := &st.batches[i]
		h = digestChain(h, uint64(int64(b.baseSequence)), uint64(int64(b.recordCount)), uint64(b.baseOffset))
	}
	return h
}

// Digest is a deterministic 64-bit hash of the whole state: applied index,
// log start, high-water mark, the offset index and the producer table.
// Replicas at the same applied index have equal digests; O(1).
func (p *Partition) Digest() uint64 {
	return digestChain(digestTagPartition, p.appliedIndex, uint64(p.logStartOffset), uint64(p.nextOffset),
		uint64(len(p.batches)-p.head), p.indexSum, uint64(len(p.producers)), p.producerSum)
}

// digestSums recomputes the offset index and producer table sums from the
// state (map order does not matter to a sum).
func (p *Partition) digestSums() (index, producers uint64) {
	for i := p.head; i < len(p.batches); i++ {
		index += batchDigest(&p.batches[i])
	}
	for id, st := range p.producers {
		producers += producerDigest(id, st)
	}
	return index, producers
}

// checkDigest verifies the incrementally kept sums against the state.
func (p *Partition) checkDigest() error {
	index, producers := p.digestSums()
	if index != p.indexSum || producers != p.producerSum {
		return fmt.Errorf("digest sums index %016x producers %016x, state gives %016x %016x",
			p.indexSum, p.producerSum, index, producers)
	}
	return nil
}

// TailDigest hashes the state but the log start and the offset index: the
// applied index, the high-water mark and the producer table. A replica
// restored from a raft snapshot differs from the others only in the
// batches below a log start they have agreed on through a TRIM it has not
// applied yet (node/snapshot.go); the simulator compares it by this digest
// until then. O(1).
func (p *Partition) TailDigest() uint64 {
	return digestChain(digestTagPartition^1, p.appliedIndex, uint64(p.nextOffset), uint64(len(p.producers)), p.producerSum)
}
