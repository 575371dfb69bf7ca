package raftlog

import (
	"fmt"
	"math"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Split reads (issue 22: a cold read off the node's loop). Entries reads
// segments on the caller's goroutine: the node's one loop, which every
// partition of the node waits on. StartRead, Run and FinishRead split a
// range read the way StartSync and FinishSync split a sync:
//
//   - StartRead (the log's goroutine) serves the range from the tail cache
//     when it holds it, without I/O; otherwise it returns a Read: the files,
//     offsets and term runs the read needs, copied, so it reads nothing of
//     the Log later;
//   - Read.Run (any goroutine) reads the files: one ReadAt per segment, and
//     for a sealed segment not yet indexed the whole segment first, as
//     indexSegment does, building its index; every record's CRC and index
//     checked; the size limit applied as Entries applies it;
//   - FinishRead (the log's goroutine) hands the entries out and installs
//     the indexes Run built in segments the log still holds.
//
// Only committed entries may be read this way (the node reads what it
// applied): their bytes never change while a Read runs, since raft
// truncates only uncommitted entries. Segments may go meanwhile (a
// compaction retires them, ApplySnapshot removes them) and their files
// close under the Read: FinishRead then reports raft.ErrCompacted rather
// than the read's error, so the caller reads again (finding the entries
// gone, or in the segments that now hold them) instead of treating it as
// damage. A File's ReadAt may run concurrently with the log's writes to
// other offsets of the same file (pread and pwrite; see File).

// Read is a range read prepared by StartRead, run by Run on any goroutine
// and ended by FinishRead.
type Read struct {
	lo, hi, maxSize uint64
	firstIndex      uint64    // the log's, at StartRead (the seal check's bound)
	terms           []termRun // the log's term runs, copied
	pieces          []readPiece
	// mem are the entries from hi on, up to the hi asked, that the tail
	// cache held at StartRead (they may not be on file yet: SaveSome).
	mem []*raftpb.Entry
	// Run's results.
	entries []*raftpb.Entry
	err     error
	ran     bool
}

// readPiece is the part of a Read one segment holds.
type readPiece struct {
	seg      *segment // identity only: Run never reads it
	file     File
	name     string
	base     uint64
	last     uint64 // the segment's last index
	prevTerm uint64
	sealEnd  int64
	// indexed: starts and sizes, copied at StartRead, cover [base, last];
	// otherwise Run builds them (built says it did).
	indexed bool
	built   bool
	starts  []int64
	sizes   []uint32
}

// StartRead begins a read of entries [lo, hi) limited to maxSize as
// Entries limits it. When the tail cache holds the range it returns the
// entries and a nil Read, with no I/O; otherwise a Read to Run off the
// log's goroutine and end with FinishRead. The errors are Entries'.
func (l *Log) StartRead(lo, hi, maxSize uint64) ([]*raftpb.Entry, *Read, error) {
	if l.closed {
		return nil, nil, ErrClosed
	}
	if lo < l.firstIndex {
		return nil, nil, raft.ErrCompacted
	}
	if hi > l.lastIndex+1 {
		panic(fmt.Sprintf("raftlog: read hi %d beyond last index %d", hi, l.lastIndex))
	}
	if l.lastIndex < l.firstIndex {
		return nil, nil, raft.ErrUnavailable
	}
	if lo >= hi {
		return []*raftpb.Entry{}, nil, nil
	}
	tailFirst := l.tailFirst()
	if lo >= tailFirst {
		ents, err := l.Entries(lo, hi, maxSize) // no I/O: the tail's segments are indexed
		return ents, nil, err
	}
	r := &Read{lo: lo, hi: min(hi, tailFirst), maxSize: maxSize, firstIndex: l.firstIndex}
	if hi > tailFirst {
		r.mem = append([]*raftpb.Entry(nil), l.tail[:hi-tailFirst]...)
	}
	hi = r.hi
	for k := l.segmentOf(lo); k < len(l.segments) && l.segments[k].base < hi; k++ {
		s := l.segments[k]
		p := readPiece{seg: s, file: s.file, name: s.name, base: s.base, last: s.lastIndex(),
			prevTerm: s.prevTerm, sealEnd: s.sealEnd, indexed: s.indexed}
		if s.indexed {
			// Copied: the active segment's index grows (and is cut back
			// by truncation, above the committed range) meanwhile.
			n := min(hi, s.lastIndex()+1) - s.base
			p.starts = append([]int64(nil), s.starts[:n]...)
			p.sizes = append([]uint32(nil), s.sizes[:n]...)
		}
		r.pieces = append(r.pieces, p)
	}
	// The runs from the one holding the first piece's base on: the seal
	// check and the size limit ask terms at and above it.
	from := r.pieces[0].base
	for k, t := range l.terms {
		if k+1 < len(l.terms) && l.terms[k+1].first <= from {
			continue
		}
		r.terms = append(r.terms, t)
	}
	return nil, r, nil
}

// termAt is Log.termAt over the copied runs.
func (r *Read) termAt(i uint64) uint64 {
	term := uint64(0)
	for _, t := range r.terms {
		if t.first > i {
			break
		}
		term = t.term
	}
	return term
}

// Run performs the read. It touches only the Read and its files, never
// the Log: any goroutine may run it, concurrently with the Log's writes.
func (r *Read) Run() error {
	if r.ran {
		panic("raftlog: Read run twice")
	}
	r.ran = true
	r.entries, r.err = r.run()
	return r.err
}

func (r *Read) run() ([]*raftpb.Entry, error) {
	out := make([]*raftpb.Entry, 0, r.hi-r.lo)
	var total uint64
	lo := r.lo
	for k := range r.pieces {
		p := &r.pieces[k]
		if !p.indexed && !p.built {
			if err := r.index(p); err != nil {
				return nil, err
			}
		}
		end := min(r.hi, p.last+1)
		if r.maxSize != math.MaxUint64 {
			for i := lo; i < end; i++ {
				dataBytes := uint64(p.sizes[i-p.base]) - frameHeaderBytes - entryHeaderBytes
				total += entryProtoBytes(r.termAt(i), i, dataBytes)
				if total > r.maxSize && i > r.lo {
					end = i
					break
				}
			}
		}
		if end <= lo {
			break
		}
		from := p.starts[lo-p.base]
		to := p.starts[end-1-p.base] + int64(p.sizes[end-1-p.base])
		buf := make([]byte, to-from)
		if n, err := p.file.ReadAt(buf, from); n != len(buf) {
			return nil, fmt.Errorf("raftlog: read %s at %d: %w", p.name, from, err)
		}
		structs := make([]raftpb.Entry, end-lo)
		values := make([]entryValues, end-lo)
		for i := lo; i < end; i++ {
			j := i - lo
			off := p.starts[i-p.base] - from
			rec := buf[off : off+int64(p.sizes[i-p.base])]
			if err := decodeEntryInto(&structs[j], &values[j], rec, i); err != nil {
				return nil, corruptf(p.name, p.starts[i-p.base], "%v", err)
			}
			out = append(out, &structs[j])
		}
		if end < min(r.hi, p.last+1) {
			break // the size limit
		}
		lo = end
		if lo >= r.hi {
			break
		}
	}
	if uint64(len(out)) < r.hi-r.lo {
		return out, nil // the size limit
	}
	for _, e := range r.mem {
		if r.maxSize != math.MaxUint64 {
			total += entryProtoBytes(e.GetTerm(), e.GetIndex(), uint64(len(e.GetData())))
			if total > r.maxSize && len(out) > 0 {
				break
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// index builds a sealed segment's index as Log.indexSegment does.
func (r *Read) index(p *readPiece) error {
	buf := make([]byte, p.sealEnd)
	if n, err := p.file.ReadAt(buf, 0); n != len(buf) {
		return fmt.Errorf("raftlog: read %s: %w", p.name, err)
	}
	starts, sizes, err := indexRecords(buf, p.name, p.base, p.prevTerm, p.last, r.firstIndex, r.termAt)
	if err != nil {
		return err
	}
	p.starts, p.sizes, p.built = starts, sizes, true
	return nil
}

// Entries answers what Run read (nil before Run or after its error), for
// a job that uses them off the loop (a tiered upload); the read still
// ends with FinishRead on the log's goroutine.
func (r *Read) Entries() []*raftpb.Entry { return r.entries }

// FinishRead ends r on the log's goroutine: the entries, or the read's
// error, or raft.ErrCompacted when a segment it read left the log
// meanwhile (retired, removed, or the log closed) and the read failed: the
// caller reads again. Indexes Run built go to the segments still held.
func (l *Log) FinishRead(r *Read) ([]*raftpb.Entry, error) {
	if !r.ran {
		panic("raftlog: FinishRead before Run")
	}
	held := true
	for k := range r.pieces {
		p := &r.pieces[k]
		live := l.holds(p.seg)
		held = held && live
		if live && p.built && !p.seg.indexed {
			p.seg.starts, p.seg.sizes, p.seg.indexed = p.starts, p.sizes, true
		}
	}
	if r.err != nil {
		if !held || l.closed || r.lo < l.firstIndex {
			return nil, fmt.Errorf("%w: a segment read left the log (%w)", raft.ErrCompacted, r.err)
		}
		return nil, r.err
	}
	return r.entries, nil
}

// holds tells whether s is one of l's segments now.
func (l *Log) holds(s *segment) bool {
	if l.closed {
		return false
	}
	for _, x := range l.segments {
		if x == s {
			return true
		}
	}
	return false
}
