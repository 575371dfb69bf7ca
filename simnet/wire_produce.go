package simnet

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/proto/strandpb"
)

// nextRecord draws the producer's next push (1 to batchMax records, one
// operation of the budget) while the budget lasts and fewer than
// wireOutstandingMax pushes are unresolved, and hands it to clientlib's
// producer (libProduce) or, for the private non-idempotent producer,
// pushes it onto its partition's window; the chain restarts when a push
// completes.
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
	var first string
	p := c.rng.IntN(w.opts.Partitions)
	if c.keyed {
		t := c.ww.topics[c.rng.IntN(len(c.ww.topics))]
		first = "k" + strconv.Itoa(c.rng.IntN(keySpace))
		p = t.first + int(clientlib.KeyPartition([]byte(first), int32(t.partitions)))
	}
	topicID, inc, ok := c.topicID(p)
	if c.ww.recreatable(p) && c.lib == nil && (!ok || !c.bindWindow(p, topicID)) {
		// The main topic instead: an unknown id cannot be named, and a
		// window does not span incarnations.
		t := c.ww.topics[0]
		p = t.first + p%t.partitions
		if c.keyed {
			p = t.first + int(clientlib.KeyPartition([]byte(first), int32(t.partitions)))
		}
		topicID, inc, _ = c.topicID(p)
	}
	if q := c.usable(p, first); q != p {
		p = q
		topicID, inc, _ = c.topicID(p)
	}
	n := 1 + c.rng.IntN(c.batchMax)
	recs := make([]recordbatch.Record, n)
	sent := make([]linearizability.Record, n)
	ts := epochMillis(w.now())
	for i := range recs {
		c.values++
		value := fmt.Sprintf("c%d-%d", c.index, c.values)
		if c.rng.IntN(largeOneIn) == 0 {
			// Larger than a small fetch budget: the node must still serve
			// the batch whole when it is the first.
			value += "-" + strings.Repeat("x", largeMin+c.rng.IntN(largeMin))
			w.coverage.Inc("event/large-record")
		}
		key := first
		if c.keyed && i > 0 {
			key = c.keyFor(p, first)
		}
		recs[i] = recordbatch.Record{TimestampMs: ts, Value: []byte(value)}
		if key != "" {
			recs[i].Key = []byte(key)
		}
		sent[i] = linearizability.Record{Offset: -1, Key: key, Value: value}
		c.ww.produced[value] = key
	}
	if n > 1 {
		w.coverage.Inc("event/multi-record-batch")
	}
	if c.lib != nil {
		c.recordTimer = true
		c.libProduce(p, inc, recs, sent)
		c.after(c.thinkTime(), c.nextRecord)
		return
	}
	batch, err := recordbatch.Encode(nil, recs)
	if err != nil {
		panic(fmt.Sprintf("simnet: encode batch: %v", err))
	}
	// The private producer is the non-idempotent one (the others run on
	// clientlib's, wire_libproducer.go). One batch in five at acks=1 or
	// 0: such a batch has no offset, and once retention deletes it unread
	// it is a credit the log model may place anywhere below the log
	// start, which a third of all batches made too slow to check.
	acks := []int32{-1, -1, -1, -1, -1, -1, -1, -1, 1, 0}[c.rng.IntN(10)]
	if c.ww.recreatable(p) {
		// A deleted incarnation is never drained: its acks=0/1
		// batches would stay open-ended in the log model for good
		// (wire_recreate.go).
		acks = -1
	}
	id := c.windows[p].Push(int32(n), w.now())
	c.batches[p][id] = &wireBatch{bytes: batch, hist: w.hist.produceCall(c.index, p, inc, sent, w.now()),
		start: w.now(), acks: acks, topicID: topicID}
	c.outstanding++
	c.pump(p)
	c.recordTimer = true
	c.after(c.thinkTime(), c.nextRecord)
}

// keyFor draws a key that partition p's key hash owns (a keyed producer
// batches by partition, as real ones do), or fallback (p's) after a few
// misses.
func (c *wireClient) keyFor(p int, fallback string) string {
	for range keyDrawsMax {
		key := "k" + strconv.Itoa(c.rng.IntN(keySpace))
		tp := c.ww.tps[p]
		if clientlib.KeyPartition([]byte(key), int32(c.knownPartitions(c.ww.topicOf(p)))) == tp.Partition {
			return key
		}
	}
	return fallback
}

// pump sends what partition p's window allows, hands out completions, and
// wakes itself when a backoff ends.
func (c *wireClient) pump(p int) {
	win := c.windows[p]
	now := c.ww.w.now()
	win.Expire(now)
	for i := 0; i < c.inFlightMax; i++ {
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
func (c *wireClient) sendBatch(p int, a clientcore.Attempt) {
	b := c.batches[p][a.ID]
	req := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{
		Acks:      b.acks,
		TimeoutMs: int32(c.ww.w.opts.ClientTimeout / time.Millisecond),
		Partitions: []*strandpb.ProduceRequest_Partition{{Topic: c.ww.tps[p].Topic, Partition: c.ww.tps[p].Partition,
			ProducerId: c.producerID, ProducerEpoch: a.Epoch, BaseSequence: a.BaseSequence, Batch: b.bytes,
			TopicId: b.topicID}},
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
func (c *wireClient) onProduce(p int, a clientcore.Attempt, offset int64, err error) {
	w := c.ww.w
	if err != nil {
		switch errCode(err) {
		case strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE, strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST:
			w.fail("produce of a valid small batch to partition %d refused: %v", p, err)
		}
		c.react(p, err)
		if b := c.batches[p][a.ID]; b != nil && !refusedUnwritten(err) {
			b.maybeWritten = true
		}
	}
	now := w.now()
	c.windows[p].Report(a.ID, offset, err, now, now+wireBackoff.Delay(a.Number, c.rng))
	c.pump(p)
}

// complete records the window's resolved batches in order. A batch that
// failed is recorded indefinite: a NOT_LEADER answer may follow a
// proposal that still commits, so no failure is surely unwritten, unless
// every attempt was refused before the node looked further than the topic
// id or the batch's CRC (refusedUnwritten): then it failed for sure.
// (Indefinite batches of a deleted incarnation are never read and leave
// the log model many open-ended operations.)
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
		switch {
		case done.Err == nil && b.acks != -1:
			// acks=0 and 1 promise no offset and may be lost on a
			// failover: never acknowledged in the history's sense.
			w.hist.produceUnknown(b.hist, w.now())
			w.coverage.Inc(fmt.Sprintf("event/produce-acks%d", b.acks))
		case done.Err == nil:
			w.hist.produceOK(b.hist, done.BaseOffset, w.now())
			w.stats.ProducesOK++
		case b.maybeWritten:
			w.hist.produceUnknown(b.hist, w.now())
			w.stats.ProducesLost++
		default:
			// Every attempt was refused before anything was proposed.
			w.hist.produceFailed(b.hist, w.now())
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
