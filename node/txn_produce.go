package node

import (
	"fmt"
	"math"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// produceTransactional is produce for a batch of a producer's open
// transaction (KIP-890): when the partition has no transaction of the
// producer open at the batch's epoch, the leader first verifies with the
// transactional id's coordinator that the partition was added to the
// producer's transaction (AddPartitionsToTxn verify-only, read locally
// when this node coordinates the id), then proposes a TXN_BEGIN and the
// write right behind it. A refused verification refuses the write (nothing
// proposed); a begin the partition refuses makes it refuse the write too,
// so no write lands outside a transaction the coordinator knows.
func (c *Core) produceTransactional(req ProduceRequest, done func(ProduceResult)) {
	fail := func(err error) { c.completeProduce(done, ProduceResult{Err: err, BaseOffset: -1}) }
	switch {
	case c.cfg.Txn.Markers == nil:
		fail(ErrTransactionsNotEnabled)
		return
	case req.ProducerID < 0 || req.ProducerEpoch < 0 || req.ProducerEpoch > math.MaxInt16 || req.TransactionalID == "" ||
		len(req.TransactionalID) > txn.NameMax:
		fail(fmt.Errorf("%w: a transactional write needs a producer id, an epoch and a transactional id of 1..%d bytes",
			ErrInvalidRequest, txn.NameMax))
		return
	}
	g := c.byTP[req.TopicPartition]
	if g == nil {
		c.produce(req, done) // refused there, as any produce
		return
	}
	if _, _, leading := g.leadership(); !leading {
		c.produce(req, done)
		return
	}
	if epoch, open := g.part.TxnOpen(req.ProducerID); open && epoch == req.ProducerEpoch {
		c.produce(req, done)
		return
	}
	if _, err := validateBatch(c.bugBatchCRC(req.Batch)); err != nil {
		// A damaged batch is refused before the verification: its answer
		// (a timeout when the coordinator is away) must not hide the
		// damage, and no TXN_BEGIN goes in for a write that will not.
		fail(err)
		return
	}
	p := txn.Producer{ID: req.ProducerID, Epoch: int16(req.ProducerEpoch)}
	c.verifyTxnPartition(req.TransactionalID, p, req.TopicPartition, func(err error) {
		if err != nil {
			fail(err)
			return
		}
		g := c.byTP[req.TopicPartition] // the replica now (a deleted topic's is gone)
		if g == nil {
			c.produce(req, done)
			return
		}
		now := c.cfg.Clock.Realtime().UnixMilli()
		c.proposeEntry(g, func(id uint64) []byte {
			return engine.EncodeTxnBeginEntry(nil, now, id, req.ProducerID, req.ProducerEpoch)
		}, func(ProduceResult) {}) // its refusal refuses the write behind it
		c.produce(req, done)
	})
}

// verifyTxnPartition asks the coordinator of id whether tp is in
// producer p's open transaction: done(nil) when it is.
func (c *Core) verifyTxnPartition(id string, p txn.Producer, tp TopicPartition, done func(error)) {
	tps := []txn.TopicPartition{{Topic: tp.Topic, Partition: tp.Partition}}
	t, ok := c.meta.meta.Topic(TransactionsTopic)
	if !ok {
		c.completions = append(c.completions, func() {
			done(fmt.Errorf("%w: no transaction coordinator yet for %q", ErrCoordinatorNotAvailable, id))
		})
		return
	}
	lead, _ := c.partitionLeader(t, TxnPartition(id, t.Partitions()))
	if lead == c.cfg.ID || lead == 0 {
		c.readTxn(id, func(s *txn.State) { done(verified(s.Verify(id, p, tps)[0])) }, done)
		return
	}
	req := &strandpb.Request{Body: &strandpb.Request_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnRequest{
		TransactionalId: id, Producer: &strandpb.TxnProducer{ProducerId: p.ID, Epoch: int32(p.Epoch)},
		Topics: []*strandpb.TxnPartitions{{Topic: tp.Topic, Partitions: []int32{tp.Partition}}}, VerifyOnly: true,
	}}}
	c.callPeer(lead, req, func(resp *strandpb.Response, err error) {
		if err != nil {
			done(err)
			return
		}
		if e := resp.GetError(); e != nil {
			done(wireRefusal(e))
			return
		}
		rs := resp.GetAddPartitionsToTxn().GetResults()
		if len(rs) != 1 || rs[0].GetTopic() != tp.Topic || rs[0].GetPartition() != tp.Partition {
			done(fmt.Errorf("%w: the coordinator answered a verification with %v", ErrCoordinatorNotAvailable, rs))
			return
		}
		done(verified(wireRefusal(rs[0].GetError())))
	})
}

// verified is a verification's refusal as the write's: a partition not
// in the transaction (or no transaction open) is INVALID_TXN_STATE; an
// older epoch stays PRODUCER_FENCED; a coordinator that moved stays
// retriable.
func verified(err error) error {
	if err == nil {
		return nil
	}
	if strandpb.CodeOf(err) == strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE {
		return fmt.Errorf("%w: %w", ErrInvalidTxnState, err)
	}
	return fmt.Errorf("node: the coordinator refused the transactional write: %w", err)
}

// wireRefusal is a peer's wire error as an error carrying its code (nil
// for none).
func wireRefusal(e *strandpb.Error) error {
	if e == nil || e.GetCode() == strandpb.ErrorCode_ERROR_CODE_NONE {
		return nil
	}
	return strandpb.NewSentinel(e.GetCode(), e.GetMessage())
}
