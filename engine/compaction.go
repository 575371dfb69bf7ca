package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/proto/strandpb"
)

// The partition side of compacted topics (doc.go, "Compaction"): the last
// replicated compaction decision and the last pass outcome reported. The
// compacted prefix itself is replica-local (raftlog/compacted); the engine
// records what every replica must agree on.

var (
	// ErrCompactionGeneration: a COMPACT whose generation is not one more
	// than the last decision's (passes run in generation order on every
	// replica), or a COMPACT_DONE for a generation not decided or older
	// than the last reported.
	ErrCompactionGeneration = errors.New("engine: compaction generation out of order")
	// ErrCompactionDiverged: a COMPACT_DONE for the reported generation
	// with another cleaned-to offset or digest. Passes are deterministic,
	// so two replicas disagreeing is a bug or a damaged prefix.
	ErrCompactionDiverged = errors.New("engine: compaction outcomes differ")
)

// CompactionState is a partition's compaction record: Decision is the last
// COMPACT applied (Generation 0: none yet); DoneGeneration the last
// generation a replica reported (0: none), with its pass's CleanedTo and
// Digest. A decision is pending while Decision.Generation > DoneGeneration.
type CompactionState struct {
	Decision       compact.Decision
	DoneGeneration uint64
	CleanedTo      int64
	Digest         [sha256.Size]byte
}

// Compaction returns the partition's compaction record.
func (p *Partition) Compaction() CompactionState { return p.compaction }

// EncodeCompactEntry appends the Data of a COMPACT entry to dst: decision
// d, whose TimeMs is the entry's append time (the only time a pass sees).
func EncodeCompactEntry(dst []byte, proposalID uint64, d compact.Decision) []byte {
	return AppendEntry(dst, &EntryFields{
		Kind:              strandpb.EntryKind_ENTRY_KIND_COMPACT,
		AppendTimeMs:      d.TimeMs,
		ProposalID:        proposalID,
		CompactGeneration: d.Generation,
		CompactOffset:     d.CleanableEnd,
		DeleteRetentionMs: d.DeleteRetentionMs,
		OffsetMapBytes:    d.OffsetMapBytes,
	})
}

// EncodeCompactDoneEntry appends the Data of a COMPACT_DONE entry to dst:
// the pass of generation gen ended its prefix at cleanedTo with digest
// (compact.Result's CleanedTo and Digest).
func EncodeCompactDoneEntry(dst []byte, appendTimeMs int64, proposalID, gen uint64, cleanedTo int64, digest [sha256.Size]byte) []byte {
	return AppendEntry(dst, &EntryFields{
		Kind:              strandpb.EntryKind_ENTRY_KIND_COMPACT_DONE,
		AppendTimeMs:      appendTimeMs,
		ProposalID:        proposalID,
		CompactGeneration: gen,
		CompactOffset:     cleanedTo,
		CompactDigest:     digest[:],
	})
}

// applyCompact applies a COMPACT entry: the next generation's decision,
// stamped with the log start (rule 8 of engine/compact: the pass drops
// what lies wholly below it) and its cleanable end raised to it, refused unless its generation is one more than the last, its fields are
// in range (compact.Decision.Check) and its cleanable end lies between the
// last decision's (so the next pass never starts below a prefix an earlier
// pass wrote) and the last stable offset (a pass takes every transaction
// below it without an abort in the index as committed; the leader's bound
// is below its LSO at proposal, and a transaction opened since starts at
// or past the high-water mark then, so an honest decision always passes).
func (p *Partition) applyCompact(e *EntryFields) Result {
	last := &p.compaction.Decision
	d := compact.Decision{Generation: e.CompactGeneration, CleanableEnd: e.CompactOffset, TimeMs: e.AppendTimeMs,
		DeleteRetentionMs: e.DeleteRetentionMs, OffsetMapBytes: e.OffsetMapBytes, LogStart: p.logStartOffset}
	// A TRIM applied since the leader decided (compact,delete,
	// delete-records) may have moved the log start past its cleanable
	// end: nothing lives below it, so the pass may clean up to it.
	d.CleanableEnd = max(d.CleanableEnd, d.LogStart)
	if d.Generation != last.Generation+1 {
		return Result{Err: fmt.Errorf("%w: decision of generation %d after generation %d",
			ErrCompactionGeneration, d.Generation, last.Generation)}
	}
	if err := d.Check(last.CleanableEnd); err != nil {
		return Result{Err: fmt.Errorf("%w: %w", ErrInvalidEntry, err)}
	}
	if lso := p.LastStableOffset(); d.CleanableEnd > lso {
		return Result{Err: fmt.Errorf("%w: cleanable end %d past the last stable offset %d (high-water mark %d)",
			ErrInvalidEntry, d.CleanableEnd, lso, p.nextOffset)}
	}
	*last = d
	return Result{}
}

// applyCompactDone applies a COMPACT_DONE entry: a replica's pass of a
// decided generation after the last reported one ended at cleanedTo with
// digest. A resend of the reported outcome is a no-op; another outcome for
// it is ErrCompactionDiverged.
func (p *Partition) applyCompactDone(e *EntryFields) Result {
	c := &p.compaction
	gen, cleanedTo := e.CompactGeneration, e.CompactOffset
	if len(e.CompactDigest) != sha256.Size {
		return Result{Err: fmt.Errorf("%w: compaction digest of %d bytes", ErrInvalidEntry, len(e.CompactDigest))}
	}
	digest := [sha256.Size]byte(e.CompactDigest)
	if gen == c.DoneGeneration && gen > 0 {
		if cleanedTo != c.CleanedTo || digest != c.Digest {
			return Result{Err: fmt.Errorf("%w: generation %d reported cleaned to %d digest %x, now %d digest %x",
				ErrCompactionDiverged, gen, c.CleanedTo, c.Digest[:8], cleanedTo, digest[:8])}
		}
		return Result{}
	}
	if gen <= c.DoneGeneration || gen > c.Decision.Generation {
		return Result{Err: fmt.Errorf("%w: outcome of generation %d, decided %d, reported %d",
			ErrCompactionGeneration, gen, c.Decision.Generation, c.DoneGeneration)}
	}
	if cleanedTo < c.CleanedTo || cleanedTo > c.Decision.CleanableEnd {
		return Result{Err: fmt.Errorf("%w: generation %d cleaned to %d, outside [%d, %d]",
			ErrInvalidEntry, gen, cleanedTo, c.CleanedTo, c.Decision.CleanableEnd)}
	}
	c.DoneGeneration, c.CleanedTo, c.Digest = gen, cleanedTo, digest
	p.extendCovered()
	return Result{}
}

// RaftTrimBound is, on a compacted topic, the highest raft index this
// replica may drop from its raft log when its own compacted prefix ends at
// prefixEnd (on a tiered one, prefixEnd is the remote log's end) (raftlog/compacted's Store.End): every entry before the one
// holding the first batch not wholly below prefixEnd, or the applied index
// when every indexed batch is. Records not yet in the prefix live only in
// the raft log, so retention's and snapshots' raft-log compaction
// (Compacted) must stop there (engine/compact's doc, "Next").
func (p *Partition) RaftTrimBound(prefixEnd int64) uint64 {
	live := p.batches[p.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].endOffset() > prefixEnd })
	if i == len(live) {
		return p.appliedIndex
	}
	return live[i].RaftIndex - 1
}

// compactionToProto puts the record in snap when a decision exists, so a
// partition that never compacted keeps its snapshot bytes.
func (p *Partition) compactionToProto(snap *strandpb.PartitionSnapshot) {
	c := &p.compaction
	if c.Decision.Generation == 0 {
		return
	}
	snap.Compaction = &strandpb.CompactionState{
		Generation: c.Decision.Generation, CleanableEnd: c.Decision.CleanableEnd, DecisionTimeMs: c.Decision.TimeMs,
		DeleteRetentionMs: c.Decision.DeleteRetentionMs, OffsetMapBytes: c.Decision.OffsetMapBytes,
		DoneGeneration: c.DoneGeneration, CleanedTo: c.CleanedTo, LogStart: c.Decision.LogStart,
	}
	if c.DoneGeneration > 0 {
		snap.Compaction.Digest = c.Digest[:]
	}
}

// compactionFromProto restores the record; checkCompaction judges it.
func (p *Partition) compactionFromProto(snap *strandpb.PartitionSnapshot) error {
	m := snap.GetCompaction()
	if m == nil {
		return nil
	}
	c := &p.compaction
	c.Decision = compact.Decision{Generation: m.GetGeneration(), CleanableEnd: m.GetCleanableEnd(),
		TimeMs: m.GetDecisionTimeMs(), DeleteRetentionMs: m.GetDeleteRetentionMs(), OffsetMapBytes: m.GetOffsetMapBytes(),
		LogStart: m.GetLogStart()}
	c.DoneGeneration, c.CleanedTo = m.GetDoneGeneration(), m.GetCleanedTo()
	if m.GetGeneration() == 0 {
		return fmt.Errorf("compaction record of generation 0")
	}
	if c.DoneGeneration > 0 {
		if len(m.GetDigest()) != sha256.Size {
			return fmt.Errorf("compaction digest of %d bytes", len(m.GetDigest()))
		}
		c.Digest = [sha256.Size]byte(m.GetDigest())
	} else if len(m.GetDigest()) != 0 {
		return fmt.Errorf("compaction digest without a reported generation")
	}
	return nil
}

// checkCompaction verifies the record: a decision in range and at most
// the last stable offset (it never falls below a decision applied), a reported generation no later than the decided
// one, its cleaned-to offset at most the decision's cleanable end, and
// nothing reported without a decision.
func (p *Partition) checkCompaction() error {
	c := &p.compaction
	if c.Decision.Generation == 0 {
		if c.DoneGeneration != 0 || c.CleanedTo != 0 || c.Digest != [sha256.Size]byte{} || c.Decision != (compact.Decision{}) {
			return fmt.Errorf("compaction record %+v without a decision", *c)
		}
		return nil
	}
	if err := c.Decision.Check(c.CleanedTo); err != nil {
		return err
	}
	if c.Decision.CleanableEnd > p.LastStableOffset() || c.Decision.LogStart > p.logStartOffset || c.DoneGeneration > c.Decision.Generation || c.CleanedTo < 0 ||
		(c.DoneGeneration == 0 && (c.CleanedTo != 0 || c.Digest != [sha256.Size]byte{})) {
		return fmt.Errorf("compaction record: decision %+v, reported generation %d cleaned to %d, last stable offset %d",
			c.Decision, c.DoneGeneration, c.CleanedTo, p.LastStableOffset())
	}
	return nil
}

// chainCompaction folds the compaction record into h; without a decision
// it leaves h alone, so a partition that never compacted keeps its digest.
func (p *Partition) chainCompaction(h uint64) uint64 {
	c := &p.compaction
	if c.Decision.Generation == 0 {
		return h
	}
	d := &c.Decision
	h = digestChain(h^digestTagCompaction, d.Generation, uint64(d.CleanableEnd), uint64(d.TimeMs),
		uint64(d.DeleteRetentionMs), uint64(d.OffsetMapBytes), c.DoneGeneration, uint64(c.CleanedTo), uint64(d.LogStart))
	for i := 0; i < sha256.Size; i += 8 {
		h = digestChain(h, binary.LittleEndian.Uint64(c.Digest[i:]))
	}
	return h
}
