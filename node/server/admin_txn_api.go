package server

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/strandlog/strand/node"
)

// apiTransactions is /api/transactions: what an operator needs to see a
// stuck transaction, from the same views as the strand_txn_* and
// strand_partition_lso_lag_records metrics. Counters are summed over the
// nodes this listener serves (strand dev: the cluster; strand serve: its
// node), each node counting the decisions of the coordinators it led
// since it started; Nodes has them per node.
type apiTransactions struct {
	// Open counts transactions open or being completed on the
	// coordinators the served nodes lead; OldestOpenSeconds is the oldest
	// one's age (0: none open).
	Open              int     `json:"open"`
	OldestOpenSeconds float64 `json:"oldest_open_seconds"`
	apiTxnCounts
	Nodes []apiTxnNode `json:"nodes"`
	// HeldBack are the partitions whose last stable offset trails the
	// high-water mark, most held back first (at most heldBackMax):
	// read_committed readers wait there until the transaction ends.
	HeldBack          []apiHeldBack `json:"held_back"`
	HeldBackTruncated bool          `json:"held_back_truncated"`
}

// apiTxnCounts are the coordinators' decision counters (node.Stats).
type apiTxnCounts struct {
	Begun         uint64 `json:"begun"`
	Committed     uint64 `json:"committed"`
	Aborted       uint64 `json:"aborted"`   // every abort: client, timeout, fencing, strand txn abort
	TimedOut      uint64 `json:"timed_out"` // aborts past transaction.timeout.ms
	MarkerRetries uint64 `json:"marker_retries"`
}

// apiTxnNode is one served node's transaction figures.
type apiTxnNode struct {
	Node              uint64  `json:"node"`
	Open              int     `json:"open"`
	OldestOpenSeconds float64 `json:"oldest_open_seconds"`
	apiTxnCounts
}

// apiHeldBack is one partition an open transaction holds back.
type apiHeldBack struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	HighWatermark    int64  `json:"high_watermark"`
	LastStableOffset int64  `json:"last_stable_offset"`
	LSOLag           int64  `json:"lso_lag_records"`
}

// heldBackMax bounds the partitions /api/transactions lists.
const heldBackMax = 256

func (a *Admin) apiTransactions(w http.ResponseWriter, req *http.Request) {
	views, ok := a.servedViews(w, req.Context())
	if !ok {
		return
	}
	writeJSON(w, transactionsOf(views, time.Now()))
}

// transactionsOf builds /api/transactions from views: per-node figures,
// their sums, and the held-back partitions as /api/topics shows them.
func transactionsOf(views []node.AdminView, now time.Time) apiTransactions {
	out := apiTransactions{Nodes: []apiTxnNode{}, HeldBack: []apiHeldBack{}}
	for _, v := range views {
		s := v.Stats
		n := apiTxnNode{Node: uint64(v.ID), Open: v.Txn.Open, apiTxnCounts: apiTxnCounts{Begun: s.TxnBegun,
			Committed: s.TxnCommitted, Aborted: s.TxnAborted, TimedOut: s.TxnTimedOut, MarkerRetries: s.TxnMarkerRetries}}
		if v.Txn.OldestStartMs >= 0 {
			n.OldestOpenSeconds = max(0, now.Sub(time.UnixMilli(v.Txn.OldestStartMs)).Seconds())
		}
		out.Nodes = append(out.Nodes, n)
		out.Open += n.Open
		out.OldestOpenSeconds = max(out.OldestOpenSeconds, n.OldestOpenSeconds)
		out.Begun += n.Begun
		out.Committed += n.Committed
		out.Aborted += n.Aborted
		out.TimedOut += n.TimedOut
		out.MarkerRetries += n.MarkerRetries
	}
	for _, t := range topicsOf(views) {
		for _, p := range t.Partitions {
			if p.LSOLag > 0 {
				out.HeldBack = append(out.HeldBack, apiHeldBack{Topic: t.Name, Partition: p.Partition,
					HighWatermark: p.HighWatermark, LastStableOffset: p.LastStableOffset, LSOLag: p.LSOLag})
			}
		}
	}
	sortHeldBack(out.HeldBack)
	if len(out.HeldBack) > heldBackMax {
		out.HeldBack, out.HeldBackTruncated = out.HeldBack[:heldBackMax], true
	}
	return out
}

// sortHeldBack orders partitions by records held back, most first, then
// by topic and partition.
func sortHeldBack(hb []apiHeldBack) {
	slices.SortStableFunc(hb, func(a, b apiHeldBack) int {
		return cmp.Or(cmp.Compare(b.LSOLag, a.LSOLag), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}
