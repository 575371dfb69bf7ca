package kafkaproto

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// The encoder before splicing, kept verbatim as the reference the
// spliced one must match byte for byte: the fetch closure's answer built
// with every partition's record bytes copied (oldFetchPartition), framed
// by kmsg (appendFrame is the old appendResponse).

func oldFetchAnswer(r *kmsg.FetchRequest, whole *strandpb.Response) kmsg.Response {
	got := whole.GetFetch().GetPartitions()
	out := kmsg.NewPtrFetchResponse()
	out.SetVersion(r.Version)
	out.ThrottleMillis = whole.GetFetch().GetThrottleMs()
	i := 0
	for _, t := range r.Topics {
		ot := kmsg.NewFetchResponseTopic()
		ot.Topic, ot.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			var a *strandpb.FetchResponse_Partition
			if i < len(got) && got[i].GetPartition() == p.Partition {
				a = got[i]
			}
			i++
			ot.Partitions = append(ot.Partitions, oldFetchPartition(whole, a, p.Partition))
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}

func oldFetchPartition(whole *strandpb.Response, a *strandpb.FetchResponse_Partition, partition int32) kmsg.FetchResponseTopicPartition {
	op := kmsg.NewFetchResponseTopicPartition()
	op.Partition = partition
	op.HighWatermark, op.LastStableOffset, op.LogStartOffset = -1, -1, -1
	op.RecordBatches = []byte{}
	if a == nil {
		e := whole.GetError()
		if e == nil {
			e = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL}
		}
		op.ErrorCode = kafkaCode(e)
		return op
	}
	op.ErrorCode = kafkaCode(partErr(whole, a.GetError()))
	if op.ErrorCode != 0 {
		if e := partErr(whole, a.GetError()); e.GetCode() == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
			op.HighWatermark, op.LastStableOffset, op.LogStartOffset = e.GetHighWatermark(), e.GetHighWatermark(), e.GetLogStartOffset()
		}
		return op
	}
	op.HighWatermark, op.LastStableOffset, op.LogStartOffset = a.GetHighWatermark(), a.GetLastStableOffset(), a.GetLogStartOffset()
	for _, t := range a.GetAbortedTransactions() {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = t.GetProducerId(), t.GetFirstOffset()
		op.AbortedTransactions = append(op.AbortedTransactions, at)
	}
	buf := []byte{}
	for _, b := range a.GetBatches() {
		if m := b.GetMarker(); m != nil {
			buf = AppendControl(buf, b.GetBaseOffset(), -1, Marker{ProducerID: b.GetProducerId(), ProducerEpoch: int16(b.GetProducerEpoch()),
				CoordinatorEpoch: m.GetCoordinatorEpoch(), Commit: m.GetCommit(), TimestampMs: b.GetAppendTimeMs()})
			continue
		}
		var err error
		if compact.IsCompacted(b.GetRecords()) {
			if buf, err = AppendCompacted(buf, b.GetRecords(), -1); err != nil {
				break
			}
			continue
		}
		pf := ProducerFields{ID: -1, Epoch: -1, Sequence: -1}
		if b.ProducerId != nil && b.GetProducerId() >= 0 {
			pf = ProducerFields{ID: b.GetProducerId(), Epoch: int16(b.GetProducerEpoch()), Sequence: b.GetBaseSequence(),
				Transactional: b.GetTransactional()}
		}
		buf, err = AppendKafka(buf, b.GetRecords(), b.GetBaseOffset(), -1, pf)
		if err != nil {
			break
		}
	}
	op.RecordBatches = buf
	return op
}

// flattenBufs joins bufs.
func flattenBufs(bufs net.Buffers) []byte {
	var out []byte
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out
}

// randomStoredBatch is a stored batch of any kind a fetch serves: Kafka's
// form (the bytes as produced, base offset zero; a short damaged one
// now and then), Strand's form (a damaged one now and then), a compacted
// batch, a transaction marker.
func randomStoredBatch(t testing.TB, r *rand.Rand) *strandpb.FetchResponse_Batch {
	b := &strandpb.FetchResponse_Batch{BaseOffset: r.Int64N(1 << 40), AppendTimeMs: r.Int64N(1 << 41),
		ProducerEpoch: int32(r.IntN(3)) - 1, BaseSequence: int32(r.IntN(3)) - 1, Transactional: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		id := r.Int64N(5) - 1
		b.ProducerId = &id
	}
	value := func() []byte {
		v := make([]byte, r.IntN(3)*r.IntN(3000))
		for i := range v {
			v[i] = byte(r.IntN(256))
		}
		return v
	}
	switch k := r.IntN(12); {
	case k < 5: // Kafka's form
		n := v2HeaderBytes + r.IntN(3)*r.IntN(6000)
		if r.IntN(20) == 0 {
			n = r.IntN(v2HeaderBytes) + 1 // damaged: shorter than a header
		}
		b.Records = make([]byte, n)
		for i := 8; i < n; i++ {
			b.Records[i] = byte(r.IntN(256))
		}
	case k < 8: // Strand's form
		var recs []recordbatch.Record
		for i := range 1 + r.IntN(4) {
			recs = append(recs, recordbatch.Record{TimestampMs: int64(1000 + i), Key: []byte{byte(i)}, Value: value()})
		}
		var err error
		if b.Records, err = recordbatch.Encode(nil, recs); err != nil {
			t.Fatal(err)
		}
		if r.IntN(20) == 0 {
			b.Records = b.Records[:len(b.Records)/2] // damaged
		}
	case k < 10: // a compacted prefix's batch
		base := r.Int64N(1 << 30)
		cb := compact.Batch{BaseOffset: base, LastOffsetDelta: 5, FirstTimestampMs: 1000, MaxTimestampMs: 1005, DeleteHorizonMs: compact.NoHorizon,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		for i := range r.IntN(3) {
			cb.Records = append(cb.Records, compact.Record{Offset: base + int64(2*i), Record: recordbatch.Record{TimestampMs: 1000 + int64(i), Key: []byte{'k', byte(i)}, Value: value()}})
		}
		b.Records = compactedBatch(t, cb)
		if r.IntN(20) == 0 {
			b.Records = b.Records[:len(b.Records)-1] // damaged
		}
	default:
		b.Marker = &strandpb.FetchResponse_TxnMarker{Commit: r.IntN(2) == 0, CoordinatorEpoch: int32(r.IntN(5))}
	}
	return b
}

// randomFetch is a Fetch request at a served version (4-13) for a few
// topics' partitions and a node's answer to it: partitions with batches of
// every kind, empty ones, ones with aborted transactions, errors of the
// partition and of the whole answer, and partitions the answer lacks.
func randomFetch(t testing.TB, r *rand.Rand) (*kmsg.FetchRequest, *strandpb.Response) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(int16(4 + r.IntN(10)))
	req.MaxBytes = 1 << 20
	fr := &strandpb.FetchResponse{ThrottleMs: int32(r.IntN(3) * 100)}
	for ti := range r.IntN(4) {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = string(rune('a'+ti)) + "-topic"
		rt.TopicID[0], rt.TopicID[15] = byte(ti+1), byte(r.IntN(256))
		for pi := range r.IntN(4) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = int32(pi)
			rt.Partitions = append(rt.Partitions, rp)
			if r.IntN(8) == 0 {
				continue // the answer lacks it
			}
			wp := &strandpb.FetchResponse_Partition{Topic: rt.Topic, Partition: int32(pi), HighWatermark: r.Int64N(1 << 40),
				LogStartOffset: r.Int64N(100), LastStableOffset: r.Int64N(1 << 40), NextOffset: r.Int64N(1 << 40)}
			if r.IntN(6) == 0 {
				wp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, Message: "out", HighWatermark: 9, LogStartOffset: 2}
			} else if r.IntN(8) == 0 {
				wp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, Message: "moved"}
			}
			for range r.IntN(3) {
				wp.AbortedTransactions = append(wp.AbortedTransactions, &strandpb.AbortedTransaction{ProducerId: r.Int64N(9), FirstOffset: r.Int64N(1 << 30)})
			}
			for range r.IntN(5) {
				wp.Batches = append(wp.Batches, randomStoredBatch(t, r))
			}
			fr.Partitions = append(fr.Partitions, wp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: fr}}
	if r.IntN(10) == 0 {
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, Message: "moved"}
	}
	return req, resp
}

// checkFetchSpliced serves req over a backend answering whole and fails
// unless the answer written in pieces — through the listener's
// AppendSpliced, appendFetchFrame at every threshold in mins, and
// appendResponse (Translate's path) — is the old encoder's bytes, and
// leaves the node's answer as it was.
func checkFetchSpliced(t *testing.T, req *kmsg.FetchRequest, whole *strandpb.Response, mins []int) {
	t.Helper()
	corr := int32(77)
	want := appendFrame(nil, corr, req.IsFlexible(), oldFetchAnswer(req, whole))
	before := proto.Clone(whole)
	s := &Server{cfg: Config{Backend: answerWith(whole), NodeID: 1}, logger: slog.New(slog.DiscardHandler), classic: newClassicState()}
	c := &conn{s: s, done: make(chan struct{})}
	p, err := c.serve(frameRequest(req, corr))
	if err != nil {
		t.Fatal(err)
	}
	if !p.fetch {
		t.Fatalf("a fetch's pending answer is not marked for splicing")
	}
	resp := p.resp()
	f, ok := resp.(*fetchAnswer)
	if !ok {
		t.Fatalf("fetch answered with %T", resp)
	}
	p.resp = ready(resp)
	compare := func(what string, got []byte) {
		t.Helper()
		if !bytes.Equal(got, want) {
			at := 0
			for at < min(len(got), len(want)) && got[at] == want[at] {
				at++
			}
			t.Fatalf("v%d %s: %d bytes, differing from the old encoder's %d at byte %d", req.Version, what, len(got), len(want), at)
		}
	}
	prefix := []byte{1, 2, 3}
	head, bufs, err := splicedPending{p}.AppendSpliced(append([]byte(nil), prefix...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(head[:len(prefix)], prefix) {
		t.Fatalf("the head's earlier bytes changed")
	}
	compare("AppendSpliced", flattenBufs(bufs))
	for _, m := range mins {
		_, bufs := appendFetchFrame(append([]byte(nil), prefix...), nil, corr, req.IsFlexible(), f, m)
		compare("appendFetchFrame", flattenBufs(bufs))
	}
	compare("appendResponse", appendResponse(nil, p, resp))
	compare("kmsg AppendTo", appendFrame(nil, corr, req.IsFlexible(), f))
	if !proto.Equal(before, whole) {
		t.Fatalf("the node's answer changed")
	}
}

// TestFetchSplicedMatchesOld: random fetch answers at every served
// version, written in pieces at several thresholds, are the old encoder's
// bytes.
func TestFetchSplicedMatchesOld(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		req, whole := randomFetch(t, r)
		checkFetchSpliced(t, req, whole, []int{0, 1, 100, 2000, SpliceBytesMin})
	}
}

// TestFetchSplicedSplices: a large stored Kafka batch is written as its
// own piece, the very stored bytes after its 16-byte head; an answer with
// nothing to splice is one piece.
func TestFetchSplicedSplices(t *testing.T) {
	records := make([]byte, 3*SpliceBytesMin)
	for i := 8; i < len(records); i++ {
		records[i] = byte(i)
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rt.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	whole := &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{Partitions: []*strandpb.FetchResponse_Partition{
		{Topic: "t", Batches: []*strandpb.FetchResponse_Batch{{BaseOffset: 5, Records: records}}}}}}}
	c := &conn{s: &Server{cfg: Config{Backend: answerWith(whole)}, logger: slog.New(slog.DiscardHandler), classic: newClassicState()}, done: make(chan struct{})}
	p, err := c.serve(frameRequest(req, 1))
	if err != nil {
		t.Fatal(err)
	}
	f := p.resp().(*fetchAnswer)
	_, bufs := appendFetchFrame(nil, nil, 1, true, f, SpliceBytesMin)
	if len(bufs) != 3 || &bufs[1][0] != &records[kafkaHeadBytes] || len(bufs[1]) != len(records)-kafkaHeadBytes {
		t.Fatalf("want the head, the stored batch after its first 16 bytes as it is, the tail: got %d pieces", len(bufs))
	}
	if _, bufs := appendFetchFrame(nil, nil, 1, true, f, len(records)+1); len(bufs) != 1 {
		t.Fatalf("an answer without a batch to splice: %d pieces, want it whole in one", len(bufs))
	}
}

// FuzzFetchSpliced: fetch answers drawn from the fuzzer's seed are written
// in pieces as the old encoder wrote them whole.
func FuzzFetchSpliced(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint16(1))
	f.Add(uint64(7), uint64(0), uint16(SpliceBytesMin))
	f.Add(uint64(42), uint64(42), uint16(61))
	f.Fuzz(func(t *testing.T, s1, s2 uint64, spliceMin uint16) {
		req, whole := randomFetch(t, rand.New(rand.NewPCG(s1, s2)))
		checkFetchSpliced(t, req, whole, []int{int(spliceMin)})
	})
}

// benchFetch is a served Fetch v12 and a 1 MiB answer to it: 16 stored
// Kafka batches of 64 KiB over 2 partitions.
func benchFetch(b *testing.B) (*kmsg.FetchRequest, *strandpb.Response) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "bench"
	fr := &strandpb.FetchResponse{}
	for p := range 2 {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		rt.Partitions = append(rt.Partitions, rp)
		wp := &strandpb.FetchResponse_Partition{Topic: "bench", Partition: int32(p), HighWatermark: 1 << 20, LastStableOffset: 1 << 20}
		for i := range 8 {
			id := int64(7)
			wp.Batches = append(wp.Batches, &strandpb.FetchResponse_Batch{BaseOffset: int64(i) << 6, AppendTimeMs: 1 << 40,
				Records: make([]byte, 64<<10), ProducerId: &id})
		}
		fr.Partitions = append(fr.Partitions, wp)
	}
	req.Topics = append(req.Topics, rt)
	return req, &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: fr}}
}

// BenchmarkKafkaFetchAnswerOld is the old encoder (the answer built with
// its record bytes copied, marshalled by kmsg); BenchmarkKafkaFetchAnswer
// the answer built with batches referenced and written in pieces. Both
// from the node's answer to the frame's bytes.
func BenchmarkKafkaFetchAnswerOld(b *testing.B) {
	req, whole := benchFetch(b)
	var buf []byte
	b.SetBytes(1 << 20)
	for b.Loop() {
		buf = appendFrame(buf[:0], 1, true, oldFetchAnswer(req, whole))
	}
}

func BenchmarkKafkaFetchAnswer(b *testing.B) {
	req, whole := benchFetch(b)
	var head []byte
	var bufs net.Buffers
	b.SetBytes(1 << 20)
	for b.Loop() {
		f := &fetchAnswer{FetchResponse: kmsg.NewPtrFetchResponse()}
		f.SetVersion(req.Version)
		ot := kmsg.NewFetchResponseTopic()
		ot.Topic = "bench"
		for i, a := range whole.GetFetch().GetPartitions() {
			op, batches := fetchPartitionHead(whole, a, int32(i))
			ot.Partitions = append(ot.Partitions, op)
			f.batches = append(f.batches, batches)
		}
		f.Topics = append(f.Topics, ot)
		head, bufs = appendFetchFrame(head[:0], bufs[:0], 1, true, f, SpliceBytesMin)
	}
}
