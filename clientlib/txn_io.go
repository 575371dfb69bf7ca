package clientlib

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// txnCoordinator asks any node which node coordinates the transactional
// id (FindCoordinator with transactional_id), caching the answer.
func (c *Client) txnCoordinator(ctx context.Context, t *txnState) (string, error) {
	t.mu.Lock()
	addr, stale := t.coordAddr, t.coordStale
	t.mu.Unlock()
	if addr != "" {
		return addr, nil
	}
	find := &strandpb.FindCoordinatorRequest{TransactionalId: t.id}
	resp, from, err := c.anyRequestLast(ctx, &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: find}}, stale)
	if err != nil {
		return "", err
	}
	return t.learnCoordinator(resp, from)
}

// learnCoordinator records the coordinator a FindCoordinator answer from
// the node at from names, or, when it names none, that node as the one
// to ask last.
func (t *txnState) learnCoordinator(resp *strandpb.Response, from string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := errorFromWire(resp.GetError()); err != nil {
		t.coordStale = from
		return "", err
	}
	t.coordAddr, t.coordFrom = resp.GetFindCoordinator().GetAddress(), from
	return t.coordAddr, nil
}

// forgetCoordinator drops the coordinator after a request to it failed
// with err when err says it is not (or may no longer be) the coordinator
// (coordinatorLost); the node that named it is then asked last.
func (t *txnState) forgetCoordinator(err error) {
	if !coordinatorLost(err) {
		return
	}
	t.mu.Lock()
	t.coordAddr, t.coordStale = "", t.coordFrom
	t.mu.Unlock()
}

// txnRequest sends req to the transactional id's coordinator once, on its
// coordinator connection (coordconn.go): a
// NOT_COORDINATOR answer, a connection failure or a timeout
// (coordinatorLost) forgets the coordinator, so a retry finds it again. The answer's whole-request error is returned.
func (c *Client) txnRequest(ctx context.Context, req *strandpb.Request) (*strandpb.Response, error) {
	t := c.txn
	addr, err := c.txnCoordinator(ctx, t)
	if err != nil {
		return nil, err
	}
	resp, err := c.coordRequest(ctx, addr, req)
	if err == nil {
		err = errorFromWire(resp.GetError())
	}
	t.forgetCoordinator(err)
	return resp, err
}

// txnCall is txnRequest with the client's retries: NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS (the previous
// transaction's markers are still being written) and connection failures
// back off and retry.
func (c *Client) txnCall(ctx context.Context, req *strandpb.Request) (*strandpb.Response, error) {
	var resp *strandpb.Response
	err := c.withRetriesPaced(ctx, c.txnRetryDelay, nil, func() error {
		var err error
		resp, err = c.txnRequest(ctx, req)
		return err
	})
	return resp, err
}

// txnRetryDelay is the wait before a coordinator request's retry number
// attempt after err (txnAddBackoff's rule).
func (c *Client) txnRetryDelay(attempt int, err error) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return txnAddBackoff(c.cfg.backoff, attempt, err, c.rng)
}

// addPartitionsRequest adds tps to the open transaction of producer
// (id, epoch).
func (t *txnState) addPartitionsRequest(id int64, epoch int32, tps []topicPartition) *strandpb.Request {
	req := &strandpb.AddPartitionsToTxnRequest{TransactionalId: t.id,
		Producer: &strandpb.TxnProducer{ProducerId: id, Epoch: epoch}}
	for _, tp := range tps { // sorted by topic: one entry per topic
		n := len(req.Topics)
		if n == 0 || req.Topics[n-1].Topic != tp.topic {
			req.Topics = append(req.Topics, &strandpb.TxnPartitions{Topic: tp.topic})
			n++
		}
		req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, tp.partition)
	}
	return &strandpb.Request{Body: &strandpb.Request_AddPartitionsToTxn{AddPartitionsToTxn: req}}
}

// addPartitionsResult is an AddPartitionsToTxn outcome, back to the loop.
type addPartitionsResult struct {
	epoch int32
	tps   []topicPartition
	resp  *strandpb.Response
	err   error
}

// txnReady says whether a transactional sink may send: the Client is not
// fenced (else its queued batches fail) and the partition is in the open
// transaction (else it joins toAdd, for AddPartitionsToTxn first).
func (p *producer) txnReady(t *txnState, s *sink, toAdd *[]topicPartition) bool {
	if err := t.fatalErr(); err != nil {
		p.failSink(s, err)
		return false
	}
	if _, _, ok := t.producer(); !ok {
		return false
	}
	if !t.isAdded(s.tp) {
		*toAdd = append(*toAdd, s.tp)
		return false
	}
	return true
}

// maybeAddPartitions sends AddPartitionsToTxn for tps (sorted), one
// request at a time, after the backoff of a retriable refusal. It returns
// when it may send one.
func (p *producer) maybeAddPartitions(tps []topicPartition, now time.Duration) time.Duration {
	if len(tps) == 0 || p.addInFlight {
		return 0
	}
	if now < p.addRetryAfter {
		return p.addRetryAfter
	}
	t := p.c.txn
	id, epoch, _ := t.producer()
	t.markStarted()
	p.addInFlight = true
	p.holdFlush()
	p.addAttempts++
	p.io.addPartitions(t.addPartitionsRequest(id, epoch, tps), addPartitionsResult{epoch: epoch, tps: tps})
	return 0
}

// handleAddPartitions takes an AddPartitionsToTxn outcome: added
// partitions may send; a retriable refusal of a partition is retried
// after a backoff; any other failure fails the partition's queued records
// and makes the transaction abortable (or the Client fenced).
func (p *producer) handleAddPartitions(res addPartitionsResult, now time.Duration) {
	p.addInFlight = false
	defer p.releaseFlush()
	t := p.c.txn
	if res.err != nil {
		err := t.note(fmt.Errorf("clientlib: AddPartitionsToTxn: %w", res.err))
		for _, tp := range res.tps {
			p.failSink(p.sinks[tp], err)
		}
		return
	}
	var added []topicPartition
	for _, r := range res.resp.GetAddPartitionsToTxn().GetResults() {
		tp := topicPartition{r.GetTopic(), r.GetPartition()}
		err := errorFromWire(r.GetError())
		switch {
		case err == nil:
			added = append(added, tp)
		case IsRetriable(err) && p.addAttempts <= p.c.cfg.retriesMax:
			p.addRetryAfter = now + p.c.txnRetryDelay(p.addAttempts, err)
		default:
			p.failSink(p.sinks[tp], t.note(fmt.Errorf("clientlib: AddPartitionsToTxn %s/%d: %w", tp.topic, tp.partition, err)))
		}
	}
	if len(added) > 0 {
		p.addAttempts = 0
	}
	t.markAdded(res.epoch, added)
}

// concurrentTxnBackoff paces coordinator requests (AddPartitionsToTxn
// above all) refused CONCURRENT_TRANSACTIONS, whether the refusal is the
// whole answer (txnCall) or one partition's: the previous transaction's
// markers are being
// written, which takes a few milliseconds, so the general retry backoff
// (100 ms) would cost most of a short transaction's time. Kafka's and
// franz-go's producers retry this case after 20 ms too.
var concurrentTxnBackoff = Backoff{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}

// errConcurrentTransactions matches a CONCURRENT_TRANSACTIONS refusal.
var errConcurrentTransactions = &Error{Code: strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS}

// errInvalidTxnState matches an INVALID_TXN_STATE refusal.
var errInvalidTxnState = &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE}

// txnAddBackoff is txnRetryDelay's rule: the client's backoff, except that
// CONCURRENT_TRANSACTIONS waits concurrentTxnBackoff (never longer than
// the client's own backoff would).
func txnAddBackoff(general Backoff, attempt int, err error, rng *rand.Rand) time.Duration {
	if errors.Is(err, errConcurrentTransactions) {
		return min(concurrentTxnBackoff.Delay(attempt, rng), general.Delay(attempt, rng))
	}
	return general.Delay(attempt, rng)
}

// failSink fails every record of s not yet sent.
func (p *producer) failSink(s *sink, err error) {
	if s == nil {
		return
	}
	p.seal(s, 0)
	s.w.FailQueued(err)
	p.pop(s)
}
