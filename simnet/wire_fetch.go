package simnet

import (
	"fmt"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// nextPoll starts a random reader's next operation.
func (c *wireClient) nextPoll() {
	if !c.ww.w.work.take() {
		c.finished = true
		c.ww.clientDone()
		return
	}
	p := c.nextPartition
	c.nextPartition = (p + 1) % len(c.positions)
	p = c.usable(p, "")
	c.attempts = 0
	c.opStart = c.ww.w.now()
	c.fetching = true
	if c.kind == kindReader {
		p = c.usable(c.rng.IntN(len(c.positions)), "")
		switch r := c.rng.IntN(readerMix); {
		case r < describeShare:
			c.describe()
			return
		case r < describeShare+listShare:
			c.listOffsets(c.nextQuery(p))
			return
		}
		c.readOffset = c.rng.Int64N(c.ww.w.work.maxHwm[p] + 1)
	}
	c.fetch(p)
}

// drainNext reads the partitions one after another to their ends, then
// ends the run.
func (c *wireClient) drainNext() {
	if c.nextPartition >= len(c.positions) {
		if c.ww.awaitMoves(c.drainNext) || c.ww.awaitJoins(c.drainNext) || c.ww.awaitOperator(c.drainNext) { // wire_moves.go, wire_joins.go, operator_verify.go
			return
		}
		c.ww.w.work.drained = true
		c.ww.w.stop()
		return
	}
	c.attempts = 0
	c.opStart = c.ww.w.now()
	c.fetching = true
	c.fetch(c.nextPartition)
}

// fetch sends one fetch attempt for partition p from the client's
// position, recorded as a poll.
func (c *wireClient) fetch(p int) {
	w := c.ww.w
	c.attempts++
	topicID, inc, ok := c.topicID(p)
	if !ok {
		c.refreshTopic(p)
		c.retryFetch(p)
		return
	}
	c.seekIncarnation(p, inc)
	offset := c.positions[p]
	if c.kind == kindReader {
		offset = c.readOffset
	}
	floor := w.work.floor(p, inc)
	op := w.hist.fetchCall(c.index, p, inc, offset, c.kind != kindReader, w.now())
	budget := int32(fetchBytesMax)
	if c.rng.IntN(3) == 0 {
		// Often smaller than one batch: the first batch is served whole.
		budget = int32(1 + c.rng.IntN(fetchBytesMax/8))
	}
	req := &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
		MaxBytes: budget,
		Partitions: []*strandpb.FetchRequest_Partition{{Topic: c.ww.tps[p].Topic, Partition: c.ww.tps[p].Partition, Offset: offset,
			MaxBytes: budget, TopicId: topicID}},
	}}}
	target := c.leaderOf(p)
	if c.kind == kindReader && c.rng.IntN(2) == 0 {
		// Random readers ask any replica half the time: a follower, a
		// deposed leader or one still catching up must refuse, or serve
		// exactly what the leader would (nothing else is linearizable).
		target = c.randomNode()
		w.stats.ReadsAnyReplica++
	}
	var call *wireCall
	call = c.ww.call(c, target, req, func(resp *strandpb.Response, err error) {
		var part *strandpb.FetchResponse_Partition
		if err == nil {
			err = wireErr(resp.GetError())
		}
		if err == nil {
			ps := resp.GetFetch().GetPartitions()
			if len(ps) != 1 {
				w.fail("fetch answered %d partitions for one", len(ps))
				err = &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST}
			} else {
				part = ps[0]
				err = wireErr(part.GetError())
			}
		}
		if err == nil && call.respDamaged {
			if r := decodeWireFetch(offset, part); r.err != nil {
				// The batch CRC caught the damage: refuse the answer and
				// ask again, as a client must.
				w.coverage.Inc("event/corrupt-fetch-refused")
				err = &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH, Message: r.err.Error()}
			}
		}
		c.onFetch(p, inc, offset, floor, target, op, part, err)
		if err == nil {
			c.coverFetch(offset, budget, part)
		}
	})
}

// onFetch records a fetch attempt's outcome and moves on or retries.
func (c *wireClient) onFetch(p, inc int, offset, floor int64, target int, op *histOp,
	part *strandpb.FetchResponse_Partition, err error) {
	w := c.ww.w
	var e *clientlib.Error
	switch {
	case err == nil:
		r := decodeWireFetch(offset, part)
		r.node = target
		if r.err != nil {
			w.hist.fetchFail(op, w.now())
			w.fail("fetch %d@%d from node %d: %v", p, offset, target+1, r.err)
			c.fetchDone(p, nil)
			return
		}
		if r.hwm < floor {
			w.fail("partition %d: fetch from node %d returned hwm %d after a fetch had returned %d", p, target+1, r.hwm, floor)
		}
		c.ww.checkProduced(p, target, r)
		w.work.raise(p, inc, r.hwm)
		w.hist.fetchOK(op, r, w.now())
		w.stats.FetchesOK++
		if n := len(r.records); n > 0 && c.kind != kindReader && inc == c.positionInc[p] {
			c.positions[p] = r.records[n-1].offset + 1
		}
		c.fetchDone(p, r)
	case asWireError(err, &e) && e.Code == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
		w.hist.fetchOutOfRange(op, &reply{hwm: e.HighWatermark, logStart: e.LogStartOffset}, w.now())
		below := offset < e.LogStartOffset
		if offset <= floor && !below {
			w.fail("fetch %d@%d out of range at node %d although a fetch returned hwm %d before it was sent",
				p, offset, target+1, floor)
		}
		if below {
			// Retention moved the log start past the position (R22): the
			// consumer decides, explicitly, to go on from the log start.
			w.coverage.Inc("event/fetch-below-log-start")
			if c.kind != kindReader {
				c.positions[p] = e.LogStartOffset
			}
		}
		c.fetchDone(p, nil)
	default:
		w.hist.fetchFail(op, w.now())
		a := c.react(p, err)
		if code := errCode(err); !a.Retriable && code != strandpb.ErrorCode_ERROR_CODE_NONE &&
			code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
			w.fail("fetch %d@%d refused by node %d: %v", p, offset, target+1, err)
		}
		c.retryFetch(p)
	}
}

// retryFetch tries p's fetch again after a backoff, or gives the
// operation up after its deadline (never the drain, nor after the heal).
func (c *wireClient) retryFetch(p int) {
	w := c.ww.w
	mayGiveUp := c.kind != kindDrain && !w.work.healed
	if mayGiveUp && w.now()-c.opStart > w.opts.OpDeadline {
		c.fetchDone(p, nil)
		return
	}
	c.after(wireBackoff.Delay(c.attempts, c.rng), func() { c.fetch(p) })
}

// fetchDone ends a fetch operation: a consumer polls on after a pause,
// the drain moves to the next partition once it read to the end.
func (c *wireClient) fetchDone(p int, r *reply) {
	c.fetching = false
	c.ww.w.checker.onOpDone(c.opStart, c.ww.w.now())
	if c.kind == kindDrain {
		if r != nil && len(r.records) == 0 && c.positions[p] >= r.hwm {
			c.ww.drained = append(c.ww.drained, c.ww.w.hist.key(p, c.positionInc[p]))
			c.nextPartition++
		}
		c.after(0, c.drainNext)
		return
	}
	c.after(c.thinkTime(), c.nextPoll)
}

// decodeWireFetch decodes a fetched partition's batches into a reply,
// keeping the records from offset on (a batch is served whole).
func decodeWireFetch(offset int64, part *strandpb.FetchResponse_Partition) *reply {
	r := &reply{hwm: part.GetHighWatermark(), logStart: part.GetLogStartOffset()}
	for _, b := range part.GetBatches() {
		next := b.GetBaseOffset()
		err := recordbatch.Decode(b.GetRecords(), func(_ int, rec recordbatch.Record) error {
			if next >= offset {
				r.records = append(r.records, fetchedRecord{offset: next, key: string(rec.Key), value: string(rec.Value)})
			}
			next++
			return nil
		})
		if err != nil {
			r.err = fmt.Errorf("%w: fetched batch at %d: %v", errBadBatch, b.GetBaseOffset(), err)
			r.records = nil
			return r
		}
	}
	return r
}

// coverFetch counts a served fetch that started inside a batch and one
// whose first batch exceeded the fetch's byte budget.
func (c *wireClient) coverFetch(offset int64, budget int32, part *strandpb.FetchResponse_Partition) {
	bs := part.GetBatches()
	if len(bs) == 0 {
		return
	}
	if bs[0].GetBaseOffset() < offset {
		c.ww.w.coverage.Inc("event/fetch-inside-batch")
	}
	if len(bs[0].GetRecords()) > int(budget) {
		c.ww.w.coverage.Inc("event/fetch-over-budget")
	}
}
