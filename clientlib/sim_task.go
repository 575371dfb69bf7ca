package clientlib

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"iter"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// A simulated Client's blocking calls (a Consumer's or GroupConsumer's
// Poll, Commit and Close, FetchOffsets, RefreshMetadata, ...) run the very
// code a real process runs, as a task: SimRun starts the call as a
// coroutine (iter.Pull) that runs only while the simulator's thread
// resumes it, so the call is a step function of the Transport's
// callbacks. Where a real process would block (a request, a backoff
// sleep, Poll waiting for a fetch to land) the task arms a Transport
// callback and yields; the callback resumes it. A fetch Poll leaves in
// flight is a plain Transport call whose answer lands for a later Poll,
// as the real process's fetch goroutine does. Clock reads are the
// Transport's virtual time (Client.now), random member ids come from the
// client's seeded source, and the consumer never lets map order choose
// the order of its requests. No goroutine is scheduled: the coroutine
// switch is a direct hand-off, and at most one task of a Client runs at a
// time.
//
// Rejected: rewriting Poll as an explicit state machine beside the real
// one (two consumers to keep in step, the simulated one not the shipped
// one); running Poll on a goroutine in the simulator (the scheduler would
// choose the interleaving).

// errTaskAbandoned unwinds an abandoned task (a crashed simulated
// process) from the point where it waits.
var errTaskAbandoned = errors.New("clientlib: simulated task abandoned")

// simTask is one blocking call running as a coroutine.
type simTask struct {
	c     *Client
	yield func(struct{}) bool
	next  func() (struct{}, bool)
	stop  func()
	over  bool // returned or abandoned
	done  func()
}

// SimRun runs fn (blocking calls on c, which must be built with
// Simulated) as a task on the simulator's thread: it starts at the
// Transport's next callback, and done runs when fn returned. The returned
// abandon ends the task where it waits, as if its process died: done
// never runs. One task of a Client runs at a time; SimRun panics when
// another is unfinished.
func (c *Client) SimRun(fn func(ctx context.Context), done func()) (abandon func()) {
	tr := c.cfg.simulated
	if tr == nil {
		panic("clientlib: SimRun needs a Client built with Simulated")
	}
	if c.simTask != nil && !c.simTask.over {
		panic("clientlib: SimRun while another task of the Client runs")
	}
	task := &simTask{c: c, done: done}
	c.simTask = task
	task.next, task.stop = iter.Pull(func(yield func(struct{}) bool) {
		task.yield = yield
		defer func() {
			if r := recover(); r != nil && r != errTaskAbandoned {
				panic(r)
			}
		}()
		fn(context.Background())
	})
	tr.After(0, task.resume)
	return task.abandon
}

// SimAbandon ends the Client's unfinished task, if any, where it waits,
// as SimRun's abandon does: for a simulator ending a run with tasks still
// waiting on answers that will never come. Until then each such task is a
// parked coroutine holding its Client and the simulated world it reaches.
func (c *Client) SimAbandon() {
	if c.simTask != nil {
		c.simTask.abandon()
	}
}

// resume runs the task until it waits again or returns.
func (t *simTask) resume() {
	if t.over {
		return
	}
	if _, more := t.next(); !more && !t.over {
		t.over = true
		t.done()
	}
}

// abandon ends the task where it waits.
func (t *simTask) abandon() {
	if !t.over {
		t.over = true
		t.stop()
	}
}

// simBlock suspends the running task until the wake handed to arm runs
// (once; later calls do nothing). arm must arrange for wake to run from a
// Transport callback, never before it returns.
func (c *Client) simBlock(arm func(wake func())) {
	t := c.simTask
	if t == nil || t.over || t.yield == nil {
		panic("clientlib: a Simulated Client blocked outside SimRun")
	}
	woken := false
	arm(func() {
		if woken || t.over {
			return
		}
		woken = true
		t.resume()
	})
	for !woken {
		if !t.yield(struct{}{}) {
			panic(errTaskAbandoned)
		}
	}
}

// simRequest is request on the Transport: the task waits for the answer,
// for RequestTimeout plus extra at most, as roundTrip does (simCall).
func (c *Client) simRequest(key connKey, req *strandpb.Request, extra time.Duration) (*strandpb.Response, error) {
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	var resp *strandpb.Response
	var err error
	c.simBlock(func(wake func()) {
		c.simCallOn(key, req, c.cfg.requestTimeout+extra, extra, func(r *strandpb.Response, e error) {
			resp, err = r, e
			wake()
		})
	})
	return resp, err
}

// now is the client's clock as a time: the wall clock in a real process,
// the Transport's virtual time (from the Unix epoch) when simulated.
func (c *Client) now() time.Time {
	if t := c.cfg.simulated; t != nil {
		return time.Unix(0, 0).Add(t.Now())
	}
	return time.Now()
}

// sleep waits d or until ctx ends; false when ctx ended. A simulated
// task waits d of virtual time.
func (c *Client) sleep(ctx context.Context, d time.Duration) bool {
	tr := c.cfg.simulated
	if tr == nil {
		return sleepCtx(ctx, d)
	}
	c.simBlock(func(wake func()) { tr.After(d, wake) })
	return true
}

// boundedCtx is ctx without its cancellation, bounded by the request
// timeout: a shared refresh must not die with its first caller. A
// simulated Client's bound is the Transport's own timeout (a wall-clock
// deadline would leak real time into the run).
func (c *Client) boundedCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.cfg.simulated != nil {
		return context.WithoutCancel(ctx), func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), c.cfg.requestTimeout)
}

// requestCtx is ctx bounded by the request timeout, still ended with ctx:
// a lookup only its caller waits for (refreshTopic), which must not keep
// a cancelled Poll waiting. A simulated Client's is ctx (boundedCtx).
func (c *Client) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.cfg.simulated != nil {
		return c.boundedCtx(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.requestTimeout)
}

// randomMemberID is a new group member id: 16 random bytes in hex, from
// crypto/rand in a real process, from the client's seeded source when
// simulated.
func (c *Client) randomMemberID(read func([]byte) (int, error)) (string, error) {
	var id [16]byte
	if c.cfg.simulated != nil {
		c.mu.Lock()
		for i := range id {
			id[i] = byte(c.rng.Uint32())
		}
		c.mu.Unlock()
		return hex.EncodeToString(id[:]), nil
	}
	if _, err := read(id[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(id[:]), nil
}

// simFetch is fetchNode on the Transport: the answer lands for a later
// Poll (and wakes a Poll waiting for it), as the fetch goroutine's does.
func (k *Consumer) simFetch(node uint64, ts []pollTarget) {
	tr := k.c.cfg.simulated
	req := k.fetchRequest(node, ts)
	sent := k.c.now()
	land := func(resp *strandpb.Response, err error) {
		k.land(landedFetch{node: node, targets: ts, sent: sent, resp: resp, err: err})
	}
	k.c.mu.Lock()
	addr, ok := k.c.meta.Address(node)
	k.c.mu.Unlock()
	if !ok {
		err := &ConnError{Addr: "node " + itoa(node), Err: errUnknownNode}
		tr.After(0, func() { land(nil, err) })
		return
	}
	k.c.simCall(addr, req, k.c.cfg.requestTimeout+k.cfg.maxWait, k.cfg.maxWait, land) // as fetchNode's requestNode
}

// simAwait is Poll's wait for a landed fetch in a task: true when one
// landed, false at deadline.
func (k *Consumer) simAwait(deadline time.Time) bool {
	select {
	case <-k.wake:
		return true
	default:
	}
	landed := false
	k.c.simBlock(func(wake func()) {
		k.mu.Lock()
		k.simWake = func() { landed = true; wake() }
		k.mu.Unlock()
		k.c.cfg.simulated.After(max(deadline.Sub(k.c.now()), 0), wake)
	})
	k.mu.Lock()
	k.simWake = nil
	k.mu.Unlock()
	if landed {
		select {
		case <-k.wake: // land's token
		default:
		}
	}
	return landed
}

// saltSource is where a credential's salt comes from: crypto/rand (nil)
// in a real process, the client's seeded source when simulated (a seed
// replays the credentials it stores).
func (c *Client) saltSource() io.Reader {
	if c.cfg.simulated == nil {
		return nil
	}
	return simRandReader{c}
}

// simRandReader reads a simulated Client's seeded source.
type simRandReader struct{ c *Client }

func (r simRandReader) Read(p []byte) (int, error) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	for i := range p {
		p[i] = byte(r.c.rng.Uint32())
	}
	return len(p), nil
}
