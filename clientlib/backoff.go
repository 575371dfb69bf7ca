package clientlib

import (
	"math/rand/v2"
	"time"
)

// Backoff is the retry policy: exponential from Base, capped at Max, with
// "equal jitter" (half the step fixed, half drawn from the caller's random
// source) so that many clients retrying the same failure spread out. It is
// a pure value: the simulator passes its seeded *rand.Rand.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// DefaultBackoff is Kafka's retry.backoff.ms (100 ms) growing to 1 s.
var DefaultBackoff = Backoff{Base: 100 * time.Millisecond, Max: time.Second}

// Delay is the wait before retry number attempt (1 for the first retry).
// It lies in [step/2, step] where step = min(Base<<(attempt-1), Max).
func (b Backoff) Delay(attempt int, rng *rand.Rand) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	step := b.Max
	if attempt < 1 {
		attempt = 1
	}
	if attempt <= 30 {
		if s := b.Base << (attempt - 1); s > 0 && (b.Max <= 0 || s < b.Max) {
			step = s
		}
	}
	if step <= 0 {
		step = b.Base
	}
	half := step / 2
	return half + time.Duration(rng.Int64N(int64(step-half)+1))
}
