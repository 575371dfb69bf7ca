package clientlib

import (
	"bytes"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// quietIO is a producerIO that sends nothing and drops completions: the
// producer's batching, sealing and resolving run without goroutines.
type quietIO struct{}

func (quietIO) send(uint64, []sentBatch)                             {}
func (quietIO) refresh([]string)                                     {}
func (quietIO) initProducerID()                                      {}
func (quietIO) complete(pendingRecord)                               {}
func (quietIO) addPartitions(*strandpb.Request, addPartitionsResult) {}

// batchRig is a producer with one sink, its IO quiet.
func batchRig(tb testing.TB, opts ...Opt) (*producer, *sink) {
	c, err := NewClient(append([]Opt{SeedAddresses("127.0.0.1:1")}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	p := newProducer(c)
	p.io = quietIO{}
	return p, p.sink(topicPartition{"t", 0})
}

// sendAndResolve sends every ready batch of s and resolves it; written
// says whether the attempts' writes finished (liveIO's sender took its
// count off) before the answers.
func sendAndResolve(p *producer, s *sink, written bool) {
	for {
		sent := p.fill([]sentBatch{{s: s}}, 0, 1<<30, 0)
		if len(sent) == 0 {
			break
		}
		for _, sb := range sent {
			if written {
				sb.batch.writing.Add(-1)
			}
			s.w.Report(sb.attempt.ID, 0, nil, 0, 0)
		}
	}
	p.pop(s)
}

// A resolved batch's buffer builds a later batch only when no write can
// read it any more, and a reused buffer encodes exactly what a new one
// would (the old batch's bytes do not leak into the new one).
func TestBatchBufferReuse(t *testing.T) {
	p, s := batchRig(t, BatchBytes(4<<10))
	at := time.UnixMilli(1_700_000_000_000)
	record := func(i int) *Record {
		return &Record{Topic: "t", Value: bytes.Repeat([]byte{byte(i)}, 100+i%7), Timestamp: at}
	}
	var first []byte
	for i := range 3 {
		p.appendOpen(s, pendingRecord{r: record(i)}, 0)
	}
	p.seal(s, 0)
	for _, b := range s.sealed {
		first = b.bytes
	}
	// Sent and resolved while its write is still under way: not reused.
	sendAndResolve(p, s, false)
	if p.pool.bytes != 0 {
		t.Fatalf("a batch whose write had not finished went back to the pool (%d bytes)", p.pool.bytes)
	}
	for i := range 3 {
		p.appendOpen(s, pendingRecord{r: record(10 + i)}, 0)
	}
	p.seal(s, 0)
	sendAndResolve(p, s, true)
	if p.pool.bytes == 0 {
		t.Fatal("a resolved, written batch's buffer was not kept")
	}
	// The next batch is built in that buffer and matches a fresh encoding.
	want := make([]recordbatch.Record, 0, 3)
	for i := range 3 {
		r := record(20 + i)
		p.appendOpen(s, pendingRecord{r: r}, 0)
		want = append(want, r.batchRecord())
	}
	p.seal(s, 0)
	if p.pool.bytes != 0 {
		t.Fatalf("the kept buffer was not taken (%d bytes still kept)", p.pool.bytes)
	}
	fresh, err := recordbatch.Encode(nil, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range s.sealed {
		if !bytes.Equal(b.bytes, fresh) {
			t.Fatal("a batch built in a reused buffer differs from a fresh encoding")
		}
		if &b.bytes[:1][0] == &first[:1][0] {
			t.Fatal("the buffer of a batch whose write had not finished was reused")
		}
	}
}

// The pool keeps at most batchPoolBytesMax bytes and hands out only
// buffers large enough.
func TestBatchPoolBounds(t *testing.T) {
	var bp batchPool
	for range 2 * batchPoolBytesMax / (256 << 10) {
		bp.put(make([]byte, 0, 256<<10))
	}
	if bp.bytes > batchPoolBytesMax {
		t.Fatalf("pool keeps %d bytes, over %d", bp.bytes, batchPoolBytesMax)
	}
	for _, n := range []int{1, 1000, 200 << 10, 256 << 10, 256<<10 + 1, 1 << 20} {
		if got := bp.get(n); cap(got) < n || len(got) != 0 {
			t.Fatalf("get(%d): len %d cap %d", n, len(got), cap(got))
		}
	}
}

// BenchmarkProducerBatch batches 1 KiB records into 256 KiB batches (the
// bench's settings) and resolves each batch once sealed, as an acknowledged
// producer does: allocs/op and B/op show the batch buffers' reuse.
func BenchmarkProducerBatch(b *testing.B) {
	p, s := batchRig(b, BatchBytes(256<<10))
	r := &Record{Topic: "t", Value: make([]byte, 1024), Timestamp: time.UnixMilli(1_700_000_000_000)}
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		p.appendOpen(s, pendingRecord{r: r}, 0)
		if s.w.Len() > 0 {
			sendAndResolve(p, s, true)
		}
	}
}
