package node

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// Node-to-node requests of the transaction coordinators (Kafka's
// inter-broker WriteTxnMarkers): a coordinator that does not lead a
// partition of a decided transaction asks the partition's leader. They
// travel in RaftFrame.txn_requests / txn_responses over the peer
// transport, which may lose, duplicate or reorder them: a call not
// answered within RequestTimeoutTicks fails with ErrTimeout (the marker
// may still be written), and the coordinator's sweep asks again; a
// duplicate answer finds no call and is dropped.

// txnPeerCallsMax bounds the peer calls a node has in flight.
const txnPeerCallsMax = 1024

// txnPeerCall is one request sent to a peer, waiting for its answer.
type txnPeerCall struct {
	deadline uint64
	done     func(*strandpb.Response, error)
}

// txnPeerFrame is what a received frame carried for the coordinators.
type txnPeerFrame struct {
	requests  []*strandpb.Request
	responses []*strandpb.Response
}

// parse decodes one txn_requests (response false) or txn_responses field;
// one that does not decode is dropped.
func (f *txnPeerFrame) parse(response bool, b []byte) {
	if response {
		if r := (&strandpb.Response{}); proto.Unmarshal(b, r) == nil {
			f.responses = append(f.responses, r)
		}
		return
	}
	if r := (&strandpb.Request{}); proto.Unmarshal(b, r) == nil && len(f.requests) < txnPeerCallsMax {
		f.requests = append(f.requests, r)
	}
}

// callPeer sends req to node to and calls done on the loop with its
// answer, or with ErrTimeout once RequestTimeoutTicks passed unanswered
// (the request may still take effect).
func (c *Core) callPeer(to NodeID, req *strandpb.Request, done func(*strandpb.Response, error)) {
	if c.txn.calls == nil {
		c.txn.calls = make(map[uint64]*txnPeerCall)
	}
	if len(c.txn.calls) >= txnPeerCallsMax {
		c.completions = append(c.completions, func() { done(nil, ErrBusy) })
		return
	}
	// Random ids (the node's stream differs per incarnation): an answer
	// to a call of an earlier incarnation never completes a new one.
	id := c.rand.Uint64()
	for id == 0 || c.txn.calls[id] != nil {
		id = c.rand.Uint64()
	}
	req.CorrelationId = id
	b, err := deterministic.Marshal(req)
	if err != nil {
		panic(fmt.Sprintf("node: marshal a peer request: %v", err))
	}
	c.txn.calls[id] = &txnPeerCall{deadline: c.ticks + uint64(c.cfg.RequestTimeoutTicks), done: done}
	c.sendTxnFrame(to, &strandpb.RaftFrame{FromNode: uint64(c.cfg.ID), TxnRequests: [][]byte{b}})
}

// sendTxnFrame sends a frame of peer requests or answers.
func (c *Core) sendTxnFrame(to NodeID, f *strandpb.RaftFrame) {
	b, err := deterministic.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("node: marshal a transaction frame: %v", err))
	}
	c.cfg.Network.Send(to, b)
	c.stats.FramesSent++
}

// expirePeerCalls fails the calls past their deadline, in id order.
func (c *Core) expirePeerCalls() {
	if len(c.txn.calls) == 0 {
		return
	}
	var late []uint64
	for id, call := range c.txn.calls {
		if c.ticks >= call.deadline {
			late = append(late, id)
		}
	}
	slices.Sort(late)
	for _, id := range late {
		call := c.txn.calls[id]
		delete(c.txn.calls, id)
		c.completions = append(c.completions, func() { call.done(nil, fmt.Errorf("%w: no answer from the partition's leader", ErrTimeout)) })
	}
}

// receiveTxnFrame serves a peer's requests (answering each in a frame of
// its own once done) and completes the calls its answers are for.
func (c *Core) receiveTxnFrame(from NodeID, f *txnPeerFrame) {
	for _, req := range f.requests {
		corr := req.GetCorrelationId()
		answer := func(resp *strandpb.Response) {
			resp.CorrelationId = corr
			b, err := deterministic.Marshal(resp)
			if err != nil {
				panic(fmt.Sprintf("node: marshal a peer answer: %v", err))
			}
			c.sendTxnFrame(from, &strandpb.RaftFrame{FromNode: uint64(c.cfg.ID), TxnResponses: [][]byte{b}})
		}
		switch body := req.GetBody().(type) {
		case *strandpb.Request_WriteTxnMarkers:
			c.handleWriteTxnMarkers(body.WriteTxnMarkers, answer)
		case *strandpb.Request_AddPartitionsToTxn:
			if !body.AddPartitionsToTxn.GetVerifyOnly() {
				answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: a peer only verifies partitions"))
				continue
			}
			c.handleVerifyPartitions(body.AddPartitionsToTxn, answer) // a partition leader's KIP-890 check
		case *strandpb.Request_AddOffsetsToTxn:
			if !body.AddOffsetsToTxn.GetVerifyOnly() {
				answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: a peer only verifies groups"))
				continue
			}
			c.handleVerifyGroup(body.AddOffsetsToTxn, answer) // a group coordinator's KIP-447 check
		default:
			answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: not a node-to-node request"))
		}
	}
	for _, resp := range f.responses {
		call := c.txn.calls[resp.GetCorrelationId()]
		if call == nil {
			continue // late or duplicated: the call already failed or completed
		}
		delete(c.txn.calls, resp.GetCorrelationId())
		c.completions = append(c.completions, func() { call.done(resp, nil) })
	}
}
