package simnet

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/node"
)

// clientKind is a client's role in the workload.
type clientKind uint8

const (
	kindProducer clientKind = iota + 1 // idempotent, acks=all, retries
	kindConsumer                       // sequential reads from its positions
	kindReader                         // reads at random offsets
	kindDrain                          // liveness: reads everything at the end
)

// timerKind is what a client's single pending timer means.
type timerKind uint8

const (
	timerNone    timerKind = iota
	timerNextOp            // start the next operation
	timerRetry             // send the next attempt of the current operation
	timerTimeout           // the current attempt took too long
)

// Workload sizes.
const (
	keySpace       = 16        // keyed producers draw keys k0..k15
	fetchBytesMax  = 2 << 10   // MaxBytes of every fetch
	attemptsMax    = 1000      // bound on attempts of one operation
	producerIDBase = 1_000_000 // producer ids are unique per run
)

// request is one attempt a client sends to a node.
type request struct {
	id      uint64
	client  *client
	produce *node.ProduceRequest
	fetch   *node.FetchRequest
}

// digest summarises r for the trace hash.
func (r *request) digest() uint64 {
	h := newTraceHash()
	h.u64(r.id)
	h.u64(uint64(r.client.index))
	if p := r.produce; p != nil {
		h.u64(uint64(p.Partition))
		h.u64(uint64(p.ProducerID))
		h.u64(uint64(p.BaseSequence))
		h.bytes(p.Batch)
	}
	if f := r.fetch; f != nil {
		h.u64(uint64(f.Partition))
		h.u64(uint64(f.Offset))
	}
	return h.sum
}

// fetchedRecord is one record a fetch returned, decoded at once so no
// bytes of the node are retained.
type fetchedRecord struct {
	offset int64
	key    string
	value  string
}

// reply is a node's answer to one request.
type reply struct {
	requestID uint64
	node      int
	err       error
	leader    node.NodeID
	offset    int64 // produce: base offset
	records   []fetchedRecord
	hwm       int64
	logStart  int64
}

// digest summarises r for the trace hash.
func (r *reply) digest() uint64 {
	h := newTraceHash()
	h.u64(r.requestID)
	h.u64(uint64(r.node))
	if r.err != nil {
		h.str(r.err.Error())
	}
	h.u64(uint64(r.leader))
	h.u64(uint64(r.offset))
	h.u64(uint64(r.hwm))
	h.u64(uint64(r.logStart))
	for _, rec := range r.records {
		h.u64(uint64(rec.offset))
		h.str(rec.key)
		h.str(rec.value)
	}
	return h.sum
}

// deliverRequest hands a request that reached its node to the core; the
// core's callback sends the reply back across the network.
func (w *world) deliverRequest(e *event) {
	n := w.nodes[e.node]
	if !n.up {
		return
	}
	inc := n.incarnation
	req := e.request
	switch {
	case req.produce != nil:
		w.guardCall(n, func() {
			n.core.Produce(*req.produce, func(res node.ProduceResult) {
				w.sendReply(n, inc, req, &reply{err: res.Err, leader: res.Leader, offset: res.BaseOffset})
			})
		})
	case req.fetch != nil:
		w.guardCall(n, func() {
			n.core.Fetch(*req.fetch, func(res node.FetchResult) {
				w.sendReply(n, inc, req, fetchReply(req.fetch.Offset, res))
			})
		})
	}
	w.process(n)
}

// fetchReply decodes a fetch result into a reply. Undecodable batches are
// a finding: a node served bytes that are not a record batch.
func fetchReply(offset int64, res node.FetchResult) *reply {
	r := &reply{err: res.Err, leader: res.Leader, hwm: res.HighWatermark, logStart: res.LogStartOffset}
	if res.Err != nil {
		return r
	}
	for _, b := range res.Batches {
		next := b.BaseOffset
		err := recordbatch.Decode(b.Batch, func(_ int, rec recordbatch.Record) error {
			if next >= offset {
				r.records = append(r.records, fetchedRecord{offset: next, key: string(rec.Key), value: string(rec.Value)})
			}
			next++
			return nil
		})
		if err != nil {
			r.err = fmt.Errorf("%w: fetched batch at %d: %v", errBadBatch, b.BaseOffset, err)
			r.records = nil
			return r
		}
	}
	return r
}

// errBadBatch marks a fetch that served undecodable bytes.
var errBadBatch = errors.New("simnet: fetched batch does not decode")

// sendReply carries a reply from node n (if still the same incarnation) to
// the request's client.
func (w *world) sendReply(n *simNode, inc uint32, req *request, r *reply) {
	if !n.up || n.incarnation != inc {
		return
	}
	r.requestID = req.id
	r.node = n.index
	c := req.client
	if w.net.lost() {
		return
	}
	w.sched.schedule(w.net.clientDelay(c.index, n.index), &event{kind: evClientReply, node: -1, from: n.index, client: c, reply: r})
}

// workload owns the clients and the shared operation budget.
type workload struct {
	w           *world
	clients     []*client
	issued      int // logical operations started
	clientsDone int
	nextReqID   uint64
	nextProdID  int64
	healed      bool
	healAt      time.Duration
	drained     bool    // the final drain read every partition to its end
	maxHwm      []int64 // highest high-water mark any fetch returned, per partition
}

// newWorkload creates the clients: producers (half keyed), consumers,
// random readers and the drain reader (last).
func newWorkload(w *world, clientCount int) *workload {
	o := w.opts
	wl := &workload{w: w, nextProdID: producerIDBase, maxHwm: make([]int64, o.Partitions)}
	for i := 0; i < clientCount; i++ {
		c := &client{w: w, wl: wl, index: i, rng: newStream(o.Seed, streamWorkload+uint64(i))}
		switch {
		case i < o.Producers:
			c.kind = kindProducer
			c.keyed = i%2 == 0
			c.seqs = make([]int32, o.Partitions)
			c.idempotent = i != o.Producers-1
			c.newProducerID()
		case i < o.Producers+o.Consumers:
			c.kind = kindConsumer
			c.nextPartition = i % o.Partitions
		case i < clientCount-1:
			c.kind = kindReader
		default:
			c.kind = kindDrain
		}
		c.positions = make([]int64, o.Partitions)
		c.leaders = make([]int, o.Partitions)
		for p := range c.leaders {
			c.leaders[p] = int(w.specs[p].Replicas[0]) - 1
		}
		wl.clients = append(wl.clients, c)
	}
	w.clients = wl.clients
	return wl
}

// start wakes every client but the drain reader after a small offset.
func (wl *workload) start() {
	for _, c := range wl.clients {
		if c.kind != kindDrain {
			c.setTimer(time.Duration(c.rng.Int64N(int64(time.Millisecond))), timerNextOp)
		}
	}
}

// take claims one operation of the budget.
func (wl *workload) take() bool {
	if wl.issued >= wl.w.opts.Ops {
		return false
	}
	wl.issued++
	if wl.w.opts.Profile == Liveness && !wl.healed && float64(wl.issued) >= wl.w.opts.HealAfter*float64(wl.w.opts.Ops) {
		wl.w.sched.schedule(0, &event{kind: evLivenessHeal, node: -1})
	}
	return true
}

// clientDone counts a client out of work; the last one ends the run, or
// starts the drain in liveness mode.
func (wl *workload) clientDone(c *client) {
	if c.kind == kindDrain {
		wl.drained = true
		wl.w.stop()
		return
	}
	wl.clientsDone++
	if wl.clientsDone < len(wl.clients)-1 {
		return
	}
	if wl.w.opts.Profile == Liveness {
		drain := wl.clients[len(wl.clients)-1]
		drain.setTimer(0, timerNextOp)
		return
	}
	wl.w.stop()
}

// client is one producer or consumer. It runs one logical operation at a
// time; every attempt of it is a request, and one timer drives it.
type client struct {
	w     *world
	wl    *workload
	index int
	kind  clientKind
	rng   *rand.Rand
	keyed bool
	// idempotent producers retry a batch with its sequence until it is
	// acknowledged; the last producer is not idempotent (producer id -1):
	// it never resends a batch whose fate is unknown, so a node that
	// applies an entry twice shows a duplicate.
	idempotent bool
	done       bool
	timer      timerKind
	gen        uint64 // generation of the live timer
	op         *clientOp
	values     int // records produced, for unique values

	producerID    int64
	seqs          []int32 // next sequence per partition
	positions     []int64 // consumer positions per partition
	leaders       []int   // node index believed to lead each partition
	nextPartition int
	// The drain reader's progress: the partition it reads and the reply
	// of its last fetch.
	drainPartition int
	drainReply     *reply
}

// clientOp is the logical operation a client is running.
type clientOp struct {
	partition    int
	produce      *node.ProduceRequest
	fetchOffset  int64
	attempts     int
	firstReqID   uint64
	attemptID    uint64
	attemptStart time.Duration
	start        time.Duration // first attempt sent
	unknown      bool          // some attempt may have taken effect
	hinted       bool          // the next attempt follows a leader hint
	hist         *histOp       // produce: the op; fetch: the current attempt's op
	hwmFloor     int64         // highest hwm returned before this attempt was sent
}

// setTimer replaces the client's timer.
func (c *client) setTimer(d time.Duration, kind timerKind) {
	c.gen++
	c.timer = kind
	c.w.sched.schedule(d, &event{kind: evClientWake, node: -1, from: c.index, client: c, wake: c.gen})
}

// onWake runs the client's timer if it is still the live one.
func (c *client) onWake(gen uint64) {
	if gen != c.gen || c.done {
		return
	}
	kind := c.timer
	c.timer = timerNone
	switch kind {
	case timerNextOp:
		c.nextOp()
	case timerRetry:
		c.sendAttempt()
	case timerTimeout:
		c.onTimeout()
	}
}

// thinkTime is the pause between a client's operations.
func (c *client) thinkTime() time.Duration {
	return time.Duration(c.rng.Int64N(int64(2 * time.Millisecond)))
}

// newProducerID gives the producer a fresh identity (after giving up an
// operation its sequence state is unknown, as after a Kafka epoch bump).
func (c *client) newProducerID() {
	c.producerID = -1
	if c.idempotent {
		c.wl.nextProdID++
		c.producerID = c.wl.nextProdID
	}
	clear(c.seqs)
}

// nextOp starts the client's next logical operation, or retires it.
func (c *client) nextOp() {
	if c.kind == kindDrain {
		c.nextDrainOp()
		return
	}
	if !c.wl.take() {
		c.done = true
		c.wl.clientDone(c)
		return
	}
	switch c.kind {
	case kindProducer:
		c.startProduce()
	case kindConsumer:
		p := c.nextPartition
		c.nextPartition = (c.nextPartition + 1) % len(c.positions)
		c.op = &clientOp{partition: p, fetchOffset: c.positions[p]}
	case kindReader:
		p := c.rng.IntN(len(c.positions))
		c.op = &clientOp{partition: p, fetchOffset: c.rng.Int64N(c.wl.maxHwm[p] + 1)}
	}
	c.sendAttempt()
}

// startProduce builds the next record: a unique value, a key for keyed
// producers (partition by key hash), else a random partition.
func (c *client) startProduce() {
	c.values++
	value := fmt.Sprintf("c%d-%d", c.index, c.values)
	var key []byte
	var p int
	if c.keyed {
		key = fmt.Appendf(nil, "k%d", c.rng.IntN(keySpace))
		h := fnv.New32a()
		h.Write(key)
		p = int(h.Sum32() % uint32(len(c.seqs)))
	} else {
		p = c.rng.IntN(len(c.seqs))
	}
	batch, err := recordbatch.Encode(nil, []recordbatch.Record{{
		TimestampMs: int64(c.w.now() / time.Millisecond), Key: key, Value: []byte(value),
	}})
	if err != nil {
		panic(fmt.Sprintf("simnet: encode batch: %v", err))
	}
	req := &node.ProduceRequest{
		TopicPartition: c.w.specs[p].TopicPartition,
		Acks:           node.AcksAll,
		ProducerID:     c.producerID,
		BaseSequence:   c.seqs[p],
		Batch:          batch,
	}
	c.op = &clientOp{partition: p, produce: req}
	c.op.hist = c.w.hist.produceCall(c.index, p, string(key), value, c.w.now())
}
