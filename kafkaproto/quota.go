package kafkaproto

import (
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// throttle notes the node's quota throttle of an answer (throttle_ms, set
// by the node for a principal over its produce or fetch rate): the
// response carries it as ThrottleMillis, and the connection stack's reader
// takes no further request from the connection until it has passed.
func (c *conn) throttle(resp *strandpb.Response) {
	ms := max(resp.GetProduce().GetThrottleMs(), resp.GetFetch().GetThrottleMs())
	if ms > 0 && c.lc != nil {
		c.lc.ThrottleFor(time.Duration(ms) * time.Millisecond)
	}
}
