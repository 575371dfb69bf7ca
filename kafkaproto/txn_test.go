package kafkaproto

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// txnErr is a native error of code.
func txnErr(code strandpb.ErrorCode) *strandpb.Error {
	return &strandpb.Error{Code: code, Message: "node: " + code.String()}
}

// fenced is the node's whole-request refusal of a stale epoch.
var fenced = &strandpb.Response{Error: txnErr(strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED)}

// answerWith is a recordBackend answering every request with resp.
func answerWith(resp *strandpb.Response) *recordBackend {
	return &recordBackend{answer: func(*strandpb.Request) *strandpb.Response { return resp }}
}

// wantNative fails unless b got exactly one native request equal to want.
func wantNative(t *testing.T, b *recordBackend, want *strandpb.Request) {
	t.Helper()
	if len(b.got) != 1 || !proto.Equal(b.got[0], want) {
		t.Fatalf("native requests %v, want %v", b.got, want)
	}
}

// InitProducerId with a transactional id is the native
// TxnInitProducerId at every served version, with the timeout, and from v3
// the producer id and epoch the client holds (KIP-360); the answer's id
// and epoch come back; an empty id is INVALID_REQUEST without asking the
// node; a fenced client is PRODUCER_FENCED from v4 (KIP-588) and
// INVALID_PRODUCER_EPOCH before.
func TestTxnInitProducerIDTranslation(t *testing.T) {
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(v)
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = kmsg.StringPtr("tx"), 60000, 7, 2
		b := answerWith(&strandpb.Response{Body: &strandpb.Response_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdResponse{ProducerId: 11, ProducerEpoch: 3}}})
		got := roundTrip(t, b, req).(*kmsg.InitProducerIDResponse)
		want := &strandpb.TxnInitProducerIdRequest{TransactionalId: "tx", TransactionTimeoutMs: 60000}
		if v >= 3 {
			want.Expected = &strandpb.TxnProducer{ProducerId: 7, Epoch: 2}
		}
		wantNative(t, b, &strandpb.Request{Body: &strandpb.Request_TxnInitProducerId{TxnInitProducerId: want}})
		if got.ErrorCode != 0 || got.ProducerID != 11 || got.ProducerEpoch != 3 {
			t.Fatalf("v%d: %+v", v, got)
		}
		wantCode := kerr.InvalidProducerEpoch.Code
		if v >= 4 {
			wantCode = kerr.ProducerFenced.Code
		}
		if got := roundTrip(t, answerWith(fenced), req).(*kmsg.InitProducerIDResponse); got.ErrorCode != wantCode || got.ProducerID != -1 {
			t.Fatalf("v%d fenced: %+v, want code %d", v, got, wantCode)
		}
		req.TransactionalID = kmsg.StringPtr("")
		b = answerWith(nil)
		if got := roundTrip(t, b, req).(*kmsg.InitProducerIDResponse); got.ErrorCode != kerr.InvalidRequest.Code || len(b.got) != 0 {
			t.Fatalf("v%d empty id: %+v, node asked %v", v, got, b.got)
		}
	}
}

// AddPartitionsToTxn v0-v3 (the client's form) is one native request;
// each partition gets its own answer, and a whole-request refusal is
// every partition's (fenced: PRODUCER_FENCED from v2, before it
// INVALID_PRODUCER_EPOCH).
func TestTxnAddPartitionsClientForm(t *testing.T) {
	perPartition := &strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{
		Results: []*strandpb.AddPartitionsToTxnResponse_Result{
			{Topic: "t", Partition: 0, Error: txnErr(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST)},
			{Topic: "t", Partition: 1, Error: txnErr(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST)},
			{Topic: "u", Partition: 2, Error: txnErr(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION)}}}}}
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.SetVersion(v)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx", 7, 2
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}, {Topic: "u", Partitions: []int32{2}}}
		b := answerWith(perPartition)
		got := roundTrip(t, b, req).(*kmsg.AddPartitionsToTxnResponse)
		wantNative(t, b, &strandpb.Request{Body: &strandpb.Request_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnRequest{
			TransactionalId: "tx", Producer: &strandpb.TxnProducer{ProducerId: 7, Epoch: 2},
			Topics: []*strandpb.TxnPartitions{{Topic: "t", Partitions: []int32{0, 1}}, {Topic: "u", Partitions: []int32{2}}}}}})
		inv, unk := kerr.InvalidRequest.Code, kerr.UnknownTopicOrPartition.Code
		if codes := clientFormCodes(got); !slices.Equal(codes, []int16{inv, inv, unk}) {
			t.Fatalf("v%d: codes %v of %+v", v, codes, got)
		}
		wantCode := kerr.InvalidProducerEpoch.Code
		if v >= 2 {
			wantCode = kerr.ProducerFenced.Code
		}
		if codes := clientFormCodes(roundTrip(t, answerWith(fenced), req).(*kmsg.AddPartitionsToTxnResponse)); !slices.Equal(codes, []int16{wantCode, wantCode, wantCode}) {
			t.Fatalf("v%d fenced: %v", v, codes)
		}
	}
}

// clientFormCodes lists a v0-v3 answer's partition codes in order.
func clientFormCodes(r *kmsg.AddPartitionsToTxnResponse) []int16 {
	var codes []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

// AddPartitionsToTxn v4 (the broker's batched form) is one native request
// per transaction, verify_only carried (KIP-890); each transaction is
// answered in order with its partitions' codes, a verify-only check of a
// stale epoch PRODUCER_FENCED.
func TestTxnAddPartitionsBatchedForm(t *testing.T) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(4)
	for i, id := range []string{"a", "b"} {
		tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = id, int64(10+i), 1, id == "b"
		tr.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{int32(i)}}}
		req.Transactions = append(req.Transactions, tr)
	}
	b := &recordBackend{answer: func(r *strandpb.Request) *strandpb.Response {
		if r.GetAddPartitionsToTxn().GetVerifyOnly() {
			return fenced
		}
		return &strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{
			Results: []*strandpb.AddPartitionsToTxnResponse_Result{{Topic: "t", Partition: 0}}}}}
	}}
	got := roundTrip(t, b, req).(*kmsg.AddPartitionsToTxnResponse)
	if len(b.got) != 2 || b.got[0].GetAddPartitionsToTxn().GetVerifyOnly() || !b.got[1].GetAddPartitionsToTxn().GetVerifyOnly() ||
		b.got[1].GetAddPartitionsToTxn().GetProducer().GetProducerId() != 11 || b.got[1].GetAddPartitionsToTxn().GetTransactionalId() != "b" {
		t.Fatalf("native requests %v", b.got)
	}
	if got.ErrorCode != 0 || len(got.Transactions) != 2 || got.Transactions[0].TransactionalID != "a" || got.Transactions[1].TransactionalID != "b" {
		t.Fatalf("answer %+v", got)
	}
	if a, bb := got.Transactions[0].Topics[0].Partitions[0], got.Transactions[1].Topics[0].Partitions[0]; a.ErrorCode != 0 || a.Partition != 0 ||
		bb.ErrorCode != kerr.ProducerFenced.Code || bb.Partition != 1 {
		t.Fatalf("partitions %+v %+v", a, bb)
	}
}

// AddOffsetsToTxn is the native request at v0-v4; its refusals come back
// by code (fenced by version, as Kafka answers).
func TestTxnAddOffsetsTranslation(t *testing.T) {
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.SetVersion(v)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "tx", 7, 2, "g"
		b := answerWith(&strandpb.Response{Body: &strandpb.Response_AddOffsetsToTxn{AddOffsetsToTxn: &strandpb.AddOffsetsToTxnResponse{}}})
		if got := roundTrip(t, b, req).(*kmsg.AddOffsetsToTxnResponse); got.ErrorCode != 0 {
			t.Fatalf("v%d: %+v", v, got)
		}
		wantNative(t, b, &strandpb.Request{Body: &strandpb.Request_AddOffsetsToTxn{AddOffsetsToTxn: &strandpb.AddOffsetsToTxnRequest{
			TransactionalId: "tx", Producer: &strandpb.TxnProducer{ProducerId: 7, Epoch: 2}, Group: "g"}}})
		wantCode := kerr.InvalidProducerEpoch.Code
		if v >= 2 {
			wantCode = kerr.ProducerFenced.Code
		}
		if got := roundTrip(t, answerWith(fenced), req).(*kmsg.AddOffsetsToTxnResponse); got.ErrorCode != wantCode {
			t.Fatalf("v%d fenced: %+v", v, got)
		}
	}
}

// EndTxn v5 is the native request and answers the next transaction's
// producer id and epoch (every end bumps it, KIP-890); v0-v4, which cannot
// carry that epoch, ask the node to keep it (transactions v1), so no
// client runs its next transaction at a fenced epoch.
func TestTxnEndTranslation(t *testing.T) {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(5)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "tx", 7, 2, true
	b := answerWith(&strandpb.Response{Body: &strandpb.Response_EndTxn{EndTxn: &strandpb.EndTxnResponse{ProducerId: 7, ProducerEpoch: 3}}})
	got := roundTrip(t, b, req).(*kmsg.EndTxnResponse)
	wantNative(t, b, &strandpb.Request{Body: &strandpb.Request_EndTxn{EndTxn: &strandpb.EndTxnRequest{
		TransactionalId: "tx", Producer: &strandpb.TxnProducer{ProducerId: 7, Epoch: 2}, Commit: true}}})
	if got.ErrorCode != 0 || got.ProducerID != 7 || got.ProducerEpoch != 3 {
		t.Fatalf("v5: %+v", got)
	}
	if got := roundTrip(t, answerWith(fenced), req).(*kmsg.EndTxnResponse); got.ErrorCode != kerr.ProducerFenced.Code || got.ProducerEpoch != -1 {
		t.Fatalf("v5 fenced: %+v", got)
	}
	for v := int16(0); v < 5; v++ {
		req.SetVersion(v)
		b := answerWith(&strandpb.Response{Body: &strandpb.Response_EndTxn{EndTxn: &strandpb.EndTxnResponse{ProducerId: 7, ProducerEpoch: 2}}})
		if got := roundTrip(t, b, req).(*kmsg.EndTxnResponse); got.ErrorCode != 0 {
			t.Fatalf("v%d: %+v", v, got)
		}
		wantNative(t, b, &strandpb.Request{Body: &strandpb.Request_EndTxn{EndTxn: &strandpb.EndTxnRequest{
			TransactionalId: "tx", Producer: &strandpb.TxnProducer{ProducerId: 7, Epoch: 2}, Commit: true, KeepEpoch: true}}})
	}
}

// The node's refusals of a transactional request come back as Kafka's
// codes with the same meaning, at every key: TRANSACTIONS_NOT_ENABLED (no
// marker writer yet) as the definite UNSUPPORTED_VERSION, never as a code a
// client retries forever.
func TestTxnErrorMapping(t *testing.T) {
	cases := []struct {
		strand strandpb.ErrorCode
		kafka  *kerr.Error
	}{
		{strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE, kerr.InvalidTxnState},
		{strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS, kerr.ConcurrentTransactions},
		{strandpb.ErrorCode_ERROR_CODE_INVALID_TRANSACTION_TIMEOUT, kerr.InvalidTransactionTimeout},
		{strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND, kerr.TransactionalIDNotFound},
		{strandpb.ErrorCode_ERROR_CODE_INVALID_PRODUCER_ID_MAPPING, kerr.InvalidProducerIDMapping},
		{strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, kerr.NotCoordinator},
		{strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, kerr.CoordinatorNotAvailable},
		{strandpb.ErrorCode_ERROR_CODE_TRANSACTIONS_NOT_ENABLED, kerr.UnsupportedVersion},
	}
	for _, c := range cases {
		for key, since := range fencedSince {
			for _, v := range []int16{since - 1, since} {
				if got := txnCode(key, v, txnErr(c.strand)); got != c.kafka.Code {
					t.Errorf("key %d v%d: %v → %d, want %s", key, v, c.strand, got, c.kafka.Message)
				}
			}
		}
		if back := strandError(c.kafka.Code, nil).GetCode(); c.strand != strandpb.ErrorCode_ERROR_CODE_TRANSACTIONS_NOT_ENABLED && back != c.strand {
			t.Errorf("%s reads back as %v, want %v", c.kafka.Message, back, c.strand)
		}
	}
	if back := strandError(kerr.ProducerFenced.Code, nil).GetCode(); back != strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED {
		t.Errorf("PRODUCER_FENCED reads back as %v", back)
	}
	notEnabled := &strandpb.Response{Error: txnErr(strandpb.ErrorCode_ERROR_CODE_TRANSACTIONS_NOT_ENABLED)}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.Topics = "tx", []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if codes := clientFormCodes(roundTrip(t, answerWith(notEnabled), req).(*kmsg.AddPartitionsToTxnResponse)); !slices.Equal(codes, []int16{kerr.UnsupportedVersion.Code}) {
		t.Errorf("not enabled: %v", codes)
	}
}

// DescribeTransactions asks the node for every id at once and answers
// each in order: a described one with its state, producer, timeout, start
// and partitions; a refused one with its code; a whole-request refusal
// (NOT_COORDINATOR) for every id.
func TestTxnDescribeTranslation(t *testing.T) {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"a", "b"}
	b := answerWith(&strandpb.Response{Body: &strandpb.Response_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsResponse{
		Transactions: []*strandpb.DescribeTransactionsResponse_Transaction{
			{TransactionalId: "a", State: "Ongoing", ProducerId: 7, ProducerEpoch: 2, TimeoutMs: 60000, StartMs: 1234,
				Topics: []*strandpb.TxnPartitions{{Topic: "t", Partitions: []int32{0, 3}}}},
			{TransactionalId: "b", Error: txnErr(strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND)}}}}})
	got := roundTrip(t, b, req).(*kmsg.DescribeTransactionsResponse)
	wantNative(t, b, &strandpb.Request{Body: &strandpb.Request_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsRequest{
		TransactionalIds: []string{"a", "b"}}}})
	if len(got.TransactionStates) != 2 {
		t.Fatalf("%+v", got)
	}
	a, bs := got.TransactionStates[0], got.TransactionStates[1]
	if a.ErrorCode != 0 || a.TransactionalID != "a" || a.State != "Ongoing" || a.ProducerID != 7 || a.ProducerEpoch != 2 ||
		a.TimeoutMillis != 60000 || a.StartTimestamp != 1234 || len(a.Topics) != 1 || a.Topics[0].Topic != "t" || !slices.Equal(a.Topics[0].Partitions, []int32{0, 3}) {
		t.Errorf("a: %+v", a)
	}
	if bs.ErrorCode != kerr.TransactionalIDNotFound.Code || bs.TransactionalID != "b" || bs.ProducerID != -1 {
		t.Errorf("b: %+v", bs)
	}
	notCo := &strandpb.Response{Error: txnErr(strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR)}
	for _, st := range roundTrip(t, answerWith(notCo), req).(*kmsg.DescribeTransactionsResponse).TransactionStates {
		if st.ErrorCode != kerr.NotCoordinator.Code {
			t.Errorf("not coordinator: %+v", st)
		}
	}
}

// ListTransactions passes the states Kafka knows to the node, answers the
// others in UnknownStateFilters (filters naming no known state match
// nothing, without asking the node, as in Kafka), and filters by producer
// id.
func TestTxnListTranslation(t *testing.T) {
	listed := &strandpb.Response{Body: &strandpb.Response_ListTransactions{ListTransactions: &strandpb.ListTransactionsResponse{
		Transactions: []*strandpb.ListTransactionsResponse_Transaction{
			{TransactionalId: "a", ProducerId: 7, State: "Ongoing"}, {TransactionalId: "b", ProducerId: 8, State: "Ongoing"}}}}}
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters, req.ProducerIDFilters = []string{"Ongoing", "Bogus"}, []int64{8}
	b := answerWith(listed)
	got := roundTrip(t, b, req).(*kmsg.ListTransactionsResponse)
	wantNative(t, b, &strandpb.Request{Body: &strandpb.Request_ListTransactions{ListTransactions: &strandpb.ListTransactionsRequest{States: []string{"Ongoing"}}}})
	if got.ErrorCode != 0 || !slices.Equal(got.UnknownStateFilters, []string{"Bogus"}) || len(got.TransactionStates) != 1 ||
		got.TransactionStates[0].TransactionalID != "b" || got.TransactionStates[0].ProducerID != 8 || got.TransactionStates[0].TransactionState != "Ongoing" {
		t.Fatalf("%+v", got)
	}
	req.StateFilters, req.ProducerIDFilters = nil, nil
	if got := roundTrip(t, answerWith(listed), req).(*kmsg.ListTransactionsResponse); len(got.TransactionStates) != 2 {
		t.Fatalf("unfiltered: %+v", got)
	}
	req.StateFilters = []string{"Bogus"}
	b = answerWith(listed)
	if got := roundTrip(t, b, req).(*kmsg.ListTransactionsResponse); len(got.TransactionStates) != 0 || len(b.got) != 0 {
		t.Fatalf("unknown states only: %+v, node asked %v", got, b.got)
	}
}

// txnCoordinatorAnswer answers a native FindCoordinator for a
// transactional id with node 1 (other keys: COORDINATOR_NOT_AVAILABLE) and
// Metadata with node 1's Kafka listener.
func txnCoordinatorAnswer(req *strandpb.Request) *strandpb.Response {
	switch req.GetBody().(type) {
	case *strandpb.Request_FindCoordinator:
		if req.GetFindCoordinator().GetTransactionalId() == "" {
			return &strandpb.Response{Error: txnErr(strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE)}
		}
		return &strandpb.Response{Body: &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{NodeId: 1}}}
	default:
		return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{
			Nodes: []*strandpb.MetadataResponse_Node{{Id: 1, KafkaAddress: "127.0.0.1:9092"}}}}}
	}
}

// FindCoordinator key type 1 asks the node for the transactional id's
// coordinator at every version that has key types (v1+; v4: each key),
// answering its Kafka listener; an empty id is INVALID_REQUEST without
// asking.
func TestTxnFindCoordinatorTranslation(t *testing.T) {
	for v := int16(1); v <= 4; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = 1, "tx", []string{"tx", ""}
		b := &recordBackend{answer: txnCoordinatorAnswer}
		got := roundTrip(t, b, req).(*kmsg.FindCoordinatorResponse)
		var asked []string
		for _, r := range b.got {
			if fc := r.GetFindCoordinator(); fc != nil {
				if fc.GetGroup() != "" {
					t.Fatalf("v%d asked a group: %v", v, fc)
				}
				asked = append(asked, fc.GetTransactionalId())
			}
		}
		if !slices.Equal(asked, []string{"tx"}) {
			t.Fatalf("v%d asked %v", v, asked)
		}
		if v < 4 {
			if got.ErrorCode != 0 || got.NodeID != 1 || got.Host != "127.0.0.1" || got.Port != 9092 {
				t.Fatalf("v%d: %+v", v, got)
			}
			continue
		}
		if len(got.Coordinators) != 2 || got.Coordinators[0].NodeID != 1 || got.Coordinators[0].Port != 9092 ||
			got.Coordinators[1].ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("v4: %+v", got)
		}
	}
}

// ApiVersions advertises the transactional APIs, DescribeProducers among
// them, at exactly the versions answered.
func TestTxnAPIsAdvertised(t *testing.T) {
	want := map[int16][2]int16{22: {0, 5}, 24: {0, 4}, 25: {0, 4}, 26: {0, 5}, 28: {0, 4}, 61: {0, 0}, 65: {0, 0}, 66: {0, 0}}
	for key, r := range want {
		a, ok := apiByKey(key)
		if !ok || a.min != r[0] || a.max != r[1] {
			t.Errorf("key %d: served %v %d-%d, want %d-%d", key, ok, a.min, a.max, r[0], r[1])
		}
		if _, refused := unsupportedAPIs[key]; refused {
			t.Errorf("key %d is both served and refused", key)
		}
	}
}
