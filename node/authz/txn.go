package authz

import (
	"slices"

	"github.com/strandlog/strand/proto/strandpb"
)

// Authorization of the transactional requests, as Kafka's authorizer asks
// (resource type TRANSACTIONAL_ID, 5): WRITE on the transactional id for
// InitProducerId with an id, AddPartitionsToTxn (and WRITE on each topic),
// AddOffsetsToTxn (and READ on the group), EndTxn, TxnOffsetCommit (before
// its group and topics) and a produce carrying the id; DESCRIBE for
// FindCoordinator of an id and DescribeTransactions (per id: an id the
// caller may not describe is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// and the others are described, as Kafka answers); ListTransactions lists
// only the ids the caller may describe. DescribeProducers needs READ on
// each topic, per partition (TOPIC_AUTHORIZATION_FAILED), as Kafka asks.
// WRITE implies DESCRIBE. An
// operator's AbortTransaction needs ALTER on the cluster or WRITE on the
// id (the producer's own principal may end what it began).

// txnIDResource is the ACL resource type of transactional ids.
const txnIDResource = "transactional-id"

func txnIDAccess(id, op string) access { return access{resource{txnIDResource, id}, op} }

// txnAccesses lists what a transactional request needs; handled is false
// for any other request.
func (z Authorizer) txnAccesses(caller Caller, req *strandpb.Request, out []access) ([]access, bool) {
	switch b := req.GetBody().(type) {
	case *strandpb.Request_TxnInitProducerId:
		out = append(out, txnIDAccess(b.TxnInitProducerId.GetTransactionalId(), "write"))
	case *strandpb.Request_AddPartitionsToTxn:
		out = append(out, txnIDAccess(b.AddPartitionsToTxn.GetTransactionalId(), "write"))
		if !b.AddPartitionsToTxn.GetVerifyOnly() {
			for _, t := range b.AddPartitionsToTxn.GetTopics() {
				out = append(out, topicAccess(t.GetTopic(), "write"))
			}
		}
	case *strandpb.Request_AddOffsetsToTxn:
		out = append(out, txnIDAccess(b.AddOffsetsToTxn.GetTransactionalId(), "write"),
			groupAccess(b.AddOffsetsToTxn.GetGroup(), "read"))
	case *strandpb.Request_EndTxn:
		out = append(out, txnIDAccess(b.EndTxn.GetTransactionalId(), "write"))
	case *strandpb.Request_TxnOffsetCommit:
		out = append(out, txnIDAccess(b.TxnOffsetCommit.GetTransactionalId(), "write"))
		out = groupAccesses(req, out)
	case *strandpb.Request_DescribeTransactions, *strandpb.Request_DescribeProducers:
		// Per id or partition: splitTxnRequest.
	case *strandpb.Request_ListTransactions:
		// Filtered: filterTxnAnswer.
	case *strandpb.Request_AbortTransaction:
		if !z.allowed(caller, clusterAccess("alter")) {
			out = append(out, txnIDAccess(b.AbortTransaction.GetTransactionalId(), "write"))
		}
	case *strandpb.Request_FindCoordinator:
		if b.FindCoordinator.GetTransactionalId() == "" {
			return out, false
		}
		out = append(out, txnIDAccess(b.FindCoordinator.GetTransactionalId(), "describe"))
	case *strandpb.Request_Produce:
		if id := b.Produce.GetTransactionalId(); id != "" {
			out = append(out, txnIDAccess(id, "write")) // the partitions: splitPartitions
		}
	default:
		return out, false
	}
	return out, true
}

// filterTxnAnswer wraps answer so a ListTransactions answer lists only the
// ids caller may describe; nil for any other request.
func (z Authorizer) filterTxnAnswer(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) func(*strandpb.Response) {
	if req.GetListTransactions() == nil {
		return nil
	}
	return func(resp *strandpb.Response) {
		if l := resp.GetListTransactions(); l != nil {
			l.Transactions = slices.DeleteFunc(l.Transactions, func(t *strandpb.ListTransactionsResponse_Transaction) bool {
				return !z.allowed(caller, txnIDAccess(t.GetTransactionalId(), "describe"))
			})
		}
		answer(resp)
	}
}

// splitTxnRequest refuses a DescribeTransactions per id and a
// DescribeProducers per partition: it returns the request without the
// refused items and an answer that puts their refusals back at their
// indexes (nil request: every item refused, answered as a whole-request
// refusal, which kafkaproto answers per item); handled is false
// for any other request. Both are reads, so what is refused is never
// looked at.
func (z Authorizer) splitTxnRequest(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) (*strandpb.Request, func(*strandpb.Response), bool) {
	switch b := req.GetBody().(type) {
	case *strandpb.Request_DescribeTransactions:
		ids := b.DescribeTransactions.GetTransactionalIds()
		refused := z.refusedItems(caller, len(ids), func(i int) access { return txnIDAccess(ids[i], "describe") })
		run, put := splitTxnIDs(ids, refused)
		return z.splitItems(req, refused, run, put, answer)
	case *strandpb.Request_DescribeProducers:
		parts := b.DescribeProducers.GetPartitions()
		refused := z.refusedItems(caller, len(parts), func(i int) access { return topicAccess(parts[i].GetTopic(), "read") })
		run, put := splitProducerParts(parts, refused)
		return z.splitItems(req, refused, run, put, answer)
	}
	return req, answer, false
}

// refusedItems is, per item of a request, its refusal (nil: allowed).
func (z Authorizer) refusedItems(caller Caller, n int, needs func(int) access) []*strandpb.Error {
	refused := make([]*strandpb.Error, n)
	for i := range refused {
		if a := needs(i); !z.allowed(caller, a) {
			refused[i] = z.refusal(caller, a).GetError()
		}
	}
	return refused
}

// splitItems runs run (the allowed items) unless nothing is refused, and
// answers through put, which merges the refusals back. A whole-request
// error is passed on as it is.
func (z Authorizer) splitItems(req *strandpb.Request, refused []*strandpb.Error, run *strandpb.Request,
	put func(*strandpb.Response), answer func(*strandpb.Response)) (*strandpb.Request, func(*strandpb.Response), bool) {
	n := 0
	for _, e := range refused {
		if e != nil {
			n++
		}
	}
	merged := func(resp *strandpb.Response) {
		if resp.GetError() == nil {
			put(resp)
		}
		answer(resp)
	}
	switch {
	case n == 0:
		return req, answer, true
	case n == len(refused):
		answer(&strandpb.Response{Error: refused[0]}) // as splitPartitions: Kafka's per-item answers are each this
		return nil, nil, true
	}
	run.CorrelationId = req.GetCorrelationId()
	return run, merged, true
}

// splitTxnIDs is the DescribeTransactions of the allowed ids and the
// merge putting the refused ones back in request order.
func splitTxnIDs(ids []string, refused []*strandpb.Error) (*strandpb.Request, func(*strandpb.Response)) {
	var allowed []string
	for i, id := range ids {
		if refused[i] == nil {
			allowed = append(allowed, id)
		}
	}
	run := &strandpb.Request{Body: &strandpb.Request_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsRequest{TransactionalIds: allowed}}}
	return run, func(resp *strandpb.Response) {
		got := resp.GetDescribeTransactions().GetTransactions()
		out := make([]*strandpb.DescribeTransactionsResponse_Transaction, 0, len(ids))
		for i, id := range ids {
			switch {
			case refused[i] != nil:
				out = append(out, &strandpb.DescribeTransactionsResponse_Transaction{TransactionalId: id, Error: refused[i]})
			case len(got) > 0:
				out, got = append(out, got[0]), got[1:]
			}
		}
		resp.Body = &strandpb.Response_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsResponse{Transactions: out}}
	}
}

// splitProducerParts is the DescribeProducers of the allowed partitions
// and the merge putting the refused ones back in request order.
func splitProducerParts(parts []*strandpb.DescribeProducersRequest_Partition, refused []*strandpb.Error) (*strandpb.Request, func(*strandpb.Response)) {
	allowed := &strandpb.DescribeProducersRequest{}
	for i, p := range parts {
		if refused[i] == nil {
			allowed.Partitions = append(allowed.Partitions, p)
		}
	}
	run := &strandpb.Request{Body: &strandpb.Request_DescribeProducers{DescribeProducers: allowed}}
	return run, func(resp *strandpb.Response) {
		got := resp.GetDescribeProducers().GetPartitions()
		out := make([]*strandpb.DescribeProducersResponse_Partition, 0, len(parts))
		for i, p := range parts {
			switch {
			case refused[i] != nil:
				out = append(out, &strandpb.DescribeProducersResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(), Error: refused[i]})
			case len(got) > 0:
				out, got = append(out, got[0]), got[1:]
			}
		}
		resp.Body = &strandpb.Response_DescribeProducers{DescribeProducers: &strandpb.DescribeProducersResponse{Partitions: out}}
	}
}
