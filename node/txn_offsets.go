package node

import (
	"fmt"
	"math"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// Offsets in a transaction (KIP-447): TxnOffsetCommit is taken by the
// group's coordinator only once the transactional id's coordinator
// confirmed that the group is in the producer's open transaction
// (AddOffsetsToTxn; read locally when this node coordinates the id, else
// asked with AddOffsetsToTxn verify_only, node to node). The offsets wait
// in the group's log as the producer's pending ones (engine/groups
// TxnCommit) until the transaction's group marker (a GroupTxnMarker
// command, proposed on the group's partition here or by its leader through
// WriteTxnMarkers) commits or aborts them.

// txnOffsetCommit serves a TxnOffsetCommit; done runs once its command
// applied (nil: pending in the transaction).
func (c *Core) txnOffsetCommit(req *strandpb.TxnOffsetCommitRequest, done func(*strandpb.Error)) {
	defer c.flush()
	fail := func(err error) { done(c.groupError(err)) }
	commit, p := req.GetCommit(), req.GetProducer()
	switch {
	case c.cfg.Txn.Markers == nil:
		fail(ErrTransactionsNotEnabled)
		return
	case p == nil || p.GetProducerId() < 0 || p.GetEpoch() < 0 || p.GetEpoch() > math.MaxInt16 || req.GetTransactionalId() == "" ||
		len(req.GetTransactionalId()) > txn.NameMax || len(commit.GetOffsets()) > handlePartitionsMax:
		fail(fmt.Errorf("%w: a transactional offset commit needs a producer, a transactional id of 1..%d bytes and at most %d offsets",
			ErrInvalidRequest, txn.NameMax, handlePartitionsMax))
		return
	}
	if _, _, err := c.coordinatorOf(commit.GetGroup()); err != nil {
		fail(err)
		return
	}
	stamped, err := c.stampTopicIDs(commit)
	if err != nil {
		fail(err)
		return
	}
	producer := txn.Producer{ID: p.GetProducerId(), Epoch: int16(p.GetEpoch())}
	c.verifyTxnGroup(req.GetTransactionalId(), producer, commit.GetGroup(), func(err error) {
		if err != nil {
			fail(err)
			return
		}
		g, co, err := c.coordinatorOf(commit.GetGroup()) // the coordinator now: it may have moved
		if err != nil {
			fail(err)
			return
		}
		cmd := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_TxnCommit{TxnCommit: &strandpb.GroupTxnCommit{
			ProducerId: producer.ID, ProducerEpoch: int32(producer.Epoch), Commit: stamped, GroupInstanceId: req.GetGroupInstanceId(),
		}}}
		c.proposeGroup(g, co, cmd, func(res groupsvc.Applied) {
			if res.Err != nil {
				fail(res.Err)
				return
			}
			done(nil)
		})
	})
}

// verifyTxnGroup asks the coordinator of id whether group is in producer
// p's open transaction: done(nil) when it is.
func (c *Core) verifyTxnGroup(id string, p txn.Producer, group string, done func(error)) {
	t, ok := c.meta.meta.Topic(TransactionsTopic)
	if !ok {
		c.completions = append(c.completions, func() {
			done(fmt.Errorf("%w: no transaction coordinator yet for %q", ErrCoordinatorNotAvailable, id))
		})
		return
	}
	lead, _ := c.partitionLeader(t, TxnPartition(id, t.Partitions()))
	if lead == c.cfg.ID || lead == 0 {
		c.readTxn(id, func(s *txn.State) { done(verified(s.VerifyGroup(id, p, group))) }, done)
		return
	}
	req := &strandpb.Request{Body: &strandpb.Request_AddOffsetsToTxn{AddOffsetsToTxn: &strandpb.AddOffsetsToTxnRequest{
		TransactionalId: id, Producer: &strandpb.TxnProducer{ProducerId: p.ID, Epoch: int32(p.Epoch)}, Group: group, VerifyOnly: true,
	}}}
	c.callPeer(lead, req, func(resp *strandpb.Response, err error) {
		if err != nil {
			done(err)
			return
		}
		done(verified(wireRefusal(resp.GetError())))
	})
}

// handleVerifyGroup is AddOffsetsToTxn's verify-only form: a read
// answering nil only when the group is in the producer's open
// transaction.
func (c *Core) handleVerifyGroup(req *strandpb.AddOffsetsToTxnRequest, answer func(*strandpb.Response)) {
	defer c.flush()
	fail := c.txnFail(answer)
	epoch := req.GetProducer().GetEpoch()
	if req.GetProducer() == nil || epoch < 0 || epoch > math.MaxInt16 {
		fail(fmt.Errorf("%w: a producer with an epoch", ErrInvalidRequest))
		return
	}
	p := txn.Producer{ID: req.GetProducer().GetProducerId(), Epoch: int16(epoch)}
	c.readTxn(req.GetTransactionalId(), func(s *txn.State) {
		answer(&strandpb.Response{Error: c.wireError(s.VerifyGroup(req.GetTransactionalId(), p, req.GetGroup()), 0, nil),
			Body: &strandpb.Response_AddOffsetsToTxn{AddOffsetsToTxn: &strandpb.AddOffsetsToTxnResponse{}}})
	}, fail)
}

// writeGroupMarker writes one group marker: on the group's coordinator
// when this node leads its partition, else through that partition's
// leader (WriteTxnMarkers). Idempotent: a repeated marker finds nothing
// pending.
func (c *Core) writeGroupMarker(m TxnMarker, done func(error)) {
	fail := func(err error) { c.completions = append(c.completions, func() { done(err) }) }
	t, ok := c.meta.meta.Topic(OffsetsTopic)
	if !ok {
		fail(fmt.Errorf("%w: no %s for the marker of group %q", ErrCoordinatorNotAvailable, OffsetsTopic, m.Group))
		return
	}
	tp := TopicPartition{Topic: OffsetsTopic, Partition: GroupPartition(m.Group, t.Partitions())}
	wm := &strandpb.WriteTxnMarkersRequest_Marker{Group: m.Group, ProducerId: m.Producer.ID, ProducerEpoch: int32(m.Producer.Epoch),
		CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Commit, KeptEpoch: m.KeptEpoch}
	if g := c.byTP[tp]; g != nil {
		if _, _, leading := g.leadership(); leading {
			c.writeGroupMarkerHere(wm, done)
			return
		}
	}
	lead, _ := c.partitionLeader(t, tp.Partition)
	if lead == 0 || lead == c.cfg.ID {
		fail(fmt.Errorf("%w: the coordinator of group %q has no leader to write a transaction marker", ErrNotLeader, m.Group))
		return
	}
	req := &strandpb.Request{Body: &strandpb.Request_WriteTxnMarkers{WriteTxnMarkers: &strandpb.WriteTxnMarkersRequest{
		Markers: []*strandpb.WriteTxnMarkersRequest_Marker{wm}}}}
	c.callPeer(lead, req, func(resp *strandpb.Response, err error) { done(groupMarkerAnswer(resp, err, m.Group)) })
}

// groupMarkerAnswer is the outcome of a WriteTxnMarkers call for one
// group marker.
func groupMarkerAnswer(resp *strandpb.Response, err error, group string) error {
	if err != nil {
		return err
	}
	if e := resp.GetError(); e != nil {
		return fmt.Errorf("node: marker for group %q refused by its coordinator: %s: %s", group, e.GetCode().Name(), e.GetMessage())
	}
	rs := resp.GetWriteTxnMarkers().GetResults()
	if len(rs) != 1 {
		return fmt.Errorf("node: marker for group %q answered %v", group, rs)
	}
	if e := rs[0].GetError(); e != nil {
		return fmt.Errorf("node: marker for group %q: %s: %s", group, e.GetCode().Name(), e.GetMessage())
	}
	return nil
}

// writeGroupMarkerHere proposes a group marker on the group's
// coordinator, which must be this node, and calls done once applied.
func (c *Core) writeGroupMarkerHere(m *strandpb.WriteTxnMarkersRequest_Marker, done func(error)) {
	g, co, err := c.coordinatorOf(m.GetGroup())
	if err != nil {
		c.completions = append(c.completions, func() { done(err) })
		return
	}
	cmd := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_TxnMarker{TxnMarker: &strandpb.GroupTxnMarker{
		Group: m.GetGroup(), ProducerId: m.GetProducerId(), ProducerEpoch: m.GetProducerEpoch(), Commit: m.GetCommit(), KeptEpoch: m.GetKeptEpoch(),
	}}}
	c.proposeGroup(g, co, cmd, func(res groupsvc.Applied) { done(res.Err) })
}
