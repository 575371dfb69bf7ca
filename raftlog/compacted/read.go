package compacted

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"path"
	"sort"

	"github.com/strandlog/strand/engine/compact"
)

// Batch header fields a read checks (compact's layout, doc.go there).
const (
	offCRC       = 4
	offBase      = 8
	offLastDelta = 16
	offRecords   = 64
)

// errPastLimit: the batch batchAt reached is longer than its limit.
var errPastLimit = errors.New("compacted: batch past the read's limit")

// batchAt reads the batch at pos of segment i into dst (appended) and
// checks its magic, length, CRC and offsets; it returns dst, the batch's
// base and last offsets. A defect is ErrCorrupt naming file and position;
// a batch whose header says it is longer than limit is errPastLimit, with
// nothing appended and nothing more checked.
func (s *Store) batchAt(dst []byte, i int, pos, limit int64) ([]byte, int64, int64, error) {
	seg := &s.m.segments[i]
	name := path.Join(s.dir, segmentName(s.m.generation, i))
	if pos+compact.HeaderBytes > seg.bytes {
		return dst, 0, 0, corruptf("%s: batch header at %d past the segment's %d bytes", name, pos, seg.bytes)
	}
	start := len(dst)
	dst = append(dst, make([]byte, compact.HeaderBytes)...)
	if _, err := s.files[i].ReadAt(dst[start:], pos); err != nil {
		return dst[:start], 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	le := binary.LittleEndian
	h := dst[start:]
	size := compact.HeaderBytes + int64(le.Uint32(h[offRecords:]))
	if size > limit {
		return dst[:start], 0, 0, errPastLimit
	}
	if h[0] != compact.Magic || size > compact.BatchBytesMax || pos+size > seg.bytes {
		return dst[:start], 0, 0, corruptf("%s: batch at %d: magic %d, %d bytes in a segment of %d", name, pos, h[0], size, seg.bytes)
	}
	dst = append(dst, make([]byte, size-compact.HeaderBytes)...)
	if _, err := s.files[i].ReadAt(dst[start+compact.HeaderBytes:], pos+compact.HeaderBytes); err != nil {
		return dst[:start], 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	b := dst[start:]
	if want, got := le.Uint32(b[offCRC:]), compact.Checksum(b); want != got {
		return dst[:start], 0, 0, corruptf("%s: batch at %d: crc %#08x, computed %#08x", name, pos, want, got)
	}
	base := int64(le.Uint64(b[offBase:]))
	last := base + int64(int32(le.Uint32(b[offLastDelta:])))
	if base < seg.base || last < base || last >= seg.end {
		return dst[:start], 0, 0, corruptf("%s: batch at %d covers [%d, %d], outside the segment's [%d, %d)", name, pos, base, last, seg.base, seg.end)
	}
	return dst, base, last, nil
}

// Read appends to dst the batches holding offset or after it, whole and in
// order, while their total stays within maxBytes, but at least one (as a
// Kafka fetch): the first is the one containing offset, or the first after
// it when offset fell in removed records. An offset at or past End gets
// nothing; below the first batch, from the first. Each batch's CRC is
// checked; a defect is ErrCorrupt.
func (s *Store) Read(dst []byte, offset int64, maxBytes int) ([]byte, error) {
	dst, _, err := s.ReadBatches(dst, offset, maxBytes, math.MaxInt)
	return dst, err
}

// ReadBatches is Read returning at most maxBatches batches (at least one),
// so a reader bounded in batches reads no bytes it would throw away. It
// also returns the offset the read covered up to: End when it read to the
// end of the prefix (compaction may have removed the records between its
// last batch and End), else the offset after its last batch, where a next
// read goes on.
func (s *Store) ReadBatches(dst []byte, offset int64, maxBytes, maxBatches int) ([]byte, int64, error) {
	if s.failed != nil {
		return dst, offset, s.failed
	}
	segs := s.m.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].end > offset })
	if offset >= s.m.end || i == len(segs) {
		return dst, max(offset, s.m.end), nil
	}
	idx := segs[i].index
	j := sort.Search(len(idx), func(j int) bool { return idx[j].offset > offset })
	pos := idx[max(j-1, 0)].position
	begin := len(dst)
	next := offset
	for n := 0; i < len(segs); {
		if pos == segs[i].bytes {
			i, pos = i+1, 0
			continue
		}
		if n >= max(maxBatches, 1) {
			return dst, next, nil
		}
		before := len(dst)
		limit := int64(math.MaxInt64) // the first batch whatever its size
		if before > begin {
			limit = int64(maxBytes - (before - begin))
		}
		var err error
		var last int64
		dst, _, last, err = s.batchAt(dst, i, pos, limit)
		if errors.Is(err, errPastLimit) {
			return dst, next, nil
		}
		if err != nil {
			return dst[:begin], offset, err
		}
		pos += int64(len(dst) - before)
		if last < offset {
			dst = dst[:before] // before offset: skip it
			continue
		}
		n++
		next = last + 1
	}
	return dst, s.m.end, nil
}

// Batches yields the current generation's batches in order, each checked
// as Read checks it; a batch's bytes are valid until the next one. It is
// what the next pass reads as its compacted prefix (compact.Log).
func (s *Store) Batches() iter.Seq2[[]byte, error] { return s.BatchesFrom(math.MinInt64) }

// BatchesFrom is Batches from the batch holding offset, or the first
// after it (found through the segments' index, as Read does): where a
// pass run in steps resumes (compact.Log's From).
func (s *Store) BatchesFrom(offset int64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		if s.failed != nil {
			yield(nil, s.failed)
			return
		}
		segs := s.m.segments
		i := sort.Search(len(segs), func(i int) bool { return segs[i].end > offset })
		var pos int64
		if i < len(segs) && len(segs[i].index) > 0 {
			idx := segs[i].index
			j := sort.Search(len(idx), func(j int) bool { return idx[j].offset > offset })
			pos = idx[max(j-1, 0)].position
		}
		var buf []byte
		for ; i < len(segs); i, pos = i+1, 0 {
			for pos < segs[i].bytes {
				var err error
				var last int64
				buf, _, last, err = s.batchAt(buf[:0], i, pos, math.MaxInt64)
				if err != nil {
					yield(buf, err)
					return
				}
				pos += int64(len(buf))
				if last >= offset && !yield(buf, nil) {
					return
				}
			}
		}
	}
}

// Verify reads the whole generation and checks what Open does not: every
// batch (CRC, offsets in order inside its segment), every index entry at a
// batch's start with the running maximum timestamp, and the digest. A
// replica runs it before it serves its prefix to a peer or trusts one it
// installed.
func (s *Store) Verify() error {
	if s.failed != nil {
		return s.failed
	}
	if s.m.generation == 0 {
		return nil
	}
	sha := sha256.New()
	next, maxTime := s.m.start, int64(-1<<63)
	for i := range s.m.segments {
		seg := &s.m.segments[i]
		k := 0
		for pos := int64(0); pos < seg.bytes; {
			buf, base, last, err := s.batchAt(nil, i, pos, math.MaxInt64)
			if err != nil {
				return err
			}
			b, err := compact.DecodeBatch(buf)
			if err != nil {
				return corruptf("segment %d at %d: %v", i, pos, err)
			}
			maxTime = max(maxTime, b.MaxTimestampMs)
			if k < len(seg.index) && seg.index[k].position == pos {
				if e := seg.index[k]; e.offset != base || e.maxTimestampMs != maxTime {
					return corruptf("segment %d: index entry %d (offset %d, time %d), batch at %d has offset %d, time %d",
						i, k, e.offset, e.maxTimestampMs, pos, base, maxTime)
				}
				k++
			}
			if base < next {
				return corruptf("segment %d: batch at %d has offset %d after offset %d", i, pos, base, next)
			}
			sha.Write(buf)
			next, pos = last+1, pos+int64(len(buf))
		}
		if k != len(seg.index) || next != seg.end {
			return corruptf("segment %d: %d of %d index entries at batches, last batch ends at %d, manifest says %d",
				i, k, len(seg.index), next, seg.end)
		}
	}
	if got := [sha256.Size]byte(sha.Sum(nil)); got != s.m.digest {
		return fmt.Errorf("%w: generation %d hashes to %x, manifest says %x", ErrDigestMismatch, s.m.generation, got[:8], s.m.digest[:8])
	}
	return nil
}

// offMaxTS is the batch header's max_time_ms (compact's layout).
const offMaxTS = 32

// OffsetForTimestamp returns the base offset of the first batch whose
// running maximum record timestamp (the largest of it and every batch
// before it in the prefix) is at or after timestampMs, as the engine's
// OffsetForTimestamp answers for the raft log (Kafka's ListOffsets at
// batch granularity); false when no batch of the prefix reaches it (the
// answer lies in the raft log). The sparse index narrows the scan to
// IndexIntervalBytes; each batch read is checked as Read checks it.
func (s *Store) OffsetForTimestamp(timestampMs int64) (int64, bool, error) {
	if s.failed != nil {
		return 0, false, s.failed
	}
	i, k := s.lastIndexBelow(timestampMs)
	if i < 0 {
		return 0, false, nil
	}
	var buf []byte
	for pos := s.m.segments[i].index[k].position; i < len(s.m.segments); i, pos = i+1, 0 {
		for pos < s.m.segments[i].bytes {
			var err error
			var base int64
			buf, base, _, err = s.batchAt(buf[:0], i, pos, math.MaxInt64)
			if err != nil {
				return 0, false, err
			}
			// The running maximum first reaches timestampMs at the first
			// batch whose own maximum does.
			if int64(binary.LittleEndian.Uint64(buf[offMaxTS:])) >= timestampMs {
				return base, true, nil
			}
			pos += int64(len(buf))
		}
	}
	return 0, false, nil
}

// lastIndexBelow returns the segment and entry of the last index entry
// whose running maximum is below timestampMs, where a scan for it starts,
// or the first entry when none is; (-1, 0) for an empty prefix. Running
// maxima are non-decreasing across the whole generation (manifest check).
func (s *Store) lastIndexBelow(timestampMs int64) (int, int) {
	segs := s.m.segments
	if len(segs) == 0 {
		return -1, 0
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].index[0].maxTimestampMs >= timestampMs })
	if i == 0 {
		return 0, 0
	}
	idx := segs[i-1].index
	k := sort.Search(len(idx), func(k int) bool { return idx[k].maxTimestampMs >= timestampMs })
	return i - 1, k - 1 // k ≥ 1: entry 0 of segment i-1 is below
}
