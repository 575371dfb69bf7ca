package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
)

// batchOf encodes count records stamped timestampMs, timestampMs+1, ...
func batchOf(t testing.TB, count int, timestampMs int64) []byte {
	t.Helper()
	var b recordbatch.Builder
	b.Reset(nil)
	for i := 0; i < count; i++ {
		if err := b.Append(recordbatch.Record{TimestampMs: timestampMs + int64(i), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

// outcome renders a Result for table comparisons.
func outcome(r Result) string {
	switch {
	case errors.Is(r.Err, ErrInvalidEntry):
		return "invalid"
	case errors.Is(r.Err, ErrOutOfOrderSequence):
		return "out-of-order"
	case errors.Is(r.Err, ErrProducerFenced):
		return "fenced"
	case errors.Is(r.Err, ErrUnknownProducer):
		return "unknown-producer"
	case errors.Is(r.Err, ErrInvalidTxnState):
		return "invalid-txn-state"
	case errors.Is(r.Err, ErrCoordinatorFenced):
		return "coordinator-fenced"
	case r.Err != nil:
		return "error " + r.Err.Error()
	case r.Duplicate:
		return fmt.Sprintf("duplicate base=%d count=%d", r.BaseOffset, r.RecordCount)
	case r.Tier != 0:
		return fmt.Sprintf("tier outcome %d", r.Tier)
	case len(r.TierDropped) > 0:
		return fmt.Sprintf("ok, %d remote segments dropped", len(r.TierDropped))
	default:
		return fmt.Sprintf("ok base=%d count=%d", r.BaseOffset, r.RecordCount)
	}
}

// applyNext applies data at the next raft index.
func applyNext(p *Partition, data []byte) Result { return p.Apply(p.AppliedIndex()+1, data) }

// mustCheck fails the test when an invariant is broken.
func mustCheck(t testing.TB, p *Partition) {
	t.Helper()
	if err := p.check(); err != nil {
		t.Fatalf("invariant: %v", err)
	}
}

// TestApplyAssignsDenseOffsets shows produce entries get consecutive
// offsets, empty entries and trims take none, and Locate finds each batch.
func TestApplyAssignsDenseOffsets(t *testing.T) {
	p := NewPartition()
	r := applyNext(p, EncodeProduceEntry(nil, 1000, 1, NoProducer, batchOf(t, 3, 10)))
	if outcome(r) != "ok base=0 count=3" {
		t.Fatalf("first batch: %s", outcome(r))
	}
	p.ApplyEmpty(2)
	r = applyNext(p, EncodeProduceEntry(nil, 1001, 2, NoProducer, batchOf(t, 2, 20)))
	if outcome(r) != "ok base=3 count=2" {
		t.Fatalf("second batch: %s", outcome(r))
	}
	if p.HighWatermark() != 5 || p.LogStartOffset() != 0 || p.AppliedIndex() != 3 {
		t.Fatalf("hwm %d start %d applied %d", p.HighWatermark(), p.LogStartOffset(), p.AppliedIndex())
	}
	locs, err := p.Locate(4, 10)
	want := BatchLocation{BaseOffset: 3, RecordCount: 2, RaftIndex: 3, AppendTimeMs: 1001, MaxTimestampMs: 21}
	if err != nil || len(locs) != 1 || locs[0] != want {
		t.Fatalf("Locate(4) = %+v, %v; want [%+v]", locs, err, want)
	}
	locs, err = p.Locate(0, 1)
	if err != nil || len(locs) != 1 || locs[0].RaftIndex != 1 {
		t.Fatalf("Locate(0, 1) = %+v, %v", locs, err)
	}
	if locs, err := p.Locate(5, 10); err != nil || len(locs) != 0 {
		t.Fatalf("Locate at the high-water mark = %+v, %v; want none, nil", locs, err)
	}
	if _, err := p.Locate(6, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Locate past the high-water mark: %v", err)
	}
	mustCheck(t, p)
}

// TestInvalidEntriesConsumeOnlyTheIndex shows damaged batches, garbage
// bytes and unknown kinds are refused with ErrInvalidEntry (wrapping the
// batch error) and consume the raft index but no offset.
func TestInvalidEntriesConsumeOnlyTheIndex(t *testing.T) {
	damaged := batchOf(t, 2, 0)
	damaged[len(damaged)-1] ^= 1
	cases := []struct {
		name string
		data []byte
		wrap error
	}{
		{"damaged batch", EncodeProduceEntry(nil, 1, 0, NoProducer, damaged), recordbatch.ErrCorrupt},
		{"no batch", EncodeProduceEntry(nil, 1, 0, NoProducer, nil), recordbatch.ErrCorrupt},
		{"garbage", []byte{0xff, 0xff, 0xff}, ErrInvalidEntry},
		{"empty data", nil, ErrInvalidEntry},
		{"unknown kind", AppendEntry(nil, &EntryFields{Kind: 9}), ErrInvalidEntry},
		{"bad epoch", EncodeProduceEntry(nil, 1, 0, Producer{ID: 1, Epoch: -2}, batchOf(t, 1, 0)), ErrInvalidEntry},
	}
	p := NewPartition()
	for i, c := range cases {
		r := applyNext(p, c.data)
		if !errors.Is(r.Err, ErrInvalidEntry) || !errors.Is(r.Err, c.wrap) {
			t.Fatalf("%s: %v, want ErrInvalidEntry wrapping %v", c.name, r.Err, c.wrap)
		}
		if p.HighWatermark() != 0 || p.AppliedIndex() != uint64(i+1) {
			t.Fatalf("%s: hwm %d applied %d", c.name, p.HighWatermark(), p.AppliedIndex())
		}
	}
	mustCheck(t, p)
}

// TestApplyGapPanics shows a skipped or repeated raft index is a bug.
func TestApplyGapPanics(t *testing.T) {
	for _, index := range []uint64{0, 1, 3} {
		p := NewPartition()
		p.ApplyEmpty(1)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("apply of index %d after 1 did not panic", index)
				}
			}()
			p.Apply(index, nil)
		}()
	}
}

// idempotenceStep is one produce of the idempotence script.
type idempotenceStep struct {
	producer Producer
	count    int
	want     string
}

// TestIdempotence walks Kafka's rules: a retry of any of the last five
// batches is a duplicate with its original offsets; a gap is out of order;
// an old epoch is fenced; a new epoch starts at sequence 0.
func TestIdempotence(t *testing.T) {
	steps := []idempotenceStep{
		{Producer{7, 0, 1}, 3, "unknown-producer"}, // a new producer starts at 0
		{Producer{7, 0, 0}, 3, "ok base=0 count=3"},
		{Producer{7, 0, 0}, 3, "duplicate base=0 count=3"},
		{Producer{7, 0, 0}, 2, "out-of-order"}, // same start, other length
		{Producer{7, 0, 3}, 2, "ok base=3 count=2"},
		{Producer{8, 0, 0}, 1, "ok base=5 count=1"}, // producers are independent
		{Producer{7, 0, 0}, 3, "duplicate base=0 count=3"},
		{Producer{7, 0, 6}, 1, "out-of-order"}, // skipped sequence 5
		{Producer{7, 0, 5}, 1, "ok base=6 count=1"},
		{Producer{7, 0, 6}, 1, "ok base=7 count=1"},
		{Producer{7, 0, 7}, 1, "ok base=8 count=1"},
		{Producer{7, 0, 0}, 3, "duplicate base=0 count=3"}, // still among the last 5
		{Producer{7, 0, 8}, 1, "ok base=9 count=1"},
		{Producer{7, 0, 0}, 3, "out-of-order"}, // now evicted
		{Producer{7, 0, 3}, 2, "duplicate base=3 count=2"},
		{Producer{7, 1, 4}, 1, "out-of-order"}, // a new epoch starts at 0
		{Producer{7, 1, 0}, 2, "ok base=10 count=2"},
		{Producer{7, 0, 9}, 1, "fenced"},
		{Producer{7, 1, 0}, 2, "duplicate base=10 count=2"},
		{Producer{7, 1, 2}, 1, "ok base=12 count=1"},
		{NoProducer, 2, "ok base=13 count=2"},
		{NoProducer, 2, "ok base=15 count=2"}, // no idempotence: written twice
	}
	p := NewPartition()
	for i, s := range steps {
		got := outcome(applyNext(p, EncodeProduceEntry(nil, 0, 0, s.producer, batchOf(t, s.count, 0))))
		if got != s.want {
			t.Fatalf("step %d %+v: %s, want %s", i, s.producer, got, s.want)
		}
		mustCheck(t, p)
	}
}

// TestTrimEvictsProducers shows a trim a day after a producer's last batch
// forgets the producers whose batches it removed, so a late retry learns
// its producer is unknown, while a producer with a retained batch keeps
// its record.
func TestTrimEvictsProducers(t *testing.T) {
	p := NewPartition()
	applyNext(p, EncodeProduceEntry(nil, 0, 0, Producer{1, 0, 0}, batchOf(t, 2, 0))) // [0,2)
	applyNext(p, EncodeProduceEntry(nil, 0, 0, Producer{2, 0, 0}, batchOf(t, 2, 0))) // [2,4)
	applyNext(p, EncodeTrimEntry(nil, ProducerExpirationMs, 0, 3))
	p.Compacted(p.AppliedIndex()) // replica-local: never evicts producers
	if got := outcome(applyNext(p, EncodeProduceEntry(nil, 0, 0, Producer{1, 0, 2}, batchOf(t, 1, 0)))); got != "unknown-producer" {
		t.Fatalf("producer 1 after its batches were trimmed: %s", got)
	}
	if got := outcome(applyNext(p, EncodeProduceEntry(nil, 0, 0, Producer{2, 0, 0}, batchOf(t, 2, 0)))); got != "duplicate base=2 count=2" {
		t.Fatalf("producer 2, whose batch straddles the log start: %s", got)
	}
	if got := outcome(applyNext(p, EncodeProduceEntry(nil, 0, 0, Producer{1, 0, 0}, batchOf(t, 1, 0)))); got != "ok base=4 count=1" {
		t.Fatalf("producer 1 starting over at 0: %s", got)
	}
	mustCheck(t, p)
}

// TestSequenceWraps shows sequences wrap from math.MaxInt32 to 0, for the
// next batch and inside a batch, and survive a snapshot.
func TestSequenceWraps(t *testing.T) {
	p := NewPartition()
	p.Apply(1, EncodeProduceEntry(nil, 0, 0, Producer{3, 0, 0}, batchOf(t, 1, 0)))
	// Pretend the producer already wrote up to MaxInt32-2.
	st := p.producers[3]
	st.batches[0].baseSequence = math.MaxInt32 - 2
	p.indexSum, p.producerSum, p.txnSum = p.digestSums()
	mustCheck(t, p)
	r := p.Apply(2, EncodeProduceEntry(nil, 0, 0, Producer{3, 0, math.MaxInt32 - 1}, batchOf(t, 3, 0)))
	if outcome(r) != "ok base=1 count=3" {
		t.Fatalf("batch across the wrap: %s", outcome(r))
	}
	if got := p.producers[3].newest().lastSequence(); got != 0 {
		t.Fatalf("last sequence %d, want 0 after wrapping", got)
	}
	q, err := RestorePartition(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Partition{p, q} {
		if r := x.Apply(3, EncodeProduceEntry(nil, 0, 0, Producer{3, 0, 1}, batchOf(t, 1, 0))); outcome(r) != "ok base=4 count=1" {
			t.Fatalf("batch after the wrap: %s", outcome(r))
		}
		if r := x.Apply(4, EncodeProduceEntry(nil, 0, 0, Producer{3, 0, math.MaxInt32 - 1}, batchOf(t, 3, 0))); outcome(r) != "duplicate base=1 count=3" {
			t.Fatalf("retry of the wrapping batch: %s", outcome(r))
		}
	}
}

// TestTrim shows trim moves the log start forward only, is clamped to the
// high-water mark, drops wholly trimmed batches and leaves Locate able to
// serve an offset inside the first retained batch.
func TestTrim(t *testing.T) {
	p := NewPartition()
	for i := 0; i < 4; i++ {
		applyNext(p, EncodeProduceEntry(nil, 0, 0, NoProducer, batchOf(t, 10, int64(i*100))))
	}
	trim := func(offset, want int64) {
		t.Helper()
		r := applyNext(p, EncodeTrimEntry(nil, 0, 0, offset))
		if r.Err != nil || p.LogStartOffset() != want {
			t.Fatalf("trim to %d: %+v, log start %d; want %d", offset, r, p.LogStartOffset(), want)
		}
		mustCheck(t, p)
	}
	trim(15, 15)
	trim(3, 15) // never backwards
	if _, err := p.Locate(14, 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Locate below the log start: %v", err)
	}
	locs, err := p.Locate(15, 10)
	if err != nil || len(locs) != 3 || locs[0].BaseOffset != 10 {
		t.Fatalf("Locate(15) = %+v, %v; want the batch at 10 and two more", locs, err)
	}
	if p.OffsetForTimestamp(0) != 15 {
		t.Fatalf("OffsetForTimestamp before everything = %d, want the log start 15", p.OffsetForTimestamp(0))
	}
	trim(1000, 40) // clamped to the high-water mark
	if locs, err := p.Locate(40, 10); err != nil || len(locs) != 0 {
		t.Fatalf("Locate at the high-water mark after a full trim: %+v, %v", locs, err)
	}
	if r := applyNext(p, EncodeProduceEntry(nil, 0, 0, NoProducer, batchOf(t, 1, 0))); outcome(r) != "ok base=40 count=1" {
		t.Fatalf("produce after a full trim: %s", outcome(r))
	}
}

// TestCompacted shows a replica-local raft compaction drops the batches at
// or below the index and moves the log start past them.
func TestCompacted(t *testing.T) {
	p := NewPartition()
	applyNext(p, EncodeProduceEntry(nil, 0, 0, NoProducer, batchOf(t, 2, 0))) // 1: [0,2)
	p.ApplyEmpty(2)
	applyNext(p, EncodeProduceEntry(nil, 0, 0, NoProducer, batchOf(t, 3, 0))) // 3: [2,5)
	applyNext(p, EncodeProduceEntry(nil, 0, 0, NoProducer, batchOf(t, 1, 0))) // 4: [5,6)
	if p.CompactableIndex() != 0 {
		t.Fatalf("CompactableIndex = %d, want 0", p.CompactableIndex())
	}
	p.Compacted(2)
	if p.LogStartOffset() != 2 || p.CompactableIndex() != 2 {
		t.Fatalf("after Compacted(2): log start %d, compactable %d", p.LogStartOffset(), p.CompactableIndex())
	}
	p.Compacted(1) // already gone: no change
	p.Compacted(4)
	if p.LogStartOffset() != 6 || p.CompactableIndex() != 4 {
		t.Fatalf("after Compacted(4): log start %d, compactable %d", p.LogStartOffset(), p.CompactableIndex())
	}
	mustCheck(t, p)
	defer func() {
		if recover() == nil {
			t.Fatalf("Compacted beyond the applied index did not panic")
		}
	}()
	p.Compacted(5)
}

// TestOffsetForTimestamp shows the lookup follows the running maximum of
// batch timestamps, so out-of-order timestamps cannot break the search.
func TestOffsetForTimestamp(t *testing.T) {
	p := NewPartition()
	for _, ts := range []int64{100, 300, 200, 400} { // batches of 2: [ts, ts+1]
		applyNext(p, EncodeProduceEntry(nil, 0, 0, NoProducer, batchOf(t, 2, ts)))
	}
	for _, c := range []struct{ ts, want int64 }{
		{0, 0}, {100, 0}, {101, 0}, {102, 2}, {250, 2}, {301, 2}, {302, 6}, {401, 6}, {402, 8},
	} {
		if got := p.OffsetForTimestamp(c.ts); got != c.want {
			t.Errorf("OffsetForTimestamp(%d) = %d, want %d", c.ts, got, c.want)
		}
	}
}

// TestSnapshotRoundTrip shows a restored partition has the same state and
// bytes, and that unknown versions and garbage are refused.
func TestSnapshotRoundTrip(t *testing.T) {
	p := NewPartition()
	for i := int32(0); i < 7; i++ {
		applyNext(p, EncodeProduceEntry(nil, int64(i), 0, Producer{int64(i % 3), 0, i / 3 * 2}, batchOf(t, 2, 5)))
	}
	applyNext(p, EncodeTrimEntry(nil, 0, 0, 3))
	snap := p.Snapshot()
	q, err := RestorePartition(snap)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !bytes.Equal(q.Snapshot(), snap) {
		t.Fatalf("restored snapshot differs")
	}
	if q.HighWatermark() != p.HighWatermark() || q.LogStartOffset() != 3 || q.AppliedIndex() != 8 {
		t.Fatalf("restored hwm %d start %d applied %d", q.HighWatermark(), q.LogStartOffset(), q.AppliedIndex())
	}
	if _, err := RestorePartition([]byte{0x08, 0x02}); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("version 2: %v", err)
	}
	if _, err := RestorePartition(nil); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("empty bytes (version 0): %v", err)
	}
	if _, err := RestorePartition([]byte{0xff}); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("garbage: %v", err)
	}
}

// TestApplyAllocations shows the produce path allocates nothing per entry
// beyond the index slice's amortized growth.
func TestApplyAllocations(t *testing.T) {
	p := NewPartition()
	batch := batchOf(t, 10, 0)
	var data []byte
	seq := int32(0)
	allocs := testing.AllocsPerRun(1000, func() {
		data = EncodeProduceEntry(data[:0], 0, 0, Producer{1, 0, seq}, batch)
		seq += 10
		if r := applyNext(p, data); r.Err != nil {
			t.Fatal(r.Err)
		}
	})
	if allocs > 0.1 {
		t.Fatalf("Apply allocates %.2f times per entry", allocs)
	}
}

// TestSnapshotDeterministic shows the same entries give byte-identical
// snapshots on two partitions and on two calls, with enough producers that
// map iteration order would show if it reached the bytes.
func TestSnapshotDeterministic(t *testing.T) {
	var entries [][]byte
	for i := int64(0); i < 200; i++ {
		entries = append(entries, EncodeProduceEntry(nil, i, 0, Producer{ID: i * 7919 % 101, BaseSequence: int32(i / 101)}, batchOf(t, 1, i)))
	}
	entries = append(entries, EncodeTrimEntry(nil, 0, 0, 50))
	build := func() *Partition {
		p := NewPartition()
		for _, data := range entries {
			applyNext(p, data)
		}
		return p
	}
	a, b := build(), build()
	first := a.Snapshot()
	if !bytes.Equal(first, a.Snapshot()) || !bytes.Equal(first, b.Snapshot()) {
		t.Fatalf("snapshots of the same entries differ")
	}
	if len(a.producers) != 101 {
		t.Fatalf("%d producers, want 101", len(a.producers))
	}
}

// TestIndexDropsFromFront shows trimming a long index one batch at a time
// compacts the dropped prefix away (head stays below half the slice),
// shrinks the backing array once mostly empty, and keeps Locate right.
func TestIndexDropsFromFront(t *testing.T) {
	p := NewPartition()
	data := EncodeProduceEntry(nil, 0, 0, NoProducer, batchOf(t, 2, 0))
	const batches = 5000
	for i := 0; i < batches; i++ {
		applyNext(p, data)
	}
	capFull := cap(p.batches)
	for offset := int64(1); offset < 2*batches; offset += 3 {
		applyNext(p, EncodeTrimEntry(nil, 0, 0, offset))
		if p.head >= indexCompactMin && p.head*2 >= len(p.batches) {
			t.Fatalf("at offset %d: head %d of %d not compacted", offset, p.head, len(p.batches))
		}
		locs, err := p.Locate(offset, 1)
		if err != nil || len(locs) != 1 || locs[0].BaseOffset != offset/2*2 || locs[0].RaftIndex != uint64(offset/2+1) {
			t.Fatalf("Locate(%d) = %+v, %v", offset, locs, err)
		}
	}
	mustCheck(t, p)
	if cap(p.batches) >= capFull/4 {
		t.Fatalf("backing array kept %d of %d slots for %d live batches", cap(p.batches), capFull, len(p.batches)-p.head)
	}
}

// TestStateSnapshotWithAppendOnlyIndex persists the offset index the way a
// checkpoint does, append-only by ordinal (IndexSince from the last end),
// through appends, trims and both kinds of index compaction, and shows
// every StateSnapshot plus the persisted index restores the same state as
// the whole Snapshot; a wrong index length or the other version is refused.
func TestStateSnapshotWithAppendOnlyIndex(t *testing.T) {
	p := NewPartition()
	var persisted []BatchLocation // by ordinal, as the chunks hold them
	checkpoint := func() {
		t.Helper()
		start, end := p.IndexOrdinals()
		for int64(len(persisted)) < start { // trimmed before ever persisted: never read
			persisted = append(persisted, BatchLocation{})
		}
		persisted = append(persisted, p.IndexSince(int64(len(persisted)))...)
		if int64(len(persisted)) != end {
			t.Fatalf("persisted %d, index end %d", len(persisted), end)
		}
		q, err := RestorePartitionIndexed(p.StateSnapshot(), slices.Clone(persisted[start:end]))
		if err != nil {
			t.Fatalf("restore at %d: %v", p.AppliedIndex(), err)
		}
		if !bytes.Equal(q.Snapshot(), p.Snapshot()) {
			t.Fatalf("restored state at %d differs", p.AppliedIndex())
		}
		if qs, qe := q.IndexOrdinals(); qs != start || qe != end {
			t.Fatalf("restored ordinals [%d, %d), want [%d, %d)", qs, qe, start, end)
		}
	}
	appended := int64(0)
	for i := range 3000 {
		producer := NoProducer
		if i%4 == 0 { // some producers on record; trims evict them
			producer = Producer{ID: int64(i % 3), BaseSequence: int32(i / 4)}
		}
		r := applyNext(p, EncodeProduceEntry(nil, int64(i), 0, producer, batchOf(t, 1+i%3, int64(i))))
		if r.Err == nil && !r.Duplicate {
			appended++
		}
		if i%7 == 0 {
			applyNext(p, EncodeTrimEntry(nil, 0, 0, p.HighWatermark()-int64(40+i%300)))
		}
		if i%50 == 0 {
			checkpoint()
		}
	}
	applyNext(p, EncodeTrimEntry(nil, 0, 0, p.HighWatermark())) // nothing left indexed
	checkpoint()
	if start, end := p.IndexOrdinals(); start != end || end != appended {
		t.Fatalf("ordinals [%d, %d) after trimming all %d batches", start, end, appended)
	}

	if _, err := RestorePartitionIndexed(p.StateSnapshot(), persisted[:1]); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("index of the wrong length: %v", err)
	}
	if _, err := RestorePartitionIndexed(p.Snapshot(), nil); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("version 1 bytes as a state: %v", err)
	}
	if _, err := RestorePartition(p.StateSnapshot()); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("version 2 bytes as a whole snapshot: %v", err)
	}
}
