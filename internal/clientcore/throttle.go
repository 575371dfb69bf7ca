package clientcore

import (
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// A node that served a principal past its quota answers with throttle_ms
// and then stops reading that connection for as long (node/server's
// listener pauses its reader, as Kafka mutes the channel). The client
// holds its own sends on the connection until then (Kafka's clients do
// the same since KIP-219), so nothing is written into a paused
// connection, and it counts neither the pause against the node's stall
// bound nor against a request's deadline: before, a throttle longer than
// StallTimeout (2 s; a throttle may be 30 s) made the client give the
// node up as stalled, suspect it, and reconnect on a fresh, unthrottled
// connection, escaping the quota.

// Throttle is how long resp asks its connection to be held: a produce's
// or fetch's throttle_ms; 0 for every other answer.
func Throttle(resp *strandpb.Response) time.Duration {
	var ms int32
	switch {
	case resp.GetProduce() != nil:
		ms = resp.GetProduce().GetThrottleMs()
	case resp.GetFetch() != nil:
		ms = resp.GetFetch().GetThrottleMs()
	}
	return time.Duration(max(ms, 0)) * time.Millisecond
}

// PastThrottle moves a call's clocks past its connection's throttle,
// which holds the connection until until: a call sent (or queued) before
// then counts as sent at until, and the node as heard from at until. Fed
// to Stalled and to the request's deadline, the node's pause is never
// held against it.
func PastThrottle(sentAt, lastRead, until time.Duration) (time.Duration, time.Duration) {
	return max(sentAt, until), max(lastRead, until)
}
