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
	digestTagPartition  uint64 = 0x5061727469 // "Parti"
	digestTagBatch      uint64 = 0x4261746368 // "Batch"
	digestTagProducer   uint64 = 0x50726f64   // "Prod"
	digestTagTxn        uint64 = 0x54786e     // "Txn"
	digestTagAborted    uint64 = 0x41626f7274 // "Abort"
	digestTagCompaction uint64 = 0x436f6d70   // "Comp"
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

// txnDigest is one transactional record's hash.
func txnDigest(id int64, rec *txnProducer) uint64 {
	open := uint64(0)
	if rec.open {
		open = 1
	}
	return digestChain(digestTagTxn, uint64(id), uint64(int64(rec.epoch)), uint64(int64(rec.coordinatorEpoch)),
		open, uint64(rec.firstOffset), uint64(rec.lastAppendMs))
}

// abortedDigest is one aborted-transaction index entry's hash.
func abortedDigest(a *AbortedTxn) uint64 {
	return digestChain(digestTagAborted, uint64(a.ProducerID), uint64(a.FirstOffset), uint64(a.LastOffset))
}

// Digest is a deterministic 64-bit hash of the whole state: applied index,
// log start, high-water mark, the offset index, the producer table and the
// transactional state. Replicas at the same applied index have equal
// digests; O(1). The covered index batches are left out (coverEnd: below
// the compaction record's CleanedTo or the remote log's end): each replica
// drops them with its raft log at its own pace.
func (p *Partition) Digest() uint64 {
	h := digestChain(digestTagPartition, p.appliedIndex, uint64(p.logStartOffset), uint64(p.nextOffset),
		uint64(len(p.batches)-p.head-p.covered), p.indexSum-p.coveredSum, uint64(len(p.producers)), p.producerSum)
	return p.chainTier(p.chainCompaction(p.chainTxns(h)))
}

// chainTxns folds the transactional state into h; without any it leaves
// h alone, so a partition that never saw a transaction keeps the digest
// it had before transactions existed.
func (p *Partition) chainTxns(h uint64) uint64 {
	if len(p.txns) == 0 && len(p.aborted) == p.abortedHead {
		return h
	}
	return digestChain(h, uint64(len(p.txns)), uint64(len(p.aborted)-p.abortedHead), p.txnSum)
}

// digestSums recomputes the offset index, producer table and transactional
// sums from the state (map order does not matter to a sum).
func (p *Partition) digestSums() (index, producers, txns uint64) {
	for i := p.head; i < len(p.batches); i++ {
		index += batchDigest(&p.batches[i])
	}
	for id, st := range p.producers {
		producers += producerDigest(id, st)
	}
	for id, rec := range p.txns {
		txns += txnDigest(id, rec)
	}
	for i := p.abortedHead; i < len(p.aborted); i++ {
		txns += abortedDigest(&p.aborted[i])
	}
	return index, producers, txns
}

// coveredSums recomputes coveredSum and covered: the indexed batches
// wholly below coverEnd, at the index's start.
func (p *Partition) coveredSums() (sum uint64, n int) {
	end := p.coverEnd()
	for i := p.head; i < len(p.batches) && p.batches[i].endOffset() <= end; i++ {
		sum += batchDigest(&p.batches[i])
		n++
	}
	return sum, n
}

// checkDigest verifies the incrementally kept sums against the state.
func (p *Partition) checkDigest() error {
	if sum, n := p.coveredSums(); sum != p.coveredSum || n != p.covered {
		return fmt.Errorf("covered batches %d sum %016x, state gives %d %016x", p.covered, p.coveredSum, n, sum)
	}
	index, producers, txns := p.digestSums()
	if index != p.indexSum || producers != p.producerSum || txns != p.txnSum {
		return fmt.Errorf("digest sums index %016x producers %016x txns %016x, state gives %016x %016x %016x",
			p.indexSum, p.producerSum, p.txnSum, index, producers, txns)
	}
	return nil
}

// TailDigest hashes the state but the log start and the offset index: the
// applied index, the high-water mark, the producer table and the
// transactional state (trimmed only by TRIM entries, like producers). A replica
// restored from a raft snapshot differs from the others only in the
// batches below a log start they have agreed on through a TRIM it has not
// applied yet (node/snapshot.go); the simulator compares it by this digest
// until then. O(1).
func (p *Partition) TailDigest() uint64 {
	return p.chainTier(p.chainCompaction(p.chainTxns(digestChain(digestTagPartition^1, p.appliedIndex, uint64(p.nextOffset), uint64(len(p.producers)), p.producerSum))))
}

// digestKey is every input of Digest and TailDigest while the partition
// holds no compaction decision (chainCompaction leaves them alone): equal
// keys, equal digests.
type digestKey struct {
	appliedIndex, indexSum, producerSum, txnSum uint64
	logStartOffset, nextOffset                  int64
	batches, producers, txns, aborted           int
}

// same is k == *o, field by field: the struct comparison calls memequal,
// and Digests runs for every replica after every Ready in the simulator
// (1.3% of a run's CPU went to that call).
func (k *digestKey) same(o *digestKey) bool {
	return k.appliedIndex == o.appliedIndex && k.indexSum == o.indexSum && k.producerSum == o.producerSum &&
		k.txnSum == o.txnSum && k.logStartOffset == o.logStartOffset && k.nextOffset == o.nextOffset &&
		k.batches == o.batches && k.producers == o.producers && k.txns == o.txns && k.aborted == o.aborted
}

// digestMemo is the last answer of Digests and the key it was computed
// for.
type digestMemo struct {
	key          digestKey
	digest, tail uint64
	ok           bool
}

// Digests returns Digest and TailDigest, computing them again only when
// one of their inputs changed: the simulator asks every replica after
// every event, and most events leave most partitions as they were. With a
// compaction decision it computes them every time.
func (p *Partition) Digests() (digest, tail uint64) {
	if p.compaction.Decision.Generation != 0 || p.tier.Active() {
		return p.Digest(), p.TailDigest()
	}
	k := digestKey{
		appliedIndex: p.appliedIndex, indexSum: p.indexSum, producerSum: p.producerSum, txnSum: p.txnSum,
		logStartOffset: p.logStartOffset, nextOffset: p.nextOffset,
		batches: len(p.batches) - p.head, producers: len(p.producers), txns: len(p.txns), aborted: len(p.aborted) - p.abortedHead,
	}
	if m := &p.digests; m.ok && m.key.same(&k) {
		return m.digest, m.tail
	}
	digest, tail = p.Digest(), p.TailDigest()
	p.digests = digestMemo{key: k, digest: digest, tail: tail, ok: true}
	return digest, tail
}
