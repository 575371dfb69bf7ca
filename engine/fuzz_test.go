package engine

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzBase builds the partition FuzzApply starts from: batches from two
// idempotent producers and one plain, and a trim into the first batch.
func fuzzBase(t testing.TB) *Partition {
	p := NewPartition()
	applyNext(p, EncodeProduceEntry(nil, 10, 1, Producer{0, 0, 0}, batchOf(t, 3, 100)))
	applyNext(p, EncodeProduceEntry(nil, 11, 2, Producer{1, 2, 0}, batchOf(t, 2, 50)))
	applyNext(p, EncodeProduceEntry(nil, 12, 3, NoProducer, batchOf(t, 1, 200)))
	applyNext(p, EncodeTrimEntry(nil, 13, 4, 1))
	applyNext(p, EncodeProduceEntry(nil, 14, 5, Producer{0, 0, 3}, batchOf(t, 2, 300)))
	return p
}

// fuzzTxnBase is fuzzBase with transactions: an aborted one in the index,
// one open that wrote, one begun that did not.
func fuzzTxnBase(t testing.TB) *Partition {
	p := fuzzBase(t)
	applyNext(p, EncodeTxnBeginEntry(nil, 15, 6, 5, 0))
	applyNext(p, EncodeTransactionalProduceEntry(nil, 16, 7, Producer{5, 0, 0}, batchOf(t, 2, 400)))
	applyNext(p, EncodeTxnMarkerEntry(nil, 17, 8, Marker{ProducerID: 5, ProducerEpoch: 1, CoordinatorEpoch: 2}))
	applyNext(p, EncodeTxnBeginEntry(nil, 18, 9, 6, 3))
	applyNext(p, EncodeTransactionalProduceEntry(nil, 19, 10, Producer{6, 3, 0}, batchOf(t, 1, 500)))
	applyNext(p, EncodeTxnBeginEntry(nil, 20, 11, 5, 1))
	return p
}

// fuzzApplySeeds are entries worth starting from: the next batch of each
// producer, retries, a fenced epoch, trims and near-garbage.
func fuzzApplySeeds(t testing.TB) [][2][]byte {
	next := EncodeProduceEntry(nil, 20, 6, Producer{0, 0, 5}, batchOf(t, 2, 400))
	return [][2][]byte{
		{next, EncodeProduceEntry(nil, 21, 7, Producer{0, 0, 5}, batchOf(t, 2, 400))},
		{EncodeProduceEntry(nil, 20, 6, Producer{1, 1, 0}, batchOf(t, 1, 0)), EncodeTrimEntry(nil, 0, 0, 4)},
		{EncodeProduceEntry(nil, 20, 6, Producer{1, 3, 0}, batchOf(t, 1, 0)), EncodeProduceEntry(nil, 0, 0, Producer{2, 0, 0}, batchOf(t, 4, 0))},
		{EncodeTrimEntry(nil, 0, 0, 1000), next},
		{next[:len(next)-3], {0x08, 0x02, 0x30, 0x7f}},
		{{}, {0xff}},
		{EncodeTxnBeginEntry(nil, 20, 6, 0, 0), EncodeTransactionalProduceEntry(nil, 21, 7, Producer{0, 0, 5}, batchOf(t, 1, 0))},
		{EncodeTransactionalProduceEntry(nil, 21, 7, Producer{6, 3, 1}, batchOf(t, 1, 0)), EncodeTxnMarkerEntry(nil, 22, 8, Marker{ProducerID: 6, ProducerEpoch: 4, CoordinatorEpoch: 1})},
		{EncodeTxnMarkerEntry(nil, 22, 8, Marker{ProducerID: 6, ProducerEpoch: 3, CoordinatorEpoch: 0, Commit: true}), EncodeTrimEntry(nil, 0, 0, 9)},
		{EncodeTransactionalProduceEntry(nil, 21, 7, Producer{5, 1, 0}, batchOf(t, 1, 0)), EncodeTxnMarkerEntry(nil, 22, 8, Marker{ProducerID: 5, ProducerEpoch: 1, CoordinatorEpoch: 1})},
		{EncodeCompactEntry(nil, 0, decision(1, 4)), EncodeCompactDoneEntry(nil, 30, 0, 1, 3, [32]byte{1})},
		{EncodeCompactEntry(nil, 0, decision(1, 9)), EncodeCompactEntry(nil, 0, decision(2, 4))},
	}
}

// FuzzApply feeds two arbitrary entries to a partition holding producers,
// a trimmed log and transactions (open, begun, aborted): no panic, every invariant holds after each, a refused
// entry changes nothing but the applied index, and the state survives a
// snapshot round trip byte for byte.
func FuzzApply(f *testing.F) {
	for _, s := range fuzzApplySeeds(f) {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		p := fuzzTxnBase(t)
		for _, data := range [][]byte{first, second} {
			before := p.Snapshot()
			r := applyNext(p, data)
			if err := p.check(); err != nil {
				t.Fatalf("invariant after %x: %v", data, err)
			}
			if r.Err != nil {
				if !errors.Is(r.Err, ErrInvalidEntry) && !errors.Is(r.Err, ErrOutOfOrderSequence) && !errors.Is(r.Err, ErrProducerFenced) && !errors.Is(r.Err, ErrUnknownProducer) &&
					!errors.Is(r.Err, ErrInvalidTxnState) && !errors.Is(r.Err, ErrCoordinatorFenced) &&
					!errors.Is(r.Err, ErrCompactionGeneration) && !errors.Is(r.Err, ErrCompactionDiverged) {
					t.Fatalf("error %v wraps no sentinel", r.Err)
				}
				q, err := RestorePartition(before)
				if err != nil {
					t.Fatal(err)
				}
				q.ApplyEmpty(q.AppliedIndex() + 1)
				if !bytes.Equal(q.Snapshot(), p.Snapshot()) {
					t.Fatalf("refused entry %x changed more than the applied index", data)
				}
			}
			snap := p.Snapshot()
			q, err := RestorePartition(snap)
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			if !bytes.Equal(q.Snapshot(), snap) {
				t.Fatalf("snapshot round trip differs")
			}
		}
	})
}

// FuzzRestore feeds arbitrary bytes to RestorePartition: no panic, and what
// it accepts satisfies every invariant and snapshots to an equal state.
func FuzzRestore(f *testing.F) {
	f.Add(fuzzBase(f).Snapshot())
	f.Add(fuzzTxnBase(f).Snapshot())
	f.Add(fuzzTxnBase(f).StateSnapshot())
	f.Add(NewPartition().Snapshot())
	f.Add(compactionSample(f).Snapshot())
	f.Add(compactionSample(f).StateSnapshot())
	f.Fuzz(func(t *testing.T, snap []byte) {
		p, err := RestorePartition(snap)
		if err != nil {
			if !errors.Is(err, ErrInvalidSnapshot) {
				t.Fatalf("error %v is not ErrInvalidSnapshot", err)
			}
			return
		}
		if err := p.check(); err != nil {
			t.Fatalf("restored a broken state: %v", err)
		}
		q, err := RestorePartition(p.Snapshot())
		if err != nil || !bytes.Equal(q.Snapshot(), p.Snapshot()) {
			t.Fatalf("re-snapshot of a restored state: %v", err)
		}
	})
}
