package compact

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
)

// sampleBatch is a compacted data batch with a gap, a tombstone (so a
// horizon), headers and a null header value.
func sampleBatch() Batch {
	return Batch{
		BaseOffset: 100, LastOffsetDelta: 9, FirstTimestampMs: 5000, DeleteHorizonMs: 9000,
		ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40, Transactional: true,
		Records: []Record{
			{Offset: 101, Record: recordbatch.Record{TimestampMs: 4990, Key: []byte("a"), Value: []byte("1"),
				Headers: []recordbatch.Header{{Key: "h", Value: []byte("x")}, {Key: "n"}}}},
			{Offset: 105, Record: recordbatch.Record{TimestampMs: 5010, Key: []byte("b")}},
			{Offset: 109, Record: recordbatch.Record{TimestampMs: 5000, Key: []byte{}, Value: []byte{}}},
		},
	}
}

// sampleMarker is a compacted commit marker.
func sampleMarker() Batch {
	return Batch{BaseOffset: 110, FirstTimestampMs: 6000, MaxTimestampMs: 6000, DeleteHorizonMs: 7000,
		ProducerID: 7, ProducerEpoch: 2, BaseSequence: -1, Transactional: true, Control: true,
		Records: []Record{{Offset: 110, Record: recordbatch.Record{TimestampMs: 6000, Key: ControlKey(true), Value: ControlValue(3)}}}}
}

// mustAppend encodes b or fails the test.
func mustAppend(t fataler, b Batch) []byte {
	t.Helper()
	out, err := AppendBatch(nil, &b)
	if err != nil {
		t.Fatalf("AppendBatch: %v", err)
	}
	return out
}

// TestBatchRoundTrip shows a data batch, a marker and an empty batch (a
// producer's last, all records gone) decode to what was encoded and
// re-encode to the same bytes; the maximum timestamp is computed.
func TestBatchRoundTrip(t *testing.T) {
	empty := Batch{BaseOffset: 3, LastOffsetDelta: 4, FirstTimestampMs: 10, MaxTimestampMs: 12,
		DeleteHorizonMs: NoHorizon, ProducerID: 1, ProducerEpoch: 0, BaseSequence: 9}
	plain := Batch{BaseOffset: 0, LastOffsetDelta: 0, FirstTimestampMs: 1, DeleteHorizonMs: NoHorizon,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		Records: []Record{{Offset: 0, Record: recordbatch.Record{TimestampMs: 1, Key: []byte("k"), Value: []byte("v")}}}}
	for _, b := range []Batch{sampleBatch(), sampleMarker(), empty, plain} {
		enc := mustAppend(t, b)
		got, err := DecodeBatch(enc)
		if err != nil {
			t.Fatalf("DecodeBatch: %v", err)
		}
		if len(b.Records) > 0 {
			b.MaxTimestampMs = 5010
			if b.Control || b.ProducerID == -1 {
				b.MaxTimestampMs = b.Records[0].TimestampMs
			}
		}
		if b.Records == nil {
			b.Records = []Record{}
		}
		if !reflect.DeepEqual(got, b) {
			t.Fatalf("decoded %+v\nwant    %+v", got, b)
		}
		if again := mustAppend(t, got); !bytes.Equal(again, enc) {
			t.Fatalf("re-encoding differs")
		}
	}
	if m := sampleMarker(); !m.MarkerCommits() {
		t.Fatal("a commit marker reads as an abort")
	}
}

// TestAppendBatchRefuses shows each canonical rule refused at encoding,
// with an error naming it, and the buffer left as it was.
func TestAppendBatchRefuses(t *testing.T) {
	cases := map[string]func(b *Batch){
		"offset 99 outside":               func(b *Batch) { b.Records[0].Offset = 99 },
		"not after the previous":          func(b *Batch) { b.Records[1].Offset = 101 },
		"without a key":                   func(b *Batch) { b.Records[0].Key = nil },
		"records in":                      func(b *Batch) { b.LastOffsetDelta = 1 },
		"delete horizon -2":               func(b *Batch) { b.DeleteHorizonMs = -2 },
		"batch without tombstones":        func(b *Batch) { b.Records[1].Value = []byte("v") },
		"sequence -1":                     func(b *Batch) { b.BaseSequence = -1 },
		"no producer, but epoch":          func(b *Batch) { b.ProducerID = -1 },
		"control batch of 3 records":      func(b *Batch) { b.Control = true; b.BaseSequence = -1 },
		"not a version-0 transaction":     func(b *Batch) { *b = sampleMarker(); b.Records[0].Key = []byte{0, 0, 0, 2} },
		"control batch transactional":     func(b *Batch) { *b = sampleMarker(); b.Transactional = false },
		"timestamp too far":               func(b *Batch) { b.FirstTimestampMs = -1 << 62; b.Records[0].TimestampMs = 1 << 62 },
		"offsets [9223372036854775807, +": func(b *Batch) { b.BaseOffset = 1<<63 - 1 },
	}
	for want, mutate := range cases {
		b := sampleBatch()
		mutate(&b)
		dst := []byte("keep")
		out, err := AppendBatch(dst, &b)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v", want, err)
		}
		if string(out) != "keep" {
			t.Errorf("%s: buffer changed to %q", want, out)
		}
	}
	b := sampleBatch()
	b.Records[0].Value = make([]byte, recordbatch.RecordBytesMax)
	if _, err := AppendBatch(nil, &b); !errors.Is(err, ErrBatchTooLarge) {
		t.Errorf("oversized record: %v", err)
	}
}

// recrc recomputes a batch's checksum after a test edited it.
func recrc(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[4:8], Checksum(b))
	return b
}

// TestDecodeBatchRefuses shows damage of each kind refused with
// ErrCorrupt and a message naming it: bit flip, truncation, trailing
// bytes, a non-minimal varint, a wrong maximum timestamp, a bad count.
func TestDecodeBatchRefuses(t *testing.T) {
	good := mustAppend(t, sampleBatch())
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string][]byte{
		"crc":           edit(func(b []byte) []byte { b[HeaderBytes] ^= 1; return b }),
		"shorter than":  good[:HeaderBytes-1],
		"records_bytes": good[:len(good)-1],
		"trailing bytes": edit(func(b []byte) []byte {
			b = append(b, 0)
			binary.LittleEndian.PutUint32(b[offRecords:], uint32(len(b)-HeaderBytes))
			return recrc(b)
		}),
		"magic":            edit(func(b []byte) []byte { b[0] = 1; return b }),
		"attributes":       edit(func(b []byte) []byte { b[1] |= 1; return b }),
		"max timestamp":    edit(func(b []byte) []byte { b[offMaxTS] ^= 1; return recrc(b) }),
		"record_count":     edit(func(b []byte) []byte { b[offCount+3] = 0x80; return recrc(b) }),
		"bad offset delta": edit(func(b []byte) []byte { b[HeaderBytes] = 0x81; return recrc(b) }),
		"reserved":         edit(func(b []byte) []byte { b[2] = 1; return b }),
		"not after":        edit(func(b []byte) []byte { b[offCount] = 2; return b }),
	}
	// A non-minimal varint: offset delta 1 spelled as 0x81 0x00.
	nonMinimal := bytes.Clone(good[:HeaderBytes])
	nonMinimal = append(append(nonMinimal, 0x81, 0x00), good[HeaderBytes+1:]...)
	binary.LittleEndian.PutUint32(nonMinimal[offRecords:], uint32(len(nonMinimal)-HeaderBytes))
	cases["bad offset delta "] = recrc(nonMinimal)
	delete(cases, "not after")
	for want, b := range cases {
		_, err := DecodeBatch(b)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), strings.TrimSpace(want)) {
			t.Errorf("%s: err %v", want, err)
		}
	}
}
