package engine

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/proto/strandpb"
)

// decision is a valid decision of generation gen up to end.
func decision(gen uint64, end int64) compact.Decision {
	return compact.Decision{Generation: gen, CleanableEnd: end, TimeMs: 100 + int64(gen), DeleteRetentionMs: 50, OffsetMapBytes: 1 << 20}
}

// stamped is d as the engine records it: with p's log start (rule 8).
func stamped(d compact.Decision, p *Partition) compact.Decision {
	d.LogStart = p.LogStartOffset()
	return d
}

// refused applies data to p and fails unless it is refused with want and
// changes nothing but the applied index.
func refused(t *testing.T, p *Partition, what string, data []byte, want error) {
	t.Helper()
	before := p.Compaction()
	if r := applyNext(p, data); !errors.Is(r.Err, want) {
		t.Fatalf("%s: %s, want %v", what, outcome(r), want)
	}
	if p.Compaction() != before {
		t.Fatalf("%s: refused, but the record changed to %+v", what, p.Compaction())
	}
	mustCheck(t, p)
}

// TestCompactDecisionOrder shows a COMPACT takes effect only as the next
// generation, with its fields in range and its cleanable end between the
// last decision's and the last stable offset (the high-water mark without
// an open transaction).
func TestCompactDecisionOrder(t *testing.T) {
	p := fuzzBase(t) // high-water mark 8
	refused(t, p, "generation 0", EncodeCompactEntry(nil, 0, decision(0, 4)), ErrCompactionGeneration)
	refused(t, p, "generation 2 first", EncodeCompactEntry(nil, 0, decision(2, 4)), ErrCompactionGeneration)
	refused(t, p, "past the high-water mark", EncodeCompactEntry(nil, 0, decision(1, 9)), ErrInvalidEntry)
	if r := applyNext(p, EncodeCompactEntry(nil, 0, decision(1, 5))); r.Err != nil {
		t.Fatalf("decision 1: %v", r.Err)
	}
	if got := p.Compaction(); got.Decision != stamped(decision(1, 5), p) || got.DoneGeneration != 0 {
		t.Fatalf("record %+v after decision 1", got)
	}
	refused(t, p, "generation 1 again", EncodeCompactEntry(nil, 0, decision(1, 6)), ErrCompactionGeneration)
	refused(t, p, "generation 3 skipping 2", EncodeCompactEntry(nil, 0, decision(3, 6)), ErrCompactionGeneration)
	refused(t, p, "cleanable end moving back", EncodeCompactEntry(nil, 0, decision(2, 4)), ErrInvalidEntry)
	for name, d := range map[string]compact.Decision{
		"negative retention": {Generation: 2, CleanableEnd: 6, TimeMs: 1, DeleteRetentionMs: -1, OffsetMapBytes: 1 << 20},
		"negative time":      {Generation: 2, CleanableEnd: 6, TimeMs: -1, OffsetMapBytes: 1 << 20},
		"tiny offset map":    {Generation: 2, CleanableEnd: 6, TimeMs: 1, OffsetMapBytes: compact.SlotBytes},
	} {
		refused(t, p, name, EncodeCompactEntry(nil, 0, d), ErrInvalidEntry)
	}
	if r := applyNext(p, EncodeCompactEntry(nil, 0, decision(2, 5))); r.Err != nil {
		t.Fatalf("decision 2 at the same cleanable end: %v", r.Err)
	}
	// A transaction open from offset 8: a pass would take its records as
	// committed, so the cleanable end stops at the last stable offset.
	applyNext(p, EncodeTxnBeginEntry(nil, 20, 0, 9, 0))
	applyNext(p, EncodeTransactionalProduceEntry(nil, 21, 0, Producer{9, 0, 0}, batchOf(t, 2, 500)))
	if p.LastStableOffset() != 8 || p.HighWatermark() != 10 {
		t.Fatalf("LSO %d, high-water mark %d: the sample changed", p.LastStableOffset(), p.HighWatermark())
	}
	refused(t, p, "past the last stable offset", EncodeCompactEntry(nil, 0, decision(3, 9)), ErrInvalidEntry)
	if r := applyNext(p, EncodeCompactEntry(nil, 0, decision(3, 8))); r.Err != nil {
		t.Fatalf("decision 3 at the last stable offset: %v", r.Err)
	}
}

// TestCompactDoneRecordsOutcome shows a reported outcome is recorded only
// for a decided generation after the last reported, inside the decision's
// range; a resend is a no-op and a different outcome for the same
// generation is ErrCompactionDiverged.
func TestCompactDoneRecordsOutcome(t *testing.T) {
	p := fuzzBase(t)
	digest := [sha256.Size]byte{1, 2, 3}
	done := func(gen uint64, cleanedTo int64, d [sha256.Size]byte) []byte {
		return EncodeCompactDoneEntry(nil, 200, 0, gen, cleanedTo, d)
	}
	refused(t, p, "outcome before any decision", done(1, 3, digest), ErrCompactionGeneration)
	applyNext(p, EncodeCompactEntry(nil, 0, decision(1, 5)))
	refused(t, p, "outcome of an undecided generation", done(2, 3, digest), ErrCompactionGeneration)
	refused(t, p, "cleaned past the cleanable end", done(1, 6, digest), ErrInvalidEntry)
	short := AppendEntry(nil, &EntryFields{Kind: strandpb.EntryKind_ENTRY_KIND_COMPACT_DONE, CompactGeneration: 1, CompactOffset: 3, CompactDigest: digest[:31]})
	refused(t, p, "short digest", short, ErrInvalidEntry)
	if r := applyNext(p, done(1, 3, digest)); r.Err != nil {
		t.Fatalf("outcome 1: %v", r.Err)
	}
	want := CompactionState{Decision: stamped(decision(1, 5), p), DoneGeneration: 1, CleanedTo: 3, Digest: digest}
	if p.Compaction() != want {
		t.Fatalf("record %+v, want %+v", p.Compaction(), want)
	}
	if r := applyNext(p, done(1, 3, digest)); r.Err != nil {
		t.Fatalf("resent outcome: %v", r.Err)
	}
	refused(t, p, "another digest for generation 1", done(1, 3, [sha256.Size]byte{9}), ErrCompactionDiverged)
	refused(t, p, "another cleaned-to for generation 1", done(1, 4, digest), ErrCompactionDiverged)
	applyNext(p, EncodeCompactEntry(nil, 0, decision(2, 7)))
	refused(t, p, "cleaned-to moving back", done(2, 2, digest), ErrInvalidEntry)
	refused(t, p, "decision below the reported cleaned-to", EncodeCompactEntry(nil, 0, decision(3, 2)), ErrInvalidEntry)
	applyNext(p, EncodeCompactEntry(nil, 0, decision(3, 8)))
	if r := applyNext(p, done(3, 8, digest)); r.Err != nil {
		t.Fatalf("outcome 3 with 2 never reported: %v", r.Err)
	}
	refused(t, p, "outcome of 2 after 3", done(2, 7, digest), ErrCompactionGeneration)
}

// compactionSample is fuzzBase with two decisions and one outcome.
func compactionSample(t testing.TB) *Partition {
	p := fuzzBase(t)
	for _, data := range [][]byte{
		EncodeCompactEntry(nil, 0, decision(1, 5)),
		EncodeCompactDoneEntry(nil, 200, 0, 1, 3, [sha256.Size]byte{4, 5}),
		EncodeCompactEntry(nil, 0, decision(2, 6)),
	} {
		if r := applyNext(p, data); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return p
}

// TestCompactionSnapshotRoundTrip shows both snapshot forms carry the
// record: the restored partition has the same bytes, digests and record,
// and decides the next compaction entries as the original does.
func TestCompactionSnapshotRoundTrip(t *testing.T) {
	for _, indexedForm := range []bool{false, true} {
		p := compactionSample(t)
		start, _ := p.IndexOrdinals()
		q, err := RestorePartition(p.Snapshot())
		if indexedForm {
			q, err = RestorePartitionIndexed(p.StateSnapshot(), slices.Clone(p.IndexSince(start)))
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(q.Snapshot(), p.Snapshot()) || q.Digest() != p.Digest() || q.TailDigest() != p.TailDigest() ||
			q.Compaction() != p.Compaction() {
			t.Fatalf("restored state differs: %+v, want %+v", q.Compaction(), p.Compaction())
		}
		for _, data := range [][]byte{
			EncodeCompactEntry(nil, 0, decision(2, 7)),
			EncodeCompactDoneEntry(nil, 1, 0, 1, 3, [sha256.Size]byte{4, 5}),
			EncodeCompactDoneEntry(nil, 1, 0, 2, 6, [sha256.Size]byte{6}),
			EncodeCompactEntry(nil, 0, decision(3, 7)),
		} {
			if a, b := outcome(applyNext(q, data)), outcome(applyNext(p, data)); a != b {
				t.Fatalf("restored partition decides %s, original %s", a, b)
			}
		}
	}
}

// TestCompactionInDigest shows the record is part of both digests: a
// replica that missed a decision or an outcome differs from one that
// applied it.
func TestCompactionInDigest(t *testing.T) {
	a, b := fuzzBase(t), fuzzBase(t)
	applyNext(a, EncodeCompactEntry(nil, 0, decision(1, 5)))
	b.ApplyEmpty(b.AppliedIndex() + 1)
	if a.Digest() == b.Digest() || a.TailDigest() == b.TailDigest() {
		t.Fatalf("a decision left the digests unchanged")
	}
	applyNext(a, EncodeCompactDoneEntry(nil, 1, 0, 1, 3, [sha256.Size]byte{1}))
	applyNext(b, EncodeCompactEntry(nil, 0, decision(1, 5)))
	if a.Digest() == b.Digest() || a.TailDigest() == b.TailDigest() {
		t.Fatalf("an outcome left the digests unchanged")
	}
}

// TestNoCompactionKeepsFormat shows a partition that never saw a COMPACT
// writes no compaction field and keeps the digests it had before
// compaction existed, and entries of the other kinds carry no compaction
// field.
func TestNoCompactionKeepsFormat(t *testing.T) {
	for _, p := range []*Partition{fuzzBase(t), fuzzTxnBase(t)} {
		for _, data := range [][]byte{p.Snapshot(), p.StateSnapshot()} {
			var snap strandpb.PartitionSnapshot
			if err := proto.Unmarshal(data, &snap); err != nil {
				t.Fatal(err)
			}
			if snap.Compaction != nil {
				t.Fatalf("compaction field in a snapshot without compaction")
			}
		}
		h := digestChain(digestTagPartition, p.appliedIndex, uint64(p.logStartOffset), uint64(p.nextOffset),
			uint64(len(p.batches)-p.head), p.indexSum, uint64(len(p.producers)), p.producerSum)
		tail := digestChain(digestTagPartition^1, p.appliedIndex, uint64(p.nextOffset), uint64(len(p.producers)), p.producerSum)
		if p.Digest() != p.chainTxns(h) || p.TailDigest() != p.chainTxns(tail) {
			t.Fatalf("digest of a partition without compaction changed")
		}
	}
	for _, data := range [][]byte{
		EncodeProduceEntry(nil, 1, 2, Producer{ID: 3, Epoch: 4, BaseSequence: 5}, []byte("x")),
		EncodeTrimEntry(nil, 1, 2, 3),
		EncodeTxnMarkerEntry(nil, 1, 2, Marker{ProducerID: 3, ProducerEpoch: 4, CoordinatorEpoch: 5}),
	} {
		e, err := DecodeEntry(data)
		if err != nil || e.CompactGeneration != 0 || e.CompactOffset != 0 || e.DeleteRetentionMs != 0 ||
			e.OffsetMapBytes != 0 || e.CompactDigest != nil {
			t.Fatalf("entry %x carries compaction fields: %+v, %v", data, e, err)
		}
	}
}

// TestRestoreRefusesBadCompaction shows a snapshot whose compaction record
// breaks a rule is ErrInvalidSnapshot.
func TestRestoreRefusesBadCompaction(t *testing.T) {
	base := compactionSample(t)
	for name, mutate := range map[string]func(c *strandpb.CompactionState){
		"generation 0":                   func(c *strandpb.CompactionState) { c.Generation = 0 },
		"reported past decided":          func(c *strandpb.CompactionState) { c.DoneGeneration = 3 },
		"short digest":                   func(c *strandpb.CompactionState) { c.Digest = c.Digest[:5] },
		"digest with nothing reported":   func(c *strandpb.CompactionState) { c.DoneGeneration, c.CleanedTo = 0, 0 },
		"cleaned past the cleanable end": func(c *strandpb.CompactionState) { c.CleanedTo = 7 },
		"cleanable end past the log":     func(c *strandpb.CompactionState) { c.CleanableEnd = 9 },
		"tiny offset map":                func(c *strandpb.CompactionState) { c.OffsetMapBytes = 1 },
	} {
		var snap strandpb.PartitionSnapshot
		if err := proto.Unmarshal(base.Snapshot(), &snap); err != nil {
			t.Fatal(err)
		}
		mutate(snap.Compaction)
		data, err := proto.Marshal(&snap)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RestorePartition(data); !errors.Is(err, ErrInvalidSnapshot) {
			t.Errorf("%s: restore gave %v", name, err)
		}
	}
}

// TestRaftTrimBound shows the raft-trim bound keeps every entry from the
// one holding the first batch not wholly in the compacted prefix, and
// allows the whole applied log once the prefix covers every batch.
func TestRaftTrimBound(t *testing.T) {
	p := fuzzBase(t) // batches: [0,3) raft 1, [3,5) raft 2, [5,6) raft 3, trim raft 4, [6,8) raft 5
	applyNext(p, EncodeTrimEntry(nil, 15, 0, 1))
	for _, c := range []struct {
		prefixEnd int64
		want      uint64
	}{{0, 0}, {2, 0}, {3, 1}, {4, 1}, {5, 2}, {6, 4}, {7, 4}, {8, 6}, {20, 6}} {
		if got := p.RaftTrimBound(c.prefixEnd); got != c.want {
			t.Errorf("RaftTrimBound(%d) = %d, want %d", c.prefixEnd, got, c.want)
		}
	}
	p.Compacted(2) // a replica-local compaction dropped the first two batches
	if got := p.RaftTrimBound(0); got != 2 {
		t.Errorf("after Compacted(2): RaftTrimBound(0) = %d, want 2", got)
	}
}

// TestCompactedTrimKeepsLogStartAndDigest shows a compacted topic's
// replica-local raft-log trim: Compacted drops only the batches the
// record covers (wholly below CleanedTo), the log start stays, and the
// digest (which leaves covered batches out) equals that of a replica
// that trimmed nothing, before and after the next COMPACT_DONE; a raft
// snapshot's state (RaftSnapshotState) carries the uncovered index inline
// and restores to the same digest; CompactedTopicTrim without a record
// drops nothing.
func TestCompactedTrimKeepsLogStartAndDigest(t *testing.T) {
	p, q := compactionSample(t), compactionSample(t) // batches [0,3) raft 1, [3,5) 2, [5,6) 3, [6,8) 5; cleaned to 3
	q.Compacted(3)
	mustCheck(t, q)
	if q.LogStartOffset() != p.LogStartOffset() || q.Digest() != p.Digest() || q.TailDigest() != p.TailDigest() {
		t.Fatalf("after Compacted(3): log start %d, digest %x vs %x", q.LogStartOffset(), q.Digest(), p.Digest())
	}
	if b, _ := q.FirstBatchFrom(0); b.BaseOffset != 3 {
		t.Fatalf("first indexed batch at %d, want 3 (only [0,3) is covered)", b.BaseOffset)
	}
	r, err := RestorePartitionIndexed(q.RaftSnapshotState(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Digest() != p.Digest() || r.LogStartOffset() != p.LogStartOffset() {
		t.Fatalf("restored: digest %x, want %x; log start %d", r.Digest(), p.Digest(), r.LogStartOffset())
	}
	for _, x := range []*Partition{p, q, r} {
		if res := applyNext(x, EncodeCompactDoneEntry(nil, 300, 0, 2, 6, [sha256.Size]byte{6})); res.Err != nil {
			t.Fatal(res.Err)
		}
		mustCheck(t, x)
	}
	q.Compacted(q.AppliedIndex())
	mustCheck(t, q)
	if q.Digest() != p.Digest() || r.Digest() != p.Digest() {
		t.Fatalf("after cleaning to 6: digests %x %x, want %x", q.Digest(), r.Digest(), p.Digest())
	}
	if b, _ := q.FirstBatchFrom(0); b.BaseOffset != 6 || q.LogStartOffset() != p.LogStartOffset() {
		t.Fatalf("first indexed batch at %d (want 6), log start %d", b.BaseOffset, q.LogStartOffset())
	}
	n := fuzzBase(t)
	before := n.Digest()
	n.CompactedTopicTrim(n.AppliedIndex())
	if n.Digest() != before {
		t.Fatal("CompactedTopicTrim without a record dropped batches")
	}
}

// TestTrimKeepsUncoveredBatches shows a TRIM on a partition with a
// compaction record (compact,delete, delete-records) drops no indexed
// batch: they stay below the new log start for the passes still to run on
// a replica whose own prefix may lag the record (AppendPassLocations finds
// them; Locate refuses them), until its own raft-log trim drops the
// covered ones; the state checks and restores from both
// snapshot forms, the next COMPACT records the log start and has its
// cleanable end raised to it, and once a pass covering them is reported
// a raft-log trim drops them.
func TestTrimKeepsUncoveredBatches(t *testing.T) {
	p := compactionSample(t) // batches [0,3) [3,5) [5,6) [6,8); cleaned to 3; decision 2 pending
	if r := applyNext(p, EncodeTrimEntry(nil, 300, 0, 7)); r.Err != nil {
		t.Fatal(r.Err)
	}
	mustCheck(t, p)
	if got := p.AppendPassLocations(nil, 0, 8); p.LogStartOffset() != 7 || len(got) != 4 || got[0].BaseOffset != 0 {
		t.Fatalf("log start %d, pass locations %+v: want all four kept", p.LogStartOffset(), got)
	}
	if _, err := p.Locate(5, 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("locate below the log start: %v", err)
	}
	start, _ := p.IndexOrdinals()
	for _, q := range []func() (*Partition, error){
		func() (*Partition, error) { return RestorePartition(p.Snapshot()) },
		func() (*Partition, error) {
			return RestorePartitionIndexed(p.StateSnapshot(), slices.Clone(p.IndexSince(start)))
		},
		func() (*Partition, error) { return RestorePartitionIndexed(p.RaftSnapshotState(), nil) },
	} {
		r, err := q()
		if err != nil || r.Digest() != p.Digest() {
			t.Fatalf("restored: %v, digest %x want %x", err, r.Digest(), p.Digest())
		}
	}
	if r := applyNext(p, EncodeCompactDoneEntry(nil, 300, 0, 2, 6, [sha256.Size]byte{6})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := applyNext(p, EncodeCompactEntry(nil, 0, decision(3, 6))); r.Err != nil {
		t.Fatal(r.Err)
	}
	if d := p.Compaction().Decision; d.LogStart != 7 || d.CleanableEnd != 7 {
		t.Fatalf("decision %+v: want log start 7, cleanable end raised to 7", d)
	}
	p.Compacted(p.AppliedIndex())
	mustCheck(t, p)
	if got := p.AppendPassLocations(nil, 0, 8); len(got) != 1 || got[0].BaseOffset != 6 {
		t.Fatalf("after the report covering them: %+v, want [6,8) only", got)
	}
}
