package kafkaproto

import (
	"bytes"
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// A Strand produce and fetch carried through the Kafka codec the way the
// simulator does: EncodeRequest on the client side, Translate on the node
// side gives back the same Strand request (producer fields exactly, the
// batch in the Kafka form holding the same records), and the node's answer decodes back into the Strand answer —
// error codes, offsets, high-water marks, batches and throttles.
func TestTranslateRoundTrip(t *testing.T) {
	batch, err := recordbatch.Encode(nil, testRecords())
	if err != nil {
		t.Fatal(err)
	}
	produce := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1, TimeoutMs: 300,
		Partitions: []*strandpb.ProduceRequest_Partition{
			{Topic: "a", Partition: 1, ProducerId: 7, ProducerEpoch: 2, BaseSequence: 40, Batch: batch},
			{Topic: "b", Partition: 0, ProducerId: -1, Batch: batch}}}}}
	frame, decode, ok := EncodeRequest(produce, 5)
	if !ok {
		t.Fatal("produce not encoded")
	}
	tr, err := Translate(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	want := decodeRecords(t, batch)
	for _, p := range tr.Request.GetProduce().GetPartitions() {
		if !recordbatch.IsKafka(p.Batch) || !equalRecords(decodeRecords(t, p.Batch), want) {
			t.Fatalf("translated batch %x holds other records", p.Batch)
		}
		p.Batch = batch
	}
	if !proto.Equal(tr.Request, produce) {
		t.Fatalf("translated %v\nwant %v", tr.Request, produce)
	}
	answer := &strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{ThrottleMs: 1500, Partitions: []*strandpb.ProduceResponse_Partition{
		{Topic: "a", Partition: 1, BaseOffset: 12},
		{Topic: "b", Partition: 0, BaseOffset: -1, Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, Message: "node: not leader"}}}}}}
	got, err := decode(tr.Answer(answer))
	if err != nil {
		t.Fatal(err)
	}
	ps := got.GetProduce().GetPartitions()
	if len(ps) != 2 || ps[0].GetBaseOffset() != 12 || ps[0].GetError() != nil ||
		ps[1].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NOT_LEADER || ps[1].GetError().GetMessage() != "node: not leader" ||
		got.GetProduce().GetThrottleMs() != 1500 {
		t.Fatalf("produce answer %v", got)
	}

	fetch := &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{MaxBytes: 1000, IsolationLevel: 1,
		Partitions: []*strandpb.FetchRequest_Partition{{Topic: "a", Partition: 1, Offset: 3, MaxBytes: 1000}, {Topic: "a", Partition: 2, Offset: 9, MaxBytes: 1000}}}}}
	frame, decode, _ = EncodeRequest(fetch, 6)
	if tr, err = Translate(frame[4:]); err != nil {
		t.Fatal(err)
	}
	// The listener asks the node for the markers (served as control batches).
	wantFetch := proto.Clone(fetch).(*strandpb.Request)
	wantFetch.GetFetch().IncludeMarkers = true
	if !proto.Equal(tr.Request, wantFetch) {
		t.Fatalf("translated %v\nwant %v", tr.Request, wantFetch)
	}
	pid := int64(7)
	answer = &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{ThrottleMs: 20, Partitions: []*strandpb.FetchResponse_Partition{
		{Topic: "a", Partition: 1, HighWatermark: 9, LastStableOffset: 9, LogStartOffset: 0, Batches: []*strandpb.FetchResponse_Batch{
			{BaseOffset: 0, Records: batch, ProducerId: &pid, ProducerEpoch: 2, BaseSequence: 40},
			{BaseOffset: 4, Records: batch},
			{BaseOffset: 8, ProducerId: &pid, ProducerEpoch: 2, Marker: &strandpb.FetchResponse_TxnMarker{Commit: true}}}},
		{Topic: "a", Partition: 2, Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, HighWatermark: 0, LogStartOffset: 0}}}}}}
	if got, err = decode(tr.Answer(answer)); err != nil {
		t.Fatal(err)
	}
	fp := got.GetFetch().GetPartitions()
	// The control batch is a marker a native reader skips.
	if len(fp) != 2 || got.GetFetch().GetThrottleMs() != 20 || fp[0].GetHighWatermark() != 9 || fp[0].GetLastStableOffset() != 9 || len(fp[0].GetBatches()) != 2 || fp[0].GetBatches()[1].GetBaseOffset() != 4 ||
		!bytes.Equal(fp[0].GetBatches()[0].GetRecords(), batch) {
		t.Fatalf("fetch answer %v", got)
	}
	if e := fp[1].GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE || e.GetHighWatermark() != 0 {
		t.Fatalf("out of range answer %v", fp[1])
	}
}

// A Strand produce and fetch whose partitions name their topic ids go
// through the Kafka codec at v13, by topic id alone: Translate hands the
// node requests with the id and no name (the node resolves it), and the
// answers, which Kafka names by id, decode back under the topic names.
func TestTranslateByTopicID(t *testing.T) {
	batch, err := recordbatch.Encode(nil, testRecords())
	if err != nil {
		t.Fatal(err)
	}
	id := bytes.Repeat([]byte{7}, 16)
	produce := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1, TimeoutMs: 300,
		Partitions: []*strandpb.ProduceRequest_Partition{{Topic: "a", Partition: 1, ProducerId: -1, Batch: batch, TopicId: id}}}}}
	frame, decode, _ := EncodeRequest(produce, 5)
	if v := int16(binary.BigEndian.Uint16(frame[6:])); v != 13 {
		t.Fatalf("produce encoded at v%d, want 13", v)
	}
	tr, err := Translate(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	if p := tr.Request.GetProduce().GetPartitions()[0]; p.GetTopic() != "" || !bytes.Equal(p.GetTopicId(), id) {
		t.Fatalf("translated partition %v", p)
	}
	got, err := decode(tr.Answer(&strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{
		Partitions: []*strandpb.ProduceResponse_Partition{{Topic: "a", Partition: 1, BaseOffset: 9}}}}}))
	if p := got.GetProduce().GetPartitions(); err != nil || len(p) != 1 || p[0].GetTopic() != "a" || p[0].GetBaseOffset() != 9 {
		t.Fatalf("produce answer %v, %v", got, err)
	}
	fetch := &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{MaxBytes: 1000,
		Partitions: []*strandpb.FetchRequest_Partition{{Topic: "a", Partition: 1, Offset: 3, MaxBytes: 1000, TopicId: id}}}}}
	frame, decode, _ = EncodeRequest(fetch, 6)
	if tr, err = Translate(frame[4:]); err != nil {
		t.Fatal(err)
	}
	if p := tr.Request.GetFetch().GetPartitions()[0]; p.GetTopic() != "" || !bytes.Equal(p.GetTopicId(), id) {
		t.Fatalf("translated partition %v", p)
	}
	got, err = decode(tr.Answer(&strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{
		Partitions: []*strandpb.FetchResponse_Partition{{Topic: "a", Partition: 1, Error: &strandpb.Error{
			Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID}}}}}}))
	if p := got.GetFetch().GetPartitions(); err != nil || len(p) != 1 || p[0].GetTopic() != "a" ||
		p[0].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
		t.Fatalf("fetch answer %v, %v", got, err)
	}
}
