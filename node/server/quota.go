package server

import (
	"github.com/strandlog/strand/node/loop"
	"github.com/strandlog/strand/node/server/listener"
)

// Quotas (issue 13) are metered by the loop's round (package loop:
// loop.Round.Meter, the token buckets with the Core's Clock's time); the
// server pauses a throttled native connection's reads
// (listener.Conn.ThrottleFor, in handle).

// The round's throttle cap is the listener's pause cap: a constant index
// out of range (a compile error) unless they are equal.
var _ = [1]struct{}{}[loop.ThrottleMax-listener.ThrottleMax]
