package node

import (
	"slices"

	"github.com/strandlog/strand/proto/strandpb"
)

// Authorization of the transactional requests, as Kafka's authorizer asks
// (resource type TRANSACTIONAL_ID, 5): WRITE on the transactional id for
// InitProducerId with an id, AddPartitionsToTxn (and WRITE on each topic),
// AddOffsetsToTxn (and READ on the group), EndTxn, TxnOffsetCommit (before
// its group and topics) and a produce carrying the id; DESCRIBE for
// FindCoordinator of an id and DescribeTransactions (each id; Strand
// refuses the whole request, as for DescribeGroups); ListTransactions
// lists only the ids the caller may describe. WRITE implies DESCRIBE. An
// operator's AbortTransaction needs ALTER on the cluster or WRITE on the
// id (the producer's own principal may end what it began).

// txnIDResource is the ACL resource type of transactional ids.
const txnIDResource = "transactional-id"

func txnIDAccess(id, op string) access { return access{resource{txnIDResource, id}, op} }

// txnAccesses lists what a transactional request needs; handled is false
// for any other request.
func txnAccesses(c *Core, caller Caller, req *strandpb.Request, out []access) ([]access, bool) {
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
	case *strandpb.Request_DescribeTransactions:
		for _, id := range b.DescribeTransactions.GetTransactionalIds() {
			out = append(out, txnIDAccess(id, "describe"))
		}
	case *strandpb.Request_ListTransactions:
		// Filtered: filterTxnAnswer.
	case *strandpb.Request_AbortTransaction:
		if !c.allowed(caller, clusterAccess("alter")) {
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
func (c *Core) filterTxnAnswer(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) func(*strandpb.Response) {
	if req.GetListTransactions() == nil {
		return nil
	}
	return func(resp *strandpb.Response) {
		if l := resp.GetListTransactions(); l != nil {
			l.Transactions = slices.DeleteFunc(l.Transactions, func(t *strandpb.ListTransactionsResponse_Transaction) bool {
				return !c.allowed(caller, txnIDAccess(t.GetTransactionalId(), "describe"))
			})
		}
		answer(resp)
	}
}
