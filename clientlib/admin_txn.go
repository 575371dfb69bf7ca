package clientlib

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// TransactionListing is one transactional id in ListTransactions.
type TransactionListing struct {
	ID         string
	ProducerID int64
	// State is Kafka's name of the id's state: Empty, Ongoing,
	// PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort.
	State string
}

// ListTransactions lists the transactional ids every coordinator holds,
// sorted by id; states keeps only those in one of them (none: all). Each
// node answers for the coordinators it leads, as in Kafka, so every node
// is asked.
func (c *Client) ListTransactions(ctx context.Context, states ...string) ([]TransactionListing, error) {
	info, err := c.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]TransactionListing{}
	for _, n := range info.Nodes {
		req := &strandpb.Request{Body: &strandpb.Request_ListTransactions{ListTransactions: &strandpb.ListTransactionsRequest{States: states}}}
		resp, err := c.request(ctx, n.Address, req, 0)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return nil, fmt.Errorf("node %d (%s): %w", n.ID, n.Address, err)
		}
		for _, t := range resp.GetListTransactions().GetTransactions() {
			seen[t.GetTransactionalId()] = TransactionListing{ID: t.GetTransactionalId(), ProducerID: t.GetProducerId(), State: t.GetState()}
		}
	}
	out := make([]TransactionListing, 0, len(seen))
	for _, t := range seen {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// TransactionDescription is a transactional id as its coordinator holds
// it (DescribeTransaction).
type TransactionDescription struct {
	ID            string
	State         string
	ProducerID    int64
	ProducerEpoch int16
	Timeout       time.Duration
	// Started is when the open transaction began; zero when none is open.
	Started time.Time
	// Partitions and Groups joined the open (or deciding) transaction.
	Partitions []TopicPartition
	Groups     []string
}

// DescribeTransaction asks the id's coordinator for it; an unknown id
// fails with a *Error of code TRANSACTIONAL_ID_NOT_FOUND.
func (c *Client) DescribeTransaction(ctx context.Context, id string) (TransactionDescription, error) {
	var d TransactionDescription
	err := c.withRetries(ctx, func() error {
		t := newTxnState(id, 0)
		addr, err := c.txnCoordinator(ctx, t)
		if err != nil {
			return err
		}
		req := &strandpb.Request{Body: &strandpb.Request_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsRequest{
			TransactionalIds: []string{id}}}}
		resp, err := c.request(ctx, addr, req, 0)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return err
		}
		ts := resp.GetDescribeTransactions().GetTransactions()
		if len(ts) != 1 {
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "answer lacks the transactional id"}
		}
		if err := errorFromWire(ts[0].GetError()); err != nil {
			return err
		}
		d = transactionFromWire(ts[0])
		return nil
	})
	return d, err
}

// transactionFromWire converts a described transactional id.
func transactionFromWire(t *strandpb.DescribeTransactionsResponse_Transaction) TransactionDescription {
	d := TransactionDescription{ID: t.GetTransactionalId(), State: t.GetState(), ProducerID: t.GetProducerId(),
		ProducerEpoch: int16(t.GetProducerEpoch()), Timeout: time.Duration(t.GetTimeoutMs()) * time.Millisecond,
		Groups: t.GetGroups()}
	if ms := t.GetStartMs(); ms >= 0 {
		d.Started = time.UnixMilli(ms)
	}
	for _, tp := range t.GetTopics() {
		for _, p := range tp.GetPartitions() {
			d.Partitions = append(d.Partitions, TopicPartition{Topic: tp.GetTopic(), Partition: p})
		}
	}
	return d
}

// AbortedTransaction is what AbortTransactionByID aborted.
type AbortedTransaction struct {
	ID string
	// ProducerID and ProducerEpoch are the abort markers' (the fenced
	// producer's epoch + 1).
	ProducerID    int64
	ProducerEpoch int16
	// Partitions and Groups receive the abort markers.
	Partitions []TopicPartition
	Groups     []string
	// Already: the transaction was being aborted when asked (by a
	// timeout, a new producer of the id, or an earlier abort).
	Already bool
}

// AbortTransactionByID aborts the transactional id's open transaction, as an
// operator ends a hanging one (Kafka's kafka-transactions.sh abort): the
// coordinator fences the producer and writes abort markers to every
// partition of the transaction. It returns once the abort is decided; the
// markers follow (DescribeTransaction shows CompleteAbort when written).
// An id without an open transaction is ERROR_CODE_INVALID_TXN_STATE, an
// unknown one ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND.
func (c *Client) AbortTransactionByID(ctx context.Context, id string) (AbortedTransaction, error) {
	var out AbortedTransaction
	err := c.withRetries(ctx, func() error {
		t := newTxnState(id, 0)
		addr, err := c.txnCoordinator(ctx, t)
		if err != nil {
			return err
		}
		req := &strandpb.Request{Body: &strandpb.Request_AbortTransaction{AbortTransaction: &strandpb.AbortTransactionRequest{TransactionalId: id}}}
		resp, err := c.request(ctx, addr, req, 0)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return err
		}
		a := resp.GetAbortTransaction()
		out = AbortedTransaction{ID: id, ProducerID: a.GetProducerId(), ProducerEpoch: int16(a.GetProducerEpoch()),
			Groups: a.GetGroups(), Already: a.GetAlready()}
		for _, tp := range a.GetTopics() {
			for _, p := range tp.GetPartitions() {
				out.Partitions = append(out.Partitions, TopicPartition{Topic: tp.GetTopic(), Partition: p})
			}
		}
		return nil
	})
	return out, err
}
