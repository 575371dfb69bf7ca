package clientlib

import (
	"fmt"
	"time"

	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// A simulated Client watches each call as a real connection does
// (conn.go's await), in virtual time: the call fails with TIMEOUT (the
// outcome unknown) once its deadline passes without an answer, and the
// connection it went on is closed, as a real one is killed; with stall
// detection on, it fails sooner, as a *ConnError sent with the node
// marked suspect (Suspects), once nothing arrived from the node for the
// stall bound beyond the call's own wait (clientcore.Stalled). So the
// simulator runs the client's own request deadline, its stall verdicts
// and the suspect list they feed, not a deadline of the simulator's: the
// Transport ends a lost answer's call only later (simnet's backstop),
// after the client gave it up.

// simWatch is the simulated Client's record of what it read: the
// virtual time an answer last arrived on each connection (a real
// connection's lastRead), by its key (an address's data or coordinator
// connection, coordconn.go).
type simWatch struct {
	lastRead map[connKey]time.Duration
}

// simCall sends req to addr on the simulated Transport; done runs once,
// with the answer, the Transport's error, or the client's own verdict:
// TIMEOUT after timeout, a stall after the stall bound beyond wait (the
// call's legitimate wait, a long poll's). A request that expects no
// answer (acks=0) is not watched: its call ends when it is written.
func (c *Client) simCall(addr string, req *strandpb.Request, timeout, wait time.Duration, done func(*strandpb.Response, error)) {
	c.simCallOn(connKey{addr: addr}, req, timeout, wait, done)
}

// simCallOn is simCall on the connection key names (when the Transport
// models connections; else key's address is called).
func (c *Client) simCallOn(key connKey, req *strandpb.Request, timeout, wait time.Duration, done func(*strandpb.Response, error)) {
	t := c.cfg.simulated
	if c.simWatch.lastRead == nil {
		c.simWatch.lastRead = map[connKey]time.Duration{}
	}
	addr := key.addr
	sc := &simWatchedCall{c: c, t: t, addr: addr, key: key, sent: t.Now(), timeout: timeout, wait: wait, done: done}
	answered := func(resp *strandpb.Response, err error) {
		if err == nil {
			c.simWatch.lastRead[key] = max(c.simWatch.lastRead[key], t.Now())
			c.reached.Store(true)
		}
		sc.finish(resp, err)
	}
	if s, ok := t.(*simConns); ok {
		s.callOn(key, req, answered)
	} else {
		t.Call(addr, req, answered)
	}
	if sc.finished || noAnswer(req) || timeout <= 0 {
		return
	}
	sc.conn = c.simConnOf(key)
	t.After(timeout, sc.expire)
	if _, stall := sc.stallOf(); stall <= 0 {
		return
	}
	sc.arm()
}

// simWatchedCall is one call simCall watches: its deadline and its stall
// verdict, each a virtual-time timer, as a real connection's await.
type simWatchedCall struct {
	c        *Client
	t        clientcore.Transport
	addr     string
	key      connKey  // the connection it goes on
	conn     *simConn // nil: none known
	sent     time.Duration
	timeout  time.Duration
	wait     time.Duration
	finished bool
	done     func(*strandpb.Response, error)
}

// finish ends the call once.
func (sc *simWatchedCall) finish(resp *strandpb.Response, err error) {
	if !sc.finished {
		sc.finished = true
		sc.done(resp, err)
	}
}

// past is the call's send time and the node's last answer, moved past
// the connection's throttle (clientcore.PastThrottle), as await does.
func (sc *simWatchedCall) past() (time.Duration, time.Duration) {
	lastRead := sc.c.simWatch.lastRead[sc.key]
	if sc.conn == nil {
		return sc.sent, lastRead
	}
	return clientcore.PastThrottle(sc.sent, lastRead, sc.conn.throttleUntil)
}

// expire ends the call with TIMEOUT at its deadline (moved by a throttle).
func (sc *simWatchedCall) expire() {
	if sc.finished {
		return
	}
	if s, _ := sc.past(); sc.t.Now() < s+sc.timeout {
		sc.t.After(s+sc.timeout-sc.t.Now(), sc.expire) // a throttle moved the deadline
		return
	}
	sc.c.simKill(sc.conn)
	sc.finish(nil, &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT,
		Message: fmt.Sprintf("no answer from %s within %v", sc.addr, sc.timeout)})
}

// stallOf is the stall bound: the node's (StallTimeout doubled per
// recent stall, Suspects) once the connection's Hello named it.
func (sc *simWatchedCall) stallOf() (uint64, time.Duration) {
	if sc.conn != nil && sc.conn.node != 0 {
		return sc.conn.node, sc.c.stallBound(sc.conn.node)
	}
	return 0, sc.c.cfg.stallTimeout
}

// arm sets the stall check for just after both bounds pass, unless the
// deadline comes first.
func (sc *simWatchedCall) arm() {
	_, stall := sc.stallOf()
	// Stalled turns true just after both bounds passed.
	s, r := sc.past()
	at := max(s+sc.wait+stall, r+stall) + 1
	if at >= s+sc.timeout {
		return // the deadline comes first
	}
	sc.t.After(at-sc.t.Now(), sc.check)
}

// check ends the call as stalled (suspecting the node) when nothing
// arrived within the bounds; otherwise it re-arms.
func (sc *simWatchedCall) check() {
	if sc.finished {
		return
	}
	node, stall := sc.stallOf()
	s, r := sc.past()
	if !clientcore.Stalled(sc.t.Now(), s, r, sc.wait, stall) {
		sc.arm()
		return
	}
	sc.c.simKill(sc.conn)
	if node != 0 {
		sc.c.markSuspect(node)
	}
	sc.finish(nil, connFailure(sc.addr, true, fmt.Errorf("%w: nothing received for %v", errStalled, stall)))
}

// noAnswer reports whether req expects no answer: a produce at acks=0.
func noAnswer(req *strandpb.Request) bool {
	p := req.GetProduce()
	return p != nil && p.GetAcks() == 0
}

// simConnOf is the connection a call on key just went on (nil when the
// Transport models none).
func (c *Client) simConnOf(key connKey) *simConn {
	if s, ok := c.cfg.simulated.(*simConns); ok {
		return s.by[key]
	}
	return nil
}

// simKill closes conn, as a real connection is killed when a call on it
// times out or stalls: the next request on its key dials (and
// authenticates) again.
func (c *Client) simKill(conn *simConn) {
	if s, ok := c.cfg.simulated.(*simConns); ok && conn != nil {
		s.drop(conn)
	}
}
