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
// virtual time an answer last arrived from each address (a real
// connection's lastRead).
type simWatch struct {
	lastRead map[string]time.Duration
}

// simCall sends req to addr on the simulated Transport; done runs once,
// with the answer, the Transport's error, or the client's own verdict:
// TIMEOUT after timeout, a stall after the stall bound beyond wait (the
// call's legitimate wait, a long poll's). A request that expects no
// answer (acks=0) is not watched: its call ends when it is written.
func (c *Client) simCall(addr string, req *strandpb.Request, timeout, wait time.Duration, done func(*strandpb.Response, error)) {
	t := c.cfg.simulated
	if c.simWatch.lastRead == nil {
		c.simWatch.lastRead = map[string]time.Duration{}
	}
	sent := t.Now()
	finished := false
	finish := func(resp *strandpb.Response, err error) {
		if !finished {
			finished = true
			done(resp, err)
		}
	}
	t.Call(addr, req, func(resp *strandpb.Response, err error) {
		if err == nil {
			c.simWatch.lastRead[addr] = max(c.simWatch.lastRead[addr], t.Now())
			c.reached.Store(true)
		}
		finish(resp, err)
	})
	if finished || noAnswer(req) || timeout <= 0 {
		return
	}
	conn := c.simConnOf(addr)
	// past is the call's send time and the node's last answer, moved past
	// the connection's throttle (clientcore.PastThrottle), as await does.
	past := func() (time.Duration, time.Duration) {
		if conn == nil {
			return sent, c.simWatch.lastRead[addr]
		}
		return clientcore.PastThrottle(sent, c.simWatch.lastRead[addr], conn.throttleUntil)
	}
	var expire func()
	expire = func() {
		if finished {
			return
		}
		if s, _ := past(); t.Now() < s+timeout {
			t.After(s+timeout-t.Now(), expire) // a throttle moved the deadline
			return
		}
		c.simKill(addr, conn)
		finish(nil, &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT,
			Message: fmt.Sprintf("no answer from %s within %v", addr, timeout)})
	}
	t.After(timeout, expire)
	// The stall bound is the node's (StallTimeout doubled per recent
	// stall, Suspects) once the connection's Hello named it.
	stallOf := func() (uint64, time.Duration) {
		if conn != nil && conn.node != 0 {
			return conn.node, c.stallBound(conn.node)
		}
		return 0, c.cfg.stallTimeout
	}
	if _, stall := stallOf(); stall <= 0 {
		return
	}
	var check func()
	arm := func() {
		_, stall := stallOf()
		// Stalled turns true just after both bounds passed.
		s, r := past()
		at := max(s+wait+stall, r+stall) + 1
		if at >= s+timeout {
			return // the deadline comes first
		}
		t.After(at-t.Now(), check)
	}
	check = func() {
		if finished {
			return
		}
		node, stall := stallOf()
		s, r := past()
		if !clientcore.Stalled(t.Now(), s, r, wait, stall) {
			arm()
			return
		}
		c.simKill(addr, conn)
		if node != 0 {
			c.markSuspect(node)
		}
		finish(nil, connFailure(addr, true, fmt.Errorf("%w: nothing received for %v", errStalled, stall)))
	}
	arm()
}

// noAnswer reports whether req expects no answer: a produce at acks=0.
func noAnswer(req *strandpb.Request) bool {
	p := req.GetProduce()
	return p != nil && p.GetAcks() == 0
}

// simConnOf is the connection a call to addr just went on (nil when the
// Transport models none).
func (c *Client) simConnOf(addr string) *simConn {
	if s, ok := c.cfg.simulated.(*simConns); ok {
		return s.by[addr]
	}
	return nil
}

// simKill closes conn, as a real connection is killed when a call on it
// times out or stalls: the next request to addr dials (and authenticates)
// again.
func (c *Client) simKill(addr string, conn *simConn) {
	if s, ok := c.cfg.simulated.(*simConns); ok && conn != nil {
		s.drop(addr, conn)
	}
}
