package wal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"go.etcd.io/raft/v3/raftpb"
)

// A write record's body:
//
//	flags u8 (bit 0 reset, bit 1 hard state) | dir length u16 | dir
//	[term u64 | vote u64 | commit u64]          (hard state flag)
//	prev term u64 | entry count u32, then per entry: term u64 | index u64 | type u8 | data length u32 | data
const entryHeaderBytes = 21

var (
	// errShort: the buffer ends before the record does (at a file's end,
	// a torn write).
	errShort = errors.New("wal: record truncated")
	// errBad: not a valid record (length, checksum, type or body).
	errBad = errors.New("wal: bad record")
)

// appendFrame appends a record of type t with body to buf.
func appendFrame(buf []byte, t byte, body []byte) []byte {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0, t)
	buf = append(buf, body...)
	endFrame(buf, start)
	return buf
}

// endFrame fills in the length and checksum of the record at start.
func endFrame(buf []byte, start int) {
	length := len(buf) - start - 8
	if length > recordBytesMax {
		panic("wal: record too large to frame")
	}
	binary.LittleEndian.PutUint32(buf[start:], uint32(length))
	binary.LittleEndian.PutUint32(buf[start+4:], checksum(buf[start:]))
}

func checksum(rec []byte) uint32 {
	crc := crc32.Update(0, castagnoli, rec[0:4])
	return crc32.Update(crc, castagnoli, rec[8:])
}

// appendRecord appends r as a write record.
func appendRecord(buf []byte, r *Record) []byte {
	if len(r.Dir) == 0 || len(r.Dir) > dirBytesMax {
		panic("wal: record with a bad directory name")
	}
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0, recordWrite)
	var flags byte
	if r.Reset {
		flags |= flagReset
	}
	if r.Hard != nil {
		flags |= flagHard
	}
	buf = append(buf, flags)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(r.Dir)))
	buf = append(buf, r.Dir...)
	if r.Hard != nil {
		buf = binary.LittleEndian.AppendUint64(buf, r.Hard.GetTerm())
		buf = binary.LittleEndian.AppendUint64(buf, r.Hard.GetVote())
		buf = binary.LittleEndian.AppendUint64(buf, r.Hard.GetCommit())
	}
	buf = binary.LittleEndian.AppendUint64(buf, r.PrevTerm)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r.Entries)))
	for _, e := range r.Entries {
		buf = binary.LittleEndian.AppendUint64(buf, e.GetTerm())
		buf = binary.LittleEndian.AppendUint64(buf, e.GetIndex())
		buf = append(buf, byte(e.GetType()))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(e.GetData())))
		buf = append(buf, e.GetData()...)
	}
	endFrame(buf, start)
	return buf
}

// decodeFrame decodes the record at the start of buf: its type, body and
// size.
func decodeFrame(buf []byte) (t byte, body []byte, size int, err error) {
	if len(buf) < frameHeaderBytes {
		return 0, nil, 0, errShort
	}
	length := binary.LittleEndian.Uint32(buf)
	if length == 0 || length > recordBytesMax {
		return 0, nil, 0, errBad
	}
	if uint64(len(buf)) < 8+uint64(length) {
		return 0, nil, 0, errShort
	}
	rec := buf[:8+length]
	if binary.LittleEndian.Uint32(buf[4:]) != checksum(rec) {
		return 0, nil, 0, errBad
	}
	return rec[8], rec[9:], len(rec), nil
}

// decodeWrite decodes a write record's body. Entry data aliases body.
func decodeWrite(body []byte) (Record, error) {
	var r Record
	if len(body) < 3 {
		return r, errBad
	}
	flags := body[0]
	if flags&^(flagReset|flagHard) != 0 {
		return r, errBad
	}
	n := int(binary.LittleEndian.Uint16(body[1:]))
	body = body[3:]
	if n == 0 || n > dirBytesMax || len(body) < n {
		return r, errBad
	}
	r.Dir, body = string(body[:n]), body[n:]
	r.Reset = flags&flagReset != 0
	if flags&flagHard != 0 {
		if len(body) < 24 {
			return r, errBad
		}
		r.Hard = &raftpb.HardState{
			Term:   ptr(binary.LittleEndian.Uint64(body)),
			Vote:   ptr(binary.LittleEndian.Uint64(body[8:])),
			Commit: ptr(binary.LittleEndian.Uint64(body[16:])),
		}
		body = body[24:]
	}
	if len(body) < 12 {
		return r, errBad
	}
	r.PrevTerm = binary.LittleEndian.Uint64(body)
	count := binary.LittleEndian.Uint32(body[8:])
	body = body[12:]
	if uint64(count) > uint64(len(body))/entryHeaderBytes {
		return r, errBad
	}
	r.Entries = make([]*raftpb.Entry, 0, count)
	for range count {
		if len(body) < entryHeaderBytes {
			return r, errBad
		}
		term, index := binary.LittleEndian.Uint64(body), binary.LittleEndian.Uint64(body[8:])
		et := raftpb.EntryType(body[16])
		size := binary.LittleEndian.Uint32(body[17:])
		body = body[entryHeaderBytes:]
		if uint64(size) > uint64(len(body)) {
			return r, errBad
		}
		if index == 0 || (len(r.Entries) > 0 && index != r.Entries[len(r.Entries)-1].GetIndex()+1) {
			return r, errBad
		}
		e := &raftpb.Entry{Term: ptr(term), Index: ptr(index), Type: et.Enum()}
		if size > 0 {
			e.Data = body[:size:size]
		}
		r.Entries = append(r.Entries, e)
		body = body[size:]
	}
	if len(body) != 0 {
		return r, errBad
	}
	return r, nil
}

func ptr[T any](v T) *T { return &v }
