package engine

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/proto/strandpb"
)

// TestTierRestore: a TIER_RESTORE on an empty partition starts its log at
// the remote start and ends it at the remote end, every offset remote,
// the manifest the one restored (a snapshot carries it); the next produce
// takes the offset after the remote end and the next upload extends the
// manifest. A partition that is not empty refuses it, unchanged, as does
// one given a broken manifest.
func TestTierRestore(t *testing.T) {
	m, err := tier.Restore([]tier.Segment{tierSeg(3, 7, 2), tierSeg(7, 12, 4)}, 5)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPartition()
	applyNext(p, EncodeTierRestoreEntry(nil, 10, 0, tier.Manifest{})) // an inactive manifest: nothing to restore...
	if !p.TierActive() || p.HighWatermark() != 0 {
		t.Fatalf("restore of an empty remote log: active %v, high-water mark %d", p.TierActive(), p.HighWatermark())
	}
	p = NewPartition()
	r := applyNext(p, EncodeTierRestoreEntry(nil, 10, 0, m))
	if r.Err != nil || !r.TierRestored {
		t.Fatalf("restore: %+v", r)
	}
	mustCheck(t, p)
	if p.LogStartOffset() != 5 || p.HighWatermark() != 12 || p.LocalStart() != 12 || p.TierNext() != 12 {
		t.Fatalf("log start %d, high-water mark %d, local start %d, remote end %d; want 5, 12, 12, 12",
			p.LogStartOffset(), p.HighWatermark(), p.LocalStart(), p.TierNext())
	}
	if _, err := p.Locate(5, 1); !errors.Is(err, ErrOffsetRemote) {
		t.Fatalf("Locate(5): %v, want ErrOffsetRemote", err)
	}
	if _, err := p.Locate(4, 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Locate(4) below the log start: %v, want ErrOffsetOutOfRange", err)
	}
	sameAfterRestore(t, p)
	if r := applyNext(p, EncodeProduceEntry(nil, 20, 0, NoProducer, batchOf(t, 2, 100))); r.Err != nil || r.BaseOffset != 12 {
		t.Fatalf("produce after the restore: %+v, want offset 12", r)
	}
	if r := applyNext(p, EncodeTierAddEntry(nil, 21, 0, tierSeg(12, 14, 5))); r.Tier != tier.Added {
		t.Fatalf("upload after the restore: %+v", r)
	}
	mustCheck(t, p)
	segs := len(p.Tier().Segments())
	if r := applyNext(p, EncodeTierRestoreEntry(nil, 30, 0, m)); !errors.Is(r.Err, ErrInvalidEntry) || r.TierRestored {
		t.Fatalf("restore of a non-empty partition: %+v, want ErrInvalidEntry", r)
	}
	if p.HighWatermark() != 14 || p.LogStartOffset() != 5 || len(p.Tier().Segments()) != segs {
		t.Fatal("a refused restore changed the partition")
	}
	gap, err := proto.Marshal(&strandpb.TierState{Start: 3, Segments: []*strandpb.TierSegment{
		{Base: 3, End: 7, Bytes: 1, MaxTimeMs: -1}, {Base: 8, End: 12, Bytes: 1, MaxTimeMs: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{{0xff, 0xff}, gap} {
		q := NewPartition()
		e := AppendEntry(nil, &EntryFields{Kind: strandpb.EntryKind_ENTRY_KIND_TIER_RESTORE, TierManifest: b})
		if r := applyNext(q, e); !errors.Is(r.Err, ErrInvalidEntry) || q.HighWatermark() != 0 || q.TierActive() {
			t.Fatalf("restore of manifest %x: %+v, high-water mark %d", b, r, q.HighWatermark())
		}
	}
}
