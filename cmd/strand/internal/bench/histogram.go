package bench

import (
	"fmt"
	"math/bits"
	"syscall"
	"time"
)

// histogram counts durations in log-linear buckets: 64 linear sub-buckets
// per power of two of nanoseconds, so quantiles are within 1/64 (1.6 %).
// Fixed size whatever the run length; not safe for concurrent use.
type histogram struct {
	counts [64 * 64]uint64
	total  uint64
	max    time.Duration
}

const histogramSubBits = 6

func histogramBucket(ns uint64) int {
	if ns < 1<<histogramSubBits {
		return int(ns)
	}
	exp := bits.Len64(ns) - histogramSubBits // ≥ 1
	sub := ns >> uint(exp-1) & (1<<histogramSubBits - 1)
	return exp<<histogramSubBits | int(sub)
}

// histogramLow is the smallest value of bucket b.
func histogramLow(b int) uint64 {
	exp, sub := b>>histogramSubBits, uint64(b&(1<<histogramSubBits-1))
	if exp == 0 {
		return sub
	}
	return (1<<histogramSubBits | sub) << uint(exp-1)
}

// record adds one duration (negative counts as 0).
func (h *histogram) record(d time.Duration) {
	ns := uint64(max(d, 0))
	b := min(histogramBucket(ns), len(h.counts)-1)
	h.counts[b]++
	h.total++
	h.max = max(h.max, d)
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// quantile is the smallest bucket bound with at least q of the values
// at or below it.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	want := uint64(q*float64(h.total) + 0.5)
	want = max(want, 1)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= want {
			return min(time.Duration(histogramLow(b+1)), h.max)
		}
	}
	return h.max
}

// summary renders p50, p99, p999 and max.
func (h *histogram) summary() string {
	return fmt.Sprintf("p50 %s  p99 %s  p999 %s  max %s", roundDuration(h.quantile(0.50)),
		roundDuration(h.quantile(0.99)), roundDuration(h.quantile(0.999)), roundDuration(h.max))
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// cpuUsage is this process's CPU time so far (user, system).
func cpuUsage() (user, system time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
