package simnet

import (
	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// The atomic-commit order, checked white-box (issue 23): no partition may
// apply a transaction marker before the coordinator's decision for it
// (PrepareCommit or PrepareAbort at the marker's producer id and epoch)
// is committed in the coordinator's log, and the marker carries the
// decided outcome. A marker written early is invisible to readers while
// the decision that follows agrees with it, and turns into an aborted or
// partial read only in the rare run where the decision differs (the
// coordinator lost its lead, a fence or a timeout decided otherwise).
//
// txnDecisions replays every __strand_transactions partition's committed
// commands, in index order as the first replica applies them (checker
// onApply), through a reference engine/txn State, and records each
// decision; every TXN_MARKER entry's first application is checked against
// them.
type txnDecisions struct {
	w       *world
	refs    map[int32]*txnDecisionRef // by __strand_transactions partition
	decided map[txn.Producer]bool     // marker producer id and epoch → commit
	broken  bool                      // a gap in a replay: no more checks
}

// txnDecisionRef is one coordinator partition's reference replay.
type txnDecisionRef struct {
	state   *txn.State
	applied uint64
}

func newTxnDecisions(w *world) *txnDecisions {
	return &txnDecisions{w: w, refs: map[int32]*txnDecisionRef{}, decided: map[txn.Producer]bool{}}
}

// onFirstApply takes the first application of index of partition tp.
func (d *txnDecisions) onFirstApply(tp node.TopicPartition, index uint64, data []byte) {
	if d == nil || d.broken {
		return
	}
	if tp.Topic == node.TransactionsTopic {
		d.replay(tp.Partition, index, data)
		return
	}
	if len(data) == 0 {
		return
	}
	e, err := engine.DecodeEntry(data)
	if err != nil || e.Kind != strandpb.EntryKind_ENTRY_KIND_TXN_MARKER {
		return
	}
	d.w.coverage.Inc("txn/marker-order-checked")
	p := txn.Producer{ID: e.ProducerID, Epoch: int16(e.ProducerEpoch)}
	commit, ok := d.decided[p]
	switch {
	case !ok:
		d.w.fail("txn: %s/%d index %d: a commit=%v marker of producer %d epoch %d before the coordinator decided the transaction",
			tp.Topic, tp.Partition, index, e.Commit, p.ID, p.Epoch)
	case commit != e.Commit:
		d.w.fail("txn: %s/%d index %d: a commit=%v marker of producer %d epoch %d, the coordinator decided commit=%v",
			tp.Topic, tp.Partition, index, e.Commit, p.ID, p.Epoch, commit)
	}
}

// replay applies one committed entry of a coordinator partition to its
// reference and records the decisions it made.
func (d *txnDecisions) replay(partition int32, index uint64, data []byte) {
	r := d.refs[partition]
	if r == nil {
		r = &txnDecisionRef{state: txn.New()}
		d.refs[partition] = r
	}
	if index != r.applied+1 {
		d.broken = true // cannot be: first applications come in index order
		d.w.coverage.Inc("txn/marker-order-gap")
		return
	}
	r.applied = index
	if len(data) == 0 {
		return
	}
	e, err := engine.DecodeEntry(data)
	if err != nil || len(e.Batch) == 0 {
		return
	}
	it := recordbatch.NewIterator(e.Batch)
	for it.Next() {
		cmd, err := txn.DecodeCommand(it.Record().Value)
		if err != nil {
			continue // skipped by the coordinator as well
		}
		if res := r.state.Apply(cmd); res.Prepared {
			d.noteDecision(r.state, commandID(cmd))
		}
	}
}

// noteDecision records id's decision, just prepared.
func (d *txnDecisions) noteDecision(s *txn.State, id string) {
	desc, err := s.Describe(id)
	if err != nil || (desc.State != txn.PrepareCommit && desc.State != txn.PrepareAbort) {
		return // decided with nothing to mark: completed at once
	}
	d.decided[desc.Producer] = desc.State == txn.PrepareCommit
}

// commandID is the transactional id a deciding command names.
func commandID(cmd *strandpb.TxnCommand) string {
	switch b := cmd.GetBody().(type) {
	case *strandpb.TxnCommand_InitProducerId:
		return b.InitProducerId.GetTransactionalId()
	case *strandpb.TxnCommand_EndTxn:
		return b.EndTxn.GetTransactionalId()
	case *strandpb.TxnCommand_TimeoutAbort:
		return b.TimeoutAbort.GetTransactionalId()
	}
	return ""
}
