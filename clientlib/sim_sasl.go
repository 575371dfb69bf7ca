package clientlib

import (
	"errors"
	"math/rand/v2"

	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// simSASL is a simulated Client's Transport when the SASL option is set
// and the simulator's Transport models connections (clientcore.Conns):
// as over TCP (authenticate), each connection runs the exchange
// (sasl.ClientSession, the steps the TCP path runs) before its first
// request, the requests sent meanwhile wait for it, and a lost
// connection authenticates again on the next request. A refused exchange
// fails the waiting requests as the TCP path fails its call
// (SASL_AUTHENTICATION_FAILED, definite); a transport error fails them as
// not sent.
type simSASL struct {
	clientcore.Transport
	conns clientcore.Conns
	s     *saslConfig
	by    map[string]*simConn // by address: the current connection
}

// simConn is one simulated connection of a simSASL.
type simConn struct {
	id      uint64
	authed  bool
	started bool // the exchange is running
	waiting []simWaiting
}

// simWaiting is a request waiting for its connection's exchange.
type simWaiting struct {
	req  *strandpb.Request
	done func(*strandpb.Response, error)
}

// newSimSASL wraps t when it models connections; t itself otherwise
// (each call stands alone, as the simulator ran before connections).
func newSimSASL(t clientcore.Transport, s *saslConfig) clientcore.Transport {
	conns, ok := t.(clientcore.Conns)
	if !ok || s == nil {
		return t
	}
	return &simSASL{Transport: t, conns: conns, s: s, by: map[string]*simConn{}}
}

// Call sends req on addr's connection, authenticating it first.
func (t *simSASL) Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	c := t.by[addr]
	if c == nil || !t.conns.Open(c.id) {
		c = &simConn{id: t.conns.Dial(addr)}
		t.by[addr] = c
	}
	if c.authed {
		t.send(addr, c, req, done)
		return
	}
	c.waiting = append(c.waiting, simWaiting{req: req, done: done})
	if !c.started {
		c.started = true
		t.exchange(addr, c)
	}
}

// send is CallOn; a transport error closes the connection (over TCP a
// lost answer does: the connection's stream is no longer known good).
func (t *simSASL) send(addr string, c *simConn, req *strandpb.Request, done func(*strandpb.Response, error)) {
	t.conns.CallOn(c.id, addr, req, func(resp *strandpb.Response, err error) {
		if err != nil {
			t.drop(addr, c)
		}
		done(resp, err)
	})
}

// drop closes c and forgets it.
func (t *simSASL) drop(addr string, c *simConn) {
	t.conns.Close(c.id)
	if t.by[addr] == c {
		delete(t.by, addr)
	}
}

// exchange runs c's authentication, then sends the waiting requests.
func (t *simSASL) exchange(addr string, c *simConn) {
	sess, req, err := t.s.begin()
	if err != nil {
		t.fail(addr, c, err)
		return
	}
	var step func(*strandpb.Request)
	step = func(req *strandpb.Request) {
		t.conns.CallOn(c.id, addr, req, func(resp *strandpb.Response, err error) {
			if err != nil {
				var ce *ConnError
				if errors.As(err, &ce) {
					err = &ConnError{Addr: ce.Addr, Err: ce.Err} // the waiting requests were not sent
				}
				t.fail(addr, c, err)
				return
			}
			next, done, err := sess.Next(resp)
			switch {
			case err != nil:
				t.fail(addr, c, t.s.stepErr(err))
			case done:
				c.authed = true
				waiting := c.waiting
				c.waiting = nil
				for _, w := range waiting {
					t.send(addr, c, w.req, w.done)
				}
			default:
				step(next)
			}
		})
	}
	step(req)
}

// fail ends c's exchange: every waiting request fails with err.
func (t *simSASL) fail(addr string, c *simConn, err error) {
	t.drop(addr, c)
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
