package compact

import (
	"fmt"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
)

// benchLog is updates rounds over keys keys with 1 KiB values, 100
// records a batch, as raft batches.
func benchLog(b *testing.B, keys, updates int) (*testLog, int64) {
	l := &testLog{}
	value := make([]byte, 1024)
	var records []recordbatch.Record
	var bytesIn int64
	for u := range updates {
		for k := range keys {
			records = append(records, recordbatch.Record{TimestampMs: int64(u), Key: fmt.Appendf(nil, "key-%05d", k), Value: value})
			if len(records) == 100 {
				l.produce(b, noProducer, false, records...)
				bytesIn += int64(len(l.inputs[len(l.inputs)-1].Data))
				records = records[:0]
			}
		}
	}
	return l, bytesIn
}

// BenchmarkCompact compacts 10,000 keys updated 3 times with 1 KiB values
// (30 MiB of raft batches) in one pass; MB/s is input bytes.
func BenchmarkCompact(b *testing.B) {
	l, bytesIn := benchLog(b, 10_000, 3)
	d := decision(l.next, 1000, 0)
	d.OffsetMapBytes = 1 << 20
	b.SetBytes(bytesIn)
	b.ReportAllocs()
	for b.Loop() {
		res, err := Compact(l.log(), d, func([]byte) error { return nil })
		if err != nil || res.RecordsOut != 10_000 {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}

// BenchmarkRecompact compacts a compacted prefix of 10,000 keys (1 KiB
// values) with one more round of updates to all of them, the steady state
// of a compacted topic at a dirty ratio of 0.5; MB/s is input bytes.
func BenchmarkRecompact(b *testing.B) {
	l, _ := benchLog(b, 10_000, 1)
	d := decision(l.next, 1000, 0)
	d.OffsetMapBytes = 1 << 20
	_, prefix := l.compact(b, d)
	more, _ := benchLog(b, 10_000, 1)
	var bytesIn int64
	for _, in := range prefix.inputs {
		bytesIn += int64(len(in.Data))
	}
	for _, in := range more.inputs {
		in.BaseOffset += prefix.next
		prefix.inputs = append(prefix.inputs, in)
		bytesIn += int64(len(in.Data))
	}
	prefix.next += more.next
	d.CleanableEnd = prefix.next
	b.SetBytes(bytesIn)
	b.ReportAllocs()
	for b.Loop() {
		res, err := Compact(prefix.log(), d, func([]byte) error { return nil })
		if err != nil || res.RecordsOut != 10_000 {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}
