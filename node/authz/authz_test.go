package authz

import (
	"testing"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// fakeState allows exactly the listed "type/name/op" triples, for anyone.
type fakeState map[string]bool

func (f fakeState) Allowed(_, _, typ, name, op string) bool { return f[typ+"/"+name+"/"+op] }
func (f fakeState) AllowedAny(_, _, typ, op string) bool    { return f[typ+"/*/"+op] }
func (f fakeState) TopicByUUID(metadata.UUID) (string, bool) {
	return "", false
}

// TestAuthorizeWithoutANode shows the seam: authorization decided from a
// State alone, per partition, with Behind turning a refusal retriable and
// a refusal on a state not Confirmed leaving the request pending,
// unanswered.
func TestAuthorizeWithoutANode(t *testing.T) {
	alice := Caller{Principal: "User:alice", Host: "10.0.0.1"}
	produce := func() *strandpb.Request {
		return &strandpb.Request{CorrelationId: 7, Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{
			Partitions: []*strandpb.ProduceRequest_Partition{{Topic: "a"}, {Topic: "b", Partition: 1}}}}}
	}
	for _, tc := range []struct {
		name        string
		state       fakeState
		super       bool
		unconfirmed bool
		behind      bool
		runs        int                // partitions left to run; -1: answered at once; -2: pending
		code        strandpb.ErrorCode // the answer's code for partition b, or the whole answer's
	}{
		{name: "one of two refused", state: fakeState{"topic/a/write": true}, runs: 1,
			code: strandpb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED},
		{name: "refused while behind", state: fakeState{"topic/a/write": true}, behind: true, runs: 1,
			code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE},
		{name: "all refused", state: fakeState{}, runs: -1,
			code: strandpb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED},
		{name: "super user", state: fakeState{}, super: true, runs: 2},
		{name: "one refused unconfirmed", state: fakeState{"topic/a/write": true}, unconfirmed: true, runs: -2},
		{name: "all refused unconfirmed", state: fakeState{}, unconfirmed: true, runs: -2},
		{name: "allowed unconfirmed", state: fakeState{"topic/a/write": true, "topic/b/write": true}, unconfirmed: true, runs: 2},
	} {
		z := Authorizer{State: tc.state, Confirmed: !tc.unconfirmed, Behind: func() bool { return tc.behind }}
		if tc.super {
			z.SuperUsers = []Principal{alice.Principal}
		}
		var got *strandpb.Response
		run, answer, pending := z.Authorize(alice, produce(), func(r *strandpb.Response) { got = r })
		switch {
		case tc.runs == -2:
			if !pending || run != nil || answer != nil || got != nil {
				t.Errorf("%s: pending %v, ran %v, answered %v; want pending, nothing run or answered", tc.name, pending, run, got)
			}
			continue
		case pending:
			t.Errorf("%s: pending, want decided", tc.name)
			continue
		case tc.runs == -1:
			if run != nil || got.GetError().GetCode() != tc.code {
				t.Errorf("%s: ran %v, answered %v; want answered %v", tc.name, run, got, tc.code)
			}
			continue
		case run == nil || len(run.GetProduce().GetPartitions()) != tc.runs:
			t.Errorf("%s: runs %v, want %d partitions", tc.name, run, tc.runs)
			continue
		}
		resp := &strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{}}}
		for _, p := range run.GetProduce().GetPartitions() {
			resp.GetProduce().Partitions = append(resp.GetProduce().Partitions, &strandpb.ProduceResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition()})
		}
		answer(resp)
		parts := got.GetProduce().GetPartitions()
		if len(parts) != 2 || parts[0].GetTopic() != "a" || parts[1].GetTopic() != "b" || parts[1].GetPartition() != 1 ||
			parts[1].GetError().GetCode() != tc.code || parts[0].GetError() != nil {
			t.Errorf("%s: answer %v, want a served and b at index 1 with %v", tc.name, parts, tc.code)
		}
	}
}

// TestFilterAnswerHidesNames shows a listing drops what the caller may
// not describe.
func TestFilterAnswerHidesNames(t *testing.T) {
	z := Authorizer{State: fakeState{"group/g1/describe": true}, Behind: func() bool { t.Fatal("Behind asked for a filter"); return false }}
	var got *strandpb.Response
	answer := z.FilterAnswer(Caller{Principal: "User:bob"}, &strandpb.Request{Body: &strandpb.Request_ListGroups{ListGroups: &strandpb.ListGroupsRequest{}}},
		func(r *strandpb.Response) { got = r })
	answer(&strandpb.Response{Body: &strandpb.Response_ListGroups{ListGroups: &strandpb.ListGroupsResponse{
		Groups: []*strandpb.ListGroupsResponse_Group{{Group: "g1"}, {Group: "g2"}}}}})
	if gs := got.GetListGroups().GetGroups(); len(gs) != 1 || gs[0].GetGroup() != "g1" {
		t.Fatalf("listed %v, want g1 alone", gs)
	}
}
