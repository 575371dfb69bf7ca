package simnet

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/proto/strandpb"
)

// A transactional process looks its coordinator up again when the one it
// knows does not answer or says it is not (yet) the coordinator without
// naming another; a produce, a lookup, an answer naming the coordinator
// and other errors retry as before.
func TestTxnCoordinatorLost(t *testing.T) {
	end := &strandpb.Request{Body: &strandpb.Request_EndTxn{EndTxn: &strandpb.EndTxnRequest{}}}
	produce := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{}}}
	find := &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{}}}
	noAnswer := &clientlib.ConnError{Addr: "n1", Sent: true, Err: errors.New("no answer within the client timeout")}
	code := func(c strandpb.ErrorCode, leader uint64) error { return &clientlib.Error{Code: c, LeaderID: leader} }
	for _, tc := range []struct {
		name string
		req  *strandpb.Request
		err  error
		want bool
	}{
		{"no answer", end, noAnswer, true},
		{"not coordinator", end, code(strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, 0), true},
		{"coordinator not available", end, code(strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, 0), true},
		{"not coordinator, naming it", end, code(strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, 2), false},
		{"concurrent transactions", end, code(strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS, 0), false},
		{"produce, no answer", produce, noAnswer, false},
		{"lookup, no answer", find, noAnswer, false},
	} {
		if got := coordinatorLost(tc.req, tc.err); got != tc.want {
			t.Errorf("%s: coordinatorLost = %v, want %v", tc.name, got, tc.want)
		}
	}
}
