package clientlib

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// producerIO is everything the producer core (drive, handle) does to the
// world: the core decides, an IO carries out and reports back. liveIO runs
// requests and promises on goroutines over real connections; simIO
// (sim.go) runs them on the simulator's transport, in virtual time.
type producerIO interface {
	// send begins one produce request to node; its outcome reaches
	// handle later.
	send(node uint64, batches []sentBatch)
	// refresh begins a metadata refresh, of topics by name when any are
	// given (Client.refreshTopics: a deleted topic is cached as unknown),
	// else of everything; its outcome reaches handle as an eventMetadata
	// result.
	refresh(topics []string)
	// initProducerID asks any node for a producer id; the outcome reaches
	// handle as an eventInitProducer result.
	initProducerID()
	// complete hands a finished record to its promise, in order.
	complete(pr pendingRecord)
	// addPartitions sends a transactional producer's AddPartitionsToTxn
	// request req to its coordinator; the outcome, res with resp or err
	// set, reaches handle as an eventAddPartitions result.
	addPartitions(req *strandpb.Request, res addPartitionsResult)
}

// liveIO is the real process's producerIO: a sender goroutine per node
// writes requests (the loop never blocks on a socket), the connection's
// reader reports each answer back to the loop (no goroutine per request),
// the promise goroutine calls promises.
type liveIO struct{ p *producer }

func (io liveIO) send(node uint64, batches []sentBatch) {
	p := io.p
	ns := p.sender(node)
	if p.beginInline(node, ns, batches) {
		return
	}
	ns.queued.Add(1)
	ns.ch <- batches // never blocks: nodeInFlight bounds it
}

func (io liveIO) refresh(topics []string) {
	p := io.p
	go func() {
		var err error
		if len(topics) > 0 {
			err = p.c.refreshTopics(context.Background(), topics)
		} else {
			err = p.c.RefreshMetadata(context.Background())
		}
		p.report(requestResult{node: uint64(eventMetadata), err: err})
	}()
}

func (io liveIO) initProducerID() {
	p := io.p
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.c.cfg.requestTimeout)
		defer cancel()
		resp, err := p.c.anyRequest(ctx, initProducerIDRequest())
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		p.report(requestResult{node: uint64(eventInitProducer), resp: resp, err: err})
	}()
}

func (io liveIO) addPartitions(req *strandpb.Request, res addPartitionsResult) {
	p := io.p
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), max(p.c.cfg.deliveryTimeout, p.c.cfg.requestTimeout))
		defer cancel()
		res.resp, res.err = p.c.txnCall(ctx, req)
		p.report(requestResult{node: uint64(eventAddPartitions), add: &res})
	}()
}

// complete never blocks: the channel holds as many records as can be
// buffered.
func (io liveIO) complete(pr pendingRecord) { io.p.promises <- pr }

// initProducerIDRequest asks for a producer id.
func initProducerIDRequest() *strandpb.Request {
	return &strandpb.Request{Body: &strandpb.Request_InitProducerId{InitProducerId: &strandpb.InitProducerIdRequest{}}}
}

// produceRequest is one produce request carrying batches.
func (p *producer) produceRequest(batches []sentBatch) *strandpb.Request {
	cfg := &p.c.cfg
	req := &strandpb.ProduceRequest{Acks: int32(cfg.acks), TimeoutMs: int32(cfg.requestTimeout / time.Millisecond)}
	for _, sb := range batches {
		req.Partitions = append(req.Partitions, &strandpb.ProduceRequest_Partition{
			Topic: sb.s.tp.topic, Partition: sb.s.tp.partition,
			ProducerId: sb.producerID, ProducerEpoch: sb.epoch, BaseSequence: sb.attempt.BaseSequence,
			Batch: sb.bytes, Transactional: p.c.txn != nil, TopicId: sb.topicID,
		})
	}
	if t := p.c.txn; t != nil {
		req.TransactionalId = t.id
	}
	return &strandpb.Request{Body: &strandpb.Request_Produce{Produce: req}}
}

// report hands a result to the loop, or drops it once the loop stopped.
func (p *producer) report(res requestResult) {
	select {
	case p.results <- res:
	case <-p.stop:
	}
}

// nodeSender is a node's sender goroutine's queue. queued counts the
// requests the loop handed it that it has not finished beginning: at zero
// every earlier request of the node is written, so the loop may write the
// next itself (beginInline) without passing one on the wire.
type nodeSender struct {
	ch     chan []sentBatch
	queued atomic.Int32
}

// sender returns the node's sender, starting its goroutine.
func (p *producer) sender(node uint64) *nodeSender {
	ns := p.senders[node]
	if ns == nil {
		ns = &nodeSender{ch: make(chan []sentBatch, p.c.cfg.inFlightPerConn)}
		p.senders[node] = ns
		go p.senderLoop(node, ns)
	}
	return ns
}

// senderLoop begins a node's requests one after another, so they reach
// the wire in the order the loop built them (a partition's batches in
// sequence order). It writes each itself (brokerConn.begin); the answer
// comes back through begin's callback, on the connection's reader.
func (p *producer) senderLoop(node uint64, ns *nodeSender) {
	for {
		select {
		case batches := <-ns.ch:
			p.begin(node, batches)
			ns.queued.Add(-1)
		case <-p.stop:
			return
		}
	}
}

// inlineBytesMax bounds what the loop writes itself: at most this many
// batch bytes of the producer's requests, this one's included, are then
// unanswered on the connection, far below a socket's buffers, so the
// write does not wait for the node to read.
const inlineBytesMax = 32 << 10

// beginInline writes a request on the loop's own goroutine when nothing
// can make it wait: the node's requests in flight are small
// (inlineBytesMax), every earlier one is written, the connection is up
// and has a free slot and no throttle. A light producer (a request per
// record or two) then skips a goroutine hand-off per request, to the
// sender and its park after. false: nothing was sent; the sender takes
// the request.
func (p *producer) beginInline(node uint64, ns *nodeSender, batches []sentBatch) bool {
	cfg := &p.c.cfg
	if cfg.acks == AcksNone || p.nodeBytes[node] > inlineBytesMax || ns.queued.Load() != 0 {
		return false
	}
	c := p.c
	c.mu.Lock()
	addr, ok := c.meta.Address(node)
	bc := c.conns[connKey{addr: addr}] // the data connection
	c.mu.Unlock()
	if !ok || bc == nil || bc.isDead() {
		return false // unknown or not connected: the sender dials or fails it
	}
	_, err := bc.beginCall(context.Background(), p.produceRequest(batches), callSpec{timeout: cfg.requestTimeout + time.Second,
		owned: true, noWait: true, onDone: func(resp *strandpb.Response, err error) {
			// Maybe on this goroutine (a write that killed the
			// connection fails its calls at once): the loop must not
			// wait on itself.
			res := requestResult{node: node, batches: batches, resp: resp, err: err}
			select {
			case p.results <- res:
			default:
				go p.report(res)
			}
		}})
	if err != nil {
		return false // never registered: the sender tries it
	}
	for _, sb := range batches {
		sb.batch.writing.Add(-1)
	}
	return true
}

// begin sends one produce request; its outcome reaches the loop by
// report, from the connection's reader (or its watchdog, on a timeout or
// stall), or from here when it cannot be sent.
func (p *producer) begin(node uint64, batches []sentBatch) {
	defer func() {
		// Written or never to be: the loop may reuse the buffers of
		// batches that have resolved.
		for _, sb := range batches {
			if sb.batch != nil {
				sb.batch.writing.Add(-1)
			}
		}
	}()
	cfg := &p.c.cfg
	envelope := p.produceRequest(batches)
	fail := func(err error) { p.report(requestResult{node: node, batches: batches, err: err}) }
	c := p.c
	c.mu.Lock()
	addr, ok := c.meta.Address(node)
	c.mu.Unlock()
	if !ok {
		fail(&ConnError{Addr: "node " + itoa(node), Err: errUnknownNode})
		return
	}
	ctx := context.Background()
	bc, err := c.conn(ctx, addr)
	if err != nil {
		fail(err)
		return
	}
	// The node gives up at timeout_ms; wait a little longer for its
	// answer. The answer is reported from the connection's reader (no
	// goroutine waits for it).
	// The envelope is this call's alone: its large batches are written
	// as they are (owned), not copied into the frame.
	_, err = bc.beginCall(ctx, envelope, callSpec{noAnswer: cfg.acks == AcksNone, timeout: cfg.requestTimeout + time.Second,
		owned: true, onDone: func(resp *strandpb.Response, err error) {
			p.report(requestResult{node: node, batches: batches, resp: resp, err: err})
		}})
	if err != nil {
		fail(err)
	}
}
