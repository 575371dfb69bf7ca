package clientlib

import (
	"context"
	"fmt"
	"time"
)

// A node the Client could not connect to is not dialled again for a
// reconnect backoff (ReconnectBackoff; by default Kafka's
// reconnect.backoff.ms, 50 ms, doubling per failure in a row to
// reconnect.backoff.max.ms, 1 s), with jitter from the Client's seeded
// random source, so clients cut off together reconnect spread out and a
// simulated run replays. A request meanwhile fails at once with a
// *ConnError, not sent, naming the last dial's failure: its caller
// retries at its own (jittered) pace or asks another node (anyRequest).
// A dial that connects ends the backoff; a definite refusal (not a Strand
// node, TLS, authentication) does not start one. The simulated
// connections (sim_conns.go) keep the same backoff. Before, a node that
// refused connections was dialled again by every request: a consumer
// reading from it and another node dialled it 89 times in 5 s (its fetch
// and a metadata refresh at each Poll), 11 times since
// (TestSimulatedRefusedLeaderRedialledWithBackoff,
// TestRefusedNodeNotRedialledInBackoff).

// DefaultReconnectBackoff is Kafka's reconnect.backoff.ms (50 ms) growing
// to reconnect.backoff.max.ms (1 s).
var DefaultReconnectBackoff = Backoff{Base: 50 * time.Millisecond, Max: time.Second}

// redialState is a node's reconnect backoff.
type redialState struct {
	failures int           // dials in a row that failed
	at       time.Duration // no dial before (monotonic)
	err      error         // the last dial's failure
}

// redialRefusedLocked is the error a request to addr fails with while
// the address is in its reconnect backoff; nil: dial. The caller holds
// c.mu.
func (c *Client) redialRefusedLocked(addr string) error {
	st, ok := c.redial[addr]
	if !ok {
		return nil
	}
	left := st.at - c.monotonic()
	if left <= 0 {
		return nil
	}
	return &ConnError{Addr: addr, Err: fmt.Errorf("%w (not dialled again for %v: reconnect backoff)", st.err, left)}
}

// dialedLocked records the outcome of a dial to addr: a plain connection
// failure (err a *ConnError) starts or lengthens the address's reconnect
// backoff; anything else ends it; a dial whose ctx ended says nothing.
// The caller holds c.mu.
func (c *Client) dialedLocked(ctx context.Context, addr string, err error) {
	if ctx.Err() != nil {
		return
	}
	ce, failed := err.(*ConnError)
	if !failed {
		delete(c.redial, addr)
		return
	}
	if c.redial == nil {
		c.redial = map[string]redialState{}
	}
	st := c.redial[addr]
	st.failures++
	st.at = c.monotonic() + c.cfg.redialBackoff.Delay(st.failures, c.rng)
	st.err = ce.Err
	c.redial[addr] = st
}
