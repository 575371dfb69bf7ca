package kafkaproto

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// A classic step encoded as the Kafka request it stands for translates
// back to the same step (the sequence number the caller gave, not the
// wall clock's), and the node's answer survives the Kafka response:
// Rejoin as REBALANCE_IN_PROGRESS, the assignment, the generation, and a
// fenced epoch as ILLEGAL_GENERATION.
func TestClassicStepsRoundTrip(t *testing.T) {
	join := &strandpb.ConsumerGroupHeartbeatRequest{Group: "g", MemberId: "m", InstanceId: "i", Subscriptions: []string{"t"},
		Owned:   []*strandpb.GroupTopicPartitions{{Topic: "t", Partitions: []int32{1}}},
		Classic: &strandpb.ClassicGroupStep{Step: strandpb.ClassicStep_CLASSIC_STEP_JOIN, Protocol: "range"}}
	sync := &strandpb.ConsumerGroupHeartbeatRequest{Group: "g", MemberId: "m",
		Classic: &strandpb.ClassicGroupStep{Step: strandpb.ClassicStep_CLASSIC_STEP_SYNC, Generation: 4, Protocol: "range"}}
	beat := &strandpb.ConsumerGroupHeartbeatRequest{Group: "g", MemberId: "m",
		Classic: &strandpb.ClassicGroupStep{Step: strandpb.ClassicStep_CLASSIC_STEP_HEARTBEAT, Generation: 4}}
	assigned := []*strandpb.GroupTopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}
	for i, tc := range []struct {
		req    *strandpb.ConsumerGroupHeartbeatRequest
		answer *strandpb.Response
		check  func(*strandpb.Response) bool
	}{
		{join, &strandpb.Response{Body: &strandpb.Response_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatResponse{Generation: 4, Protocol: "range"}}},
			func(r *strandpb.Response) bool {
				return r.GetGroupHeartbeat().GetGeneration() == 4 && r.GetError() == nil
			}},
		{sync, &strandpb.Response{Body: &strandpb.Response_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatResponse{Assigned: assigned, Protocol: "range"}}},
			func(r *strandpb.Response) bool {
				return proto.Equal(r.GetGroupHeartbeat().GetAssigned()[0], assigned[0])
			}},
		{beat, &strandpb.Response{Body: &strandpb.Response_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatResponse{Rejoin: true}}},
			func(r *strandpb.Response) bool { return r.GetGroupHeartbeat().GetRejoin() && r.GetError() == nil }},
		{beat, &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH}},
			func(r *strandpb.Response) bool {
				return r.GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH
			}},
	} {
		frame, decode, ok := EncodeRequest(&strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: tc.req}}, int32(i+1))
		if !ok {
			t.Fatalf("case %d not encoded", i)
		}
		tr, err := TranslateSeq(frame[4:], uint64(100+i))
		if err != nil {
			t.Fatal(err)
		}
		got := tr.Request.GetGroupHeartbeat()
		if got.GetSeq() != uint64(100+i) || got.GetClassic().GetStep() != tc.req.GetClassic().GetStep() ||
			got.GetClassic().GetGeneration() != tc.req.GetClassic().GetGeneration() || got.GetMemberId() != "m" {
			t.Fatalf("case %d translated to %v", i, got)
		}
		if i == 0 && (got.GetInstanceId() != "i" || len(got.GetOwned()) != 1 || got.GetClassic().GetProtocol() != "range") {
			t.Fatalf("join translated to %v", got)
		}
		resp, err := decode(tr.Answer(tc.answer))
		if err != nil || !tc.check(resp) {
			t.Fatalf("case %d answer decoded to %v, %v", i, resp, err)
		}
	}
}
