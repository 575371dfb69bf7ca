package node

import (
	"errors"
	"fmt"
	"math"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/proto/strandpb"
)

// Errors of the partition side of transactions (engine/transactions.go),
// with their wire codes.
var (
	// ErrInvalidTxnState: a transactional write without a transaction
	// begun on the partition, a plain write while the producer's
	// transaction is open, or a partition the coordinator does not have
	// in the producer's transaction (KIP-890 verification).
	ErrInvalidTxnState = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE, "node: invalid transaction state")
	// ErrCoordinatorFenced: a marker from a coordinator epoch older than
	// the partition's last marker for the producer.
	ErrCoordinatorFenced = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_TRANSACTION_COORDINATOR_FENCED,
		"node: transaction coordinator fenced")
)

// PartitionMarkers is the TxnMarkerWriter of a real cluster (production
// and the simulator): a partition marker becomes a TXN_MARKER entry of the
// partition, proposed here when this node leads it and otherwise asked of
// its leader (WriteTxnMarkers, txn_peer.go). A marker the partition
// already took is answered done, so the coordinator's re-asks (after an
// error, a timeout or a fail-over) are harmless.
type PartitionMarkers struct{}

// WriteTxnMarker implements TxnMarkerWriter. A group's marker is a
// GroupTxnMarker command on the group's coordinator (txn_offsets.go).
func (PartitionMarkers) WriteTxnMarker(c *Core, m TxnMarker, done func(error)) {
	if m.Group != "" {
		c.writeGroupMarker(m, done)
		return
	}
	c.writeTxnMarker(m, done)
}

// engineMarker is m as the engine's marker.
func engineMarker(m TxnMarker) engine.Marker {
	return engine.Marker{ProducerID: m.Producer.ID, ProducerEpoch: int32(m.Producer.Epoch),
		CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Commit}
}

// coordinatorEpoch is the coordinator epoch of markers written while
// leading in term: the term itself, which never decreases for the
// transactional id's partition (hence for its producer id).
func coordinatorEpoch(term uint64) int32 { return int32(min(term, math.MaxInt32)) }

// writeTxnMarker writes one partition marker: here when this node leads
// the partition, else through its leader.
func (c *Core) writeTxnMarker(m TxnMarker, done func(error)) {
	fail := func(err error) { c.completions = append(c.completions, func() { done(err) }) }
	tp := m.Partition
	if g := c.byTP[tp]; g != nil {
		if _, _, leading := g.leadership(); leading {
			c.writeMarkerHere(g, engineMarker(m), m.KeptEpoch, done)
			return
		}
	}
	t, ok := c.meta.meta.Topic(tp.Topic)
	if !ok || tp.Partition < 0 || tp.Partition >= t.Partitions() {
		c.confirmMarkerPartitionGone(tp, func(gone bool) {
			if gone {
				done(nil) // deleted: no reader is left to see the transaction there
				return
			}
			done(fmt.Errorf("%w: %s/%d for a transaction marker", ErrUnknownTopicPartition, tp.Topic, tp.Partition))
		})
		return
	}
	lead, _ := c.partitionLeader(t, tp.Partition)
	if lead == 0 || lead == c.cfg.ID {
		fail(fmt.Errorf("%w: %s/%d has no leader to write a transaction marker", ErrNotLeader, tp.Topic, tp.Partition))
		return
	}
	req := &strandpb.Request{Body: &strandpb.Request_WriteTxnMarkers{WriteTxnMarkers: &strandpb.WriteTxnMarkersRequest{
		Markers: []*strandpb.WriteTxnMarkersRequest_Marker{{Topic: tp.Topic, Partition: tp.Partition, ProducerId: m.Producer.ID,
			ProducerEpoch: int32(m.Producer.Epoch), CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Commit,
			KeptEpoch: m.KeptEpoch}}}}}
	c.callPeer(lead, req, func(resp *strandpb.Response, err error) { done(markerAnswer(resp, err, tp)) })
}

// confirmMarkerPartitionGone calls done (as a completion) with true once
// a ReadIndex on the metadata group shows tp absent from the applied
// metadata: its topic deleted (or re-created with fewer partitions). A
// marker for it is then done, as Kafka's coordinator drops a deleted
// partition from the transaction; retrying it forever would hold the
// transactional id in CONCURRENT_TRANSACTIONS. This node's metadata alone
// proves nothing (it may lag the create another node used, and the
// marker of a committed transaction must not be skipped), hence the read.
func (c *Core) confirmMarkerPartitionGone(tp TopicPartition, done func(gone bool)) {
	answer := func(gone bool) { c.completions = append(c.completions, func() { done(gone) }) }
	lead, term := c.metaLeader()
	if lead == 0 || c.meta.live >= c.cfg.PendingRequestsMax {
		answer(false)
		return
	}
	c.readIndex(c.meta.group, term, func(*group) {
		t, ok := c.meta.meta.Topic(tp.Topic)
		answer(!ok || tp.Partition < 0 || tp.Partition >= t.Partitions())
	}, func(error, NodeID) { answer(false) })
}

// markerAnswer is the outcome of a WriteTxnMarkers call for one marker.
func markerAnswer(resp *strandpb.Response, err error, tp TopicPartition) error {
	if err != nil {
		return err
	}
	if e := resp.GetError(); e != nil {
		return fmt.Errorf("node: marker for %s/%d refused by its leader: %s: %s", tp.Topic, tp.Partition, e.GetCode().Name(), e.GetMessage())
	}
	rs := resp.GetWriteTxnMarkers().GetResults()
	if len(rs) != 1 || rs[0].GetTopic() != tp.Topic || rs[0].GetPartition() != tp.Partition {
		return fmt.Errorf("node: marker for %s/%d answered %v", tp.Topic, tp.Partition, rs)
	}
	if e := rs[0].GetError(); e != nil {
		return fmt.Errorf("node: marker for %s/%d: %s: %s", tp.Topic, tp.Partition, e.GetCode().Name(), e.GetMessage())
	}
	return nil
}

// writeMarkerHere proposes m on g, which this node leads, and calls done
// once applied. A marker refused as fenced by a newer producer epoch is
// done: only a marker of a later epoch or a later transaction's begin
// (which the coordinator allows only once every marker of this one was
// written, and the partition refuses while another transaction is open)
// moves the epoch on, so the transaction is closed here.
//
// A marker carries its transaction's epoch + 1 (KIP-890), so one whose
// epoch is that of the transaction open here belongs to an earlier
// transaction, already ended here (a late duplicate of a request): it is
// done, and never proposed, where it would end the later transaction.
// Not so with keptEpoch (a transactions v1 client, whose transactions all
// run at one epoch): its marker ends the transaction open at its epoch,
// and a late duplicate cannot be told from it (Kafka's v1 window, which
// KIP-890's bump closes).
func (c *Core) writeMarkerHere(g *group, m engine.Marker, keptEpoch bool, done func(error)) {
	if epoch, open := g.part.TxnOpen(m.ProducerID); open && epoch == m.ProducerEpoch && !keptEpoch {
		c.completions = append(c.completions, func() { done(nil) })
		return
	}
	now := c.cfg.Clock.Realtime().UnixMilli()
	c.proposeEntry(g, func(id uint64) []byte { return engine.EncodeTxnMarkerEntry(nil, now, id, m) }, func(res ProduceResult) {
		if errors.Is(res.Err, ErrProducerFenced) {
			res.Err = nil
		}
		done(res.Err)
	})
}

// handleWriteTxnMarkers serves a coordinator's WriteTxnMarkers (a peer's
// request): each marker is proposed on its partition, which this node
// must lead, and answered once applied.
func (c *Core) handleWriteTxnMarkers(req *strandpb.WriteTxnMarkersRequest, answer func(*strandpb.Response)) {
	ms := req.GetMarkers()
	if len(ms) == 0 || len(ms) > handlePartitionsMax {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, fmt.Sprintf("node: %d markers, want 1..%d", len(ms), handlePartitionsMax)))
		return
	}
	results := make([]*strandpb.WriteTxnMarkersResponse_Result, len(ms))
	pending := len(ms)
	for i, m := range ms {
		tp := TopicPartition{Topic: m.GetTopic(), Partition: m.GetPartition()}
		finish := func(err error) {
			lead := NodeID(0)
			if g := c.byTP[tp]; g != nil {
				lead, _, _ = g.leadership()
			}
			results[i] = &strandpb.WriteTxnMarkersResponse_Result{Topic: tp.Topic, Partition: tp.Partition, Error: c.wireError(err, lead, &tp)}
			if pending--; pending == 0 {
				answer(&strandpb.Response{Body: &strandpb.Response_WriteTxnMarkers{WriteTxnMarkers: &strandpb.WriteTxnMarkersResponse{Results: results}}})
			}
		}
		if m.GetGroup() != "" {
			c.writeGroupMarkerHere(m, func(err error) {
				results[i] = &strandpb.WriteTxnMarkersResponse_Result{Error: c.groupError(err)}
				if pending--; pending == 0 {
					answer(&strandpb.Response{Body: &strandpb.Response_WriteTxnMarkers{WriteTxnMarkers: &strandpb.WriteTxnMarkersResponse{Results: results}}})
				}
			})
			continue
		}
		g := c.byTP[tp]
		if g == nil || isCoordinatorTopic(tp.Topic) || m.GetProducerId() < 0 || m.GetProducerEpoch() < 0 || m.GetProducerEpoch() > math.MaxInt16 {
			c.completions = append(c.completions, func() {
				finish(fmt.Errorf("%w: no partition %s/%d here for a marker", ErrUnknownTopicPartition, tp.Topic, tp.Partition))
			})
			continue
		}
		c.writeMarkerHere(g, engine.Marker{ProducerID: m.GetProducerId(), ProducerEpoch: m.GetProducerEpoch(),
			CoordinatorEpoch: m.GetCoordinatorEpoch(), Commit: m.GetCommit()}, m.GetKeptEpoch(), finish)
	}
}

// proposeEntry proposes the entry encode builds (given its proposal id)
// on g, which must be led here, and calls done once it applied (acks=all)
// with the engine's outcome, or with the refusal that kept it out: the
// path of produce without a client batch (transaction markers and
// begins).
func (c *Core) proposeEntry(g *group, encode func(proposalID uint64) []byte, done func(ProduceResult)) {
	lead, term, leading := g.leadership()
	var err error
	switch {
	case c.closed:
		err = ErrStopped
	case !leading:
		err = ErrNotLeader
	case c.tierRecovering(g):
		err = ErrTierRecovering // tier_recover.go: a begin would keep the restore out
	default:
		err = c.roomFor(g)
	}
	if err != nil {
		c.completeProduce(done, ProduceResult{Err: err, BaseOffset: -1, Leader: lead})
		return
	}
	c.nextProposalID++
	id := c.nextProposalID
	c.touch(g)
	if err := g.raw.Propose(encode(id)); err != nil {
		lead, _, leading = g.leadership()
		err = ErrNotLeader
		if leading {
			err = ErrBusy
		}
		c.completeProduce(done, ProduceResult{Err: err, BaseOffset: -1, Leader: lead})
		return
	}
	w := &produceWait{proposalID: id, term: term, acks: AcksAll, deadline: c.ticks + uint64(c.cfg.RequestTimeoutTicks),
		done: done, proposedAt: c.cfg.Clock.Monotonic()}
	g.produces = append(g.produces, w)
	c.noteWait(w.deadline)
	g.byProposal[id] = w
	g.unindexed++
	g.live++
}
