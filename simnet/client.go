package simnet

import (
	"errors"
	"time"

	"github.com/strandlog/strand/node"
)

// sendAttempt sends the current operation's next attempt to the node the
// client believes leads the partition, and arms the attempt's timeout.
func (c *client) sendAttempt() {
	op := c.op
	op.attempts++
	c.wl.nextReqID++
	op.attemptID = c.wl.nextReqID
	if op.attempts == 1 {
		op.firstReqID = op.attemptID
		op.start = c.w.now()
	}
	op.attemptStart = c.w.now()
	req := &request{id: op.attemptID, client: c, produce: op.produce}
	if op.produce == nil {
		req.fetch = &node.FetchRequest{
			TopicPartition: c.w.specs[op.partition].TopicPartition,
			Offset:         op.fetchOffset,
			MaxBytes:       fetchBytesMax,
		}
		op.hwmFloor = c.wl.maxHwm[op.partition]
		poll := c.kind == kindConsumer || c.kind == kindDrain
		op.hist = c.w.hist.fetchCall(c.index, op.partition, op.fetchOffset, poll, c.w.now())
	}
	target := c.leaders[op.partition]
	if !c.w.net.lost() {
		c.w.sched.schedule(c.w.net.clientDelay(c.index, target),
			&event{kind: evClientRequest, node: target, from: c.index, request: req})
	}
	c.setTimer(c.w.opts.ClientTimeout, timerTimeout)
}

// onReply handles a node's reply. A late success of an earlier attempt of
// the current produce still acknowledges it; other stale replies are void.
func (c *client) onReply(r *reply) {
	op := c.op
	if c.done || op == nil || r.requestID < op.firstReqID {
		return
	}
	if r.requestID != op.attemptID && (op.produce == nil || r.err != nil) {
		return
	}
	if op.produce != nil {
		c.onProduceReply(r)
	} else {
		c.onFetchReply(r)
	}
}

// onProduceReply completes or retries a produce.
func (c *client) onProduceReply(r *reply) {
	op := c.op
	p := op.partition
	switch {
	case r.err == nil:
		c.seqs[p]++
		c.leaders[p] = r.node
		c.w.hist.produceOK(op.hist, r.offset, c.w.now())
		c.w.stats.ProducesOK++
		c.finishOp()
	case !c.idempotent:
		// Not idempotent: a resend could write the record twice, so an
		// attempt whose fate is unknown ends the operation.
		c.followHint(p, r)
		op.unknown = op.unknown || !errors.Is(r.err, node.ErrUnknownTopicPartition)
		c.giveUp()
	case errors.Is(r.err, node.ErrNotLeader) || errors.Is(r.err, node.ErrUnknownTopicPartition):
		// ErrNotLeader may come after proposing (leadership lost while
		// waiting): the entry may still commit.
		op.unknown = op.unknown || errors.Is(r.err, node.ErrNotLeader)
		c.followHint(p, r)
		c.retry()
	case errors.Is(r.err, node.ErrOutOfOrderSequence) || errors.Is(r.err, node.ErrProducerFenced):
		// The node lost track of this producer's sequence: this attempt
		// was not written, but earlier ones may have been.
		op.unknown = true
		c.giveUp()
	case errors.Is(r.err, node.ErrRecordTooLarge) || errors.Is(r.err, node.ErrInvalidRequest):
		c.w.fail("produce of a valid small batch refused by node %d: %v", r.node+1, r.err)
		c.giveUp()
	default: // ErrTimeout, ErrStopped, anything else: the outcome is unknown
		op.unknown = true
		c.pickOtherNode(p, r.node)
		c.retry()
	}
}

// onFetchReply records a successful fetch or retries a failed one.
func (c *client) onFetchReply(r *reply) {
	op := c.op
	p := op.partition
	switch {
	case r.err == nil:
		c.leaders[p] = r.node
		c.recordFetch(r)
		c.finishOp()
	case errors.Is(r.err, node.ErrOffsetOutOfRange):
		// The model judges it against the hwm and log start reported.
		c.w.hist.fetchOutOfRange(op.hist, r, c.w.now())
		if op.fetchOffset <= op.hwmFloor {
			c.w.fail("fetch %d@%d out of range at node %d although a fetch returned hwm %d before it was sent",
				p, op.fetchOffset, r.node+1, op.hwmFloor)
		}
		c.finishOp()
	case errors.Is(r.err, errBadBatch):
		c.w.hist.fetchFail(op.hist, c.w.now())
		c.w.fail("fetch %d@%d from node %d: %v", p, op.fetchOffset, r.node+1, r.err)
		c.finishOp()
	case errors.Is(r.err, node.ErrNotLeader) || errors.Is(r.err, node.ErrUnknownTopicPartition):
		c.w.hist.fetchFail(op.hist, c.w.now())
		c.followHint(p, r)
		c.retry()
	default:
		c.w.hist.fetchFail(op.hist, c.w.now())
		c.pickOtherNode(p, r.node)
		c.retry()
	}
}

// recordFetch checks and records a successful fetch and moves positions.
func (c *client) recordFetch(r *reply) {
	op := c.op
	p := op.partition
	if r.hwm < op.hwmFloor {
		c.w.fail("partition %d: fetch from node %d returned hwm %d after a fetch had returned %d",
			p, r.node+1, r.hwm, op.hwmFloor)
	}
	c.wl.maxHwm[p] = max(c.wl.maxHwm[p], r.hwm)
	c.w.hist.fetchOK(op.hist, r, c.w.now())
	c.w.stats.FetchesOK++
	if c.kind == kindConsumer || c.kind == kindDrain {
		if n := len(r.records); n > 0 {
			c.positions[p] = r.records[n-1].offset + 1
		}
	}
	if c.kind == kindDrain {
		c.drainReply = r
	}
}

// onTimeout: the attempt's outcome is unknown; try another replica.
func (c *client) onTimeout() {
	op := c.op
	if op.produce != nil {
		op.unknown = true
	} else {
		c.w.hist.fetchFail(op.hist, c.w.now())
	}
	c.pickOtherNode(op.partition, c.leaders[op.partition])
	if op.produce != nil && !c.idempotent {
		c.giveUp()
		return
	}
	c.retry()
}

// followHint aims the next attempt at the leader a node named, or at a
// random replica when it named none (or itself).
func (c *client) followHint(p int, r *reply) {
	if r.leader != 0 && int(r.leader)-1 != r.node && int(r.leader) <= len(c.w.nodes) {
		c.leaders[p] = int(r.leader) - 1
		c.op.hinted = true
		return
	}
	c.pickOtherNode(p, r.node)
}

// pickOtherNode aims the next attempt at a random replica other than not.
func (c *client) pickOtherNode(p, not int) {
	replicas := c.w.specs[p].Replicas
	i := int(replicas[c.rng.IntN(len(replicas))]) - 1
	if i == not {
		i = int(replicas[(c.rng.IntN(len(replicas)-1)+1+indexOf(replicas, not))%len(replicas)]) - 1
	}
	c.leaders[p] = i
	c.op.hinted = false
}

// indexOf is the position of node index n in replicas (0 when absent).
func indexOf(replicas []node.NodeID, n int) int {
	for i, r := range replicas {
		if int(r)-1 == n {
			return i
		}
	}
	return 0
}

// retry arms the backoff before the next attempt, or gives up.
func (c *client) retry() {
	op := c.op
	mayGiveUp := !(c.w.opts.Profile == Liveness && c.wl.healed)
	if mayGiveUp && (op.attempts >= attemptsMax || c.w.now()-op.start > c.w.opts.OpDeadline) {
		c.giveUp()
		return
	}
	if op.hinted {
		c.setTimer(time.Millisecond, timerRetry)
		return
	}
	d := 5 * time.Millisecond << min(op.attempts-1, 5)
	c.setTimer(d/2+time.Duration(c.rng.Int64N(int64(d/2)+1)), timerRetry)
}

// giveUp abandons the current operation: a produce that may have taken
// effect stays open (indefinite), one that surely did not fails; either
// way the producer takes a new identity.
func (c *client) giveUp() {
	op := c.op
	if op.produce != nil {
		c.w.stats.ProducesLost++
		if op.unknown {
			c.w.hist.produceUnknown(op.hist, c.w.now())
		} else {
			c.w.hist.produceFail(op.hist, c.w.now())
		}
		c.newProducerID()
	}
	c.finishOp()
	// Something is wrong (no leader yet, a fault): pause before the next
	// operation rather than abandon it too.
	c.setTimer(10*time.Millisecond+time.Duration(c.rng.Int64N(int64(40*time.Millisecond))), timerNextOp)
}

// finishOp ends the current operation, checks the liveness bound and
// schedules the next one.
func (c *client) finishOp() {
	c.w.checker.onOpDone(c.op.start, c.w.now())
	c.op = nil
	c.setTimer(c.thinkTime(), timerNextOp)
}

// nextDrainOp reads every partition to its high-water mark, one after
// another, then ends the run.
func (c *client) nextDrainOp() {
	if r := c.drainReply; r != nil {
		c.drainReply = nil
		if len(r.records) == 0 && c.positions[c.drainPartition] >= r.hwm {
			c.drainPartition++
		}
	}
	if c.drainPartition >= len(c.positions) {
		c.done = true
		c.wl.clientDone(c)
		return
	}
	p := c.drainPartition
	c.op = &clientOp{partition: p, fetchOffset: c.positions[p]}
	c.sendAttempt()
}
