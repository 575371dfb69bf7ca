package frame

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/strandlog/strand/proto/strandpb"
)

// checkProduceSpliced fails unless AppendProduceSpliced writes req exactly
// as Append does (after prefix bytes already in the head), and leaves req
// as it was.
func checkProduceSpliced(t *testing.T, req *strandpb.Request, spliceMin int, prefix []byte) {
	t.Helper()
	want, err := Append(nil, req)
	if err != nil {
		t.Skip(err)
	}
	before := proto.Clone(req)
	head := append([]byte(nil), prefix...)
	head, bufs, err := AppendProduceSpliced(head, nil, req, spliceMin)
	if err != nil {
		t.Fatalf("AppendProduceSpliced: %v", err)
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
	if !proto.Equal(before, req) {
		t.Fatalf("AppendProduceSpliced changed the request: %v, was %v", req, before)
	}
}

// randomProduceRequest is a produce request with every field of its
// partitions set at random (some left unset).
func randomProduceRequest(r *rand.Rand) *strandpb.Request {
	pr := &strandpb.ProduceRequest{Acks: int32(r.IntN(3)) - 1, TimeoutMs: int32(r.IntN(40000))}
	if r.IntN(3) == 0 {
		pr.TransactionalId = "tx"
	}
	for p := range r.IntN(5) {
		batch := make([]byte, r.IntN(3)*r.IntN(3000))
		for i := range batch {
			batch[i] = byte(r.IntN(256))
		}
		wp := &strandpb.ProduceRequest_Partition{Topic: "t", Partition: int32(p), ProducerId: r.Int64N(5) - 1,
			ProducerEpoch: int32(r.IntN(3)), BaseSequence: int32(r.IntN(100)), Batch: batch, Transactional: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			wp.TopicId = bytes.Repeat([]byte{byte(p + 1)}, 16)
		}
		pr.Partitions = append(pr.Partitions, wp)
	}
	return &strandpb.Request{CorrelationId: r.Uint64N(1 << 20), Body: &strandpb.Request_Produce{Produce: pr}}
}

// TestAppendProduceSplicedMatchesAppend: random produce requests, spliced
// at several thresholds, are Append's bytes.
func TestAppendProduceSplicedMatchesAppend(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		req := randomProduceRequest(r)
		for _, m := range []int{1, 100, 2000, SpliceBytesMin} {
			checkProduceSpliced(t, req, m, []byte{1, 2, 3})
		}
	}
}

// TestAppendProduceSplicedSplices: a large batch is its own piece, the
// very slice given, not a copy; a request without one is one piece.
func TestAppendProduceSplicedSplices(t *testing.T) {
	batch := bytes.Repeat([]byte{7}, 3*SpliceBytesMin)
	req := &strandpb.Request{CorrelationId: 3, Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1,
		Partitions: []*strandpb.ProduceRequest_Partition{{Topic: "t", Batch: batch, TopicId: []byte{1}}}}}}
	_, bufs, err := AppendProduceSpliced(nil, nil, req, SpliceBytesMin)
	if err != nil {
		t.Fatal(err)
	}
	if len(bufs) != 3 || &bufs[1][0] != &batch[0] || len(bufs[1]) != len(batch) {
		t.Fatalf("want the header, the batch as it is, then the topic id, got %d pieces", len(bufs))
	}
	if _, bufs, _ := AppendProduceSpliced(nil, nil, req, len(batch)+1); len(bufs) != 1 {
		t.Fatalf("a request without a batch to splice: %d pieces, want it whole in one", len(bufs))
	}
	other := &strandpb.Request{CorrelationId: 4, Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{MaxWaitMs: 5}}}
	checkProduceSpliced(t, other, 1, nil)
}

// TestProduceSplicedFieldNumbers: the fields AppendProduceSpliced writes
// itself are where wire.proto puts them.
func TestProduceSplicedFieldNumbers(t *testing.T) {
	for _, c := range []struct {
		m     proto.Message
		name  protoreflect.Name
		field protoreflect.FieldNumber
	}{
		{&strandpb.Request{}, "produce", requestProduceField},
		{&strandpb.ProduceRequest{}, "partitions", producePartitionField},
		{&strandpb.ProduceRequest_Partition{}, "batch", produceBatchField},
	} {
		fd := c.m.ProtoReflect().Descriptor().Fields().ByName(c.name)
		if fd == nil || fd.Number() != c.field {
			t.Errorf("%s.%s: want field %d, descriptor says %v", c.m.ProtoReflect().Descriptor().FullName(), c.name, c.field, fd)
		}
	}
}

// FuzzAppendProduceSpliced: any request (decoded from the fuzzer's bytes,
// unknown fields dropped) splices to exactly Append's bytes.
func FuzzAppendProduceSpliced(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 8 {
		b, _ := proto.Marshal(randomProduceRequest(r))
		f.Add(b, uint16(1))
		f.Add(b, uint16(700))
	}
	f.Fuzz(func(t *testing.T, data []byte, spliceMin uint16) {
		var req strandpb.Request
		if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, &req); err != nil {
			return
		}
		checkProduceSpliced(t, &req, int(spliceMin), []byte{9})
	})
}
