package raftlog

// SegmentInfo describes one segment of a Log: the raft indexes it holds and
// its size on disk. Retention decides with it which whole segments to drop.
type SegmentInfo struct {
	// Base is the index of the segment's first entry (or the one it would
	// hold when empty); Last is its last entry's index, Base-1 when empty.
	Base, Last uint64
	Bytes      int64
}

// Segments appends a description of every segment, oldest first, to dst.
// The last one is the active segment, which never goes by compaction.
func (l *Log) Segments(dst []SegmentInfo) []SegmentInfo {
	for _, s := range l.segments {
		dst = append(dst, SegmentInfo{Base: s.base, Last: s.lastIndex(), Bytes: s.size})
	}
	return dst
}

// SizeBytes is the total size of the log's segments.
func (l *Log) SizeBytes() int64 {
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// SetSegmentBytesMax changes the size at which the active segment rolls (a
// topic's segment.bytes); n <= 0 keeps the current size. It takes effect at
// the next write.
func (l *Log) SetSegmentBytesMax(n int64) {
	if n > 0 {
		l.segmentBytesMax = n
	}
}

// SegmentBytesMax is the size at which the active segment rolls.
func (l *Log) SegmentBytesMax() int64 { return l.segmentBytesMax }

// Roll closes the active segment and starts the next one, when the active
// segment holds at least one entry (a topic's segment.ms: an idle segment
// must become old enough to be deleted whole). The finished segment is
// synced, as at a roll by size; the new one is durable at the next Sync.
// It reports whether it rolled. A roll SaveSome began is finished here
// (the active segment is sealed already).
func (l *Log) Roll() (bool, error) {
	if err := l.writable(); err != nil {
		return false, err
	}
	if l.rollPending {
		if _, err := l.finishRoll(); err != nil {
			return false, l.fail(err)
		}
		return true, nil
	}
	if s := l.segments[len(l.segments)-1]; s.lastIndex() < s.base {
		return false, nil
	}
	if _, err := l.roll(nil); err != nil {
		return false, l.fail(err)
	}
	return true, nil
}

// SealActive begins a roll by age off the caller's thread: it seals the
// active segment, when it holds at least one entry, as a pending write and
// does not sync it. The next sync job (StartSync) makes the seal durable;
// the next write, or Roll, then creates the next segment (finishRoll,
// which syncs the sealed segment itself only if no sync covered it). It
// reports whether it sealed: false when the active segment holds no entry
// or a roll is pending already.
func (l *Log) SealActive() (bool, error) {
	l.checkNotSyncing()
	if err := l.writable(); err != nil {
		return false, err
	}
	if l.rollPending {
		return false, nil
	}
	s := l.segments[len(l.segments)-1]
	if s.lastIndex() < s.base {
		return false, nil
	}
	if err := l.seal(s, l.takePending(s)); err != nil {
		return false, l.fail(err)
	}
	l.rollPending = true
	return true, nil
}

// RollPending reports whether the active segment is sealed and the next
// one not yet created (SaveSome stopped at a roll, or SealActive).
func (l *Log) RollPending() bool { return l.rollPending }

// CompactionPoint is the index a compaction up to limit would actually
// reach: the last index of the newest segment (never the active one) that
// holds nothing above limit, or 0 when no whole segment lies at or below
// limit. CreateSnapshot(CompactionPoint(limit), ...) removes exactly those
// segments and leaves the log starting at a segment's base.
func (l *Log) CompactionPoint(limit uint64) uint64 {
	var point uint64
	for _, s := range l.segments[:len(l.segments)-1] {
		if s.lastIndex() > limit {
			break
		}
		if s.lastIndex() >= s.base {
			point = s.lastIndex()
		}
	}
	if point < l.firstIndex {
		return 0
	}
	return point
}
