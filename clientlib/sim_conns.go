package clientlib

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// simConns is a simulated Client's Transport when the simulator's
// Transport models connections (clientcore.Conns): each connection opens
// as dialConn opens a real one, before its first request: a Hello
// (checkHello: the node's id, its protocol version, its cluster), given
// up after the dial's deadline (DialTimeout, or StallTimeout when
// shorter: a paused node accepts connections but answers nothing), then,
// with the SASL option, the authentication exchange (sasl.ClientSession,
// the steps the TCP path runs). The requests sent meanwhile wait for it,
// and a lost connection opens again on the next request. A failed open
// fails the waiting requests as dialConn fails the call (dialFailure: a
// definite refusal as it is, else a *ConnError, not sent).
type simConns struct {
	clientcore.Transport
	conns clientcore.Conns
	c     *Client
	by    map[connKey]*simConn // by address and kind (coordconn.go): the current connection
}

// simConn is one simulated connection of a simConns.
type simConn struct {
	id      uint64
	key     connKey // its address and kind
	ready   bool    // the Hello (and exchange) succeeded
	started bool    // the Hello is out
	// node is the node's id, from its Hello.
	node    uint64
	waiting []simWaiting
	// throttleUntil is when the node's quota throttle on the connection
	// ends (virtual time; 0: none).
	throttleUntil time.Duration
}

// simWaiting is a request waiting for its connection to open.
type simWaiting struct {
	req  *strandpb.Request
	done func(*strandpb.Response, error)
}

// newSimConns wraps t when it models connections; t itself otherwise
// (each call stands alone, as the simulator ran before connections).
func newSimConns(t clientcore.Transport, c *Client) clientcore.Transport {
	conns, ok := t.(clientcore.Conns)
	if !ok {
		return t
	}
	return &simConns{Transport: t, conns: conns, c: c, by: map[connKey]*simConn{}}
}

// Call sends req on addr's data connection, opening one first.
func (t *simConns) Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	t.callOn(connKey{addr: addr}, req, done)
}

// callOn sends req on the connection key names, opening one first.
func (t *simConns) callOn(key connKey, req *strandpb.Request, done func(*strandpb.Response, error)) {
	addr := key.addr
	c := t.by[key]
	if c == nil || !t.conns.Open(c.id) {
		t.c.mu.Lock()
		err := t.c.redialRefusedLocked(addr)
		t.c.mu.Unlock()
		if err != nil { // in its reconnect backoff (redial.go)
			t.After(0, func() { done(nil, err) })
			return
		}
		c = &simConn{id: t.conns.Dial(addr), key: key}
		t.by[key] = c
	}
	if c.ready {
		t.send(addr, c, req, done)
		return
	}
	c.waiting = append(c.waiting, simWaiting{req: req, done: done})
	if !c.started {
		c.started = true
		t.hello(addr, c)
	}
}

// hello opens c: its Hello, then the exchange when the Client
// authenticates, then the waiting requests.
func (t *simConns) hello(addr string, c *simConn) {
	cfg := &t.c.cfg
	deadline := cfg.dialTimeout
	if cfg.stallTimeout > 0 && cfg.stallTimeout < deadline {
		deadline = cfg.stallTimeout
	}
	over := false
	t.conns.CallOn(c.id, addr, helloRequest(cfg.clientID), func(resp *strandpb.Response, err error) {
		if over {
			return
		}
		over = true
		var h *strandpb.HelloResponse
		if err == nil {
			h, err = checkHello(resp)
		}
		if err == nil {
			t.c.mu.Lock()
			err = t.c.checkClusterLocked(h.GetClusterId(), addr)
			t.c.mu.Unlock()
		}
		if err != nil {
			err = dialFailure(cfg, addr, notSent(err))
			t.dialed(addr, err)
			t.fail(addr, c, err)
			return
		}
		t.dialed(addr, nil)
		c.node = h.GetNodeId()
		if cfg.sasl == nil {
			t.opened(addr, c)
			return
		}
		t.exchange(addr, c)
	})
	t.After(deadline, func() {
		if !over {
			over = true
			err := &ConnError{Addr: addr, Err: fmt.Errorf("no answer to hello within %v", deadline)}
			t.dialed(addr, err)
			t.fail(addr, c, err)
		}
	})
}

// dialed records the outcome of a connection's Hello to addr for its
// reconnect backoff, as connTo records a dial's (redial.go).
func (t *simConns) dialed(addr string, err error) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.c.dialedLocked(context.Background(), addr, err)
}

// notSent is err with a *ConnError's Sent cleared: a connection that
// failed to open sent none of the requests waiting for it.
func notSent(err error) error {
	var ce *ConnError
	if errors.As(err, &ce) {
		return &ConnError{Addr: ce.Addr, Err: ce.Err}
	}
	return err
}

// opened sends the requests that waited for c.
func (t *simConns) opened(addr string, c *simConn) {
	c.ready = true
	waiting := c.waiting
	c.waiting = nil
	for _, w := range waiting {
		t.send(addr, c, w.req, w.done)
	}
}

// send is CallOn; a transport error closes the connection (over TCP a
// lost answer does: the connection's stream is no longer known good).
// A throttled connection (clientcore.Throttle) holds the request until
// the node reads it again, as conn.go's writer does.
func (t *simConns) send(addr string, c *simConn, req *strandpb.Request, done func(*strandpb.Response, error)) {
	if d := c.throttleUntil - t.Now(); d > 0 {
		t.After(d, func() { t.send(addr, c, req, done) })
		return
	}
	written := false
	t.conns.CallOn(c.id, addr, req, func(resp *strandpb.Response, err error) {
		if written {
			return // acks=0: done when written; nothing reads an answer
		}
		if err != nil {
			t.drop(c)
		} else if d := clientcore.Throttle(resp); d > 0 && !bugIgnoresThrottle() {
			c.throttleUntil = max(c.throttleUntil, t.Now()+d)
		}
		done(resp, err)
	})
	if noAnswer(req) {
		// A request that expects no answer (a produce at acks=0) is done
		// once written, as conn.go's writer finishes it: before, a
		// simulated one waited for the node's answer, and one the network
		// lost held its record until the simulator's backstop, 10 s later
		// (simnet seed 26: a liveness failure).
		written = true
		done(nil, nil)
	}
}

// drop closes c and forgets it.
func (t *simConns) drop(c *simConn) {
	t.conns.Close(c.id)
	if t.by[c.key] == c {
		delete(t.by, c.key)
	}
}

// exchange runs c's authentication, then sends the waiting requests.
func (t *simConns) exchange(addr string, c *simConn) {
	s := t.c.cfg.sasl
	sess, req, err := s.begin()
	if err != nil {
		t.fail(addr, c, err)
		return
	}
	var step func(*strandpb.Request)
	step = func(req *strandpb.Request) {
		t.conns.CallOn(c.id, addr, req, func(resp *strandpb.Response, err error) {
			if err != nil {
				t.fail(addr, c, notSent(err)) // the waiting requests were not sent
				return
			}
			next, done, err := sess.Next(resp)
			switch {
			case err != nil:
				t.fail(addr, c, s.stepErr(err))
			case done:
				t.opened(addr, c)
			default:
				step(next)
			}
		})
	}
	step(req)
}

// fail ends c's exchange: every waiting request fails with err.
func (t *simConns) fail(addr string, c *simConn, err error) {
	t.drop(c)
	waiting := c.waiting
	c.waiting = nil
	for _, w := range waiting {
		w.done(nil, err)
	}
}

// simSASLNonces seeds a simulated Client's SCRAM nonces from its own
// random source: a seed replays its exchanges.
func (c *Client) simSASLNonces() {
	if c.cfg.sasl != nil && c.cfg.sasl.random == nil {
		var seed [32]byte
		for i := range seed {
			seed[i] = byte(c.rng.Uint32())
		}
		c.cfg.sasl.random = rand.NewChaCha8(seed)
	}
}
