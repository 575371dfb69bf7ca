package engine

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/engine/tier"
)

func tierSeg(base, end int64, term uint64) tier.Segment {
	return tier.Segment{Base: base, End: end, Bytes: 100 * (end - base), MaxTimeMs: 5, Term: term, CRC: uint32(base*31 + end)}
}

// TestTierAddAndTrim: TIER_ADD entries build the manifest under its rules
// (added, duplicate, stale), an upload past the last stable offset is
// refused, and a TRIM answers the segments it took out; a snapshot at every
// step restores the same manifest and digest.
func TestTierAddAndTrim(t *testing.T) {
	p := fuzzBase(t) // high-water mark 8, log start 1
	steps := []struct {
		seg  tier.Segment
		want tier.Outcome
		err  error
	}{
		{tierSeg(1, 6, 1), tier.Added, nil},
		{tierSeg(1, 6, 1), tier.Duplicate, nil}, // a retried proposal
		{tierSeg(2, 8, 2), tier.Stale, nil},     // another leader's overlapping upload
		{tierSeg(7, 8, 2), tier.Stale, nil},     // a gap
		{tierSeg(6, 9, 2), 0, ErrInvalidEntry},  // past the high-water mark
		{tier.Segment{Base: 6, End: 6, Bytes: 1}, 0, ErrInvalidEntry},
		{tierSeg(6, 8, 2), tier.Added, nil},
	}
	for i, s := range steps {
		before := p.Tier().Segments()
		r := applyNext(p, EncodeTierAddEntry(nil, 20, 0, s.seg))
		if !errors.Is(r.Err, s.err) || r.Tier != s.want {
			t.Fatalf("step %d %+v: outcome %v err %v, want %v %v", i, s.seg, r.Tier, r.Err, s.want, s.err)
		}
		if r.Tier != tier.Added && len(p.Tier().Segments()) != len(before) {
			t.Fatalf("step %d changed the manifest", i)
		}
		mustCheck(t, p)
		sameAfterRestore(t, p)
	}
	r := applyNext(p, EncodeTrimEntry(nil, 30, 0, 7))
	if r.Err != nil || len(r.TierDropped) != 1 || r.TierDropped[0] != tierSeg(1, 6, 1) {
		t.Fatalf("trim to 7 dropped %+v (%v)", r.TierDropped, r.Err)
	}
	if m := p.Tier(); m.Start() != 7 || len(m.Segments()) != 1 {
		t.Fatalf("after trim: start %d, %d segments", m.Start(), len(m.Segments()))
	}
	mustCheck(t, p)
	sameAfterRestore(t, p)
}

// sameAfterRestore: the snapshot carries the manifest and the digest.
func sameAfterRestore(t *testing.T, p *Partition) {
	t.Helper()
	q, err := RestorePartition(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.Tier(), q.Tier()
	if a.Start() != b.Start() || a.Active() != b.Active() || len(a.Segments()) != len(b.Segments()) {
		t.Fatalf("restored manifest differs: %+v vs %+v", b, a)
	}
	for i, s := range a.Segments() {
		if b.Segments()[i] != s {
			t.Fatalf("restored segment %d: %+v, want %+v", i, b.Segments()[i], s)
		}
	}
	if p.Digest() != q.Digest() {
		t.Fatal("restored digest differs")
	}
}

// TestTierInactiveLeavesStateAlone: a partition that never tiered has the
// digest and snapshot it had before tiering existed, trims included, and
// the first TIER_ADD changes its digest.
func TestTierInactiveLeavesStateAlone(t *testing.T) {
	p := fuzzBase(t)
	applyNext(p, EncodeTrimEntry(nil, 30, 0, 3))
	if p.Tier().Active() || p.chainTier(42) != 42 {
		t.Fatal("an inactive manifest entered the state")
	}
	if snap := p.snapshotProto(SnapshotVersion); snap.GetTier() != nil {
		t.Fatal("an inactive manifest entered the snapshot")
	}
	before := p.Digest()
	applyNext(p, EncodeTierAddEntry(nil, 20, 0, tierSeg(3, 6, 1)))
	after := p.Digest()
	if before == after {
		t.Fatal("the first upload left the digest unchanged")
	}
}

// TestTierSnapshotRefusesBrokenManifest: a snapshot whose manifest breaks
// its invariants is refused, not restored.
func TestTierSnapshotRefusesBrokenManifest(t *testing.T) {
	p := fuzzBase(t)
	applyNext(p, EncodeTierAddEntry(nil, 20, 0, tierSeg(1, 4, 1)))
	applyNext(p, EncodeTierAddEntry(nil, 20, 0, tierSeg(4, 8, 1)))
	snap := p.snapshotProto(SnapshotVersion)
	snap.Batches = batchesToProto(p.batches[p.head:])
	snap.Tier.Segments[1].Base = 5 // a gap
	if _, err := RestorePartition(marshalSnapshot(snap)); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("restore of a manifest with a gap: %v", err)
	}
}

// TestTierCompactedKeepsLogStart: on a tiered partition a raft-log
// compaction (local retention) drops only the batches the remote log
// covers and leaves the replicated log start where it was; offsets below
// the local start are ErrOffsetRemote, and the digest stays that of a
// replica that dropped nothing.
func TestTierCompactedKeepsLogStart(t *testing.T) {
	p := fuzzBase(t) // batches [0,3) [3,5) [5,6) at raft 1-3, TRIM to 1 at 4, [6,8) at 5
	applyNext(p, EncodeTierAddEntry(nil, 20, 0, tierSeg(1, 6, 1)))
	q, err := RestorePartition(p.Snapshot()) // a replica that keeps its raft log
	if err != nil {
		t.Fatal(err)
	}
	p.Compacted(p.AppliedIndex()) // everything: only what is remote goes
	mustCheck(t, p)
	if p.LogStartOffset() != 1 || p.LocalStart() != 6 {
		t.Fatalf("log start %d, local start %d; want 1 and 6", p.LogStartOffset(), p.LocalStart())
	}
	if _, err := p.Locate(2, 1); !errors.Is(err, ErrOffsetRemote) {
		t.Fatalf("Locate(2) below the local start: %v, want ErrOffsetRemote", err)
	}
	if locs, err := p.Locate(6, 1); err != nil || len(locs) != 1 || locs[0].BaseOffset != 6 {
		t.Fatalf("Locate(6): %v %v", locs, err)
	}
	if p.Digest() != q.Digest() {
		t.Fatalf("digest %016x after local retention, %016x without", p.Digest(), q.Digest())
	}
	for _, r := range []*Partition{p, q} {
		applyNext(r, EncodeProduceEntry(nil, 30, 0, NoProducer, batchOf(t, 2, 600)))
		applyNext(r, EncodeTierAddEntry(nil, 31, 0, tierSeg(6, 8, 1)))
		mustCheck(t, r)
	}
	if p.Digest() != q.Digest() {
		t.Fatalf("digests differ after the next upload: %016x, %016x", p.Digest(), q.Digest())
	}
	sameAfterRestore(t, p)
	if got := p.OffsetForTimestamp(-1); got != 1 {
		t.Fatalf("OffsetForTimestamp(-1) = %d, want the log start 1 (remote)", got)
	}
}
