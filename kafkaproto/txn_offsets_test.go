package kafkaproto

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// txnOffsetsBackend answers metadata with topic t (one partition) and
// every other request with resp, recording the native requests.
func txnOffsetsBackend(resp *strandpb.Response) *recordBackend {
	return &recordBackend{answer: func(req *strandpb.Request) *strandpb.Response {
		if req.GetMetadata() != nil {
			return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{
				Topics: []*strandpb.MetadataResponse_Topic{{Name: "t", Partitions: []*strandpb.MetadataResponse_Partition{{Partition: 0, LeaderId: 1}}}}}}}
		}
		return resp
	}}
}

// TxnOffsetCommit v0-v4 is the native TxnOffsetCommit: v3 and v4 carry the
// member's id, generation (as a classic one's) and instance id, older
// versions no member (not fenced by the group); a partition that does not
// exist is answered locally; a stale generation is ILLEGAL_GENERATION; a
// fenced producer PRODUCER_FENCED from v3 (KIP-588), INVALID_PRODUCER_EPOCH
// before; a group not in the open transaction TRANSACTION_ABORTABLE from v4
// (KIP-890 part 1), INVALID_TXN_STATE before.
func TestTxnOffsetCommitTranslation(t *testing.T) {
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(v)
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", "g", 7, 2
		req.Generation, req.MemberID, req.InstanceID = 4, "m", kmsg.StringPtr("i")
		md := "meta"
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{
			{Partition: 0, Offset: 42, Metadata: &md}, {Partition: 9, Offset: 1}}}}
		b := txnOffsetsBackend(&strandpb.Response{Body: &strandpb.Response_TxnOffsetCommit{TxnOffsetCommit: &strandpb.TxnOffsetCommitResponse{}}})
		got := roundTrip(t, b, req).(*kmsg.TxnOffsetCommitResponse)
		commit := &strandpb.OffsetCommitRequest{Group: "g", MemberEpoch: -1,
			Offsets: []*strandpb.OffsetCommitPartition{{Topic: "t", Partition: 0, Offset: 42, Metadata: "meta"}}}
		want := &strandpb.TxnOffsetCommitRequest{TransactionalId: "tx", Producer: &strandpb.TxnProducer{ProducerId: 7, Epoch: 2}, Commit: commit}
		if v >= 3 {
			commit.MemberId, commit.MemberEpoch, commit.ClassicGeneration, want.GroupInstanceId = "m", 4, true, "i"
		}
		if len(b.got) != 2 || !proto.Equal(b.got[1], &strandpb.Request{Body: &strandpb.Request_TxnOffsetCommit{TxnOffsetCommit: want}}) {
			t.Fatalf("v%d: native requests %v, want %v", v, b.got, want)
		}
		ps := got.Topics[0].Partitions
		if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: %+v", v, got)
		}
		fencedCode, notInTxn := kerr.InvalidProducerEpoch.Code, kerr.InvalidTxnState.Code
		if v >= 3 {
			fencedCode = kerr.ProducerFenced.Code
		}
		if v >= 4 {
			notInTxn = kerr.TransactionAbortable.Code
		}
		for code, want := range map[strandpb.ErrorCode]int16{
			strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED:    fencedCode,
			strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE:  notInTxn,
			strandpb.ErrorCode_ERROR_CODE_FENCED_INSTANCE_ID: kerr.FencedInstanceID.Code,
			strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR:    kerr.NotCoordinator.Code,
		} {
			got := roundTrip(t, txnOffsetsBackend(&strandpb.Response{Error: txnErr(code)}), req).(*kmsg.TxnOffsetCommitResponse)
			if c := got.Topics[0].Partitions[0].ErrorCode; c != want {
				t.Errorf("v%d %v: code %d, want %d", v, code, c, want)
			}
		}
		if v >= 3 {
			stale := roundTrip(t, txnOffsetsBackend(&strandpb.Response{Error: txnErr(strandpb.ErrorCode_ERROR_CODE_STALE_MEMBER_EPOCH)}), req)
			if c := stale.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != kerr.IllegalGeneration.Code {
				t.Errorf("stale generation: code %d, want ILLEGAL_GENERATION", c)
			}
		}
	}
}

// OffsetFetch v7+ with require_stable asks the node for the unstable
// partitions and answers UNSTABLE_OFFSET_COMMIT (offset -1) for them,
// whether asked by name or listed among all; without require_stable the
// committed offset is answered as before.
func TestOffsetFetchRequireStable(t *testing.T) {
	answer := &strandpb.Response{Body: &strandpb.Response_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchResponse{
		Offsets:  []*strandpb.GroupCommittedOffset{{Topic: "t", Partition: 0, Offset: 5}, {Topic: "t", Partition: 1, Offset: 6}},
		Unstable: []*strandpb.GroupTopicPartitions{{Topic: "t", Partitions: []int32{1, 2}}}}}}
	for _, stable := range []bool{false, true} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(7)
		req.Group, req.RequireStable = "g", stable
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
		b := answerWith(answer)
		got := roundTrip(t, b, req).(*kmsg.OffsetFetchResponse)
		if len(b.got) != 1 || b.got[0].GetOffsetFetch().GetRequireStable() != stable {
			t.Fatalf("native %v", b.got)
		}
		ps := got.Topics[0].Partitions
		wantCode, wantOffset := int16(0), int64(6)
		if stable {
			wantCode, wantOffset = kerr.UnstableOffsetCommit.Code, -1
		}
		if ps[0].ErrorCode != 0 || ps[0].Offset != 5 || ps[1].ErrorCode != wantCode || ps[1].Offset != wantOffset {
			t.Fatalf("require_stable %v: %+v", stable, ps)
		}
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group, req.RequireStable, req.Topics = "g", true, nil
	got := roundTrip(t, answerWith(answer), req).(*kmsg.OffsetFetchResponse)
	codes := map[int32]int16{}
	for _, tp := range got.Topics {
		for _, p := range tp.Partitions {
			codes[p.Partition] = p.ErrorCode
		}
	}
	if len(codes) != 3 || codes[0] != 0 || codes[1] != kerr.UnstableOffsetCommit.Code || codes[2] != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("all partitions with require_stable: %+v", got.Topics)
	}
}
