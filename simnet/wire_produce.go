package simnet

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/linearizability"
)

// nextRecord draws the producer's next push (1 to batchMax records, one
// operation of the budget) while the budget lasts and fewer than
// wireOutstandingMax pushes are unresolved, and hands it to clientlib's
// producer (libProduce); the chain restarts when a push completes.
//
// The non-idempotent producer sends one push in five at acks=1 or 0 (its
// acks=0 and acks=1 clients): such records have no offset, and once
// retention deletes them unread they are credits the log model may place
// anywhere below the log start, which a third of all batches made too slow
// to check.
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
	_, inc, _ := c.topicID(p)
	if q := c.usable(p, first); q != p {
		p = q
		_, inc, _ = c.topicID(p)
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
	acks := clientlib.AcksAll
	if !c.idempotent {
		acks = []clientlib.Acks{-1, -1, -1, -1, -1, -1, -1, -1, 1, 0}[c.rng.IntN(10)]
		if c.ww.recreatable(p) {
			// A deleted incarnation is never drained: its acks=0/1
			// records would stay open-ended in the log model for good
			// (wire_recreate.go).
			acks = clientlib.AcksAll
		}
	}
	c.recordTimer = true
	c.libProduce(p, inc, acks, recs, sent)
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

// checkFinished retires a producer whose budget ended and whose windows
// are empty.
func (c *wireClient) checkFinished() {
	if c.finished || !c.budgetDone || c.outstanding > 0 {
		return
	}
	c.finished = true
	c.ww.clientDone()
}
