//go:build simbugs

package node

import (
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/txnsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// bugMarkersBeforeDecision (MarkersBeforeDecision) writes the markers of
// the id's open (or completing) transaction as soon as an EndTxn arrives,
// with the outcome the request asks for, before the decision
// (PrepareCommit or PrepareAbort) is proposed, let alone durable: the
// partitions learn an outcome the coordinator may never decide (the
// request refused as fenced, the proposal lost with its leader, a timeout
// or fencing abort decided instead).
func (c *Core) bugMarkersBeforeDecision(co *txnsvc.Coordinator, req *strandpb.EndTxnRequest) {
	w := c.cfg.Txn.Markers
	if !c.cfg.Bugs.MarkersBeforeDecision || w == nil {
		return
	}
	d, err := co.State.Describe(req.GetTransactionalId())
	if err != nil || (d.State != txn.Ongoing && d.State != txn.PrepareCommit && d.State != txn.PrepareAbort) {
		return
	}
	marker := d.Producer
	if d.State == txn.Ongoing && !req.GetKeepEpoch() {
		marker.Epoch++ // the epoch the decision would bump to
	}
	for _, tp := range d.Partitions {
		m := TxnMarker{TransactionalID: d.ID, Commit: req.GetCommit(), Producer: marker, KeptEpoch: req.GetKeepEpoch(),
			Partition: TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, CoordinatorEpoch: coordinatorEpoch(co.Term)}
		w.WriteTxnMarker(c, m, func(error) {})
	}
}
