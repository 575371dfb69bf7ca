package node

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/recordbatch"
)

// produce appends req.Batch to its partition through raft. done is queued
// to run once, on the Core's goroutine, at the flush that ends this call's
// caller (HandleAs) or a later Process or Tick:
//
//   - definite failures (unknown partition, not leader, invalid or too
//     large batch, ErrBusy) complete at once: nothing was proposed;
//   - AcksNone completes once proposed, BaseOffset -1;
//   - AcksLeader completes once the leader's log holds the entry durably
//     (synced), BaseOffset -1;
//   - AcksAll completes once the entry is applied, with its base offset, or
//     with the original base offset for an idempotent duplicate.
//
// ErrNotLeader after proposing (leadership lost while waiting) and
// ErrTimeout are indefinite: the entry may still commit.
func (c *Core) produce(req ProduceRequest, done func(ProduceResult)) {
	g, lead, term, info, err := c.admitProduce(req)
	if err != nil {
		c.completeProduce(done, ProduceResult{Err: err, BaseOffset: -1, Leader: lead})
		return
	}
	c.nextProposalID++
	id := c.nextProposalID
	producer := engine.Producer{ID: req.ProducerID, Epoch: req.ProducerEpoch, BaseSequence: req.BaseSequence}
	encode := engine.EncodeProduceEntry
	if req.Transactional {
		encode = engine.EncodeTransactionalProduceEntry
	}
	data := encode(nil, c.cfg.Clock.Realtime().UnixMilli(), id, producer, req.Batch)
	c.touch(g)
	if err := g.raw.Propose(data); err != nil {
		// Dropped: leadership moved (or a transfer), or the uncommitted
		// tail is full while still leading.
		lead, _, leading := g.leadership()
		err = ErrNotLeader
		if leading {
			err = ErrBusy
		}
		c.completeProduce(done, ProduceResult{Err: err, BaseOffset: -1, Leader: lead})
		return
	}
	if req.Acks == AcksNone || c.bugAckLeaderEarly(req.Acks) {
		c.completeProduce(done, ProduceResult{BaseOffset: -1, Leader: lead})
		return
	}
	w := &produceWait{
		proposalID: id, term: term, acks: req.Acks, records: info.RecordCount,
		deadline: c.ticks + uint64(c.cfg.RequestTimeoutTicks), done: done,
		proposedAt: c.cfg.Clock.Monotonic(),
	}
	g.produces = append(g.produces, w)
	c.noteWait(w.deadline)
	g.byProposal[id] = w
	g.unindexed++
	g.live++
	c.bugAckEarly(g, w, done)
}

// admitProduce finds req's replica and checks, in order, that this node
// runs, hosts and leads the partition, that the batch is valid and within
// the topic's limits, and that the replica and the disk can take it. A
// refusal is a definite failure (nothing was proposed), with the leader
// this node knows once it hosts the partition.
func (c *Core) admitProduce(req ProduceRequest) (g *group, lead NodeID, term uint64, info recordbatch.Info, err error) {
	if c.closed {
		return nil, 0, 0, info, ErrStopped
	}
	g = c.byTP[req.TopicPartition]
	if g == nil {
		return nil, 0, 0, info, ErrUnknownTopicPartition
	}
	lead, term, leading := g.leadership()
	if !leading {
		return g, lead, term, info, ErrNotLeader
	}
	info, err = validateBatch(c.bugBatchCRC(req.Batch))
	if err == nil {
		err = c.checkMaxMessageBytes(g, req.Batch)
	}
	if err == nil {
		err = c.checkKeyed(g, req.Batch)
	}
	if err == nil {
		err = c.roomFor(g)
	}
	if err == nil && c.tierRecovering(g) {
		err = ErrTierRecovering // tier_recover.go
	}
	return g, lead, term, info, err
}

// roomFor refuses a new proposal on g, led here, while the replica has
// PendingRequestsMax in flight, the disk is full or stalled: the checks
// every write (a client's batch, a transaction marker) passes last.
func (c *Core) roomFor(g *group) error {
	switch {
	case g.live >= c.cfg.PendingRequestsMax:
		return ErrBusy
	case c.space.full:
		return ErrNotEnoughSpace
	case c.stall.stalled:
		return ErrDiskStalled
	}
	return nil
}

// validateBatch checks a batch before proposing it: a bad batch is a
// definite failure and never reaches the log.
func validateBatch(batch []byte) (recordbatch.Info, error) {
	if len(batch) > recordbatch.BatchBytesMax {
		return recordbatch.Info{}, fmt.Errorf("%w: batch of %d bytes", ErrRecordTooLarge, len(batch))
	}
	info, err := recordbatch.Validate(batch)
	switch {
	case err == nil:
		return info, nil
	case errors.Is(err, recordbatch.ErrRecordTooLarge), errors.Is(err, recordbatch.ErrBatchTooLarge):
		return info, fmt.Errorf("%w: %w", ErrRecordTooLarge, err)
	case errors.Is(err, recordbatch.ErrCorrupt):
		return info, fmt.Errorf("%w: %w: %w", ErrCorruptBatch, ErrInvalidRequest, err)
	default:
		return info, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
}

// checkMaxMessageBytes refuses a batch longer, as sent, than its topic's
// max.message.bytes when that is below the default (the default is the
// record limit validateBatch enforces, with the batch framing on top, so
// it stays as it was).
func (c *Core) checkMaxMessageBytes(g *group, batch []byte) error {
	if c.meta == nil {
		return nil
	}
	id, cfg, ok := c.meta.meta.TopicConfig(g.tp.Topic)
	if !ok || id != g.topicID || cfg.MaxMessageBytes >= metadata.MaxMessageBytesDefault ||
		len(batch) <= int(cfg.MaxMessageBytes) {
		return nil
	}
	return fmt.Errorf("%w: batch of %d bytes over the topic's max.message.bytes %d", ErrRecordTooLarge,
		len(batch), cfg.MaxMessageBytes)
}

// checkKeyed refuses a batch holding a record without a key when its
// topic compacts, as Kafka does (LogValidator: INVALID_RECORD): compaction
// keeps the latest value per key, and a keyless record has none.
func (c *Core) checkKeyed(g *group, batch []byte) error {
	if c.meta == nil {
		return nil
	}
	id, cfg, ok := c.meta.meta.TopicConfig(g.tp.Topic)
	if !ok || id != g.topicID || !cfg.CleanupPolicy.Compacts() {
		return nil
	}
	return refuseKeyless(g.tp, batch)
}

// refuseKeyless is ErrInvalidRecord naming the first record of batch (a
// batch validateBatch accepted) without a key, or nil.
func refuseKeyless(tp TopicPartition, batch []byte) error {
	it := recordbatch.NewIterator(batch)
	for it.Next() {
		if it.Record().Key == nil {
			return fmt.Errorf("%w: Compacted topic cannot accept message without key in topic partition %s-%d (record %d of the batch)",
				ErrInvalidRecord, tp.Topic, tp.Partition, it.Index())
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

// produceResult turns the engine's outcome for an applied entry into the
// client's.
func produceResult(res engine.Result, leader NodeID) ProduceResult {
	out := ProduceResult{BaseOffset: -1, Leader: leader}
	switch {
	case res.Err == nil:
		out.BaseOffset = res.BaseOffset
		out.Duplicate = res.Duplicate
	case errors.Is(res.Err, engine.ErrOutOfOrderSequence):
		out.Err = fmt.Errorf("%w: %w", ErrOutOfOrderSequence, res.Err)
	case errors.Is(res.Err, engine.ErrUnknownProducer):
		out.Err = fmt.Errorf("%w: %w", ErrUnknownProducer, res.Err)
	case errors.Is(res.Err, engine.ErrProducerFenced):
		out.Err = fmt.Errorf("%w: %w", ErrProducerFenced, res.Err)
	case errors.Is(res.Err, engine.ErrInvalidTxnState):
		out.Err = fmt.Errorf("%w: %w", ErrInvalidTxnState, res.Err)
	case errors.Is(res.Err, engine.ErrCoordinatorFenced):
		out.Err = fmt.Errorf("%w: %w", ErrCoordinatorFenced, res.Err)
	default:
		out.Err = fmt.Errorf("%w: %w", ErrInvalidRequest, res.Err)
	}
	return out
}

// finishProduce stops tracking w and, unless already acknowledged,
// completes it with result.
func (c *Core) finishProduce(g *group, w *produceWait, result ProduceResult) {
	if w.finished {
		panic(fmt.Sprintf("node: produce %d finished twice", w.proposalID))
	}
	w.finished = true
	g.live--
	if w.index == 0 {
		delete(g.byProposal, w.proposalID)
		g.unindexed--
	} else if g.byIndex[w.index] == w {
		delete(g.byIndex, w.index)
	}
	if c.bugAckedEarly(g, w) {
		return
	}
	c.completeProduce(w.done, result)
	w.done = nil
}

// completeProduce queues done(result) to run at the end of the current call.
func (c *Core) completeProduce(done func(ProduceResult), result ProduceResult) {
	c.completions = append(c.completions, func() { done(result) })
}

// flush runs the queued completions; callbacks may call back into the Core,
// whose own completions join the same queue.
func (c *Core) flush() {
	if c.flushing {
		return
	}
	c.flushing = true
	defer func() { c.flushing = false }()
	for i := 0; i < len(c.completions); i++ {
		fn := c.completions[i]
		c.completions[i] = nil
		fn()
	}
	c.completions = c.completions[:0]
}

// indexProposals records the raft index of this node's proposals found in
// entries, which the leader is about to persist. It returns the acks=1
// waits among them, to complete once the entries are synced.
func (c *Core) indexProposals(g *group, entries []*raftpb.Entry, acked []*produceWait) []*produceWait {
	if g.unindexed == 0 {
		return acked
	}
	for _, e := range entries {
		if len(e.GetData()) == 0 || e.GetType() != raftpb.EntryType_EntryNormal {
			continue
		}
		fields, err := engine.DecodeEntry(e.GetData())
		if err != nil {
			continue
		}
		w := g.byProposal[fields.ProposalID]
		if w == nil || w.term != e.GetTerm() {
			continue
		}
		delete(g.byProposal, w.proposalID)
		g.unindexed--
		w.index = e.GetIndex()
		if w.acks == AcksLeader {
			acked = append(acked, w)
			continue
		}
		if old := g.byIndex[w.index]; old != nil {
			// A stale wait for an entry overwritten at the same index.
			c.finishProduce(g, old, ProduceResult{Err: ErrNotLeader, BaseOffset: -1})
		}
		g.byIndex[w.index] = w
	}
	return acked
}
