package engine

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/proto/strandpb"
)

// The partition side of tiered storage (doc.go, "Tiered storage"): the
// manifest of uploaded segments, changed only by TIER_ADD entries and by
// TRIMs once active. Uploads, reads and deletions in the bucket are the
// node's; the engine records what every replica must agree on.

// Tier returns the partition's manifest of remote segments (inactive
// until a TIER_ADD applied): a copy, sharing no memory with the partition.
func (p *Partition) Tier() tier.Manifest { return p.tier.Clone() }

// TierActive reports whether a segment was ever uploaded (the manifest is
// active), without copying the manifest.
func (p *Partition) TierActive() bool { return p.tier.Active() }

// TierLocate answers the remote segment holding offset (tier.Manifest's
// Locate), without copying the manifest.
func (p *Partition) TierLocate(offset int64) (tier.Segment, bool) { return p.tier.Locate(offset) }

// TierNext is the end of the remote log (tier.Manifest's Next; 0 while
// inactive).
func (p *Partition) TierNext() int64 {
	if !p.tier.Active() {
		return 0
	}
	return p.tier.Next()
}

// TierStart is the remote log start (tier.Manifest's Start; 0 while
// inactive), without copying the manifest: the leader's log start marker
// follows it (node/tier.go).
func (p *Partition) TierStart() int64 { return p.tier.Start() }

// EncodeTierAddEntry appends the Data of a TIER_ADD entry to dst: the
// leader uploaded seg.
func EncodeTierAddEntry(dst []byte, appendTimeMs int64, proposalID uint64, seg tier.Segment) []byte {
	return AppendEntry(dst, &EntryFields{
		Kind:          strandpb.EntryKind_ENTRY_KIND_TIER_ADD,
		AppendTimeMs:  appendTimeMs,
		ProposalID:    proposalID,
		TierBase:      seg.Base,
		TierEnd:       seg.End,
		TierBytes:     seg.Bytes,
		TierMaxTimeMs: seg.MaxTimeMs,
		TierTerm:      seg.Term,
		TierCRC:       seg.CRC,
	})
}

// applyTierAdd applies a TIER_ADD entry: tier.Manifest.Add's rules, and a
// segment must end at or below the last stable offset (the leader uploads
// only stable records; a transaction opened since its proposal starts at
// or past the high-water mark then, so an honest upload always passes).
// Result.Tier says whether it was added, a duplicate, or stale.
func (p *Partition) applyTierAdd(e *EntryFields) Result {
	seg := tier.Segment{Base: e.TierBase, End: e.TierEnd, Bytes: e.TierBytes, MaxTimeMs: e.TierMaxTimeMs, Term: e.TierTerm, CRC: e.TierCRC}
	if lso := p.LastStableOffset(); seg.End > lso {
		return Result{Err: fmt.Errorf("%w: uploaded segment [%d, %d) past the last stable offset %d", ErrInvalidEntry, seg.Base, seg.End, lso)}
	}
	out, err := p.tier.Add(seg)
	if err != nil {
		return Result{Err: fmt.Errorf("%w: %w", ErrInvalidEntry, err)}
	}
	p.extendCovered()
	return Result{Tier: out}
}

// EncodeTierRestoreEntry appends the Data of a TIER_RESTORE entry to dst:
// the leader of an empty partition of a recovered topic found the remote
// log m in the bucket (node/tier_recover.go).
func EncodeTierRestoreEntry(dst []byte, appendTimeMs int64, proposalID uint64, m tier.Manifest) []byte {
	st := tierStateProto(m)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("engine: marshal a tier state: %v", err)) // a message of plain fields always marshals
	}
	return AppendEntry(dst, &EntryFields{
		Kind:         strandpb.EntryKind_ENTRY_KIND_TIER_RESTORE,
		AppendTimeMs: appendTimeMs,
		ProposalID:   proposalID,
		TierManifest: b,
	})
}

// applyTierRestore applies a TIER_RESTORE entry: on an empty partition
// (nothing ever appended, trimmed, compacted or uploaded, no producer)
// the log starts at the manifest's start and ends at its end, every
// offset remote, and the manifest is the one found in the bucket, active
// even when empty (it then only fixes the log start). Any other partition
// refuses it (ErrInvalidEntry), as every replica does alike: a recovery
// never rewrites offsets a partition already gave out.
func (p *Partition) applyTierRestore(e *EntryFields) Result {
	if p.nextOffset != 0 || p.logStartOffset != 0 || p.head != len(p.batches) || p.tier.Active() ||
		len(p.producers) != 0 || len(p.txns) != 0 || p.compaction.Decision.Generation != 0 {
		return Result{Err: fmt.Errorf("%w: a tier restore on a partition that is not empty (high-water mark %d, log start %d)",
			ErrInvalidEntry, p.nextOffset, p.logStartOffset)}
	}
	var st strandpb.TierState
	if err := proto.Unmarshal(e.TierManifest, &st); err != nil {
		return Result{Err: fmt.Errorf("%w: tier restore: %w", ErrInvalidEntry, err)}
	}
	m, err := tierStateManifest(&st)
	if err == nil && m.Start() < 0 {
		err = fmt.Errorf("remote log start %d", m.Start())
	}
	if err != nil {
		return Result{Err: fmt.Errorf("%w: tier restore: %w", ErrInvalidEntry, err)}
	}
	p.tier = m
	p.logStartOffset, p.nextOffset = m.Start(), m.Next()
	p.extendCovered()
	return Result{TierRestored: true}
}

// coverEnd is the offset below which indexed batches are covered: held
// somewhere besides the raft log, so that each replica drops them from its
// raft log, and its index, at its own pace (Compacted). That is the
// compaction record's CleanedTo, or, once a segment was uploaded, the end
// of the remote log too (a topic does not both compact and tier:
// engine/metadata refuses it).
func (p *Partition) coverEnd() int64 {
	if p.tier.Active() {
		return max(p.compaction.CleanedTo, p.tier.Next())
	}
	return p.compaction.CleanedTo
}

// extendCovered counts into covered the indexed batches coverEnd now
// covers (it only grows: CleanedTo and the manifest's Next never move
// back).
func (p *Partition) extendCovered() {
	end := p.coverEnd()
	live := p.batches[p.head+p.covered:]
	for i := 0; i < len(live) && live[i].endOffset() <= end; i++ {
		p.coveredSum += batchDigest(&live[i])
		p.covered++
	}
}

// LocalStart is the first offset the offset index holds (the high-water
// mark when it holds none): the log start, but on a tiered partition whose
// raft log dropped covered batches (local retention) the first offset
// still held locally, the ones below it being remote, and on a compacted
// topic it may lie below the log start (trim). Reads at or past the log
// start and below it are remote reads (the node's tier reads).
func (p *Partition) LocalStart() int64 {
	if p.head == len(p.batches) {
		return p.nextOffset
	}
	return p.batches[p.head].BaseOffset
}

// tierToProto records an active manifest in the snapshot.
func (p *Partition) tierToProto(snap *strandpb.PartitionSnapshot) {
	if !p.tier.Active() {
		return
	}
	snap.Tier = tierStateProto(p.tier)
}

// tierStateProto is m as a snapshot and a TIER_RESTORE carry it.
func tierStateProto(m tier.Manifest) *strandpb.TierState {
	segs := m.Segments()
	st := &strandpb.TierState{Start: m.Start(), Segments: make([]*strandpb.TierSegment, len(segs))}
	for i, s := range segs {
		st.Segments[i] = &strandpb.TierSegment{Base: s.Base, End: s.End, Bytes: s.Bytes, MaxTimeMs: s.MaxTimeMs, Term: s.Term, Crc: s.CRC}
	}
	return st
}

// tierStateManifest is st as an active manifest, its invariants checked.
func tierStateManifest(st *strandpb.TierState) (tier.Manifest, error) {
	segs := make([]tier.Segment, len(st.GetSegments()))
	for i, s := range st.GetSegments() {
		segs[i] = tier.Segment{Base: s.GetBase(), End: s.GetEnd(), Bytes: s.GetBytes(), MaxTimeMs: s.GetMaxTimeMs(), Term: s.GetTerm(), CRC: s.GetCrc()}
	}
	return tier.Restore(segs, st.GetStart())
}

// tierFromProto restores the manifest, checking its invariants.
func (p *Partition) tierFromProto(snap *strandpb.PartitionSnapshot) error {
	st := snap.GetTier()
	if st == nil {
		return nil
	}
	m, err := tierStateManifest(st)
	if err != nil {
		return err
	}
	p.tier = m
	return nil
}

// checkTier verifies the manifest against the partition: its own
// invariants, and nothing remote past the high-water mark.
func (p *Partition) checkTier() error {
	if err := p.tier.Check(); err != nil {
		return err
	}
	if next := p.tier.Next(); p.tier.Active() && next > p.nextOffset {
		return fmt.Errorf("remote log ends at %d, past the high-water mark %d", next, p.nextOffset)
	}
	return nil
}

// digestTagTier keeps the manifest's part of a digest apart.
const digestTagTier uint64 = 0x54696572 // "Tier"

// chainTier folds an active manifest into h; an inactive one leaves h
// alone, so a partition that never tiered keeps its digest.
func (p *Partition) chainTier(h uint64) uint64 {
	if !p.tier.Active() {
		return h
	}
	h = digestChain(h^digestTagTier, uint64(p.tier.Start()))
	for _, s := range p.tier.Segments() {
		h = digestChain(h, uint64(s.Base), uint64(s.End), uint64(s.Bytes), uint64(s.MaxTimeMs), s.Term, uint64(s.CRC))
	}
	return h
}
