package loop

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// Quotas (issue 13): per principal produce and fetch byte rates, set in
// the metadata group (strand quota set) and enforced by each node on its
// own traffic, as Kafka's are: a token bucket per principal and direction
// holds one second of its rate; a request that overdraws it is served,
// its answer says how long the client is throttled (throttle_ms, Kafka's
// ThrottleMillis), and node/server reads nothing more from that
// connection until then. The buckets take time as an argument (x/time/rate
// does), the Core's Clock's, so the simulator runs the same decision in
// virtual time. Rejected: holding the answer back (a client's own timeout
// would fire and it would resend, adding load); cluster-wide buckets (a
// round trip through raft per request).

// ThrottleMax bounds one throttle (Kafka's default quota window is 1 s
// times 11 samples; a client waits at most this long): node/server's
// connection stack bounds a reader's pause alike (listener.ThrottleMax; the
// server fails to compile if the two differ).
const ThrottleMax = 30 * time.Second

// quotaEpoch turns the Clock's monotonic time into the time.Time the
// buckets take.
var quotaEpoch = time.Unix(0, 0)

// tokenBucket meters one principal's bytes in one direction: a
// x/time/rate limiter holding one second of the rate, into whose debt a
// request may go (the debt is the throttle).
type tokenBucket struct {
	bytesPerSec int64
	limiter     *rate.Limiter
}

// charge takes n bytes at now and returns how long the client must wait
// until the bucket is out of debt (0: not throttled), at most ThrottleMax.
// A reservation holds at most the burst, so a larger charge goes into debt
// a second's worth at a time, and no further than ThrottleMax: a client
// waits no longer than that anyway.
func (b *tokenBucket) charge(bytesPerSec int64, n int, now time.Time) time.Duration {
	if b.limiter == nil || b.bytesPerSec != bytesPerSec { // new, or the quota changed: start full
		b.bytesPerSec, b.limiter = bytesPerSec, rate.NewLimiter(rate.Limit(bytesPerSec), int(bytesPerSec))
	}
	var wait time.Duration
	for n > 0 && wait < ThrottleMax {
		step := min(n, b.limiter.Burst())
		wait = b.limiter.ReserveN(now, step).DelayFrom(now)
		n -= step
	}
	return min(wait, ThrottleMax)
}

// Quotas holds the buckets of every principal that was charged. Owned by
// the loop.
type Quotas struct {
	produce map[node.Principal]*tokenBucket
	fetch   map[node.Principal]*tokenBucket
}

// Charge meters n bytes of principal's produce (or fetch) traffic at now
// against bytesPerSec and returns the throttle (0: none).
func (m *Quotas) Charge(principal node.Principal, fetch bool, bytesPerSec int64, n int, now time.Time) time.Duration {
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
	return b.charge(bytesPerSec, n, now)
}

// Meter wraps reply so a produce or fetch answer to a principal with a
// quota (in the view as the request arrives) is charged, at the Clock's
// time when it is answered, and carries its throttle (throttle_ms);
// reply gets the answer and the throttle (0: none), which node/server
// turns into a pause of the connection's reads. Other answers pass with 0.
func (r *Round) Meter(caller node.Caller, req *strandpb.Request, reply func(*strandpb.Response, time.Duration)) func(*strandpb.Response) {
	pass := func(resp *strandpb.Response) { reply(resp, 0) }
	view := r.Security()
	if view == nil || !view.HasQuotas() {
		return pass
	}
	principal := caller.Principal
	if principal == "" {
		principal = node.Anonymous
	}
	quota, ok := view.Quota(principal)
	if !ok {
		return pass
	}
	var produced int
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Produce:
		if quota.ProduceBytesPerSec == 0 {
			return pass
		}
		for _, p := range b.Produce.GetPartitions() {
			produced += len(p.GetBatch())
		}
	case *strandpb.Request_Fetch:
		if quota.FetchBytesPerSec == 0 {
			return pass
		}
	default:
		return pass
	}
	return func(resp *strandpb.Response) {
		var wait time.Duration
		now := quotaEpoch.Add(r.cfg.Clock.Monotonic())
		if p := resp.GetProduce(); p != nil {
			wait = r.quotas.Charge(principal, false, quota.ProduceBytesPerSec, produced, now)
			p.ThrottleMs = int32(wait / time.Millisecond)
		} else if f := resp.GetFetch(); f != nil {
			n := 0
			for _, part := range f.GetPartitions() {
				for _, b := range part.GetBatches() {
					n += len(b.GetRecords())
				}
			}
			wait = r.quotas.Charge(principal, true, quota.FetchBytesPerSec, n, now)
			f.ThrottleMs = int32(wait / time.Millisecond)
		}
		reply(resp, wait)
	}
}
