package server

import (
	"sync"
	"time"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// Quotas (issue 13): per principal produce and fetch byte rates, set in
// the metadata group (strand quota set) and enforced by each node on its
// own traffic, as Kafka's are: a token bucket per principal and direction
// holds one second of its rate; a request that overdraws it is served,
// its answer says how long the client is throttled (throttle_ms, Kafka's
// ThrottleMillis), and the node reads nothing more from that connection
// until then. Real time is fine here: node/server is not the pure core.
// Rejected: holding the answer back (a client's own timeout would fire
// and it would resend, adding load); cluster-wide buckets (a round trip
// through raft per request).

// throttleMax bounds one throttle (Kafka's default quota window is 1 s
// times 11 samples; a client waits at most this long).
const throttleMax = 30 * time.Second

// tokenBucket meters one principal's bytes in one direction.
type tokenBucket struct {
	rate   float64 // bytes per second
	tokens float64 // may go negative: the debt that is the throttle
	last   time.Time
}

// charge takes n bytes at now and returns how long the client must wait
// until the bucket is out of debt (0: not throttled).
func (b *tokenBucket) charge(rate int64, n int, now time.Time) time.Duration {
	if b.rate != float64(rate) || b.last.IsZero() {
		*b = tokenBucket{rate: float64(rate), tokens: float64(rate), last: now}
	}
	b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return min(throttleMax, time.Duration(-b.tokens/b.rate*float64(time.Second)))
}

// quotaMeters holds the buckets of every principal with a quota.
type quotaMeters struct {
	mu      sync.Mutex
	produce map[node.Principal]*tokenBucket
	fetch   map[node.Principal]*tokenBucket
}

// charge meters n bytes of principal's produce (or fetch) traffic.
func (m *quotaMeters) charge(principal node.Principal, fetch bool, rate int64, n int, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	buckets := &m.produce
	if fetch {
		buckets = &m.fetch
	}
	if *buckets == nil {
		*buckets = map[node.Principal]*tokenBucket{}
	}
	b := (*buckets)[principal]
	if b == nil {
		b = &tokenBucket{}
		(*buckets)[principal] = b
	}
	return b.charge(rate, n, now)
}

// metered wraps reply so a produce or fetch answer of a principal with a
// quota is charged and carries its throttle; a native connection then
// pauses its reads (the Kafka listener reads throttle_ms itself).
func (r *Server) metered(q runtimeRequest, reply func(*strandpb.Response)) func(*strandpb.Response) {
	view := r.security.Load()
	if view == nil || len(view.quotas) == 0 {
		return reply
	}
	quota, ok := view.quotas[string(q.caller.Principal)]
	if !ok {
		return reply
	}
	var produced int
	switch b := q.req.GetBody().(type) {
	case *strandpb.Request_Produce:
		if quota.ProduceBytesPerSec == 0 {
			return reply
		}
		for _, p := range b.Produce.GetPartitions() {
			produced += len(p.GetBatch())
		}
	case *strandpb.Request_Fetch:
		if quota.FetchBytesPerSec == 0 {
			return reply
		}
	default:
		return reply
	}
	return func(resp *strandpb.Response) {
		var wait time.Duration
		now := time.Now()
		if p := resp.GetProduce(); p != nil {
			wait = r.quotas.charge(q.caller.Principal, false, quota.ProduceBytesPerSec, produced, now)
			p.ThrottleMs = int32(wait / time.Millisecond)
		} else if f := resp.GetFetch(); f != nil {
			n := 0
			for _, part := range f.GetPartitions() {
				for _, b := range part.GetBatches() {
					n += len(b.GetRecords())
				}
			}
			wait = r.quotas.charge(q.caller.Principal, true, quota.FetchBytesPerSec, n, now)
			f.ThrottleMs = int32(wait / time.Millisecond)
		}
		if wait > 0 && q.conn != nil {
			q.conn.throttleUntil.Store(now.Add(wait).UnixNano())
		}
		reply(resp)
	}
}

// waitThrottle pauses the reader while the connection is throttled.
func (c *runtimeConn) waitThrottle() {
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
