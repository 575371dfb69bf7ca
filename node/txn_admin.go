package node

import (
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/txnsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// The operators' side of the transaction coordinators: strand txn abort
// (AbortTransactionRequest) and the counters and gauges /metrics shows.

// handleAbortTransaction aborts the transactional id's open transaction
// for an operator: the coordinator proposes an AdminAbort, which prepares
// the abort at the next epoch (fencing the producer, as a timeout does),
// answers once that decision is applied (durable in its log) and writes
// the abort markers to every partition and group of the transaction.
func (c *Core) handleAbortTransaction(req *strandpb.AbortTransactionRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	fail := c.txnFail(answer)
	if c.cfg.Txn.Markers == nil {
		fail(ErrTransactionsNotEnabled)
		return
	}
	id := req.GetTransactionalId()
	g, co, err := c.txnCoordinatorOf(id)
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.TxnCommand{Body: &strandpb.TxnCommand_AdminAbort{AdminAbort: &strandpb.TxnAdminAbort{TransactionalId: id}}}
	c.proposeTxn(g, co, cmd, func(a txnsvc.Applied) {
		if err := txnOutcome(a); err != nil {
			fail(err)
			return
		}
		out := &strandpb.AbortTransactionResponse{ProducerId: a.Res.Producer.ID, ProducerEpoch: int32(a.Res.Producer.Epoch),
			Already: !a.Res.Prepared}
		if d, err := co.State.Describe(id); err == nil {
			w := txnToWire(d)
			out.Topics, out.Groups = w.Topics, w.Groups
		}
		if a.Res.Prepared {
			c.driveMarkers(g, co)
		}
		answer(&strandpb.Response{Body: &strandpb.Response_AbortTransaction{AbortTransaction: out}})
	})
}

// countTxn counts in Stats what one command this coordinator proposed did
// once applied (wasOpen: its id had a transaction open before): a begun
// transaction, a commit or abort decided (by the client, a timeout, a
// fencing InitProducerId or an operator). Commands replayed by a new
// coordinator are not counted again.
func (c *Core) countTxn(cmd *strandpb.TxnCommand, wasOpen bool, res txn.Result) {
	s := &c.stats
	switch b := cmd.GetBody().(type) {
	case *strandpb.TxnCommand_AddPartitions, *strandpb.TxnCommand_AddOffsets:
		if res.Err == nil && !wasOpen {
			s.TxnBegun++
		}
	case *strandpb.TxnCommand_EndTxn:
		switch {
		case !res.Prepared:
		case b.EndTxn.GetCommit():
			s.TxnCommitted++
		default:
			s.TxnAborted++
		}
	case *strandpb.TxnCommand_TimeoutAbort:
		if res.Prepared {
			s.TxnAborted++
			s.TxnTimedOut++
		}
	case *strandpb.TxnCommand_AdminAbort, *strandpb.TxnCommand_InitProducerId:
		if res.Prepared {
			s.TxnAborted++
		}
	}
}

// TxnView is what the transaction coordinators this node leads hold open
// (AdminView.Txn).
type TxnView struct {
	// Open counts the transactions open or being completed (Ongoing,
	// PrepareCommit, PrepareAbort).
	Open int
	// OldestStartMs is the oldest open transaction's start (wall clock,
	// ms), -1 when none is open.
	OldestStartMs int64
}

// txnView sums the coordinators this node leads.
func (c *Core) txnView() TxnView {
	v := TxnView{OldestStartMs: -1}
	for _, g := range c.groups {
		co := c.txn.coords[g.tp]
		if co == nil || g.tp.Topic != TransactionsTopic {
			continue
		}
		if _, _, leading := g.leadership(); !leading {
			continue
		}
		n, oldest := co.State.OpenCount()
		v.Open += n
		if oldest >= 0 && (v.OldestStartMs < 0 || oldest < v.OldestStartMs) {
			v.OldestStartMs = oldest
		}
	}
	return v
}
