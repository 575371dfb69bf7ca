package raftlog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
)

// Record framing. Every byte raftlog writes belongs to a record:
//
//	offset 0  length  uint32 little endian: bytes after the 8-byte prefix (type + body)
//	offset 4  crc     uint32 little endian: CRC32C (Castagnoli) of bytes [0,4) then [8,8+length)
//	offset 8  type    uint8
//	offset 9  body    length-1 bytes
//
// The checksum covers the length field too, so a flipped length bit cannot
// make a shorter or longer record pass.
const (
	frameHeaderBytes = 9 // length, crc, type

	recordSegment   byte = 1 // first record of every segment file
	recordEntry     byte = 2 // one raft entry
	recordHardState byte = 3 // raft HardState
	recordSnapshot  byte = 4 // the only record of a snapshot file
	recordSeal      byte = 5 // last record of a sealed segment (seal.go)

	segmentBodyBytes     = 17 // version u8, base u64, prevTerm u64
	entryHeaderBytes     = 17 // term u64, index u64, entry type u8
	hardStateBodyBytes   = 24 // term u64, vote u64, commit u64
	snapshotHeaderBytes  = 21 // flags u8, index u64, term u64, confState length u32
	segmentFormatVersion = 1

	// recordBytesMax bounds a record's length field, so a damaged length can
	// never make recovery allocate or scan absurd amounts.
	recordBytesMax = math.MaxUint32 - frameHeaderBytes
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errShortRecord says buf ends before the record does: at the end of a file
// this is a torn write.
var errShortRecord = errors.New("raftlog: record truncated")

// errBadRecord says the bytes at hand are not a valid record (zero length,
// bad checksum, unknown type).
var errBadRecord = errors.New("raftlog: bad record")

// recordChecksum returns the checksum of the record in rec (whole frame).
func recordChecksum(rec []byte) uint32 {
	crc := crc32.Update(0, castagnoli, rec[0:4])
	return crc32.Update(crc, castagnoli, rec[8:])
}

// beginRecord appends a frame header for a record of recordType to buf and
// returns buf and the offset of the record, to be passed to endRecord once
// the body has been appended.
func beginRecord(buf []byte, recordType byte) ([]byte, int) {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0, recordType)
	return buf, start
}

// endRecord fills in the length and checksum of the record starting at start.
func endRecord(buf []byte, start int) {
	length := len(buf) - start - 8
	if length > recordBytesMax {
		panic("raftlog: record too large to frame")
	}
	binary.LittleEndian.PutUint32(buf[start:], uint32(length))
	binary.LittleEndian.PutUint32(buf[start+4:], recordChecksum(buf[start:]))
}

// appendRecord appends a whole record with body to buf.
func appendRecord(buf []byte, recordType byte, body []byte) []byte {
	buf, start := beginRecord(buf, recordType)
	buf = append(buf, body...)
	endRecord(buf, start)
	return buf
}

// decodeRecord decodes the record at the start of buf. It returns the type,
// the body (aliasing buf) and the record's total size in bytes. The error is
// errShortRecord when buf ends inside the record and errBadRecord when the
// frame is invalid. It never panics, whatever buf holds.
func decodeRecord(buf []byte) (recordType byte, body []byte, size int64, err error) {
	if len(buf) < frameHeaderBytes {
		return 0, nil, 0, errShortRecord
	}
	length := int64(binary.LittleEndian.Uint32(buf[0:4]))
	if length == 0 {
		return 0, nil, 0, errBadRecord
	}
	size = 8 + length
	if int64(len(buf)) < size {
		return 0, nil, 0, errShortRecord
	}
	rec := buf[:size]
	if binary.LittleEndian.Uint32(rec[4:8]) != recordChecksum(rec) {
		return 0, nil, 0, errBadRecord
	}
	recordType = rec[8]
	if !validBody(recordType, rec[frameHeaderBytes:]) {
		return 0, nil, 0, errBadRecord
	}
	return recordType, rec[frameHeaderBytes:], size, nil
}

// validBody checks a record body's size against its type.
func validBody(recordType byte, body []byte) bool {
	switch recordType {
	case recordSegment:
		return len(body) == segmentBodyBytes && body[0] == segmentFormatVersion
	case recordEntry:
		return len(body) >= entryHeaderBytes
	case recordHardState:
		return len(body) == hardStateBodyBytes
	case recordSnapshot:
		if len(body) < snapshotHeaderBytes {
			return false
		}
		confBytes := uint64(binary.LittleEndian.Uint32(body[17:21]))
		return confBytes <= uint64(len(body)-snapshotHeaderBytes)
	case recordSeal:
		_, err := decodeSealBody(body)
		return err == nil
	}
	return false
}

// segmentHeader is the body of a recordSegment.
type segmentHeader struct {
	base     uint64 // index of the segment's first entry
	prevTerm uint64 // term of entry base-1 (the snapshot's term when base-1 is the snapshot index)
}

func appendSegmentRecord(buf []byte, h segmentHeader) []byte {
	var body [segmentBodyBytes]byte
	body[0] = segmentFormatVersion
	binary.LittleEndian.PutUint64(body[1:], h.base)
	binary.LittleEndian.PutUint64(body[9:], h.prevTerm)
	return appendRecord(buf, recordSegment, body[:])
}

func decodeSegmentBody(body []byte) segmentHeader {
	return segmentHeader{
		base:     binary.LittleEndian.Uint64(body[1:]),
		prevTerm: binary.LittleEndian.Uint64(body[9:]),
	}
}

// hardState is raft's HardState without pointers.
type hardState struct {
	term, vote, commit uint64
}

// newer reports whether h was written after o. Term, vote (within a term)
// and commit only grow, so the later of two hard states dominates.
func (h hardState) newer(o hardState) bool {
	if h.term != o.term {
		return h.term > o.term
	}
	if h.commit != o.commit {
		return h.commit > o.commit
	}
	return h.vote != 0 && o.vote == 0
}

func appendHardStateRecord(buf []byte, h hardState) []byte {
	var body [hardStateBodyBytes]byte
	binary.LittleEndian.PutUint64(body[0:], h.term)
	binary.LittleEndian.PutUint64(body[8:], h.vote)
	binary.LittleEndian.PutUint64(body[16:], h.commit)
	return appendRecord(buf, recordHardState, body[:])
}

func decodeHardStateBody(body []byte) hardState {
	return hardState{
		term:   binary.LittleEndian.Uint64(body[0:]),
		vote:   binary.LittleEndian.Uint64(body[8:]),
		commit: binary.LittleEndian.Uint64(body[16:]),
	}
}

// entryHeader is the fixed part of a recordEntry body; the entry's Data
// follows it unchanged.
type entryHeader struct {
	term, index uint64
	entryType   byte
}

// copyChunkBytes is the piece of Data copied and then checksummed while
// still in the L1 cache.
const copyChunkBytes = 16 << 10

// appendEntryRecord appends the record of one entry: the only copy of data
// on the write path, checksummed chunk by chunk as it is copied.
func appendEntryRecord(buf []byte, h entryHeader, data []byte) []byte {
	length := 1 + entryHeaderBytes + len(data)
	if length > recordBytesMax {
		panic("raftlog: record too large to frame")
	}
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(length))
	buf = append(buf, 0, 0, 0, 0, recordEntry)
	buf = binary.LittleEndian.AppendUint64(buf, h.term)
	buf = binary.LittleEndian.AppendUint64(buf, h.index)
	buf = append(buf, h.entryType)
	crc := crc32.Update(0, castagnoli, buf[start:start+4])
	crc = crc32.Update(crc, castagnoli, buf[start+8:])
	for len(data) > 0 {
		n := min(len(data), copyChunkBytes)
		from := len(buf)
		buf = append(buf, data[:n]...)
		crc = crc32.Update(crc, castagnoli, buf[from:])
		data = data[n:]
	}
	binary.LittleEndian.PutUint32(buf[start+4:], crc)
	return buf
}

func decodeEntryHeader(body []byte) entryHeader {
	return entryHeader{
		term:      binary.LittleEndian.Uint64(body[0:]),
		index:     binary.LittleEndian.Uint64(body[8:]),
		entryType: body[16],
	}
}
