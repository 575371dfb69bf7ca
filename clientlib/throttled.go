package clientlib

import (
	"cmp"
	"slices"
	"time"
)

// Lookups (metadata, FindCoordinator: anyRequest) ask the nodes whose
// data connection is under a quota throttle after every other node
// (candidates), the soonest free first, as Kafka's client picks the
// least-loaded node for them and passes over a throttled one
// (NetworkClient.leastLoadedNode: a throttled connection is not ready).
// A throttled connection holds every request sent on it until the
// throttle ends (conn.go's lockUnthrottled, simConns.send): before, a
// lookup that drew a throttled node waited out its throttle (up to
// RequestTimeout, then failed) while another node could have answered at
// once (TestLookupSkipsThrottledNode).

// throttleLeftLocked is how long the node at addr still throttles the
// Client's data connection to it (0: not throttled, or no connection).
// The caller holds c.mu.
func (c *Client) throttleLeftLocked(addr string) time.Duration {
	if t, ok := c.cfg.simulated.(*simConns); ok {
		sc := t.by[connKey{addr: addr}]
		if sc == nil || !t.conns.Open(sc.id) {
			return 0
		}
		return max(sc.throttleUntil-t.Now(), 0)
	}
	bc := c.conns[connKey{addr: addr}]
	if bc == nil || bc.isDead() {
		return 0
	}
	return max(time.Duration(bc.throttleUntil.Load())-time.Since(bc.born), 0)
}

// throttledLastLocked moves the throttled addresses of addrs to its end,
// the soonest free first; the others keep their order. The caller holds
// c.mu.
func (c *Client) throttledLastLocked(addrs []string) []string {
	type held struct {
		addr string
		left time.Duration
	}
	var free []string
	var throttled []held
	for _, a := range addrs {
		if d := c.throttleLeftLocked(a); d > 0 {
			throttled = append(throttled, held{a, d})
			continue
		}
		free = append(free, a)
	}
	if len(throttled) == 0 {
		return addrs
	}
	slices.SortStableFunc(throttled, func(x, y held) int { return cmp.Compare(x.left, y.left) })
	for _, h := range throttled {
		free = append(free, h.addr)
	}
	return free
}
