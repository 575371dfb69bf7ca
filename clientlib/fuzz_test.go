package clientlib

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// FuzzDecodeBatches feeds arbitrary batch bytes, base offsets and
// positions to the consumer's decoding of a fetch answer: no panic; the
// records it returns have dense offsets from the position, stay below the
// high-water mark, and the next position follows the last record.
func FuzzDecodeBatches(f *testing.F) {
	batch, err := recordbatch.Encode(nil, []recordbatch.Record{
		{TimestampMs: 5, Key: []byte("k"), Value: []byte("v")},
		{TimestampMs: 6, Value: []byte("w"), Headers: []recordbatch.Header{{Key: "h", Value: nil}}},
		{TimestampMs: 7},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(batch, int64(10), int64(11), int64(13))
	f.Add(batch, int64(0), int64(0), int64(1))
	f.Add([]byte{1, 0, 0, 0}, int64(0), int64(0), int64(5))
	f.Fuzz(func(t *testing.T, data []byte, base, from, hwm int64) {
		if base < 0 || from < 0 || hwm < 0 || base > 1<<40 || from > 1<<40 || hwm > 1<<40 {
			return
		}
		if compact.IsCompacted(data) {
			return // FuzzDecodeCompacted: offsets with gaps
		}
		batches := []*strandpb.FetchResponse_Batch{{BaseOffset: base, Records: data}}
		records, next, err := decodeBatches("t", 0, batches, from, hwm, false)
		for i, r := range records {
			if r.Offset != from+int64(i) || r.Offset >= hwm {
				t.Fatalf("record %d at offset %d (from %d, hwm %d)", i, r.Offset, from, hwm)
			}
		}
		if next != from+int64(len(records)) {
			t.Fatalf("next %d after %d records from %d", next, len(records), from)
		}
		if _, verr := recordbatch.Validate(data); verr == nil && err != nil && base <= from {
			t.Fatalf("valid batch failed to decode: %v", err)
		}
	})
}

// FuzzDecodeCompacted feeds arbitrary bytes as a compacted prefix's batch
// (seeded with valid ones) to the consumer's decoding: no panic; a batch
// DecodeBatch refuses is recordbatch.ErrCorrupt; records come at offsets
// strictly increasing from the position, below the high-water mark, each
// one the batch holds; the position ends past the batch's range, capped
// at the high-water mark, and never moves back.
func FuzzDecodeCompacted(f *testing.F) {
	f.Add(compactedBytes(f, 10, 9, rec(12, "a", "1"), rec(15, "b", "")), int64(0), int64(100))
	f.Add(compactedBytes(f, 3, 4), int64(3), int64(5))
	f.Fuzz(func(t *testing.T, data []byte, from, hwm int64) {
		if from < 0 || hwm < 0 || from > 1<<40 || hwm > 1<<40 {
			return
		}
		b, decErr := compact.DecodeBatch(data)
		batches := []*strandpb.FetchResponse_Batch{{BaseOffset: 0, Records: data}}
		records, next, err := decodeBatches("t", 0, batches, from, hwm, false)
		if !compact.IsCompacted(data) {
			return
		}
		if decErr != nil {
			if !errors.Is(err, recordbatch.ErrCorrupt) || len(records) != 0 || next != from {
				t.Fatalf("bad batch: %v, %d records, next %d", err, len(records), next)
			}
			return
		}
		prev := from - 1
		for _, r := range records {
			if r.Offset <= prev || r.Offset >= hwm {
				t.Fatalf("record at %d after %d (hwm %d)", r.Offset, prev, hwm)
			}
			prev = r.Offset
		}
		if want := max(from, min(b.LastOffset()+1, hwm)); err != nil || next != want {
			t.Fatalf("next %d, want %d (err %v)", next, want, err)
		}
	})
}
