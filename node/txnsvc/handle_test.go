package txnsvc

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

var (
	errInvalid    = errors.New("invalid request")
	errNotEnabled = errors.New("transactions not enabled")
)

// fakeHost is one coordinator whose replica applies each command at once.
type fakeHost struct {
	co                       *Coordinator
	proposed, drives, refill int
}

func (h *fakeHost) CoordinatorOf(string) (*Coordinator, Replica, error) {
	return h.co, fakeReplica{h}, nil
}
func (h *fakeHost) Error(err error) *strandpb.Error {
	code := strandpb.ErrorCode_ERROR_CODE_INTERNAL
	if errors.Is(err, errInvalid) {
		code = strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST
	}
	return &strandpb.Error{Code: code, Message: err.Error()}
}
func (h *fakeHost) WireError(err error) *strandpb.Error {
	if err == nil {
		return nil
	}
	return h.Error(err)
}
func (h *fakeHost) Metadata() *metadata.State  { return nil }
func (h *fakeHost) LedCoordinators() []Replica { return []Replica{fakeReplica{h}} }

type fakeReplica struct{ h *fakeHost }

func (r fakeReplica) Propose(cmd *strandpb.TxnCommand, done func(Applied)) {
	r.h.proposed++
	cmd.NowMs = 1000
	done(Applied{Res: r.h.co.State.Apply(cmd)})
}
func (r fakeReplica) Read(serve func(*txn.State), _ func(error)) { serve(r.h.co.State) }
func (r fakeReplica) DriveMarkers()                              { r.h.drives++ }
func (r fakeReplica) RefillProducerIDs(done func(error)) {
	r.h.refill++
	r.h.co.State.Apply(grantCmd(0, 1000, 10))
	done(nil)
}
func (r fakeReplica) HookBeforeDecision(*Coordinator, *strandpb.EndTxnRequest) {}

// TestServiceOverAHost shows the transaction requests served from a Host
// alone: an InitProducerId on an empty pool refills it and proposes once
// more; AddOffsets opens the transaction; ListTransactions reads it; EndTxn
// decides it and drives its markers; a request over the partition bound,
// and one needing markers on a node without them, are refused before
// anything is proposed.
func TestServiceOverAHost(t *testing.T) {
	h := &fakeHost{co: New(1, 1, 0, 0)}
	s := Service{Host: h, MaxTimeoutMs: 900_000, PartitionsMax: 2, MarkersEnabled: true,
		ErrInvalidRequest: errInvalid, ErrTransactionsNotEnabled: errNotEnabled}
	var resp *strandpb.Response
	answer := func(r *strandpb.Response) { resp = r }
	s.InitProducerID(&strandpb.TxnInitProducerIdRequest{TransactionalId: "app", TransactionTimeoutMs: 60_000}, answer)
	init := resp.GetTxnInitProducerId()
	if resp.GetError() != nil || init.GetProducerId() != 1000 || h.refill != 1 || h.proposed != 2 {
		t.Fatalf("init: %v, refilled %d, proposed %d; want producer 1000 after one refill and two proposals", resp, h.refill, h.proposed)
	}
	producer := &strandpb.TxnProducer{ProducerId: init.GetProducerId(), Epoch: init.GetProducerEpoch()}
	s.AddOffsets(&strandpb.AddOffsetsToTxnRequest{TransactionalId: "app", Producer: producer, Group: "g"}, answer)
	if resp.GetError() != nil {
		t.Fatalf("add offsets: %v", resp)
	}
	s.ListTransactions(&strandpb.ListTransactionsRequest{States: []string{txn.Ongoing.String()}}, answer)
	if ts := resp.GetListTransactions().GetTransactions(); len(ts) != 1 || ts[0].GetTransactionalId() != "app" {
		t.Fatalf("listed %v, want app ongoing", ts)
	}
	s.EndTxn(&strandpb.EndTxnRequest{TransactionalId: "app", Producer: producer, Commit: true}, answer)
	if resp.GetError() != nil || h.drives != 1 {
		t.Fatalf("end: %v, drove markers %d times, want once", resp, h.drives)
	}
	proposed := h.proposed
	s.AddPartitions(&strandpb.AddPartitionsToTxnRequest{TransactionalId: "app", Producer: producer,
		Topics: []*strandpb.TxnPartitions{{Topic: "t", Partitions: []int32{0, 1, 2}}}}, answer)
	if resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST || h.proposed != proposed {
		t.Fatalf("3 partitions with a bound of 2: %v, proposed %d", resp, h.proposed-proposed)
	}
	s.MarkersEnabled = false
	s.EndTxn(&strandpb.EndTxnRequest{TransactionalId: "app", Producer: producer, Commit: true}, answer)
	if resp.GetError() == nil || h.proposed != proposed {
		t.Fatalf("end without markers: %v, proposed %d", resp, h.proposed-proposed)
	}
}
