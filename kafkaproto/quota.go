package kafkaproto

import (
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// throttleMax bounds one pause of a connection's reader.
const throttleMax = 30 * time.Second

// throttle notes the node's quota throttle of an answer (throttle_ms, set
// by the node for a principal over its produce or fetch rate): the
// response carries it as ThrottleMillis, and the reader takes no further
// request from the connection until it has passed.
func (c *conn) throttle(resp *strandpb.Response) {
	ms := max(resp.GetProduce().GetThrottleMs(), resp.GetFetch().GetThrottleMs())
	if ms > 0 {
		c.throttleUntil.Store(time.Now().Add(time.Duration(ms) * time.Millisecond).UnixNano())
	}
}

// waitThrottle pauses the reader while the connection is throttled.
func (c *conn) waitThrottle() {
	until := c.throttleUntil.Load()
	if until == 0 {
		return
	}
	if d := time.Until(time.Unix(0, until)); d > 0 {
		t := time.NewTimer(min(d, throttleMax))
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.done:
		}
	}
}
