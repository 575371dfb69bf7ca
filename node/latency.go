package node

import "time"

// LatencyBuckets are the upper bounds of a LatencyHistogram's buckets, the
// last bucket being everything above the final bound. They span a
// same-machine fsync (100 µs) to a request timeout (10 s).
var LatencyBuckets = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// LatencyHistogram counts durations into LatencyBuckets: Counts[i] holds
// those at most LatencyBuckets[i] and above the bound before it, and the
// final count those above every bound. A plain value: copying it copies
// the counts.
type LatencyHistogram struct {
	Counts [len(LatencyBuckets) + 1]uint64
	Count  uint64
	Sum    time.Duration
}

// Observe counts one duration.
func (h *LatencyHistogram) Observe(d time.Duration) {
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	h.Counts[i]++
	h.Count++
	h.Sum += d
}

// noteCommitted counts the commit latency of an acks=all produce that
// applied successfully: from its proposal to its apply on this leader, by
// the Core's Clock (virtual time in the simulator).
func (c *Core) noteCommitted(w *produceWait) {
	c.stats.CommitLatency.Observe(c.cfg.Clock.Monotonic() - w.proposedAt)
}
