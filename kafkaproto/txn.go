package kafkaproto

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// Transactions: each Kafka request is the node's native one (proto
// wire.proto, node/txn_handle.go), sent to this node; a node that is not
// the transactional id's coordinator answers NOT_COORDINATOR, and the
// client asks FindCoordinator (key type 1) again, as for groups.

// fencedSince is, per transactional API key, the first version whose
// clients know PRODUCER_FENCED (KIP-588); older ones are answered
// INVALID_PRODUCER_EPOCH instead, as Kafka's KafkaApis does.
var fencedSince = map[int16]int16{
	22: 4, // InitProducerId
	24: 2, // AddPartitionsToTxn
	25: 2, // AddOffsetsToTxn
	26: 2, // EndTxn
	28: 3, // TxnOffsetCommit
}

// txnCode is kafkaCode for an answer of a transactional request of key at
// version: a fenced producer is PRODUCER_FENCED for the clients that know
// it and INVALID_PRODUCER_EPOCH for older ones. (Produce keeps
// INVALID_PRODUCER_EPOCH, kafkaCodeRows' row, as Kafka answers a produce.)
func txnCode(key, version int16, e *strandpb.Error) int16 {
	if e.GetCode() != strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED {
		return kafkaCode(e)
	}
	if since, ok := fencedSince[key]; ok && version >= since {
		return kerr.ProducerFenced.Code
	}
	return kerr.InvalidProducerEpoch.Code
}

// abortableSince is, per API key, the first version whose clients know
// TRANSACTION_ABORTABLE (KIP-890 part 1): Kafka answers a transactional
// write or TxnOffsetCommit whose partition or group the coordinator does
// not have in the open transaction with it, and INVALID_TXN_STATE to the
// versions below (AddPartitionsToTxnManager folds it back "for backward
// compatibility with clients"). A client aborts on TRANSACTION_ABORTABLE and
// goes on under the same producer; INVALID_TXN_STATE is fatal to it.
var abortableSince = map[int16]int16{
	0:  11, // Produce
	28: 4,  // TxnOffsetCommit
}

// abortable is code for an answer of key at version: INVALID_TXN_STATE is
// TRANSACTION_ABORTABLE for the versions that know it.
func abortable(key, version, code int16) int16 {
	if since, ok := abortableSince[key]; ok && version >= since && code == kerr.InvalidTxnState.Code {
		return kerr.TransactionAbortable.Code
	}
	return code
}

// abortableRefusals answers TRANSACTION_ABORTABLE, where the produce
// version knows it, for each transactional batch the node refused
// INVALID_TXN_STATE (its partition not in the producer's open transaction;
// a plain batch's refusal while a transaction is open stays
// INVALID_TXN_STATE, as Kafka's log answers it).
func abortableRefusals(r *kmsg.ProduceRequest, out *kmsg.ProduceResponse, transactional map[tp]bool) {
	for i, t := range r.Topics {
		for j, p := range t.Partitions {
			if op := &out.Topics[i].Partitions[j]; transactional[tp{produceTopicKey(r, t), p.Partition}] {
				op.ErrorCode = abortable(0, r.Version, op.ErrorCode)
			}
		}
	}
}

// txnProducer is a Kafka producer id and epoch as the native request's.
func txnProducer(id int64, epoch int16) *strandpb.TxnProducer {
	return &strandpb.TxnProducer{ProducerId: id, Epoch: int32(epoch)}
}

// initTxnProducerID is InitProducerId with a transactional id: the id's
// producer id at a new epoch, fencing every older one. v3+ carries the
// producer id and epoch the client holds (KIP-360): a client recovering
// from an abortable error keeps its producer id.
func (c *conn) initTxnProducerID(r *kmsg.InitProducerIDRequest, out *kmsg.InitProducerIDResponse) func() kmsg.Response {
	if *r.TransactionalID == "" {
		out.ErrorCode = kerr.InvalidRequest.Code // Kafka's answer to an empty transactional id
		return ready(out)
	}
	n := &strandpb.TxnInitProducerIdRequest{TransactionalId: *r.TransactionalID, TransactionTimeoutMs: r.TransactionTimeoutMillis}
	if r.Version >= 3 && r.ProducerID >= 0 {
		n.Expected = txnProducer(r.ProducerID, r.ProducerEpoch)
	}
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_TxnInitProducerId{TxnInitProducerId: n}})
	return func() kmsg.Response {
		whole := c.wait(k)
		if whole == nil {
			return nil
		}
		if out.ErrorCode = txnCode(22, r.Version, whole.GetError()); out.ErrorCode == 0 {
			a := whole.GetTxnInitProducerId()
			out.ProducerID, out.ProducerEpoch = a.GetProducerId(), int16(a.GetProducerEpoch())
		}
		return out
	}
}

// addPartitionsToTxn adds partitions to a transaction. v0-v3 is the
// client's form (one transaction); v4 is the broker's batched form, each
// transaction added or, verify_only (KIP-890), checked: a partition is
// answered without error only when it is in the producer's open
// transaction.
func (c *conn) addPartitionsToTxn(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	out := kmsg.NewPtrAddPartitionsToTxnResponse()
	out.SetVersion(r.Version)
	if r.Version < 4 {
		n := &strandpb.AddPartitionsToTxnRequest{TransactionalId: r.TransactionalID, Producer: txnProducer(r.ProducerID, r.ProducerEpoch)}
		for _, t := range r.Topics {
			n.Topics = append(n.Topics, &strandpb.TxnPartitions{Topic: t.Topic, Partitions: t.Partitions})
		}
		answer := c.submitAddPartitions(n, r.Version)
		return func() kmsg.Response {
			topics, ok := answer()
			if !ok {
				return nil
			}
			for _, t := range topics {
				ot := kmsg.NewAddPartitionsToTxnResponseTopic()
				ot.Topic = t.Topic
				for _, p := range t.Partitions {
					ot.Partitions = append(ot.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p.Partition, ErrorCode: p.ErrorCode})
				}
				out.Topics = append(out.Topics, ot)
			}
			return out
		}
	}
	answers := make([]func() ([]kmsg.AddPartitionsToTxnResponseTransactionTopic, bool), len(r.Transactions))
	for i, t := range r.Transactions {
		n := &strandpb.AddPartitionsToTxnRequest{TransactionalId: t.TransactionalID, Producer: txnProducer(t.ProducerID, t.ProducerEpoch), VerifyOnly: t.VerifyOnly}
		for _, tp := range t.Topics {
			n.Topics = append(n.Topics, &strandpb.TxnPartitions{Topic: tp.Topic, Partitions: tp.Partitions})
		}
		answers[i] = c.submitAddPartitions(n, r.Version)
	}
	return func() kmsg.Response {
		for i, answer := range answers {
			topics, ok := answer()
			if !ok {
				return nil
			}
			ot := kmsg.NewAddPartitionsToTxnResponseTransaction()
			ot.TransactionalID, ot.Topics = r.Transactions[i].TransactionalID, topics
			out.Transactions = append(out.Transactions, ot)
		}
		return out
	}
}

// submitAddPartitions sends one transaction's AddPartitionsToTxn; the
// returned function waits for its per-partition answer in the request's
// order (false: the connection closed). A whole-request refusal (fenced,
// not the coordinator) is every partition's error, as in Kafka.
func (c *conn) submitAddPartitions(n *strandpb.AddPartitionsToTxnRequest, version int16) func() ([]kmsg.AddPartitionsToTxnResponseTransactionTopic, bool) {
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_AddPartitionsToTxn{AddPartitionsToTxn: n}})
	return func() ([]kmsg.AddPartitionsToTxnResponseTransactionTopic, bool) {
		whole := c.wait(k)
		if whole == nil {
			return nil, false
		}
		var topics []kmsg.AddPartitionsToTxnResponseTransactionTopic
		for _, t := range n.GetTopics() {
			ot := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			ot.Topic = t.GetTopic()
			for _, p := range t.GetPartitions() {
				code := txnCode(24, version, partErr(whole, partitionResult(whole, t.GetTopic(), p)))
				ot.Partitions = append(ot.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: p, ErrorCode: code})
			}
			topics = append(topics, ot)
		}
		return topics, true
	}
}

// partitionResult is the node's error for one partition of an
// AddPartitionsToTxn answer (nil: none, or not answered).
func partitionResult(whole *strandpb.Response, topic string, partition int32) *strandpb.Error {
	for _, res := range whole.GetAddPartitionsToTxn().GetResults() {
		if res.GetTopic() == topic && res.GetPartition() == partition {
			return res.GetError()
		}
	}
	return nil
}

// addOffsetsToTxn adds a group's offsets to the transaction (its
// TxnOffsetCommit then commits them with the transaction).
func (c *conn) addOffsetsToTxn(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.AddOffsetsToTxnRequest)
	out := kmsg.NewPtrAddOffsetsToTxnResponse()
	out.SetVersion(r.Version)
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_AddOffsetsToTxn{AddOffsetsToTxn: &strandpb.AddOffsetsToTxnRequest{
		TransactionalId: r.TransactionalID, Producer: txnProducer(r.ProducerID, r.ProducerEpoch), Group: r.Group}}})
	return func() kmsg.Response {
		whole := c.wait(k)
		if whole == nil {
			return nil
		}
		out.ErrorCode = txnCode(25, r.Version, whole.GetError())
		return out
	}
}

// endTxn commits or aborts the open transaction. v5 (transactions v2,
// KIP-890) bumps the epoch and answers it; v0-v4 cannot carry a new
// epoch, so their end keeps it (transactions v1, as Kafka 4.0 answers
// an older client).
func (c *conn) endTxn(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.EndTxnRequest)
	out := kmsg.NewPtrEndTxnResponse()
	out.SetVersion(r.Version)
	out.ProducerID, out.ProducerEpoch = -1, -1
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_EndTxn{EndTxn: &strandpb.EndTxnRequest{
		TransactionalId: r.TransactionalID, Producer: txnProducer(r.ProducerID, r.ProducerEpoch), Commit: r.Commit,
		KeepEpoch: r.Version < 5}}})
	return func() kmsg.Response {
		whole := c.wait(k)
		if whole == nil {
			return nil
		}
		if out.ErrorCode = txnCode(26, r.Version, whole.GetError()); out.ErrorCode == 0 {
			a := whole.GetEndTxn()
			out.ProducerID, out.ProducerEpoch = a.GetProducerId(), int16(a.GetProducerEpoch())
		}
		return out
	}
}

// describeTransactions describes transactional ids on this node, their
// coordinator; an id coordinated elsewhere is NOT_COORDINATOR.
func (c *conn) describeTransactions(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.DescribeTransactionsRequest)
	out := kmsg.NewPtrDescribeTransactionsResponse()
	out.SetVersion(r.Version)
	if len(r.TransactionalIDs) == 0 {
		return ready(out)
	}
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsRequest{
		TransactionalIds: r.TransactionalIDs}}})
	return func() kmsg.Response {
		whole := c.wait(k)
		if whole == nil {
			return nil
		}
		got := whole.GetDescribeTransactions().GetTransactions()
		for i, id := range r.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
			var d *strandpb.DescribeTransactionsResponse_Transaction
			if i < len(got) && got[i].GetTransactionalId() == id {
				d = got[i]
			}
			if st.ErrorCode = kafkaCode(partErr(whole, d.GetError())); st.ErrorCode == 0 && d == nil {
				st.ErrorCode = kerr.UnknownServerError.Code // the node answered another list: a bug, said plainly
			}
			if st.ErrorCode == 0 {
				describedTxn(&st, d)
			}
			out.TransactionStates = append(out.TransactionStates, st)
		}
		return out
	}
}

// describedTxn fills st from the node's description.
func describedTxn(st *kmsg.DescribeTransactionsResponseTransactionState, d *strandpb.DescribeTransactionsResponse_Transaction) {
	st.State, st.TimeoutMillis, st.StartTimestamp = d.GetState(), d.GetTimeoutMs(), d.GetStartMs()
	st.ProducerID, st.ProducerEpoch = d.GetProducerId(), int16(d.GetProducerEpoch())
	for _, t := range d.GetTopics() {
		ot := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		ot.Topic, ot.Partitions = t.GetTopic(), t.GetPartitions()
		st.Topics = append(st.Topics, ot)
	}
}

// kafkaTxnStates are the transaction states Kafka names; a ListTransactions
// state filter outside them is answered in UnknownStateFilters. Strand's
// coordinator never reports Dead or PrepareEpochFence (a removed id is not
// listed; a fence prepares an abort), so those filters match nothing.
var kafkaTxnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
	"Dead", "PrepareEpochFence"}

// listTransactions lists the transactional ids this node coordinates,
// filtered by state and producer id (a client asks every node and merges).
// As in Kafka, a state filter is matched only by the states it names that
// exist: filters naming none of them match nothing.
func (c *conn) listTransactions(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.ListTransactionsRequest)
	out := kmsg.NewPtrListTransactionsResponse()
	out.SetVersion(r.Version)
	var states []string
	for _, s := range r.StateFilters {
		if slices.Contains(kafkaTxnStates, s) {
			states = append(states, s)
		} else {
			out.UnknownStateFilters = append(out.UnknownStateFilters, s)
		}
	}
	if len(r.StateFilters) > 0 && len(states) == 0 {
		return ready(out)
	}
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_ListTransactions{ListTransactions: &strandpb.ListTransactionsRequest{States: states}}})
	return func() kmsg.Response {
		whole := c.wait(k)
		if whole == nil {
			return nil
		}
		if out.ErrorCode = kafkaCode(whole.GetError()); out.ErrorCode != 0 {
			return out
		}
		for _, t := range whole.GetListTransactions().GetTransactions() {
			if len(r.ProducerIDFilters) > 0 && !slices.Contains(r.ProducerIDFilters, t.GetProducerId()) {
				continue
			}
			st := kmsg.NewListTransactionsResponseTransactionState()
			st.TransactionalID, st.ProducerID, st.TransactionState = t.GetTransactionalId(), t.GetProducerId(), t.GetState()
			out.TransactionStates = append(out.TransactionStates, st)
		}
		return out
	}
}
