package clientlib

import (
	"context"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// An admin call that changes state and whose request one node took
// without answering (it may have been applied) before another node
// answered it with a definite refusal fails maybe-written, in the same
// attempt as across attempts: before, controllerRequest and anyRequest
// returned the last node's answer alone, and the call said "not applied"
// of a change the first node may have made (a CreateTopic applied by a
// node that then went silent failed "topic exists", definitely). The
// refusal alone, no answer lost, stays definite.
func TestAdminLostAnswerAtOneNodeIsMaybeWritten(t *testing.T) {
	refusal := &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED}
	calls := []struct {
		name string
		// is reports whether req is the call's write.
		is func(req *strandpb.Request) bool
		// refused is a node's definite refusal of the write.
		refused *strandpb.Response
		call    func(ctx context.Context, c *Client) error
	}{
		{"CreateTopic", func(r *strandpb.Request) bool { return r.GetCreateTopics() != nil },
			&strandpb.Response{Body: &strandpb.Response_CreateTopics{CreateTopics: &strandpb.CreateTopicsResponse{Topics: []*strandpb.TopicResult{
				{Name: "x", Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS}}}}}},
			func(ctx context.Context, c *Client) error { return c.CreateTopic(ctx, "x", 1, 1, nil) }},
		{"AlterTopicConfig", func(r *strandpb.Request) bool { return r.GetAlterConfigs() != nil }, &strandpb.Response{Error: refusal},
			func(ctx context.Context, c *Client) error {
				_, err := c.AlterTopicConfig(ctx, "t", map[string]string{"retention.ms": "1"}, nil)
				return err
			}},
		{"RemoveNode", func(r *strandpb.Request) bool { return r.GetNodeAdmin() != nil }, &strandpb.Response{Error: refusal},
			func(ctx context.Context, c *Client) error { return c.RemoveNode(ctx, 2) }},
		{"AlterACLs", func(r *strandpb.Request) bool { return r.GetAlterAcls() != nil }, &strandpb.Response{Error: refusal},
			func(ctx context.Context, c *Client) error {
				_, _, err := c.AlterACLs(ctx, []*strandpb.AclBinding{{Principal: "User:u"}}, nil)
				return err
			}},
		{"MovePartitions", func(r *strandpb.Request) bool { return r.GetMovePartitions() != nil },
			&strandpb.Response{Body: &strandpb.Response_MovePartitions{MovePartitions: &strandpb.MovePartitionsResponse{Moves: []*strandpb.MovePartitionsResponse_Move{
				{Topic: "t", Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS}}}}}},
			func(ctx context.Context, c *Client) error {
				rs, err := c.MovePartitions(ctx, []PartitionMove{{Topic: "t", Replicas: []uint64{1, 2}}})
				if err == nil && len(rs) == 1 {
					err = rs[0].Err
				}
				return err
			}},
	}
	for _, tc := range calls {
		run := func(loseFirst bool) (int, error) {
			writes := 0
			w := &scriptedWorld{answer: func(addr string, req *strandpb.Request) *strandpb.Response {
				if !tc.is(req) {
					return twoNodeMetadata() // no controller named: the write goes to each node in turn
				}
				writes++
				if writes == 1 && loseFirst {
					return nil // taken, the answer lost
				}
				return tc.refused
			}}
			c, err := NewClient(Simulated(w), SeedAddresses("n1", "n2"), RandSeed(1))
			if err != nil {
				t.Fatal(err)
			}
			c.SimRun(func(ctx context.Context) {
				c.RefreshMetadata(ctx)
				err = tc.call(ctx, c)
			}, func() {})
			w.run(t, 1000)
			return writes, err
		}
		if n, err := run(true); n != 2 || !MaybeWritten(err) {
			t.Errorf("%s: one node's answer lost, the other's a refusal: %d writes sent, %v; want 2 and maybe written", tc.name, n, err)
		}
		if n, err := run(false); n != 1 || err == nil || MaybeWritten(err) {
			t.Errorf("%s: refused at once: %d writes sent, %v; want 1 and a definite refusal", tc.name, n, err)
		}
	}
}
