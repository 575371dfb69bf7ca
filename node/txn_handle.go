package node

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/txnsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// handleTxnRequest serves the transaction coordinator's requests
// (InitProducerId with a transactional id, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, ListTransactions, DescribeTransactions,
// AbortTransaction, and the partition leaders' DescribeProducers); false
// when req is none of them. Writes are answered once their command is
// applied and read back by the coordinator, reads after a ReadIndex on the
// id's partition, so both are linearizable.
func (c *Core) handleTxnRequest(req *strandpb.Request, answer func(*strandpb.Response)) bool {
	switch body := req.GetBody().(type) {
	case *strandpb.Request_TxnInitProducerId:
		c.handleTxnInitProducerID(body.TxnInitProducerId, answer)
	case *strandpb.Request_AddPartitionsToTxn:
		if body.AddPartitionsToTxn.GetVerifyOnly() {
			c.handleVerifyPartitions(body.AddPartitionsToTxn, answer)
		} else {
			c.handleAddPartitionsToTxn(body.AddPartitionsToTxn, answer)
		}
	case *strandpb.Request_AddOffsetsToTxn:
		if body.AddOffsetsToTxn.GetVerifyOnly() {
			c.handleVerifyGroup(body.AddOffsetsToTxn, answer) // txn_offsets.go
		} else {
			c.handleAddOffsetsToTxn(body.AddOffsetsToTxn, answer)
		}
	case *strandpb.Request_EndTxn:
		c.handleEndTxn(body.EndTxn, answer)
	case *strandpb.Request_ListTransactions:
		c.handleListTransactions(body.ListTransactions, answer)
	case *strandpb.Request_DescribeTransactions:
		c.handleDescribeTransactions(body.DescribeTransactions, answer)
	case *strandpb.Request_AbortTransaction:
		c.handleAbortTransaction(body.AbortTransaction, answer) // txn_admin.go
	case *strandpb.Request_DescribeProducers:
		c.handleDescribeProducers(body.DescribeProducers, answer) // txn_producers.go
	case *strandpb.Request_WriteTxnMarkers:
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: write_txn_markers is sent node to node only"))
	default:
		return false
	}
	return true
}

// txnFail is an answer failing the whole request with err (a moved
// coordinator is NOT_COORDINATOR, as for groups).
func (c *Core) txnFail(answer func(*strandpb.Response)) func(error) {
	return func(err error) { answer(&strandpb.Response{Error: c.groupError(err)}) }
}

// handleFindTxnCoordinator names the leader of the transactional id's
// partition of __strand_transactions, creating the topic on first use.
func (c *Core) handleFindTxnCoordinator(req *strandpb.FindCoordinatorRequest, answer func(*strandpb.Response)) {
	fail := c.txnFail(answer)
	if id := req.GetTransactionalId(); len(id) > txn.NameMax || req.GetGroup() != "" {
		fail(fmt.Errorf("%w: a transactional id of 1..%d bytes and no group", ErrInvalidRequest, txn.NameMax))
		return
	}
	if c.meta == nil {
		fail(ErrCoordinatorNotAvailable)
		return
	}
	t, ok := c.transactionsTopic()
	if !ok {
		fail(ErrCoordinatorNotAvailable)
		return
	}
	p := TxnPartition(req.GetTransactionalId(), t.Partitions())
	lead := c.coordinatorLeader(t, p) // groups_handle.go
	if lead == 0 {
		fail(ErrCoordinatorNotAvailable)
		return
	}
	answer(&strandpb.Response{Body: &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{
		NodeId: uint64(lead), Address: c.peerAddress(lead), Partition: p,
	}}})
}

// handleTxnInitProducerID gives the transactional id its producer id at a
// new epoch (engine/txn's InitProducerID), taking a block of producer ids
// from the metadata group first when the coordinator has none left.
func (c *Core) handleTxnInitProducerID(req *strandpb.TxnInitProducerIdRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	fail := c.txnFail(answer)
	maxMs := int32(min(c.txnConfig().MaxTimeout.Milliseconds(), math.MaxInt32))
	if ms := req.GetTransactionTimeoutMs(); ms < 1 || ms > maxMs {
		fail(fmt.Errorf("%w: transaction.timeout.ms %d, want 1..%d (transaction.max.timeout.ms)", txn.ErrInvalidTimeout, ms, maxMs))
		return
	}
	g, co, err := c.txnCoordinatorOf(req.GetTransactionalId())
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_InitProducerId{InitProducerId: &strandpb.TxnInitProducerId{
		TransactionalId: req.GetTransactionalId(), TimeoutMs: req.GetTransactionTimeoutMs(), MaxTimeoutMs: maxMs, Expected: req.GetExpected(),
	}}}
	c.proposeTxnInit(g, co, cmd, true, answer)
}

// proposeTxnInit proposes an InitProducerId; refused for want of producer
// ids, it refills the pool and proposes once more when refill is set.
func (c *Core) proposeTxnInit(g *group, co *txnsvc.Coordinator, cmd *strandpb.TxnCommand, refill bool, answer func(*strandpb.Response)) {
	fail := c.txnFail(answer)
	c.proposeTxn(g, co, cmd, func(a txnsvc.Applied) {
		switch {
		case a.Err != nil:
			fail(a.Err)
		case errors.Is(a.Res.Err, txn.ErrProducerIDsNeeded) && refill:
			c.refillProducerIDs(g, co, func(err error) {
				if err != nil {
					fail(fmt.Errorf("%w: %v", txn.ErrProducerIDsNeeded, err))
					return
				}
				c.proposeTxnInit(g, co, cmd, false, answer)
			})
		case a.Res.Err != nil:
			if a.Res.Fenced {
				c.driveMarkers(g, co) // the fenced transaction's abort markers
			}
			fail(a.Res.Err)
		default:
			answer(&strandpb.Response{Body: &strandpb.Response_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdResponse{
				ProducerId: a.Res.Producer.ID, ProducerEpoch: int32(a.Res.Producer.Epoch)}}})
		}
	})
}

// handleAddPartitionsToTxn adds partitions to the producer's transaction.
// Every partition must exist and be no coordinator's internal one; when
// one is not, nothing is added (the others are answered "not attempted").
func (c *Core) handleAddPartitionsToTxn(req *strandpb.AddPartitionsToTxnRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	fail := c.txnFail(answer)
	if c.cfg.Txn.Markers == nil {
		fail(ErrTransactionsNotEnabled)
		return
	}
	tps := txnPartitions(req.GetTopics())
	if len(tps) == 0 || len(tps) > handlePartitionsMax {
		fail(fmt.Errorf("%w: %d partitions, want 1..%d", ErrInvalidRequest, len(tps), handlePartitionsMax))
		return
	}
	g, co, err := c.txnCoordinatorOf(req.GetTransactionalId())
	if err != nil {
		fail(err)
		return
	}
	if results, ok := c.checkTxnPartitions(tps); !ok {
		answer(&strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{Results: results}}})
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_AddPartitions{AddPartitions: &strandpb.TxnAddPartitions{
		TransactionalId: req.GetTransactionalId(), Producer: req.GetProducer(), Topics: req.GetTopics(),
	}}}
	c.proposeTxn(g, co, cmd, func(a txnsvc.Applied) {
		if err := txnOutcome(a); err != nil {
			fail(err)
			return
		}
		results := make([]*strandpb.AddPartitionsToTxnResponse_Result, len(tps))
		for i, tp := range tps {
			results[i] = &strandpb.AddPartitionsToTxnResponse_Result{Topic: tp.Topic, Partition: tp.Partition}
		}
		answer(&strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{Results: results}}})
	})
}

// checkTxnPartitions answers, per partition, UNKNOWN_TOPIC_OR_PARTITION
// for one this node's applied metadata does not hold (or an internal one)
// and "not attempted" for the others; ok when every partition exists.
func (c *Core) checkTxnPartitions(tps []txn.TopicPartition) ([]*strandpb.AddPartitionsToTxnResponse_Result, bool) {
	results := make([]*strandpb.AddPartitionsToTxnResponse_Result, len(tps))
	ok := true
	for i, tp := range tps {
		results[i] = &strandpb.AddPartitionsToTxnResponse_Result{Topic: tp.Topic, Partition: tp.Partition}
		t, exists := c.meta.meta.Topic(tp.Topic)
		if !exists || isCoordinatorTopic(tp.Topic) || tp.Partition < 0 || tp.Partition >= t.Partitions() {
			ok = false
			results[i].Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
				Message: fmt.Sprintf("node: no partition %s/%d to add to a transaction", tp.Topic, tp.Partition)}
		}
	}
	for _, r := range results {
		if r.Error == nil && !ok {
			r.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
				Message: "node: not attempted: another partition of the request does not exist"}
		}
	}
	return results, ok
}

// handleVerifyPartitions is AddPartitionsToTxn's verify-only form: a read
// answering, per partition, nil only when it is in the producer's open
// transaction.
func (c *Core) handleVerifyPartitions(req *strandpb.AddPartitionsToTxnRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	fail := c.txnFail(answer)
	tps := txnPartitions(req.GetTopics())
	epoch := req.GetProducer().GetEpoch()
	if len(tps) == 0 || len(tps) > handlePartitionsMax || req.GetProducer() == nil || epoch < -1 || epoch > math.MaxInt16 {
		fail(fmt.Errorf("%w: %d partitions and a producer, want 1..%d and an epoch", ErrInvalidRequest, len(tps), handlePartitionsMax))
		return
	}
	p := txn.Producer{ID: req.GetProducer().GetProducerId(), Epoch: int16(epoch)}
	c.readTxn(req.GetTransactionalId(), func(s *txn.State) {
		errs := s.Verify(req.GetTransactionalId(), p, tps)
		results := make([]*strandpb.AddPartitionsToTxnResponse_Result, len(tps))
		for i, tp := range tps {
			results[i] = &strandpb.AddPartitionsToTxnResponse_Result{Topic: tp.Topic, Partition: tp.Partition, Error: c.wireError(errs[i], 0, nil)}
		}
		answer(&strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{Results: results}}})
	}, fail)
}

// handleAddOffsetsToTxn adds a group's offsets to the transaction.
func (c *Core) handleAddOffsetsToTxn(req *strandpb.AddOffsetsToTxnRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	fail := c.txnFail(answer)
	if c.cfg.Txn.Markers == nil {
		fail(ErrTransactionsNotEnabled)
		return
	}
	g, co, err := c.txnCoordinatorOf(req.GetTransactionalId())
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_AddOffsets{AddOffsets: &strandpb.TxnAddOffsets{
		TransactionalId: req.GetTransactionalId(), Producer: req.GetProducer(), Group: req.GetGroup(),
	}}}
	c.proposeTxn(g, co, cmd, func(a txnsvc.Applied) {
		if err := txnOutcome(a); err != nil {
			fail(err)
			return
		}
		answer(&strandpb.Response{Body: &strandpb.Response_AddOffsetsToTxn{AddOffsetsToTxn: &strandpb.AddOffsetsToTxnResponse{}}})
	})
}

// handleEndTxn decides the open transaction (PrepareCommit or
// PrepareAbort, durable in the coordinator's log), answers the epoch of
// the next transaction and starts writing the markers; the transaction
// completes once the marker writer reported every one.
func (c *Core) handleEndTxn(req *strandpb.EndTxnRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	fail := c.txnFail(answer)
	if c.cfg.Txn.Markers == nil {
		fail(ErrTransactionsNotEnabled)
		return
	}
	g, co, err := c.txnCoordinatorOf(req.GetTransactionalId())
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_EndTxn{EndTxn: &strandpb.TxnEnd{
		TransactionalId: req.GetTransactionalId(), Producer: req.GetProducer(), Commit: req.GetCommit(),
		KeepEpoch: req.GetKeepEpoch(),
	}}}
	c.bugMarkersBeforeDecision(co, req) // planted-bug hook (-tags simbugs)
	c.proposeTxn(g, co, cmd, func(a txnsvc.Applied) {
		if err := txnOutcome(a); err != nil {
			fail(err)
			return
		}
		if a.Res.Prepared {
			c.driveMarkers(g, co)
		}
		answer(&strandpb.Response{Body: &strandpb.Response_EndTxn{EndTxn: &strandpb.EndTxnResponse{
			ProducerId: a.Res.Producer.ID, ProducerEpoch: int32(a.Res.Producer.Epoch)}}})
	})
}

// txnOutcome is an applied command's error: the proposal's, else the
// state machine's refusal.
func txnOutcome(a txnsvc.Applied) error {
	if a.Err != nil {
		return a.Err
	}
	return a.Res.Err
}

// readTxn runs serve with the coordinator's state of the transactional id
// once a read index of its partition is applied and read back, or fail.
func (c *Core) readTxn(id string, serve func(*txn.State), fail func(error)) {
	g, co, err := c.txnCoordinatorOf(id)
	if err != nil {
		fail(err)
		return
	}
	c.readTxnCoordinator(g, co, serve, fail)
}

// readTxnCoordinator is readTxn for a known replica and coordinator; serve
// and fail run as completions.
func (c *Core) readTxnCoordinator(g *group, co *txnsvc.Coordinator, serve func(*txn.State), fail func(error)) {
	c.readPartition(g.tp, func(g *group) {
		c.completions = append(c.completions, func() {
			if c.txn.coords[g.tp] != co {
				fail(ErrNotCoordinator)
				return
			}
			if err := c.txnCatchUp(g, co); err != nil {
				fail(err)
				return
			}
			serve(co.State)
		})
	}, func(err error, _ NodeID) {
		c.completions = append(c.completions, func() { fail(err) })
	})
}

// handleListTransactions lists the transactional ids of every
// __strand_transactions partition this node leads (a client asks every
// node and merges), filtered by state.
func (c *Core) handleListTransactions(req *strandpb.ListTransactionsRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	resp := &strandpb.ListTransactionsResponse{}
	var reps []*group
	var cos []*txnsvc.Coordinator
	for _, g := range c.groups {
		if g.tp.Topic != TransactionsTopic || g.part == nil {
			continue
		}
		if co, err := c.txnCoordinatorFor(g); err == nil {
			reps, cos = append(reps, g), append(cos, co)
		}
	}
	pending := len(reps) + 1
	finish := func() {
		if pending--; pending == 0 {
			slices.SortFunc(resp.Transactions, func(a, b *strandpb.ListTransactionsResponse_Transaction) int {
				return cmpStr(a.GetTransactionalId(), b.GetTransactionalId())
			})
			answer(&strandpb.Response{Body: &strandpb.Response_ListTransactions{ListTransactions: resp}})
		}
	}
	for i, g := range reps {
		c.readTxnCoordinator(g, cos[i], func(s *txn.State) {
			for _, id := range s.IDs() {
				d, _ := s.Describe(id)
				if len(req.GetStates()) == 0 || slices.Contains(req.GetStates(), d.State.String()) {
					resp.Transactions = append(resp.Transactions, &strandpb.ListTransactionsResponse_Transaction{
						TransactionalId: id, ProducerId: d.Producer.ID, State: d.State.String()})
				}
			}
			finish()
		}, func(error) { finish() })
	}
	finish()
}

// handleDescribeTransactions describes each id on its coordinator (this
// node); an id coordinated elsewhere is answered NOT_COORDINATOR.
func (c *Core) handleDescribeTransactions(req *strandpb.DescribeTransactionsRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	if !c.checkCount(len(req.GetTransactionalIds()), answer) {
		return
	}
	ids := req.GetTransactionalIds()
	out := make([]*strandpb.DescribeTransactionsResponse_Transaction, len(ids))
	pending := len(ids) + 1
	finish := func() {
		if pending--; pending == 0 {
			answer(&strandpb.Response{Body: &strandpb.Response_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsResponse{Transactions: out}}})
		}
	}
	for i, id := range ids {
		c.readTxn(id, func(s *txn.State) {
			d, err := s.Describe(id)
			if err != nil {
				out[i] = &strandpb.DescribeTransactionsResponse_Transaction{TransactionalId: id, Error: c.groupError(err)}
			} else {
				out[i] = txnToWire(d)
			}
			finish()
		}, func(err error) {
			out[i] = &strandpb.DescribeTransactionsResponse_Transaction{TransactionalId: id, Error: c.groupError(err)}
			finish()
		})
	}
	finish()
}

// txnToWire converts a described transactional id.
func txnToWire(d txn.Description) *strandpb.DescribeTransactionsResponse_Transaction {
	out := &strandpb.DescribeTransactionsResponse_Transaction{
		TransactionalId: d.ID, State: d.State.String(), ProducerId: d.Producer.ID, ProducerEpoch: int32(d.Producer.Epoch),
		TimeoutMs: d.TimeoutMs, StartMs: d.TxnStartMs, Groups: d.Groups,
	}
	for _, p := range d.Partitions {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != p.Topic {
			out.Topics = append(out.Topics, &strandpb.TxnPartitions{Topic: p.Topic})
		}
		last := out.Topics[len(out.Topics)-1]
		last.Partitions = append(last.Partitions, p.Partition)
	}
	return out
}

// txnPartitions flattens per-topic lists.
func txnPartitions(in []*strandpb.TxnPartitions) []txn.TopicPartition {
	var out []txn.TopicPartition
	for _, tp := range in {
		for _, p := range tp.GetPartitions() {
			out = append(out, txn.TopicPartition{Topic: tp.GetTopic(), Partition: p})
		}
	}
	return out
}
