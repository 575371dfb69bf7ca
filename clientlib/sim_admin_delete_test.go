package clientlib

import (
	"context"
	"errors"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// deleteGroupAfterLoss runs DeleteGroup("g") on a scripted node whose
// first delete's answer is lost when loseFirst (the delete applied) and
// whose other deletes are answered refused: the delete attempts made
// and the call's error.
func deleteGroupAfterLoss(t *testing.T, loseFirst bool, refused *strandpb.Response) (int, error) {
	t.Helper()
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
			return refused
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

// DeleteGroup whose first attempt's answer is lost (it may have deleted
// the group) and whose retry finds no such group succeeds: the group is
// gone, as asked. Before, it failed with GROUP_NOT_FOUND, a definite
// failure the operator actor's ledger (simnet) holds to "not applied".
// A first attempt that is answered GROUP_NOT_FOUND still fails.
func TestDeleteGroupRetryFindsItGone(t *testing.T) {
	notFound := &strandpb.Response{Body: &strandpb.Response_DeleteGroups{DeleteGroups: &strandpb.DeleteGroupsResponse{
		Results: []*strandpb.DeleteGroupsResponse_Result{{Group: "g", Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND}}}}}}
	run := func(loseFirst bool) (int, error) { return deleteGroupAfterLoss(t, loseFirst, notFound) }
	if n, err := run(true); n != 2 || err != nil {
		t.Errorf("answer lost, then not found: %d attempts, %v; want 2 and success", n, err)
	}
	if n, err := run(false); n != 1 || err == nil {
		t.Errorf("not found at once: %d attempts, %v; want 1 and ErrGroupNotFound", n, err)
	}
}

// DeleteUser whose first attempt's answer is lost (it may have deleted the
// user) and whose retry is refused as an unknown user succeeds when the
// user is gone: deleted as asked. Before, it failed with the refusal, a
// definite failure for a delete that had happened (the operator's
// read-back, seeds 14 and 77). A refusal with no lost answer before it, or
// with the user still listed, still fails.
func TestDeleteUserRetryFindsItGone(t *testing.T) {
	run := func(loseFirst, listed bool) (int, error) {
		deletes := 0
		w := &scriptedWorld{answer: func(addr string, req *strandpb.Request) *strandpb.Response {
			switch {
			case req.GetAlterUsers() != nil:
				deletes++
				if deletes == 1 && loseFirst {
					return nil // applied, the answer lost
				}
				return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "metadata: unknown user"}}
			case req.GetListUsers() != nil:
				var users []*strandpb.ListUsersResponse_User
				if listed {
					users = append(users, &strandpb.ListUsersResponse_User{Name: "u"})
				}
				return &strandpb.Response{Body: &strandpb.Response_ListUsers{ListUsers: &strandpb.ListUsersResponse{Users: users}}}
			}
			return twoNodeMetadata()
		}}
		c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		c.SimRun(func(ctx context.Context) { err = c.DeleteUser(ctx, "u") }, func() {})
		w.run(t, 1000)
		return deletes, err
	}
	if n, err := run(true, false); n != 2 || err != nil {
		t.Errorf("answer lost, then unknown user, user gone: %d attempts, %v; want 2 and success", n, err)
	}
	if _, err := run(true, true); err == nil {
		t.Error("answer lost, then refused, user still listed: success; want the refusal")
	}
	if n, err := run(false, false); n != 1 || err == nil {
		t.Errorf("refused at once: %d attempts, %v; want 1 and the refusal", n, err)
	}
}

// An admin call whose attempt's answer was lost (it may have been applied)
// and whose retry is refused definitely fails maybe-written: a
// *RetriesExhaustedError with MaybeWritten wrapping the refusal, never the
// refusal alone, which says "not applied" (TestSimMoves seed 2: DeleteGroup's
// retry was refused authentication after its first attempt deleted the
// group). A refusal with no lost answer before it stays definite.
func TestAdminRetryAfterLostAnswerIsMaybeWritten(t *testing.T) {
	refused := &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED}}
	run := func(loseFirst bool) error {
		_, err := deleteGroupAfterLoss(t, loseFirst, refused)
		return err
	}
	if err := run(true); !MaybeWritten(err) {
		t.Errorf("answer lost, then refused: %v; want maybe written", err)
	}
	if err := run(false); err == nil || MaybeWritten(err) {
		t.Errorf("refused at once: %v; want a definite refusal", err)
	}
}

// SetQuota whose first attempt's answer is lost (it may have been
// applied) and whose last attempts reached no node (every connection
// refused) fails maybe-written. Before,
// the security calls dropped what controllerRequestUnsure had noted and
// returned the UnreachableError, a definite failure: the operator actor's
// ledger held the quota unchanged and the read-back found it set
// (TestSimJoins seed 19 on an intermediate tree of this branch).
func TestSecurityCallAfterLostAnswerIsMaybeWritten(t *testing.T) {
	calls := 0
	w := &scriptedWorld{}
	w.refused = func(_ string, req *strandpb.Request) bool { return req.GetAlterQuotas() != nil && calls >= 2 }
	w.answer = func(_ string, req *strandpb.Request) *strandpb.Response {
		if req.GetAlterQuotas() == nil {
			return twoNodeMetadata()
		}
		calls++
		if calls == 1 {
			return nil // applied, the answer lost
		}
		return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER}}
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1", "n2"), RandSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	c.SimRun(func(ctx context.Context) { err = c.SetQuota(ctx, "User:q", 1, 2) }, func() {})
	w.run(t, 10000)
	// The Client reached the cluster (its metadata was answered), so the
	// refused connections are retried (Client.unreachable) until the
	// retries run out; the failure stays maybe-written either way.
	if err == nil || !MaybeWritten(err) {
		t.Fatalf("SetQuota after a lost answer, then no node reached: %v; want a failure that may have been written", err)
	}
}

// The same for a Client that never reached the cluster: its only answer
// was lost and every later connection is refused, so the failure is an
// *UnreachableError (nothing answered it), and it stays maybe-written.
func TestSecurityCallLostThenUnreachableIsMaybeWritten(t *testing.T) {
	calls := 0
	w := &scriptedWorld{}
	w.refused = func(_ string, req *strandpb.Request) bool { return req.GetAlterQuotas() == nil || calls >= 1 }
	w.answer = func(_ string, req *strandpb.Request) *strandpb.Response {
		calls++
		return nil // applied, the answer lost
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1", "n2"), RandSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	c.SimRun(func(ctx context.Context) { err = c.SetQuota(ctx, "User:q", 1, 2) }, func() {})
	w.run(t, 10000)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !MaybeWritten(err) {
		t.Fatalf("SetQuota after a lost answer, then no node reached: %v; want an UnreachableError that may have been written", err)
	}
}
