package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sealed segments. When the active segment rolls, a seal record is appended
// to it and the file is synced before the next segment is created, so every
// segment but the last ends with its seal. The seal says what a scan of the
// segment would find: base, last index and term runs, the hard state, the
// offset where the entries end. Open reads only the seals of the segments
// before the last one (one ReadAt each) and scans the last one, so a
// restart costs O(segments + the active segment), not O(bytes). A sealed
// segment's per-entry index (record offsets and sizes) is built when an
// entry of it is first read, with every record's checksum verified then; an
// entry is checked again each time it is read.
//
// Seal body (the record's CRC32C covers it), little endian:
//
//	offset 0   version    u8   = sealVersion
//	offset 1   base       u64  index the segment starts at (= its name)
//	offset 9   last       u64  index of its last entry (base-1: none)
//	offset 17  prevTerm   u64  as in its segment record
//	offset 25  lastTerm   u64  term of entry last (prevTerm when none)
//	offset 33  end        u64  offset of the seal record: where entries end
//	offset 41  hasHard    u8   0 or 1
//	offset 42  hard state term, vote, commit (3 × u64; zero without)
//	offset 66  runs       u32  count n of term runs
//	offset 70  n × (first u64, term u64): the terms of entries [base, last]
//	           (the first run may start above base after a compaction)
//	end-4      size       u32  the whole record's size, so Open finds the
//	           record from the file's end
//
// A segment written before seals existed (or whose seal is damaged) has no
// valid seal at its end: Open scans it whole, as it scanned every segment
// before; damage then is ErrCorrupt as for any synced segment.
//
// Rejected: a sidecar index file per segment (a second file to create, sync
// and remove in order, and to keep consistent under truncation); the full
// per-entry index in the seal (12 bytes per entry read at every Open:
// O(entries) again, 10× more at 10× the data); trusting a seal without its
// checksum.

const (
	sealVersion         = 1
	sealFixedBytes      = 70
	sealRunsMax         = 1 << 16 // bounds a damaged count before any allocation
	sealReadBytes       = 512     // one ReadAt finds a seal of up to ~25 term runs
	sealRecordBytesBase = frameHeaderBytes + sealFixedBytes + 4
)

// seal is the decoded body of a recordSeal.
type seal struct {
	base, last         uint64
	prevTerm, lastTerm uint64
	end                int64
	hasHard            bool
	hard               hardState
	runs               []termRun
}

var errBadSeal = errors.New("raftlog: bad seal")

// appendSealRecord appends the seal record of sl (whose end is where the
// record starts) to buf.
func appendSealRecord(buf []byte, sl seal) []byte {
	buf, start := beginRecord(buf, recordSeal)
	buf = append(buf, sealVersion)
	for _, v := range []uint64{sl.base, sl.last, sl.prevTerm, sl.lastTerm, uint64(sl.end)} {
		buf = binary.LittleEndian.AppendUint64(buf, v)
	}
	if sl.hasHard {
		buf = append(buf, 1)
	} else {
		buf = append(buf, 0)
	}
	for _, v := range []uint64{sl.hard.term, sl.hard.vote, sl.hard.commit} {
		buf = binary.LittleEndian.AppendUint64(buf, v)
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(sl.runs)))
	for _, r := range sl.runs {
		buf = binary.LittleEndian.AppendUint64(buf, r.first)
		buf = binary.LittleEndian.AppendUint64(buf, r.term)
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(buf)-start+4))
	endRecord(buf, start)
	return buf
}

// decodeSealBody decodes and checks a seal record's body; it never panics.
// The checks are those every seal raftlog writes passes: runs ascending
// inside [base, last] with terms that never go down from prevTerm to
// lastTerm, an end past the segment record.
func decodeSealBody(body []byte) (seal, error) {
	if len(body) < sealFixedBytes+4 || body[0] != sealVersion {
		return seal{}, errBadSeal
	}
	u := func(off int) uint64 { return binary.LittleEndian.Uint64(body[off:]) }
	sl := seal{base: u(1), last: u(9), prevTerm: u(17), lastTerm: u(25), end: int64(u(33))}
	if body[41] > 1 {
		return seal{}, errBadSeal
	}
	sl.hasHard = body[41] == 1
	sl.hard = hardState{term: u(42), vote: u(50), commit: u(58)}
	n := uint64(binary.LittleEndian.Uint32(body[66:]))
	if n > sealRunsMax || uint64(len(body)) != sealFixedBytes+16*n+4 {
		return seal{}, errBadSeal
	}
	if int(binary.LittleEndian.Uint32(body[len(body)-4:])) != frameHeaderBytes+len(body) {
		return seal{}, errBadSeal
	}
	if sl.base == 0 || sl.last+1 < sl.base || sl.end < frameHeaderBytes+segmentBodyBytes ||
		(!sl.hasHard && sl.hard != hardState{}) {
		return seal{}, errBadSeal
	}
	term := sl.prevTerm
	for k := range int(n) {
		r := termRun{first: u(sealFixedBytes + 16*k), term: u(sealFixedBytes + 16*k + 8)}
		if r.first < sl.base || r.first > sl.last || r.term < term ||
			(k > 0 && (r.first <= sl.runs[k-1].first || r.term == term)) {
			return seal{}, errBadSeal
		}
		sl.runs = append(sl.runs, r)
		term = r.term
	}
	if term != sl.lastTerm || (sl.last >= sl.base && n == 0) {
		return seal{}, errBadSeal
	}
	return sl, nil
}

// sealOf returns the seal of segment s as it is now: its entries, the
// terms the log knows for them, the log's hard state.
func (l *Log) sealOf(s *segment) seal {
	sl := seal{base: s.base, last: s.lastIndex(), prevTerm: s.prevTerm, lastTerm: s.prevTerm, end: s.size,
		hasHard: l.hasHard}
	if l.hasHard {
		sl.hard = l.hard
	}
	if s.lastIndex() < s.base {
		return sl
	}
	// Entries below firstIndex-1 have no term any more (compacted inside
	// the segment); nothing asks for them again.
	from := max(s.base, l.firstIndex-1)
	for _, r := range l.terms {
		if r.first > s.lastIndex() {
			break
		}
		first := max(r.first, from)
		if n := len(sl.runs); n > 0 && first <= sl.runs[n-1].first {
			sl.runs[n-1].term = r.term // a later run covers the start
			continue
		}
		sl.runs = append(sl.runs, termRun{first: first, term: r.term})
	}
	sl.lastTerm = l.termAt(s.lastIndex())
	return sl
}

// seal writes pending (records of s's entries not yet written; the Log
// takes the buffer) and s's seal record in one write; the caller syncs s.
func (l *Log) seal(s *segment, pending []byte) error {
	end := s.size + int64(len(pending))
	sl := l.sealOf(s)
	sl.end = end
	l.deferWrite(s, appendSealRecord(pending, sl), true) // pending is the caller's buffer, handed over
	s.sealEnd = end
	return nil
}

// readSeal reads the seal at the end of a segment file of size bytes, or
// reports ok false when there is none valid (a segment older than seals,
// or damage: the caller scans the file instead).
func readSeal(f File, size int64, base uint64) (sl seal, ok bool) {
	if size < sealRecordBytesBase+frameHeaderBytes+segmentBodyBytes {
		return seal{}, false
	}
	n := min(size, sealReadBytes)
	buf := make([]byte, n)
	if k, _ := f.ReadAt(buf, size-n); int64(k) != n {
		return seal{}, false
	}
	recSize := int64(binary.LittleEndian.Uint32(buf[n-4:]))
	if recSize < sealRecordBytesBase || recSize > size-frameHeaderBytes-segmentBodyBytes {
		return seal{}, false
	}
	if recSize > n {
		buf = make([]byte, recSize)
		if k, _ := f.ReadAt(buf, size-recSize); int64(k) != recSize {
			return seal{}, false
		}
	} else {
		buf = buf[n-recSize:]
	}
	recordType, body, got, err := decodeRecord(buf)
	if err != nil || recordType != recordSeal || got != recSize {
		return seal{}, false
	}
	sl, err = decodeSealBody(body)
	if err != nil || sl.base != base || sl.end != size-recSize {
		return seal{}, false
	}
	return sl, true
}

// indexSegment builds the per-entry index of a sealed segment Open took
// from its seal: one read of the segment, every record's checksum, index
// and term checked. Damage is ErrCorrupt (the data was synced before the
// seal was).
func (l *Log) indexSegment(s *segment) error {
	if s.indexed {
		return nil
	}
	buf := make([]byte, s.sealEnd)
	if n, err := s.file.ReadAt(buf, 0); n != len(buf) {
		return fmt.Errorf("raftlog: read %s: %w", s.name, err)
	}
	starts, sizes, err := indexRecords(buf, s.name, s.base, s.prevTerm, s.lastIndex(), l.firstIndex, l.termAt)
	if err != nil {
		return err
	}
	s.starts, s.sizes, s.indexed = starts, sizes, true
	return nil
}

// indexRecords indexes the records of a sealed segment's bytes buf (up to
// its seal): every record's CRC checked, each entry's index in sequence
// from base to last and, from firstIndex-1 on, its term the one termAt
// gives (the seal's runs). It returns each entry's record offset and size.
func indexRecords(buf []byte, name string, base, prevTerm, last, firstIndex uint64, termAt func(uint64) uint64) ([]int64, []uint32, error) {
	recordType, body, off, err := decodeRecord(buf)
	if err != nil || recordType != recordSegment || decodeSegmentBody(body) != (segmentHeader{base, prevTerm}) {
		return nil, nil, corruptf(name, 0, "bad segment record (%v)", err)
	}
	starts := make([]int64, 0, last+1-base)
	sizes := make([]uint32, 0, cap(starts))
	for off < int64(len(buf)) {
		recordType, body, size, err := decodeRecord(buf[off:])
		if err != nil {
			return nil, nil, corruptf(name, off, "%v", err)
		}
		switch recordType {
		case recordHardState:
		case recordEntry:
			h := decodeEntryHeader(body)
			want := base + uint64(len(starts))
			if h.index != want || h.index > last {
				return nil, nil, corruptf(name, off, "entry %d where %d belongs (last %d)", h.index, want, last)
			}
			if h.index+1 >= firstIndex && h.term != termAt(h.index) {
				return nil, nil, corruptf(name, off, "entry %d term %d, seal says %d", h.index, h.term, termAt(h.index))
			}
			starts, sizes = append(starts, off), append(sizes, uint32(size))
		default:
			return nil, nil, corruptf(name, off, "unexpected record type %d", recordType)
		}
		off += size
	}
	if uint64(len(starts)) != last+1-base {
		return nil, nil, corruptf(name, off, "%d entries, seal says %d", len(starts), last+1-base)
	}
	return starts, sizes, nil
}

// VerifyFrom checks, now, every record of the segments holding entries at
// and above index: a node calls it at open for the entries it will replay,
// so damage there is found (and repaired) before raft reads them. It
// returns ErrCorrupt on damage.
func (l *Log) VerifyFrom(index uint64) error {
	if l.closed {
		return ErrClosed
	}
	for _, s := range l.segments {
		if s.lastIndex() >= index && s.lastIndex() >= s.base {
			if err := l.indexSegment(s); err != nil {
				return err
			}
		}
	}
	return nil
}
