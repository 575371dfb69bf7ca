package tier

import (
	"errors"
	"fmt"
	"sort"
)

// Segment is one uploaded object: the partition's records [Base, End) as
// stored, uploaded by the leader of raft term Term.
type Segment struct {
	// Base and End bound the offsets the object holds, [Base, End).
	Base, End int64
	// Bytes is the object's size.
	Bytes int64
	// MaxTimeMs is the largest record timestamp in it (remote time
	// retention), -1 when unknown.
	MaxTimeMs int64
	// Term is the uploading leader's raft term (part of the key).
	Term uint64
	// CRC is the CRC32C of the whole object, checked after an upload is
	// read back and by a recovery that reads it whole.
	CRC uint32
}

// Range is a half-open range of offsets [Base, End).
type Range struct {
	Base, End int64
}

// Outcome is what Add did.
type Outcome int

const (
	// Added: the segment extends the manifest.
	Added Outcome = iota + 1
	// Duplicate: an identical segment is listed already (a retried ADD).
	Duplicate
	// Stale: the segment overlaps or leaves a gap; the manifest is
	// unchanged and the object is its uploader's to delete.
	Stale
)

// ErrInvalid: a command whose fields no uploader writes (empty range,
// negative size): a corrupt or foreign entry, refused by every replica
// alike.
var ErrInvalid = errors.New("tier: invalid segment")

// Manifest is the replicated list of a partition's remote segments.
type Manifest struct {
	segs   []Segment
	start  int64
	active bool
}

// Active reports whether a segment was ever added: an inactive manifest is
// the zero value, ignores trims, and leaves the partition's state as it
// was before tiering existed.
func (m Manifest) Active() bool { return m.active }

// Clone answers a copy that shares no memory with m.
func (m Manifest) Clone() Manifest {
	m.segs = append([]Segment(nil), m.segs...)
	return m
}

// Segments answers the listed segments in offset order (a copy).
func (m Manifest) Segments() []Segment { return append([]Segment(nil), m.segs...) }

// Start is the remote log start.
func (m Manifest) Start() int64 { return m.start }

// Empty reports whether nothing is remote.
func (m Manifest) Empty() bool { return len(m.segs) == 0 }

// Next is the offset the next segment must hold: after the last remote
// record, or Start when trims removed every segment.
func (m Manifest) Next() int64 {
	if len(m.segs) == 0 {
		return m.start
	}
	return max(m.start, m.segs[len(m.segs)-1].End)
}

// Bytes is the remote size: the sum of the listed objects.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, s := range m.segs {
		n += s.Bytes
	}
	return n
}

// validSegment checks the fields every uploader writes.
func validSegment(s Segment) error {
	if s.Base < 0 || s.End <= s.Base || s.Bytes <= 0 || s.MaxTimeMs < -1 {
		return fmt.Errorf("%w: [%d, %d) of %d bytes, max time %d", ErrInvalid, s.Base, s.End, s.Bytes, s.MaxTimeMs)
	}
	return nil
}

// Add applies an ADD command: seg was uploaded. The first segment ever
// added starts the remote log at its Base; after it, a segment is added
// when it extends the remote log without a gap or an overlap: Base ≤ Next <
// End, and Base ≥ the last listed segment's End. See the package comment.
func (m *Manifest) Add(seg Segment) (Outcome, error) {
	if err := validSegment(seg); err != nil {
		return 0, err
	}
	for _, s := range m.segs {
		if s == seg {
			return Duplicate, nil
		}
	}
	if !m.active {
		m.active, m.start, m.segs = true, seg.Base, []Segment{seg}
		return Added, nil
	}
	want := m.Next()
	if seg.Base > want || seg.End <= want || (len(m.segs) > 0 && seg.Base < m.segs[len(m.segs)-1].End) {
		return Stale, nil
	}
	m.segs = append(m.segs, seg)
	return Added, nil
}

// Trim applies a move of the log start to start (retention or
// delete-records): the remote start follows, and the segments wholly below
// it leave the manifest and are answered for deletion from the bucket.
func (m *Manifest) Trim(start int64) []Segment {
	if !m.active || start <= m.start {
		return nil
	}
	m.start = start
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].End > start })
	gone := m.segs[:i:i]
	m.segs = append([]Segment(nil), m.segs[i:]...) // a new array: copies of the manifest keep theirs
	return gone
}

// Locate answers the segment holding offset, or false when offset is
// below Start or not remote.
func (m Manifest) Locate(offset int64) (Segment, bool) {
	if offset < m.start {
		return Segment{}, false
	}
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].End > offset })
	if i == len(m.segs) || m.segs[i].Base > offset {
		return Segment{}, false
	}
	return m.segs[i], true
}

// OffsetForTimestamp answers the base of the first segment below local
// whose newest record is at or after timestampMs, false when none is (the
// local log answers then).
func (m Manifest) OffsetForTimestamp(timestampMs, local int64) (int64, bool) {
	for _, s := range m.segs {
		if s.Base >= local {
			break
		}
		if s.MaxTimeMs >= timestampMs {
			return max(s.Base, m.start), true
		}
	}
	return 0, false
}

// LocalRemote answers the offsets [from, to) whose records are remote: a
// local segment may be deleted by local retention only when its records
// all lie in it, or below the partition's log start (which only a
// replicated TRIM moves). Empty (from == to) while nothing is remote.
func (m Manifest) LocalRemote() Range {
	if len(m.segs) == 0 {
		return Range{Base: m.start, End: m.start}
	}
	return Range{Base: m.start, End: m.Next()}
}

// NextUpload answers the next range the leader should upload, given the
// partition's log start (where an inactive manifest's first upload
// begins), its sealed local segments as offset ranges (sorted, not
// overlapping; the active segment is never among them) and the stable
// offset (the smaller of the high-water mark and the last stable offset).
// The range runs from Next to the end of the first sealed segment past it,
// and only when that whole segment is stable.
func (m Manifest) NextUpload(logStart int64, sealed []Range, stable int64) (Range, bool) {
	want := logStart
	if m.active {
		want = m.Next()
	}
	for _, r := range sealed {
		if r.End <= want {
			continue
		}
		if r.Base > want || r.End > stable {
			return Range{}, false // a hole in the local log, or not stable yet
		}
		return Range{Base: want, End: r.End}, true
	}
	return Range{}, false
}

// Orphan reports whether the object of key-derived seg, found under the
// partition's prefix, is one the manifest does not reference and never
// will, so the leader of term may delete it. The caller must have applied
// an entry of its own term (no ADD of an older term can commit later).
func (m Manifest) Orphan(seg Segment, term uint64) bool {
	for _, s := range m.segs {
		if s.Base == seg.Base && s.End == seg.End && s.Term == seg.Term {
			return false
		}
	}
	if !m.active {
		return seg.Term < term // no ADD committed yet: only an older term's object is dead
	}
	if seg.End <= m.Next() || seg.Term < term {
		return true // covered already, trimmed away, or a finished term's
	}
	n := len(m.segs)
	return n > 0 && seg.Base < m.segs[n-1].End // overlaps: never addable
}

// Check verifies the manifest's invariants: sorted, non-empty, contiguous
// segments, the first holding Start; nothing at all while inactive.
func (m Manifest) Check() error {
	if !m.active && (len(m.segs) > 0 || m.start != 0) {
		return fmt.Errorf("tier: inactive manifest with %d segments from %d", len(m.segs), m.start)
	}
	for i, s := range m.segs {
		if err := validSegment(s); err != nil {
			return fmt.Errorf("segment %d: %w", i, err)
		}
		if i > 0 && m.segs[i-1].End != s.Base {
			return fmt.Errorf("tier: segment %d starts at %d, after a segment ending at %d", i, s.Base, m.segs[i-1].End)
		}
	}
	if len(m.segs) > 0 && (m.start < m.segs[0].Base || m.start >= m.segs[0].End) {
		return fmt.Errorf("tier: remote start %d outside the first segment [%d, %d)", m.start, m.segs[0].Base, m.segs[0].End)
	}
	return nil
}

// Restore builds an active manifest from a snapshot's segments and start,
// checking the invariants.
func Restore(segs []Segment, start int64) (Manifest, error) {
	m := Manifest{segs: append([]Segment(nil), segs...), start: start, active: true}
	if err := m.Check(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}
