package frame

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/strandlog/strand/proto/strandpb"
)

// flatten joins bufs.
func flatten(bufs net.Buffers) []byte {
	var out []byte
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out
}

// checkSpliced fails unless AppendSpliced writes resp exactly as Append
// does (after prefix bytes already in the head), and leaves resp as it
// was.
func checkSpliced(t *testing.T, resp *strandpb.Response, spliceMin int, prefix []byte) {
	t.Helper()
	want, err := Append(nil, resp)
	if err != nil {
		t.Skip(err)
	}
	before := proto.Clone(resp)
	head := append([]byte(nil), prefix...)
	head, bufs, err := AppendSpliced(head, nil, resp, spliceMin)
	if err != nil {
		t.Fatalf("AppendSpliced: %v", err)
	}
	if !bytes.Equal(head[:len(prefix)], prefix) {
		t.Fatalf("the head's earlier bytes changed")
	}
	if got := flatten(bufs); !bytes.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		t.Fatalf("spliced frame (%d bytes) differs from Append's (%d bytes) at byte %d (min %d)", len(got), len(want), at, spliceMin)
	}
	if !proto.Equal(before, resp) {
		t.Fatalf("AppendSpliced changed the answer: %v, was %v", resp, before)
	}
}

// randomFetchAnswer is a fetch answer with every field of its batches and
// partitions set at random (some left unset).
func randomFetchAnswer(r *rand.Rand) *strandpb.Response {
	fr := &strandpb.FetchResponse{ThrottleMs: int32(r.IntN(3) * 100)}
	for p := range r.IntN(4) {
		wp := &strandpb.FetchResponse_Partition{Topic: "t", Partition: int32(p), HighWatermark: r.Int64N(1 << 40),
			LogStartOffset: r.Int64N(100), LastStableOffset: r.Int64N(1 << 40), NextOffset: r.Int64N(1 << 40)}
		if r.IntN(4) == 0 {
			wp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, Message: "out", HighWatermark: 9}
		}
		if r.IntN(3) == 0 {
			wp.AbortedTransactions = append(wp.AbortedTransactions, &strandpb.AbortedTransaction{ProducerId: 4, FirstOffset: 2})
		}
		for range r.IntN(5) {
			records := make([]byte, r.IntN(3)*r.IntN(3000))
			for i := range records {
				records[i] = byte(r.IntN(256))
			}
			b := &strandpb.FetchResponse_Batch{BaseOffset: r.Int64N(1 << 40), AppendTimeMs: r.Int64N(1 << 41), Records: records,
				ProducerEpoch: int32(r.IntN(3)) - 1, BaseSequence: int32(r.IntN(3)) - 1, Transactional: r.IntN(2) == 0}
			if r.IntN(2) == 0 {
				id := r.Int64N(5) - 1
				b.ProducerId = &id
			}
			if r.IntN(4) == 0 {
				b.Marker = &strandpb.FetchResponse_TxnMarker{Commit: r.IntN(2) == 0, CoordinatorEpoch: int32(r.IntN(5))}
			}
			wp.Batches = append(wp.Batches, b)
		}
		fr.Partitions = append(fr.Partitions, wp)
	}
	resp := &strandpb.Response{CorrelationId: r.Uint64N(1 << 20), Body: &strandpb.Response_Fetch{Fetch: fr}}
	if r.IntN(5) == 0 {
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, Message: "moved"}
	}
	return resp
}

// TestAppendSplicedMatchesAppend: random fetch answers, spliced at several
// thresholds, are Append's bytes.
func TestAppendSplicedMatchesAppend(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		resp := randomFetchAnswer(r)
		for _, m := range []int{1, 100, 2000, SpliceBytesMin} {
			checkSpliced(t, resp, m, []byte{1, 2, 3})
		}
	}
}

// TestAppendSplicedSplices: a large batch is its own piece, the very
// slice given, not a copy.
func TestAppendSplicedSplices(t *testing.T) {
	records := bytes.Repeat([]byte{7}, 3*SpliceBytesMin)
	resp := &strandpb.Response{CorrelationId: 3, Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{
		Partitions: []*strandpb.FetchResponse_Partition{{Topic: "t", Batches: []*strandpb.FetchResponse_Batch{{BaseOffset: 5, Records: records}}}}}}}
	_, bufs, err := AppendSpliced(nil, nil, resp, SpliceBytesMin)
	if err != nil {
		t.Fatal(err)
	}
	if len(bufs) != 2 || &bufs[1][0] != &records[0] || len(bufs[1]) != len(records) {
		t.Fatalf("want the header then the stored records as they are, got %d pieces", len(bufs))
	}
	if _, bufs, _ := AppendSpliced(nil, nil, resp, len(records)+1); len(bufs) != 1 {
		t.Fatalf("an answer without a batch to splice: %d pieces, want it whole in one", len(bufs))
	}
}

// TestAppendSplicedOther: an answer that is not a fetch is appended whole.
func TestAppendSplicedOther(t *testing.T) {
	resp := &strandpb.Response{CorrelationId: 3, Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{ThrottleMs: 5}}}
	checkSpliced(t, resp, 1, nil)
}

// TestSplicedFieldNumbers: the fields AppendSpliced writes itself are
// where wire.proto puts them (a renumbering fails here, not on the wire).
func TestSplicedFieldNumbers(t *testing.T) {
	for _, c := range []struct {
		m     proto.Message
		name  protoreflect.Name
		field protoreflect.FieldNumber
	}{
		{&strandpb.Response{}, "fetch", responseFetchField},
		{&strandpb.FetchResponse{}, "partitions", fetchPartitionField},
		{&strandpb.FetchResponse_Partition{}, "batches", partitionBatchField},
		{&strandpb.FetchResponse_Batch{}, "records", batchRecordsField},
	} {
		fd := c.m.ProtoReflect().Descriptor().Fields().ByName(c.name)
		if fd == nil || fd.Number() != c.field {
			t.Errorf("%s.%s: want field %d, descriptor says %v", c.m.ProtoReflect().Descriptor().FullName(), c.name, c.field, fd)
		}
	}
}

// FuzzAppendSpliced: any fetch answer (decoded from the fuzzer's bytes,
// unknown fields dropped) splices to exactly Append's bytes.
func FuzzAppendSpliced(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		b, _ := proto.Marshal(randomFetchAnswer(r))
		f.Add(b, uint16(1))
		f.Add(b, uint16(700))
	}
	f.Fuzz(func(t *testing.T, data []byte, spliceMin uint16) {
		var resp strandpb.Response
		if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, &resp); err != nil {
			return
		}
		checkSpliced(t, &resp, int(spliceMin), []byte{9})
	})
}

// benchAnswer is a 1 MiB fetch answer: 16 batches of 64 KiB over 2
// partitions.
func benchAnswer() *strandpb.Response {
	fr := &strandpb.FetchResponse{}
	for p := range 2 {
		wp := &strandpb.FetchResponse_Partition{Topic: "bench", Partition: int32(p), HighWatermark: 1 << 20}
		for i := range 8 {
			id := int64(7)
			wp.Batches = append(wp.Batches, &strandpb.FetchResponse_Batch{BaseOffset: int64(i) << 6, AppendTimeMs: 1 << 40,
				Records: make([]byte, 64<<10), ProducerId: &id})
		}
		fr.Partitions = append(fr.Partitions, wp)
	}
	return &strandpb.Response{CorrelationId: 9, Body: &strandpb.Response_Fetch{Fetch: fr}}
}

// BenchmarkAppendAnswer is the marshalled answer (the writer before
// AppendSpliced), BenchmarkAppendSplicedAnswer the spliced one.
func BenchmarkAppendAnswer(b *testing.B) {
	resp := benchAnswer()
	var buf []byte
	b.SetBytes(1 << 20)
	for b.Loop() {
		buf, _ = Append(buf[:0], resp)
	}
}

func BenchmarkAppendSplicedAnswer(b *testing.B) {
	resp := benchAnswer()
	var head []byte
	var bufs net.Buffers
	b.SetBytes(1 << 20)
	for b.Loop() {
		head, bufs, _ = AppendSpliced(head[:0], bufs[:0], resp, SpliceBytesMin)
	}
}
