package engine

import "fmt"

// check verifies the partition's invariants in O(n). RestorePartition runs
// it on every snapshot; tests run it after every step.
func (p *Partition) check() error {
	if p.logStartOffset < 0 || p.logStartOffset > p.nextOffset {
		return fmt.Errorf("log start %d outside [0, high-water mark %d]", p.logStartOffset, p.nextOffset)
	}
	if p.head < 0 || p.head > len(p.batches) {
		return fmt.Errorf("index head %d of %d", p.head, len(p.batches))
	}
	live := p.batches[p.head:]
	// On a compacted topic the index may start below the log start (what
	// no pass covers yet stays indexed across a trim) or above it, but
	// never above the record's CleanedTo: the raft log is trimmed below
	// it only (the compacted prefixes hold those records). On a tiered
	// one likewise above it, never above the remote log's end (coverEnd).
	indexStart := p.logStartOffset
	if p.compaction.Decision.Generation != 0 || p.tier.Active() {
		first := p.nextOffset
		if len(live) > 0 {
			first = live[0].BaseOffset
		}
		if first < p.logStartOffset {
			indexStart = first // batches no reported pass covers stay below a trim (partition.go trim)
		}
		if first > p.logStartOffset {
			if end := p.coverEnd(); first > end {
				return fmt.Errorf("index starts at %d, past the log start %d and the covered end %d", first, p.logStartOffset, end)
			}
			indexStart = first
		}
	}
	if len(live) == 0 {
		if indexStart != p.nextOffset {
			return fmt.Errorf("no batch indexed, but log start %d below high-water mark %d", p.logStartOffset, p.nextOffset)
		}
	} else if err := checkIndex(live, p.appliedIndex, indexStart, p.nextOffset); err != nil {
		return err
	}
	for id, st := range p.producers {
		if id < 0 || st == nil {
			return fmt.Errorf("producer %d without a record", id)
		}
		if err := st.check(); err != nil {
			return fmt.Errorf("producer %d: %v", id, err)
		}
		if last := st.newest(); last.baseOffset > p.nextOffset-int64(last.recordCount) {
			return fmt.Errorf("producer %d: batch at %d beyond high-water mark %d", id, last.baseOffset, p.nextOffset)
		}
	}
	if err := p.checkTxns(); err != nil {
		return err
	}
	if err := p.checkCompaction(); err != nil {
		return err
	}
	if err := p.checkTier(); err != nil {
		return err
	}
	return p.checkDigest()
}

// checkIndex verifies a non-empty offset index: dense, in raft order, with
// non-decreasing running timestamps, holding the log start and ending at
// the high-water mark.
func checkIndex(live []BatchLocation, appliedIndex uint64, logStartOffset, nextOffset int64) error {
	for i := range live {
		b := &live[i]
		if b.BaseOffset < 0 || b.RecordCount <= 0 || b.RaftIndex == 0 || b.RaftIndex > appliedIndex {
			return fmt.Errorf("batch %d: %d records at offset %d, raft index %d (applied %d)",
				i, b.RecordCount, b.BaseOffset, b.RaftIndex, appliedIndex)
		}
		if i == 0 {
			continue
		}
		prev := &live[i-1]
		if b.BaseOffset != prev.endOffset() || b.RaftIndex <= prev.RaftIndex ||
			b.MaxTimestampMs < prev.MaxTimestampMs {
			return fmt.Errorf("batch %d (offset %d, raft index %d, max time %d) does not follow "+
				"batch %d (end %d, raft index %d, max time %d)",
				i, b.BaseOffset, b.RaftIndex, b.MaxTimestampMs, i-1, prev.endOffset(), prev.RaftIndex, prev.MaxTimestampMs)
		}
	}
	if first := &live[0]; logStartOffset < first.BaseOffset || logStartOffset >= first.endOffset() {
		return fmt.Errorf("log start %d outside first batch [%d, %d)", logStartOffset, first.BaseOffset, first.endOffset())
	}
	if end := live[len(live)-1].endOffset(); end != nextOffset {
		return fmt.Errorf("index ends at %d, high-water mark %d", end, nextOffset)
	}
	return nil
}

// assertInvariants panics when a partition invariant is broken, in builds
// with the invariants tag (a broken invariant is a bug, never an outcome).
func (p *Partition) assertInvariants() {
	if !invariantsEnabled {
		return
	}
	if err := p.check(); err != nil {
		panic(fmt.Sprintf("engine: invariant broken at applied index %d: %v", p.appliedIndex, err))
	}
}
