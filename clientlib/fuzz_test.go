package clientlib

import (
	"testing"

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
