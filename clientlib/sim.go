package clientlib

import (
	"context"
	"errors"
	"time"

	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// A simulated Client (the Simulated option) runs its producer on the
// simulator's thread: Produce places the record and asks for a step at the
// current virtual time; a step is producer.drive followed by the promises
// it completed, and arms a timer for the time drive asks to run again;
// every request goes through the Transport and its outcome runs handle
// then a step. So the simulator runs the very batching, sequencing, retry,
// leader-cache and metadata code a real process runs; only the goroutines,
// sockets and wall clock of liveIO and conn.go stay out (a simulated
// connection's Hello, SASL, deadline and stall verdicts: sim_conns.go,
// sim_watch.go).

// errSimBufferFull fails a record produced on a simulated Client while
// MaxBufferedRecords are buffered.
var errSimBufferFull = errors.New("clientlib: the simulated producer's buffer is full")

// simIO is the simulated Client's producerIO.
type simIO struct {
	p *producer
	t clientcore.Transport
	// timers are the virtual times a step is already scheduled for.
	timers map[time.Duration]bool
	// done are the completed records whose promises the current step
	// runs once drive or handle returned.
	done []pendingRecord
	// idleWaiters wake the Flush calls waiting for nothing buffered.
	idleWaiters []func()
}

func newSimIO(p *producer, t clientcore.Transport) *simIO {
	return &simIO{p: p, t: t, timers: map[time.Duration]bool{}}
}

// wakeAt schedules a step at time at, unless one is due no later.
func (io *simIO) wakeAt(at time.Duration) {
	for t := range io.timers { // a yes/no answer: map order does not leak
		if t <= at {
			return
		}
	}
	io.timers[at] = true
	io.t.After(max(at-io.t.Now(), 0), func() {
		delete(io.timers, at)
		io.step()
	})
}

// step runs the producer loop once at the current virtual time.
func (io *simIO) step() {
	now := io.t.Now()
	next := io.p.drive(now)
	io.settle()
	if next > 0 {
		io.wakeAt(next)
	}
}

// settle runs the promises of completed records in completion order.
func (io *simIO) settle() {
	for len(io.done) > 0 {
		pr := io.done[0]
		io.done = io.done[1:]
		pr.promise(pr.r, pr.err)
		io.p.release()
	}
	io.wakeIdleWaiters()
}

// result takes a request's outcome into the loop and steps it.
func (io *simIO) result(res requestResult) {
	io.p.handle(res, io.t.Now())
	io.step()
}

func (io *simIO) complete(pr pendingRecord) { io.done = append(io.done, pr) }

func (io *simIO) send(node uint64, batches []sentBatch) {
	c := io.p.c
	req := io.p.produceRequest(batches)
	c.mu.Lock()
	addr, ok := c.meta.Address(node)
	c.mu.Unlock()
	if !ok {
		err := &ConnError{Addr: "node " + itoa(node), Err: errUnknownNode}
		io.t.After(0, func() { io.result(requestResult{node: node, batches: batches, err: err}) })
		return
	}
	// The node gives up at timeout_ms; wait a little longer for its answer
	// (as liveIO does).
	c.simCall(addr, req, c.cfg.requestTimeout+time.Second, 0, func(resp *strandpb.Response, err error) {
		io.result(requestResult{node: node, batches: batches, resp: resp, err: err})
	})
}

func (io *simIO) refresh(topics []string) {
	c := io.p.c
	req := &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: topics}}}
	io.anyCall(req, "", func(resp *strandpb.Response, addr string, err error) {
		c.mu.Lock()
		if len(topics) > 0 {
			err = c.applyNamedMetadataLocked(resp, addr, err)
		} else {
			err = c.applyMetadataLocked(resp, addr, err)
		}
		c.mu.Unlock()
		io.result(requestResult{node: uint64(eventMetadata), err: err})
	})
}

func (io *simIO) initProducerID() {
	io.anyCall(initProducerIDRequest(), "", func(resp *strandpb.Response, _ string, err error) {
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		io.result(requestResult{node: uint64(eventInitProducer), resp: resp, err: err})
	})
}

// anyCall is anyRequestLast on the transport: the candidates one after
// another until one answers, with the same verdicts when none does.
func (io *simIO) anyCall(req *strandpb.Request, lastAddr string, done func(*strandpb.Response, string, error)) {
	addrs := askLast(io.p.c.candidates(), lastAddr)
	unreached := 0
	var noneResp *strandpb.Response // a node's answer naming no coordinator (namesNoCoordinator)
	var noneFrom string
	var try func(i int, last error)
	try = func(i int, last error) {
		if i == len(addrs) {
			if noneResp != nil {
				done(noneResp, noneFrom, nil)
				return
			}
			if unreached == len(addrs) && len(addrs) > 0 {
				last = io.p.c.unreachable(addrs, last)
			}
			done(nil, "", last)
			return
		}
		io.p.c.simCall(addrs[i], req, io.p.c.cfg.requestTimeout, 0, func(resp *strandpb.Response, err error) {
			var ns *NotStrandError
			var ce *ConnError
			switch {
			case err == nil && namesNoCoordinator(req, resp):
				if noneResp == nil {
					noneResp, noneFrom = resp, addrs[i]
				}
				try(i+1, last)
			case err == nil:
				done(resp, addrs[i], nil)
			case errors.As(err, &ns):
				done(nil, "", err)
			case errors.As(err, &ce) && !ce.Sent:
				unreached++
				try(i+1, err)
			default:
				try(i+1, err)
			}
		})
	}
	try(0, nil)
}

// simProduce is Produce on a simulated Client: the record is placed at
// once and a step is due now, so records produced at one instant share
// batches as a real loop's intake does. A full buffer fails the record
// (nothing may block the simulator's thread).
func (p *producer) simProduce(io *simIO, pr pendingRecord) {
	select {
	case p.budget <- struct{}{}:
	default:
		pr.promise(pr.r, errSimBufferFull)
		return
	}
	p.holdFlush()
	if pr.r.Timestamp.IsZero() {
		pr.r.Timestamp = time.Unix(0, 0).Add(io.t.Now()) // virtual: no wall clock
	}
	pr.r.Offset = -1
	p.add(pr, io.t.Now())
	io.settle()
	io.wakeAt(io.t.Now())
}

// addPartitions sends a transactional producer's AddPartitionsToTxn on
// the Transport by txnCall's rules, without blocking the simulator's
// thread: the coordinator found with FindCoordinator (cached), forgotten
// on NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a connection failure or
// a timeout (coordinatorLost);
// a retriable failure of the whole request retried after txnRetryDelay,
// up to the client's retries.
func (io *simIO) addPartitions(req *strandpb.Request, res addPartitionsResult) {
	io.txnCall(req, 1, func(resp *strandpb.Response, err error) {
		res.resp, res.err = resp, err
		io.result(requestResult{node: uint64(eventAddPartitions), add: &res})
	})
}

// txnCall is Client.txnCall on the Transport: done runs with the outcome.
func (io *simIO) txnCall(req *strandpb.Request, attempt int, done func(*strandpb.Response, error)) {
	c := io.p.c
	io.txnRequest(req, func(resp *strandpb.Response, err error) {
		if err == nil || !IsRetriable(err) || attempt > c.cfg.retriesMax {
			done(resp, err)
			return
		}
		io.t.After(c.txnRetryDelay(attempt, err), func() { io.txnCall(req, attempt+1, done) })
	})
}

// txnRequest is Client.txnRequest on the Transport.
func (io *simIO) txnRequest(req *strandpb.Request, done func(*strandpb.Response, error)) {
	t := io.p.c.txn
	send := func(addr string) {
		io.p.c.simCallOn(coordKey(addr), req, io.p.c.cfg.requestTimeout, 0, func(resp *strandpb.Response, err error) {
			if err == nil {
				err = errorFromWire(resp.GetError())
			}
			t.forgetCoordinator(err)
			done(resp, err)
		})
	}
	t.mu.Lock()
	addr, stale := t.coordAddr, t.coordStale
	t.mu.Unlock()
	if addr != "" {
		send(addr)
		return
	}
	find := &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{TransactionalId: t.id}}}
	io.anyCall(find, stale, func(resp *strandpb.Response, from string, err error) {
		var addr string
		if err == nil {
			addr, err = t.learnCoordinator(resp, from)
		}
		if err != nil {
			done(nil, err)
			return
		}
		send(addr)
	})
}

// flush is producer.flush on a simulated Client: a step seals every open
// batch, and the task waits, without blocking the simulator's thread,
// until nothing is buffered.
func (io *simIO) flush(ctx context.Context) error {
	p := io.p
	p.mu.Lock()
	p.flushers++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.flushers--
		p.mu.Unlock()
	}()
	io.wakeAt(io.t.Now())
	for {
		p.mu.Lock()
		n := p.buffered
		p.mu.Unlock()
		if n == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p.c.simBlock(func(wake func()) { io.idleWaiters = append(io.idleWaiters, wake) })
	}
}

// wakeIdleWaiters wakes the flushes waiting, from a Transport callback,
// once nothing is buffered.
func (io *simIO) wakeIdleWaiters() {
	p := io.p
	p.mu.Lock()
	n := p.buffered
	p.mu.Unlock()
	if n > 0 || len(io.idleWaiters) == 0 {
		return
	}
	ws := io.idleWaiters
	io.idleWaiters = nil
	for _, wake := range ws {
		io.t.After(0, wake)
	}
}
