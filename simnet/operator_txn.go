package simnet

import (
	"context"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/proto/strandpb"
)

// opTxnID is the operator's transactional id.
const opTxnID = "ops-txn"

// txnRequest builds the transaction coordinator's requests. The nodes run
// the real marker writer (node.PartitionMarkers), but the simulator does
// not drive transactions yet: the operator's requests name an id that
// never gets a producer (its InitProducerId asks a timeout above
// transaction.max.timeout.ms), so they are refused definitely (a
// TxnOffsetCommit by its verification with the id's coordinator)
// (INVALID_TRANSACTION_TIMEOUT, INVALID_PRODUCER_ID_MAPPING,
// TRANSACTIONAL_ID_NOT_FOUND) or answered empty, and change nothing but creating __strand_transactions.
func (op *operator) txnRequest(a opAction) *opRequest {
	target := op.ops.randomNode()
	producer := &strandpb.TxnProducer{ProducerId: 1}
	var req *strandpb.Request
	switch a.kind {
	case "txn_init_producer_id":
		req = &strandpb.Request{Body: &strandpb.Request_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdRequest{
			TransactionalId: opTxnID, TransactionTimeoutMs: 1 << 30}}}
	case "add_partitions_to_txn":
		req = &strandpb.Request{Body: &strandpb.Request_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnRequest{
			TransactionalId: opTxnID, Producer: producer, Topics: []*strandpb.TxnPartitions{{Topic: topicMain, Partitions: []int32{0}}}}}}
	case "add_offsets_to_txn":
		req = &strandpb.Request{Body: &strandpb.Request_AddOffsetsToTxn{AddOffsetsToTxn: &strandpb.AddOffsetsToTxnRequest{
			TransactionalId: opTxnID, Producer: producer, Group: opGroup}}}
	case "txn_offset_commit": // refused by the verification: the id has no producer
		req = &strandpb.Request{Body: &strandpb.Request_TxnOffsetCommit{TxnOffsetCommit: &strandpb.TxnOffsetCommitRequest{
			TransactionalId: opTxnID, Producer: producer, Commit: &strandpb.OffsetCommitRequest{Group: opGroup,
				Offsets: []*strandpb.OffsetCommitPartition{{Topic: topicMain, Partition: 0, Offset: intruderValue}}}}}}
	case "end_txn":
		req = &strandpb.Request{Body: &strandpb.Request_EndTxn{EndTxn: &strandpb.EndTxnRequest{TransactionalId: opTxnID, Producer: producer, Commit: true}}}
	case "list_transactions":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			ts, err := cl.ListTransactions(ctx)
			return libErr(len(ts), err)
		}}
	case "write_txn_markers": // node to node only: Handle refuses it
		req = &strandpb.Request{Body: &strandpb.Request_WriteTxnMarkers{WriteTxnMarkers: &strandpb.WriteTxnMarkersRequest{}}}
	case "describe_transactions": // the id has no producer: refused (with authorization on, for want of an ACL)
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			_, err := cl.DescribeTransaction(ctx, opTxnID)
			return 0, err
		}}
	case "abort_transaction": // the id has no transaction open: refused
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			_, err := cl.AbortTransactionByID(ctx, opTxnID)
			return 0, err
		}}
	default:
		return nil
	}
	return &opRequest{target: target, req: req}
}
