package server

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/server/listener"
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
// times 11 samples; a client waits at most this long): the connection
// stack's bound on a reader's pause.
const throttleMax = listener.ThrottleMax

// tokenBucket meters one principal's bytes in one direction: a
// x/time/rate limiter holding one second of the rate, into whose debt a
// request may go (the debt is the throttle).
type tokenBucket struct {
	bytesPerSec int64
	limiter     *rate.Limiter
}

// charge takes n bytes at now and returns how long the client must wait
// until the bucket is out of debt (0: not throttled), at most throttleMax.
// A reservation holds at most the burst, so a larger charge goes into debt
// a second's worth at a time, and no further than throttleMax: a client
// waits no longer than that anyway.
func (b *tokenBucket) charge(bytesPerSec int64, n int, now time.Time) time.Duration {
	if b.limiter == nil || b.bytesPerSec != bytesPerSec { // new, or the quota changed: start full
		b.bytesPerSec, b.limiter = bytesPerSec, rate.NewLimiter(rate.Limit(bytesPerSec), int(bytesPerSec))
	}
	var wait time.Duration
	for n > 0 && wait < throttleMax {
		step := min(n, b.limiter.Burst())
		wait = b.limiter.ReserveN(now, step).DelayFrom(now)
		n -= step
	}
	return min(wait, throttleMax)
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
func (r *Server) metered(q loopRequest, reply func(*strandpb.Response)) func(*strandpb.Response) {
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
		if q.conn != nil {
			q.conn.lc.ThrottleFor(wait)
		}
		reply(resp)
	}
}
