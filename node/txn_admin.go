package node

import (
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// The operators' side of the transaction coordinators: the counters and
// gauges /metrics shows (strand txn abort is txnsvc.Service's
// AbortTransaction).

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
