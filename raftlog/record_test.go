package raftlog

import (
	"bytes"
	"fmt"
	"testing"
)

// recordSeeds are valid and damaged records of every type, the seed corpus of FuzzDecodeRecord.
func recordSeeds() [][]byte {
	seg := appendSegmentRecord(nil, segmentHeader{base: 7, prevTerm: 3})
	ent := appendEntryRecord(nil, entryHeader{term: 3, index: 7, entryType: 0}, []byte("batch bytes"))
	empty := appendEntryRecord(nil, entryHeader{term: 1, index: 1, entryType: 1}, nil)
	hard := appendHardStateRecord(nil, hardState{term: 3, vote: 2, commit: 6})
	sl := appendSealRecord(nil, seal{base: 7, last: 20, prevTerm: 3, lastTerm: 5, end: 4000, hasHard: true,
		hard: hardState{term: 5, vote: 2, commit: 18}, runs: []termRun{{7, 3}, {12, 4}, {15, 5}}})
	flipped := append([]byte(nil), ent...)
	flipped[12] ^= 4
	return [][]byte{seg, ent, empty, hard, sl, flipped, ent[:len(ent)-1], {}, make([]byte, 16), append(append([]byte(nil), hard...), seg...)}
}

// TestRecordRoundTrip shows each record type decodes to what was encoded and that any single flipped bit is rejected.
func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range recordSeeds()[:5] {
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

// TestSealRoundTrip shows a seal decodes to what was encoded, and that seals breaking a rule (runs out of order or outside the segment, terms going down, a wrong size) are refused.
func TestSealRoundTrip(t *testing.T) {
	good := seal{base: 7, last: 20, prevTerm: 3, lastTerm: 5, end: 4000, hasHard: true,
		hard: hardState{term: 5, vote: 2, commit: 18}, runs: []termRun{{7, 3}, {12, 4}, {15, 5}}}
	_, body, _, err := decodeRecord(appendSealRecord(nil, good))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSealBody(body)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(good) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, good)
	}
	bad := []func(*seal){
		func(s *seal) { s.runs[1].first = 5 },  // below base
		func(s *seal) { s.runs[2].first = 21 }, // past last
		func(s *seal) { s.runs[1].term = 2 },   // term goes down
		func(s *seal) { s.lastTerm = 4 },       // last run disagrees
		func(s *seal) { s.runs = nil },         // entries without terms
		func(s *seal) { s.last = 5 },           // last below base-1
		func(s *seal) { s.end = 3 },            // inside the segment record
	}
	for k, mutate := range bad {
		s := good
		s.runs = append([]termRun(nil), good.runs...)
		mutate(&s)
		_, body, _, err := decodeRecord(appendSealRecord(nil, s))
		if err == nil {
			_, err = decodeSealBody(body)
		}
		if err == nil {
			t.Fatalf("bad seal %d (%+v) decodes", k, s)
		}
	}
}
