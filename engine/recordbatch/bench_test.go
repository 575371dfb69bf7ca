package recordbatch

import (
	"fmt"
	"testing"
)

// benchRecords makes count records of valueBytes-byte values, 16-byte keys.
func benchRecords(count, valueBytes int) []Record {
	records := make([]Record, count)
	for i := range records {
		records[i] = Record{
			TimestampMs: 1_700_000_000_000 + int64(i),
			Key:         fmt.Appendf(nil, "key-%012d", i),
			Value:       make([]byte, valueBytes),
		}
	}
	return records
}

// BenchmarkValidate measures the apply path's check of a 100-record batch.
func BenchmarkValidate(b *testing.B) {
	for _, valueBytes := range []int{100, 1024} {
		batch, _ := Encode(nil, benchRecords(100, valueBytes))
		b.Run(fmt.Sprintf("records=100/value=%dB", valueBytes), func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := Validate(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkEncode measures a producer building a 100-record batch in a
// reused buffer.
func BenchmarkEncode(b *testing.B) {
	records := benchRecords(100, 100)
	var buf []byte
	var builder Builder
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		builder.Reset(buf[:0])
		for _, r := range records {
			if err := builder.Append(r); err != nil {
				b.Fatal(err)
			}
		}
		buf, _ = builder.Finish()
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkDecode measures iterating a 100-record batch (consumer side).
func BenchmarkDecode(b *testing.B) {
	batch, _ := Encode(nil, benchRecords(100, 100))
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		n := 0
		it := NewIterator(batch)
		for it.Next() {
			n += len(it.Record().Value)
		}
		if it.Err() != nil || n != 100*100 {
			b.Fatal(it.Err())
		}
	}
}
