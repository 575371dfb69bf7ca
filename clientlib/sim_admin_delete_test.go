package clientlib

import (
	"context"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// DeleteGroup whose first attempt's answer is lost (it may have deleted
// the group) and whose retry finds no such group succeeds: the group is
// gone, as asked. Before, it failed with GROUP_NOT_FOUND, a definite
// failure the operator actor's ledger (simnet) holds to "not applied".
// A first attempt that is answered GROUP_NOT_FOUND still fails.
func TestDeleteGroupRetryFindsItGone(t *testing.T) {
	run := func(loseFirst bool) (int, error) {
		deletes := 0
		w := &scriptedWorld{answer: func(addr string, req *strandpb.Request) *strandpb.Response {
			switch {
			case req.GetFindCoordinator() != nil:
				return &strandpb.Response{Body: &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{Address: "n1"}}}
			case req.GetDeleteGroups() != nil:
				deletes++
				if deletes == 1 && loseFirst {
					return nil // applied, the answer lost
				}
				return &strandpb.Response{Body: &strandpb.Response_DeleteGroups{DeleteGroups: &strandpb.DeleteGroupsResponse{
					Results: []*strandpb.DeleteGroupsResponse_Result{{Group: "g", Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND}}}}}}
			}
			return twoNodeMetadata()
		}}
		c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		c.SimRun(func(ctx context.Context) { err = c.DeleteGroup(ctx, "g") }, func() {})
		w.run(t, 1000)
		return deletes, err
	}
	if n, err := run(true); n != 2 || err != nil {
		t.Errorf("answer lost, then not found: %d attempts, %v; want 2 and success", n, err)
	}
	if n, err := run(false); n != 1 || err == nil {
		t.Errorf("not found at once: %d attempts, %v; want 1 and ErrGroupNotFound", n, err)
	}
}
