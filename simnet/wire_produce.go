package simnet

import (
	"fmt"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// nextRecord pushes the producer's next record onto its partition's
// window, while the budget lasts and fewer than wireOutstandingMax records
// are unresolved; the chain restarts when a record completes.
func (c *wireClient) nextRecord() {
	c.recordTimer = false
	if c.budgetDone || c.outstanding >= wireOutstandingMax {
		return
	}
	w := c.ww.w
	if !w.work.take() {
		c.budgetDone = true
		c.checkFinished()
		return
	}
	c.values++
	value := fmt.Sprintf("c%d-%d", c.index, c.values)
	var key []byte
	var p int
	if c.keyed {
		key = fmt.Appendf(nil, "k%d", c.rng.IntN(keySpace))
		p = int(clientlib.KeyPartition(key, int32(len(c.windows))))
	} else {
		p = c.rng.IntN(len(c.windows))
	}
	batch, err := recordbatch.Encode(nil, []recordbatch.Record{{
		TimestampMs: int64(w.now() / time.Millisecond), Key: key, Value: []byte(value),
	}})
	if err != nil {
		panic(fmt.Sprintf("simnet: encode batch: %v", err))
	}
	id := c.windows[p].Push(1, w.now())
	c.batches[p][id] = &wireBatch{bytes: batch, hist: w.hist.produceCall(c.index, p, string(key), value, w.now()),
		start: w.now()}
	c.outstanding++
	c.pump(p)
	c.recordTimer = true
	c.after(c.thinkTime(), c.nextRecord)
}

// pump sends what partition p's window allows, hands out completions, and
// wakes itself when a backoff ends.
func (c *wireClient) pump(p int) {
	win := c.windows[p]
	now := c.ww.w.now()
	win.Expire(now)
	for i := 0; i < wireInFlightMax; i++ {
		a, ok := win.Next(now)
		if !ok {
			break
		}
		c.sendBatch(p, a)
	}
	c.complete(p)
	if win.Len() > 0 && win.InFlight() == 0 {
		// Waiting for a backoff (or a delivery timeout): come back then.
		d := max(win.ReadyAt()-now, time.Millisecond)
		c.after(d, func() { c.pump(p) })
	}
}

// sendBatch sends one attempt of a batch to the partition's leader.
func (c *wireClient) sendBatch(p int, a clientlib.Attempt) {
	b := c.batches[p][a.ID]
	req := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{
		Acks:      -1,
		TimeoutMs: int32(c.ww.w.opts.ClientTimeout / time.Millisecond),
		Partitions: []*strandpb.ProduceRequest_Partition{{Topic: topicName, Partition: int32(p),
			ProducerId: c.producerID, ProducerEpoch: a.Epoch, BaseSequence: a.BaseSequence, Batch: b.bytes}},
	}}}
	target := c.leaderOf(p)
	c.ww.call(c, target, req, func(resp *strandpb.Response, err error) {
		offset := int64(-1)
		if err == nil {
			err = wireErr(resp.GetError())
		}
		if err == nil {
			ps := resp.GetProduce().GetPartitions()
			if len(ps) != 1 {
				c.ww.w.fail("produce answered %d partitions for one", len(ps))
				err = &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST}
			} else if err = wireErr(ps[0].GetError()); err == nil {
				offset = ps[0].GetBaseOffset()
			}
		}
		c.onProduce(p, a, offset, err)
	})
}

// onProduce reports an attempt's outcome to the window and acts on it.
func (c *wireClient) onProduce(p int, a clientlib.Attempt, offset int64, err error) {
	w := c.ww.w
	if err != nil {
		switch errCode(err) {
		case strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE, strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH:
			w.fail("produce of a valid small batch to partition %d refused: %v", p, err)
		}
		c.react(p, err)
	}
	now := w.now()
	c.windows[p].Report(a.ID, offset, err, now, now+wireBackoff.Delay(a.Number, c.rng))
	c.pump(p)
}

// complete records the window's resolved batches in order. A batch that
// failed is recorded indefinite: a NOT_LEADER answer may follow a
// proposal that still commits, so no failure is surely unwritten.
func (c *wireClient) complete(p int) {
	w := c.ww.w
	for {
		done, ok := c.windows[p].Pop()
		if !ok {
			break
		}
		b := c.batches[p][done.ID]
		delete(c.batches[p], done.ID)
		c.outstanding--
		w.checker.onOpDone(b.start, w.now())
		if done.Err == nil {
			w.hist.produceOK(b.hist, done.BaseOffset, w.now())
			w.stats.ProducesOK++
		} else {
			w.hist.produceUnknown(b.hist, w.now())
			w.stats.ProducesLost++
		}
		if !c.recordTimer && !c.budgetDone {
			c.recordTimer = true
			c.after(c.thinkTime(), c.nextRecord)
		}
	}
	c.checkFinished()
}

// checkFinished retires a producer whose budget ended and whose windows
// are empty.
func (c *wireClient) checkFinished() {
	if c.finished || !c.budgetDone || c.outstanding > 0 {
		return
	}
	c.finished = true
	c.ww.clientDone()
}
