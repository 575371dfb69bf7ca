package raftlog

import (
	"bytes"
	"testing"
)

// recordSeeds are valid and damaged records of every type, the seed corpus of FuzzDecodeRecord.
func recordSeeds() [][]byte {
	seg := appendSegmentRecord(nil, segmentHeader{base: 7, prevTerm: 3})
	ent := appendEntryRecord(nil, entryHeader{term: 3, index: 7, entryType: 0}, []byte("batch bytes"))
	empty := appendEntryRecord(nil, entryHeader{term: 1, index: 1, entryType: 1}, nil)
	hard := appendHardStateRecord(nil, hardState{term: 3, vote: 2, commit: 6})
	flipped := append([]byte(nil), ent...)
	flipped[12] ^= 4
	return [][]byte{seg, ent, empty, hard, flipped, ent[:len(ent)-1], {}, make([]byte, 16), append(append([]byte(nil), hard...), seg...)}
}

// TestRecordRoundTrip shows each record type decodes to what was encoded and that any single flipped bit is rejected.
func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range recordSeeds()[:4] {
		recordType, body, size, err := decodeRecord(rec)
		if err != nil || size != int64(len(rec)) {
			t.Fatalf("decode %x: %v size %d", rec, err, size)
		}
		if again := appendRecord(nil, recordType, body); !bytes.Equal(again, rec) {
			t.Fatalf("re-encode %x gives %x", rec, again)
		}
		for bit := 0; bit < len(rec)*8; bit++ {
			damaged := append([]byte(nil), rec...)
			damaged[bit/8] ^= 1 << (bit % 8)
			if _, _, _, err := decodeRecord(damaged); err == nil {
				t.Fatalf("record %x with bit %d flipped decodes", rec, bit)
			}
		}
	}
}

// FuzzDecodeRecord checks the framing decoder never panics, never reads past its input, and accepts only records that re-encode to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	for _, seed := range recordSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		recordType, body, size, err := decodeRecord(buf)
		if err != nil {
			if err != errShortRecord && err != errBadRecord {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if size > int64(len(buf)) || size < frameHeaderBytes {
			t.Fatalf("size %d of %d bytes", size, len(buf))
		}
		if again := appendRecord(nil, recordType, body); !bytes.Equal(again, buf[:size]) {
			t.Fatalf("accepted %x re-encodes to %x", buf[:size], again)
		}
	})
}
