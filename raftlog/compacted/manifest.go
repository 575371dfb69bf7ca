package compacted

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// The manifest names the current generation, its segments and their sparse
// index (doc.go, "Files"). It is the store's commit record: written whole
// to manifest.tmp, synced, renamed over manifest, the directory synced.
const (
	manifestMagic = "SCM1"
	// manifestHeaderBytes: magic, crc, generation, start, end, digest,
	// segment count.
	manifestHeaderBytes = 4 + 4 + 8 + 8 + 8 + sha256.Size + 4
	// segmentHeaderBytes: base, end, bytes, index count.
	segmentHeaderBytes = 8 + 8 + 8 + 4
	// indexEntryBytes: offset, position, max timestamp.
	indexEntryBytes = 8 + 8 + 8
	// manifestBytesMax bounds what Open reads: 64 MiB of index entries
	// index a prefix far beyond any disk at the default interval.
	manifestBytesMax = 64 << 20
)

// castagnoli is CRC32C's table, as the batches'.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// indexEntry locates one batch in a segment: its base offset, its byte
// position, and the largest record timestamp of the segment's batches up
// to and including it (a running maximum, for a timestamp lookup).
type indexEntry struct {
	offset, position, maxTimestampMs int64
}

// segment is one segment file of a generation: the batches of offsets
// [base, end) in bytes bytes, indexed sparsely (the first batch always).
type segment struct {
	base, end, bytes int64
	index            []indexEntry
}

// manifest is the decoded commit record of a generation: the prefix
// [start, end) and the SHA-256 of its batches in order (compact's
// Result.Digest). Generation 0 is the empty store, never written.
type manifest struct {
	generation uint64
	start, end int64
	digest     [sha256.Size]byte
	segments   []segment
}

// appendManifest appends m's encoding to dst.
func appendManifest(dst []byte, m *manifest) []byte {
	le := binary.LittleEndian
	begin := len(dst)
	dst = append(dst, manifestMagic...)
	dst = le.AppendUint32(dst, 0) // crc, set below
	dst = le.AppendUint64(dst, m.generation)
	dst = le.AppendUint64(dst, uint64(m.start))
	dst = le.AppendUint64(dst, uint64(m.end))
	dst = append(dst, m.digest[:]...)
	dst = le.AppendUint32(dst, uint32(len(m.segments)))
	for i := range m.segments {
		s := &m.segments[i]
		dst = le.AppendUint64(dst, uint64(s.base))
		dst = le.AppendUint64(dst, uint64(s.end))
		dst = le.AppendUint64(dst, uint64(s.bytes))
		dst = le.AppendUint32(dst, uint32(len(s.index)))
		for _, e := range s.index {
			dst = le.AppendUint64(dst, uint64(e.offset))
			dst = le.AppendUint64(dst, uint64(e.position))
			dst = le.AppendUint64(dst, uint64(e.maxTimestampMs))
		}
	}
	le.PutUint32(dst[begin+4:], crc32.Checksum(dst[begin+8:], castagnoli))
	return dst
}

// decodeManifest checks and decodes a manifest: the CRC, exact lengths,
// and every ordering rule check enforces. Any defect is ErrCorrupt naming
// it (FuzzDecodeManifest).
func decodeManifest(b []byte) (manifest, error) {
	le := binary.LittleEndian
	if len(b) < manifestHeaderBytes || len(b) > manifestBytesMax {
		return manifest{}, corruptf("manifest of %d bytes", len(b))
	}
	if string(b[:4]) != manifestMagic {
		return manifest{}, corruptf("manifest magic %q", b[:4])
	}
	if want, got := le.Uint32(b[4:8]), crc32.Checksum(b[8:], castagnoli); want != got {
		return manifest{}, corruptf("manifest crc %#08x, computed %#08x", want, got)
	}
	m := manifest{
		generation: le.Uint64(b[8:]),
		start:      int64(le.Uint64(b[16:])),
		end:        int64(le.Uint64(b[24:])),
	}
	copy(m.digest[:], b[32:64])
	count := le.Uint32(b[64:])
	rest := b[manifestHeaderBytes:]
	if uint64(count)*segmentHeaderBytes > uint64(len(rest)) {
		return manifest{}, corruptf("manifest: %d segments in %d bytes", count, len(rest))
	}
	m.segments = make([]segment, 0, count)
	for i := uint32(0); i < count; i++ {
		s, n, err := decodeSegment(rest)
		if err != nil {
			return manifest{}, fmt.Errorf("%w (segment %d)", err, i)
		}
		m.segments = append(m.segments, s)
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return manifest{}, corruptf("manifest: %d bytes after the last segment", len(rest))
	}
	return m, m.check()
}

// decodeSegment decodes one segment's header and index from b and returns
// the bytes it used.
func decodeSegment(b []byte) (segment, int, error) {
	le := binary.LittleEndian
	if len(b) < segmentHeaderBytes {
		return segment{}, 0, corruptf("manifest: segment header cut at %d bytes", len(b))
	}
	s := segment{base: int64(le.Uint64(b)), end: int64(le.Uint64(b[8:])), bytes: int64(le.Uint64(b[16:]))}
	count := uint64(le.Uint32(b[24:]))
	b = b[segmentHeaderBytes:]
	if count*indexEntryBytes > uint64(len(b)) {
		return segment{}, 0, corruptf("manifest: %d index entries in %d bytes", count, len(b))
	}
	s.index = make([]indexEntry, count)
	for i := range s.index {
		e := b[i*indexEntryBytes:]
		s.index[i] = indexEntry{offset: int64(le.Uint64(e)), position: int64(le.Uint64(e[8:])),
			maxTimestampMs: int64(le.Uint64(e[16:]))}
	}
	return s, segmentHeaderBytes + int(count)*indexEntryBytes, nil
}

// check enforces the manifest's rules: a written generation is at least 1;
// 0 ≤ start ≤ end; segments non-empty, in offset order inside [start, end);
// each index starts at the segment's first batch (position 0, offset base)
// and strictly increases in offset and position, inside the segment; the
// running max timestamps never decrease, across segments too.
func (m *manifest) check() error {
	if m.generation == 0 || m.start < 0 || m.end < m.start {
		return corruptf("manifest: generation %d, prefix [%d, %d)", m.generation, m.start, m.end)
	}
	prev, prevTime := m.start, int64(math.MinInt64)
	for i := range m.segments {
		s := &m.segments[i]
		if s.base < prev || s.end <= s.base || s.end > m.end || s.bytes <= 0 || s.bytes > math.MaxInt64/2 {
			return corruptf("manifest: segment %d [%d, %d) of %d bytes after offset %d in [%d, %d)",
				i, s.base, s.end, s.bytes, prev, m.start, m.end)
		}
		if err := s.checkIndex(); err != nil {
			return fmt.Errorf("%w (segment %d)", err, i)
		}
		if s.index[0].maxTimestampMs < prevTime {
			return corruptf("manifest: segment %d's running max time %d below the last segment's %d", i, s.index[0].maxTimestampMs, prevTime)
		}
		prev, prevTime = s.end, s.index[len(s.index)-1].maxTimestampMs
	}
	return nil
}

// checkIndex checks a segment's sparse index.
func (s *segment) checkIndex() error {
	if len(s.index) == 0 || s.index[0].position != 0 || s.index[0].offset != s.base {
		return corruptf("manifest: index does not start at the segment's first batch")
	}
	for i := 1; i < len(s.index); i++ {
		a, b := &s.index[i-1], &s.index[i]
		if b.offset <= a.offset || b.offset >= s.end || b.position <= a.position || b.position >= s.bytes ||
			b.maxTimestampMs < a.maxTimestampMs {
			return corruptf("manifest: index entry %d (offset %d, position %d, time %d) after (%d, %d, %d)",
				i, b.offset, b.position, b.maxTimestampMs, a.offset, a.position, a.maxTimestampMs)
		}
	}
	return nil
}
