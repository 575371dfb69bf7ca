package engine

import (
	"fmt"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
)

// benchBatch encodes count records of valueBytes-byte values with 16-byte keys.
func benchBatch(b *testing.B, count, valueBytes int) []byte {
	records := make([]recordbatch.Record, count)
	for i := range records {
		records[i] = recordbatch.Record{
			TimestampMs: 1_700_000_000_000 + int64(i),
			Key:         fmt.Appendf(nil, "key-%012d", i),
			Value:       make([]byte, valueBytes),
		}
	}
	batch, err := recordbatch.Encode(nil, records)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

// BenchmarkApply measures applying produce entries of 100 records, without
// and with an idempotent producer; the figure that matters is records/s.
func BenchmarkApply(b *testing.B) {
	for _, valueBytes := range []int{100, 1024} {
		batch := benchBatch(b, 100, valueBytes)
		b.Run(fmt.Sprintf("records=100/value=%dB", valueBytes), func(b *testing.B) {
			p := NewPartition()
			data := EncodeProduceEntry(nil, 1, 0, NoProducer, batch)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if r := p.Apply(uint64(i+1), data); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "records/s")
		})
		b.Run(fmt.Sprintf("records=100/value=%dB/idempotent", valueBytes), func(b *testing.B) {
			p := NewPartition()
			const chunk = 1024
			entries := make([][]byte, chunk)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if i%chunk == 0 {
					b.StopTimer()
					for j := range entries {
						seq := int32((i + j) * 100)
						entries[j] = EncodeProduceEntry(entries[j][:0], 1, 0, Producer{ID: 42, BaseSequence: seq}, batch)
					}
					b.StartTimer()
				}
				if r := p.Apply(uint64(i+1), entries[i%chunk]); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkLocate measures finding a random offset among a million batches.
func BenchmarkLocate(b *testing.B) {
	p := NewPartition()
	data := EncodeProduceEntry(nil, 1, 0, NoProducer, benchBatch(b, 10, 10))
	const batches = 1 << 20
	for i := 0; i < batches; i++ {
		p.Apply(uint64(i+1), data)
	}
	var dst []BatchLocation
	x := uint64(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		var err error
		dst, err = p.AppendLocations(dst[:0], int64(x>>33)%(batches*10), 8)
		if err != nil || len(dst) == 0 {
			b.Fatal(err)
		}
	}
}
