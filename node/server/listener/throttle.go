package listener

import "time"

// ThrottleMax bounds one pause of a connection's reader.
const ThrottleMax = 30 * time.Second

// ThrottleFor pauses the connection's reader for d from now: a quota
// throttle (the answer told the client how long, as Kafka's
// ThrottleMillis; the node reads nothing more from it until then, as Kafka
// mutes a throttled client's channel).
func (c *Conn) ThrottleFor(d time.Duration) {
	if d > 0 {
		c.throttleUntil.Store(time.Now().Add(d).UnixNano())
	}
}

// WaitThrottle pauses the reader while the connection is throttled (at
// most ThrottleMax), or until it closes.
func (c *Conn) WaitThrottle() {
	until := c.throttleUntil.Load()
	if until == 0 {
		return
	}
	if d := time.Until(time.Unix(0, until)); d > 0 {
		t := time.NewTimer(min(d, ThrottleMax))
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.done:
		}
	}
}
