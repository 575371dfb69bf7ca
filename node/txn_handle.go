package node

import (
	"fmt"
	"math"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/txnsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// handleTxnRequest serves the transaction coordinator's requests
// (InitProducerId with a transactional id, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, ListTransactions, DescribeTransactions,
// AbortTransaction, and the partition leaders' DescribeProducers); false
// when req is none of them. Package txnsvc serves most of them (Service
// over txnServiceHost); writes are answered once their command is
// applied and read back by the coordinator, reads after a ReadIndex on
// the id's partition, so both are linearizable.
func (c *Core) handleTxnRequest(req *strandpb.Request, answer func(*strandpb.Response)) bool {
	svc := c.txnService()
	switch body := req.GetBody().(type) {
	case *strandpb.Request_TxnInitProducerId:
		func() {
			defer c.flush()
			svc.InitProducerID(body.TxnInitProducerId, answer)
		}()
	case *strandpb.Request_AddPartitionsToTxn:
		if body.AddPartitionsToTxn.GetVerifyOnly() {
			c.handleVerifyPartitions(body.AddPartitionsToTxn, answer)
		} else {
			func() {
				defer c.flush()
				svc.AddPartitions(body.AddPartitionsToTxn, answer)
			}()
		}
	case *strandpb.Request_AddOffsetsToTxn:
		if body.AddOffsetsToTxn.GetVerifyOnly() {
			c.handleVerifyGroup(body.AddOffsetsToTxn, answer) // txn_offsets.go
		} else {
			func() {
				defer c.flush()
				svc.AddOffsets(body.AddOffsetsToTxn, answer)
			}()
		}
	case *strandpb.Request_EndTxn:
		func() {
			defer c.flush()
			svc.EndTxn(body.EndTxn, answer)
		}()
	case *strandpb.Request_ListTransactions:
		func() {
			defer c.flush()
			svc.ListTransactions(body.ListTransactions, answer)
		}()
	case *strandpb.Request_DescribeTransactions:
		func() {
			defer c.flush()
			if c.checkCount(len(body.DescribeTransactions.GetTransactionalIds()), answer) {
				svc.DescribeTransactions(body.DescribeTransactions, answer)
			}
		}()
	case *strandpb.Request_AbortTransaction:
		func() {
			defer c.flush()
			svc.AbortTransaction(body.AbortTransaction, answer)
		}()
	case *strandpb.Request_DescribeProducers:
		c.handleDescribeProducers(body.DescribeProducers, answer) // txn_producers.go
	case *strandpb.Request_WriteTxnMarkers:
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: write_txn_markers is sent node to node only"))
	default:
		return false
	}
	return true
}

// handleVerifyPartitions is AddPartitionsToTxn's verify-only form
// (txnsvc.Service.VerifyPartitions), from a client or a partition leader
// (txn_peer.go).
func (c *Core) handleVerifyPartitions(req *strandpb.AddPartitionsToTxnRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	c.txnService().VerifyPartitions(req, answer)
}

// txnService is package txnsvc's request handling over this node.
func (c *Core) txnService() txnsvc.Service {
	return txnsvc.Service{
		Host: txnServiceHost{c}, MaxTimeoutMs: int32(min(c.txnConfig().MaxTimeout.Milliseconds(), math.MaxInt32)),
		PartitionsMax: handlePartitionsMax, MarkersEnabled: c.cfg.Txn.Markers != nil,
		ErrInvalidRequest: ErrInvalidRequest, ErrTransactionsNotEnabled: ErrTransactionsNotEnabled,
	}
}

// txnServiceHost is txnsvc.Host over the Core.
type txnServiceHost struct{ c *Core }

func (h txnServiceHost) CoordinatorOf(id string) (*txnsvc.Coordinator, txnsvc.Replica, error) {
	g, co, err := h.c.txnCoordinatorOf(id)
	if err != nil {
		return nil, nil, err
	}
	return co, txnReplica{h.c, g, co}, nil
}

func (h txnServiceHost) Error(err error) *strandpb.Error     { return h.c.groupError(err) }
func (h txnServiceHost) WireError(err error) *strandpb.Error { return h.c.wireError(err, 0, nil) }

func (h txnServiceHost) Metadata() *metadata.State {
	if h.c.meta == nil {
		return nil
	}
	return h.c.meta.meta
}

// LedCoordinators lists the coordinators of every __strand_transactions
// replica this node leads, in group order (txnsvc.Host).
func (h txnServiceHost) LedCoordinators() []txnsvc.Replica {
	var out []txnsvc.Replica
	for _, g := range h.c.groups {
		if g.tp.Topic != TransactionsTopic || g.part == nil {
			continue
		}
		if co, err := h.c.txnCoordinatorFor(g); err == nil {
			out = append(out, txnReplica{h.c, g, co})
		}
	}
	return out
}

// txnReplica is txnsvc.Replica: a coordinator's replica g, which this node
// leads.
type txnReplica struct {
	c  *Core
	g  *group
	co *txnsvc.Coordinator
}

func (r txnReplica) Propose(cmd *strandpb.TxnCommand, done func(txnsvc.Applied)) {
	r.c.proposeTxn(r.g, r.co, cmd, done)
}

func (r txnReplica) Read(serve func(*txn.State), fail func(error)) {
	r.c.readTxnCoordinator(r.g, r.co, serve, fail)
}

func (r txnReplica) DriveMarkers() { r.c.driveMarkers(r.g, r.co) }

func (r txnReplica) RefillProducerIDs(done func(error)) { r.c.refillProducerIDs(r.g, r.co, done) }

func (r txnReplica) HookBeforeDecision(co *txnsvc.Coordinator, req *strandpb.EndTxnRequest) {
	r.c.bugMarkersBeforeDecision(co, req)
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
