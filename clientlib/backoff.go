package clientlib

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff is the retry policy: exponential from Base, capped at Max, with
// "equal jitter" (half the step fixed, half drawn from the caller's random
// source) so that many clients retrying the same failure spread out. It is
// a pure value: the caller hands in the random source, so the simulator's
// seeded *rand.Rand makes every delay replay. The client's request and
// batch retries, a dead-letter RetryPolicy and the bench's waits for a
// cluster all draw their waits from one.
type Backoff struct {
	Base time.Duration
	Max  time.Duration // the cap; 0 or less: none
}

// DefaultBackoff is Kafka's retry.backoff.ms (100 ms) growing to 1 s.
var DefaultBackoff = Backoff{Base: 100 * time.Millisecond, Max: time.Second}

// backoffDoublingsMax stops the doubling where Base<<n cannot overflow for
// any sane Base (2^30 × Base).
const backoffDoublingsMax = 30

// Delay is the wait before retry number attempt (1 for the first retry;
// less counts as 1). It lies in [step/2, step] where step = min(Base <<
// (attempt-1), Max); 0 when Base is not positive.
func (b Backoff) Delay(attempt int, rng *rand.Rand) time.Duration {
	step := b.step(attempt)
	if step <= 0 {
		return 0
	}
	half := step / 2
	return half + time.Duration(rng.Int64N(int64(step-half)+1))
}

// step is the upper end of Delay(attempt): Base doubled attempt-1 times
// (at most backoffDoublingsMax times), at most Max.
func (b Backoff) step(attempt int) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	n := min(max(attempt, 1)-1, backoffDoublingsMax)
	s := b.Base << n
	if s>>n != b.Base { // overflowed
		s = math.MaxInt64
	}
	if b.Max > 0 && s > b.Max {
		s = b.Max
	}
	return s
}
