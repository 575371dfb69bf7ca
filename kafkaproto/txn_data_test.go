package kafkaproto

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// readControl decodes one control batch with franz-go's own readers: the
// batch, its one record, the record's key and value.
func readControl(t *testing.T, b []byte) (kmsg.RecordBatch, kmsg.ControlRecordKey, kmsg.EndTxnMarker) {
	t.Helper()
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(b); err != nil {
		t.Fatalf("kmsg reads the control batch: %v", err)
	}
	if got := int32(crc32.Checksum(b[v2AttrOffset:], castagnoli)); got != batch.CRC {
		t.Fatalf("crc %#x, computed %#x", batch.CRC, got)
	}
	var rec kmsg.Record
	if err := rec.ReadFrom(batch.Records); err != nil {
		t.Fatalf("kmsg reads the control record: %v", err)
	}
	if int(rec.Length)+varintLen(int64(rec.Length)) != len(batch.Records) {
		t.Fatalf("record of %d bytes in %d", rec.Length, len(batch.Records))
	}
	var key kmsg.ControlRecordKey
	var marker kmsg.EndTxnMarker
	if err := key.ReadFrom(rec.Key); err != nil {
		t.Fatalf("control key %x: %v", rec.Key, err)
	}
	if err := marker.ReadFrom(rec.Value); err != nil {
		t.Fatalf("control value %x: %v", rec.Value, err)
	}
	if rec.OffsetDelta != 0 || rec.TimestampDelta64 != 0 || len(rec.Headers) != 0 {
		t.Fatalf("control record %+v", rec)
	}
	return batch, key, marker
}

func varintLen(v int64) int { return len(binary.AppendVarint(nil, v)) }

// A marker is served as Kafka writes it: a batch at its offset with the
// transactional and control bits, the marker's producer id and epoch,
// base sequence -1, one record whose key is version 0 and the type (1
// commit, 0 abort) and whose value is version 0 and the coordinator
// epoch; franz-go's readers decode it. A producer sending it back is
// refused ErrControlBatch.
func TestControlBatchEncoding(t *testing.T) {
	for _, commit := range []bool{true, false} {
		m := Marker{ProducerID: 42, ProducerEpoch: 7, CoordinatorEpoch: 3, Commit: commit, TimestampMs: 1_700_000_000_000}
		b := AppendControl([]byte("prefix"), 1234, 9, m)[len("prefix"):]
		batch, key, marker := readControl(t, b)
		wantType := kmsg.ControlRecordKeyTypeAbort
		if commit {
			wantType = kmsg.ControlRecordKeyTypeCommit
		}
		if batch.FirstOffset != 1234 || batch.PartitionLeaderEpoch != 9 || batch.Magic != 2 || batch.Attributes != 0x30 ||
			batch.LastOffsetDelta != 0 || batch.NumRecords != 1 || batch.ProducerID != 42 || batch.ProducerEpoch != 7 ||
			batch.FirstSequence != -1 || batch.FirstTimestamp != m.TimestampMs || batch.MaxTimestamp != m.TimestampMs {
			t.Errorf("commit %v: batch %+v", commit, batch)
		}
		if key.Version != 0 || key.Type != wantType || marker.Version != 0 || marker.CoordinatorEpoch != 3 {
			t.Errorf("commit %v: key %+v, value %+v", commit, key, marker)
		}
		if _, _, err := ToStore(b); !errors.Is(err, ErrControlBatch) {
			t.Errorf("commit %v: a control batch produced: %v, want ErrControlBatch", commit, err)
		}
	}
}

// A transactional batch is stored as sent (transactional bit kept) and
// served back with it; ToStore reports the bit.
func TestTransactionalBatchServedAsSent(t *testing.T) {
	pf := ProducerFields{ID: 5, Epoch: 1, Sequence: 0}
	sent := kafkaBatch(t, testRecords(), codecNone, pf, attrTransactional)
	stored, got, err := ToStore(sent)
	if err != nil || !got.Transactional || got.ID != 5 || got.Epoch != 1 {
		t.Fatalf("ToStore: %+v, %v", got, err)
	}
	if _, err := recordbatch.Validate(stored); err != nil {
		t.Fatalf("the node's validation of the stored batch: %v", err)
	}
	served, err := AppendKafka(nil, stored, 77, -1, ProducerFields{ID: -1})
	if err != nil {
		t.Fatal(err)
	}
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(served); err != nil || batch.Attributes != attrTransactional || batch.FirstOffset != 77 || batch.ProducerID != 5 {
		t.Fatalf("served %+v, %v", batch, err)
	}
}

// produceReq is a Kafka produce of batch to tx/0, with transactional id
// tid when not nil.
func produceReq(tid *string, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(11)
	req.TransactionID, req.Acks, req.TimeoutMillis = tid, -1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "tx"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// A transactional Kafka produce is the native produce with the
// transactional id and the partition marked transactional; a
// transactional batch without a transactional id is refused
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED and a control batch INVALID_RECORD
// (Kafka's answers), without asking the node.
func TestTransactionalProduceTranslation(t *testing.T) {
	pf := ProducerFields{ID: 5, Epoch: 1, Sequence: 0}
	txnBatch := kafkaBatch(t, testRecords(), codecNone, pf, attrTransactional)
	b := answerWith(&strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{
		Partitions: []*strandpb.ProduceResponse_Partition{{Topic: "tx", Partition: 0, BaseOffset: 10}}}}})
	got := roundTrip(t, b, produceReq(kmsg.StringPtr("tid"), txnBatch)).(*kmsg.ProduceResponse)
	if code := got.Topics[0].Partitions[0].ErrorCode; code != 0 || got.Topics[0].Partitions[0].BaseOffset != 10 {
		t.Fatalf("transactional produce: %+v", got.Topics[0].Partitions[0])
	}
	sent := b.got[0].GetProduce()
	if sent.GetTransactionalId() != "tid" || !sent.GetPartitions()[0].GetTransactional() || sent.GetPartitions()[0].GetProducerId() != 5 {
		t.Fatalf("native produce %v", sent)
	}
	for name, tc := range map[string]struct {
		req  *kmsg.ProduceRequest
		want int16
	}{
		"no transactional id": {produceReq(nil, txnBatch), kerr.TransactionalIDAuthorizationFailed.Code},
		"control batch": {produceReq(kmsg.StringPtr("tid"), AppendControl(nil, 0, -1, Marker{ProducerID: 5, ProducerEpoch: 1})),
			kerr.InvalidRecord.Code},
	} {
		b := answerWith(nil)
		got := roundTrip(t, b, tc.req).(*kmsg.ProduceResponse)
		if code := got.Topics[0].Partitions[0].ErrorCode; code != tc.want || len(b.got) != 0 {
			t.Errorf("%s: %v (native requests %d), want %v", name, kerr.ErrorForCode(code), len(b.got), kerr.ErrorForCode(tc.want))
		}
	}
}

// A Kafka fetch asks the node for markers at the client's isolation level
// and answers the last stable offset, the aborted transactions, and each
// marker as a control batch at its offset between the data batches.
func TestTransactionalFetchTranslation(t *testing.T) {
	pf := ProducerFields{ID: 5, Epoch: 1, Sequence: 0}
	stored, _, err := ToStore(kafkaBatch(t, testRecords(), codecNone, pf, attrTransactional))
	if err != nil {
		t.Fatal(err)
	}
	id, epoch := int64(5), int32(2)
	b := answerWith(&strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{Partitions: []*strandpb.FetchResponse_Partition{{
		Topic: "tx", Partition: 0, HighWatermark: 9, LastStableOffset: 5, LogStartOffset: 0,
		AbortedTransactions: []*strandpb.AbortedTransaction{{ProducerId: 5, FirstOffset: 0, LastOffset: 4}},
		Batches: []*strandpb.FetchResponse_Batch{
			{BaseOffset: 0, Records: stored, ProducerId: &id, ProducerEpoch: 1},
			{BaseOffset: 4, ProducerId: &id, ProducerEpoch: epoch, BaseSequence: -1, AppendTimeMs: 99,
				Marker: &strandpb.FetchResponse_TxnMarker{CoordinatorEpoch: 6}},
		}}}}}})
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.IsolationLevel = 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "tx"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	got := roundTrip(t, b, req).(*kmsg.FetchResponse)
	sent := b.got[0].GetFetch()
	if sent.GetIsolationLevel() != 1 || !sent.GetIncludeMarkers() {
		t.Fatalf("native fetch %v", sent)
	}
	p := got.Topics[0].Partitions[0]
	wantAborted := []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 5, FirstOffset: 0}}
	if p.ErrorCode != 0 || p.HighWatermark != 9 || p.LastStableOffset != 5 || !slices.EqualFunc(p.AbortedTransactions, wantAborted,
		func(a, b kmsg.FetchResponseTopicPartitionAbortedTransaction) bool {
			return a.ProducerID == b.ProducerID && a.FirstOffset == b.FirstOffset
		}) {
		t.Fatalf("partition answer %+v", p)
	}
	first := 12 + int(binary.BigEndian.Uint32(p.RecordBatches[v2LengthOffset:]))
	var data kmsg.RecordBatch
	if err := data.ReadFrom(p.RecordBatches[:first]); err != nil || data.Attributes != attrTransactional || data.NumRecords != 4 {
		t.Fatalf("data batch %+v, %v", data, err)
	}
	control, key, marker := readControl(t, p.RecordBatches[first:])
	if control.FirstOffset != 4 || control.ProducerID != 5 || control.ProducerEpoch != 2 || control.FirstTimestamp != 99 ||
		key.Type != kmsg.ControlRecordKeyTypeAbort || marker.CoordinatorEpoch != 6 {
		t.Fatalf("control batch %+v, key %+v, value %+v", control, key, marker)
	}
}

// FuzzDecodeFetch feeds arbitrary bytes as the body of a Kafka fetch
// answer to the translated client's decoder (which skips control
// batches): no panic, and a decoded answer holds only Strand batches.
func FuzzDecodeFetch(f *testing.F) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(clientFetchByName)
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "tx"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = AppendControl(kafkaBatch(f, testRecords(), codecNone, ProducerFields{ID: 3, Epoch: 1}, attrTransactional),
		4, -1, Marker{ProducerID: 3, ProducerEpoch: 1, Commit: true})
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	f.Add(resp.AppendTo([]byte{0})) // an empty tag section, then the body
	f.Fuzz(func(t *testing.T, body []byte) {
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)+4))
		frame = binary.BigEndian.AppendUint32(frame, 7)
		got, err := decodeFetch(append(frame, body...), 7, clientFetchByName, topicNames{}, nil)
		if err != nil {
			return
		}
		for _, p := range got.GetFetch().GetPartitions() {
			for _, b := range p.GetBatches() {
				if _, err := recordbatch.Validate(b.GetRecords()); err != nil {
					t.Fatalf("decoded batch at %d invalid: %v", b.GetBaseOffset(), err)
				}
			}
		}
	})
}

// The Kafka codec carries a native transactional produce whole: the
// transactional id in the request and the partition's batch with the
// transactional bit, so Translate hands the node the same produce.
func TestTranslateTransactionalProduce(t *testing.T) {
	batch, err := recordbatch.Encode(nil, testRecords())
	if err != nil {
		t.Fatal(err)
	}
	produce := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1, TimeoutMs: 300,
		TransactionalId: "tid", Partitions: []*strandpb.ProduceRequest_Partition{
			{Topic: "a", Partition: 1, ProducerId: 7, ProducerEpoch: 2, BaseSequence: 0, Batch: batch, Transactional: true}}}}}
	frame, _, ok := EncodeRequest(produce, 5)
	if !ok {
		t.Fatal("produce not encoded")
	}
	tr, err := Translate(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tr.Request.GetProduce().GetPartitions() {
		if h, err := recordbatch.ParseKafkaHeader(p.Batch); err != nil || !h.Transactional {
			t.Fatalf("translated batch header %+v, %v: want the transactional bit", h, err)
		}
		p.Batch = batch
	}
	if !proto.Equal(tr.Request, produce) {
		t.Fatalf("translated %v\nwant %v", tr.Request, produce)
	}
}

// A batch a native producer wrote in a transaction (Strand's form) is
// served to a Kafka fetch with the transactional bit; a plain one without.
func TestNativeTransactionalBatchServedTransactional(t *testing.T) {
	batch, err := recordbatch.Encode(nil, testRecords())
	if err != nil {
		t.Fatal(err)
	}
	id := int64(7)
	for _, txn := range []bool{true, false} {
		a := &strandpb.FetchResponse_Partition{HighWatermark: 4, LastStableOffset: 4, Batches: []*strandpb.FetchResponse_Batch{
			{BaseOffset: 0, Records: batch, ProducerId: &id, ProducerEpoch: 1, Transactional: txn}}}
		p := fetchPartition(&strandpb.Response{}, a, 0)
		var got kmsg.RecordBatch
		if err := got.ReadFrom(p.RecordBatches); err != nil || (got.Attributes&attrTransactional != 0) != txn {
			t.Errorf("transactional %v: served attributes %#x, %v", txn, got.Attributes, err)
		}
	}
}

// A transactional batch the node refuses INVALID_TXN_STATE (its partition
// is not in the producer's open transaction) is answered
// TRANSACTION_ABORTABLE from Produce v11, the versions whose clients know
// it (KIP-890 part 1), and INVALID_TXN_STATE below; a plain batch's
// INVALID_TXN_STATE (written while its producer's transaction is open)
// stays INVALID_TXN_STATE at every version, as Kafka's log answers it.
func TestTransactionalProduceAbortable(t *testing.T) {
	pf := ProducerFields{ID: 5, Epoch: 1, Sequence: 0}
	refused := answerWith(&strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{
		Partitions: []*strandpb.ProduceResponse_Partition{{Topic: "tx", Partition: 0, BaseOffset: -1,
			Error: txnErr(strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE)}}}}})
	for _, tc := range []struct {
		version int16
		attrs   uint16
		want    int16
	}{
		{10, attrTransactional, kerr.InvalidTxnState.Code},
		{11, attrTransactional, kerr.TransactionAbortable.Code},
		{13, attrTransactional, kerr.TransactionAbortable.Code},
		{11, 0, kerr.InvalidTxnState.Code},
	} {
		req := produceReq(kmsg.StringPtr("tid"), kafkaBatch(t, testRecords(), codecNone, pf, tc.attrs))
		req.SetVersion(tc.version)
		if tc.version >= 13 {
			req.Topics[0].TopicID = [16]byte{1}
		}
		got := roundTrip(t, refused, req).(*kmsg.ProduceResponse)
		if code := got.Topics[0].Partitions[0].ErrorCode; code != tc.want {
			t.Errorf("v%d attributes %d: %v, want %v", tc.version, tc.attrs, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want))
		}
	}
}
