package clientlib

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// Every delay lies in [step/2, step], where step is Base doubled per
// attempt and capped at Max (no cap when Max is 0), and never shrinks as
// attempts grow, whatever the policy: the bounds a caller relies on to
// bound its own wait (RetryPolicy.MaxDelay) and to spread retries out.
func TestBackoffBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, b := range []Backoff{
		{Base: 100 * time.Millisecond, Max: time.Second},
		{Base: 5 * time.Millisecond, Max: 160 * time.Millisecond},
		{Base: time.Second, Max: 100 * time.Millisecond}, // Max below Base: every step is Max
		{Base: time.Millisecond},                         // no cap
		{Base: time.Hour},                                // no cap, doublings that would overflow
		{Base: 1, Max: 1},
	} {
		lastLow := time.Duration(0)
		for attempt := -1; attempt <= 70; attempt++ {
			step := wantStep(b, attempt)
			for range 20 {
				d := b.Delay(attempt, rng)
				if d < step/2 || d > step {
					t.Fatalf("%+v attempt %d: delay %v outside [%v, %v]", b, attempt, d, step/2, step)
				}
			}
			if step/2 < lastLow {
				t.Fatalf("%+v attempt %d: lower bound %v below the previous attempt's %v", b, attempt, step/2, lastLow)
			}
			lastLow = step / 2
		}
	}
	if d := (Backoff{Max: time.Second}).Delay(3, rng); d != 0 {
		t.Fatalf("no Base: delay %v, want 0", d)
	}
}

// wantStep is the upper bound of Delay(attempt) as Backoff's doc states
// it, computed apart from Backoff: Base doubled attempt-1 times (attempt
// below 1 counts as 1; at most 30 doublings), capped at Max when Max > 0.
func wantStep(b Backoff, attempt int) time.Duration {
	step := b.Base
	for n := 1; n < min(attempt, 31); n++ {
		if step > (1<<63-1)/2 {
			step = 1<<63 - 1
			break
		}
		step *= 2
	}
	if b.Max > 0 && step > b.Max {
		step = b.Max
	}
	return step
}

// The jitter spreads retries: draws for one attempt take many values, so
// clients failing together do not retry together.
func TestBackoffJittered(t *testing.T) {
	b, rng := DefaultBackoff, rand.New(rand.NewPCG(5, 5))
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[b.Delay(4, rng)] = true
	}
	if len(seen) < 50 {
		t.Fatalf("%d distinct delays in 100 draws: not jittered", len(seen))
	}
}

// A consumer's Poll that failed retriably (or found nothing to fetch)
// waits a jittered backoff step before the next, not a fixed one, and the
// step doubles with each such Poll in a row up to the Backoff's Max
// (KIP-580), so an outage is not polled every few milliseconds.
func TestConsumerRetryDelayJitteredAndGrowing(t *testing.T) {
	c, err := NewClient(RetryBackoff(100*time.Millisecond, time.Second), RandSeed(9))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[time.Duration]bool{}
	for range 100 {
		d := NewConsumer(c).retryDelay() // the first retry of a fresh consumer
		if d < 50*time.Millisecond || d > 100*time.Millisecond {
			t.Fatalf("first retry delay %v outside [50ms, 100ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Fatalf("%d distinct retry delays in 100: not jittered", len(seen))
	}
	k := NewConsumer(c)
	for n, step := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		step *= time.Millisecond
		if d := k.retryDelay(); d < step/2 || d > step {
			t.Fatalf("retry %d: delay %v outside [%v, %v]", n+1, d, step/2, step)
		}
	}
}

// An AddPartitionsToTxn refused CONCURRENT_TRANSACTIONS (the previous
// transaction's markers are still being written) is retried after
// Kafka's 20 ms, not the client's general 100 ms backoff, which cost a
// short transaction most of its time (about 12 commits/s, 29–40 with
// 20 ms, in make bench-txn); other retriable refusals keep the general
// backoff, and a smaller general backoff is never lengthened.
func TestTxnAddBackoffForConcurrentTransactions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	concurrent := &Error{Code: strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS}
	other := &Error{Code: strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE}
	for range 100 {
		if d := txnAddBackoff(DefaultBackoff, 1, concurrent, rng); d > 20*time.Millisecond {
			t.Fatalf("first retry after CONCURRENT_TRANSACTIONS waits %v, want at most 20ms", d)
		}
		if d := txnAddBackoff(DefaultBackoff, 1, other, rng); d < 50*time.Millisecond {
			t.Fatalf("first retry after COORDINATOR_NOT_AVAILABLE waits %v, want the general backoff (50-100ms)", d)
		}
		if d := txnAddBackoff(Backoff{Base: time.Millisecond}, 1, concurrent, rng); d > time.Millisecond {
			t.Fatalf("a 1ms general backoff became %v", d)
		}
	}
}
