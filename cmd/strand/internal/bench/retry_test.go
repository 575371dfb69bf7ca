package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// fakeRetrier is a retrier on a fake clock: each wait moves the clock on
// by the wait and records it.
func fakeRetrier(waits *[]time.Duration) retrier {
	now := time.Unix(0, 0)
	return retrier{backoff: retryBackoff, rng: rand.New(rand.NewPCG(1, 2)),
		now: func() time.Time { return now },
		wait: func(_ context.Context, d time.Duration) error {
			*waits = append(*waits, d)
			now = now.Add(d)
			return nil
		}}
}

// Between tries retry waits clientlib's jittered backoff: wait n lies in
// [step/2, step] with step = 50 ms doubled n-1 times, at most 1 s.
func TestRetryWaitsJitteredBackoff(t *testing.T) {
	var waits []time.Duration
	tries := 0
	err := fakeRetrier(&waits).retry(context.Background(), time.Hour, "ready", func() error {
		if tries++; tries < 9 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || tries != 9 || len(waits) != 8 {
		t.Fatalf("err %v after %d tries and %d waits, want nil after 9 and 8", err, tries, len(waits))
	}
	for i, d := range waits {
		step := min(50*time.Millisecond<<i, time.Second)
		if d < step/2 || d > step {
			t.Fatalf("wait %d: %v outside [%v, %v]", i+1, d, step/2, step)
		}
	}
}

// No wait runs past the deadline: the last try happens at it, and the
// error names the condition and wraps the last try's error.
func TestRetryStopsAtDeadline(t *testing.T) {
	var waits []time.Duration
	last := errors.New("2 of 3 nodes registered")
	err := fakeRetrier(&waits).retry(context.Background(), 3*time.Second, "every server registered",
		func() error { return last })
	if !errors.Is(err, last) || !strings.Contains(err.Error(), "every server registered: not within 3s") {
		t.Fatalf("err %v, want the deadline's, wrapping %v", err, last)
	}
	var total time.Duration
	for _, d := range waits {
		total += d
	}
	if total != 3*time.Second {
		t.Fatalf("waited %v in all (%v), want exactly the 3 s allowed", total, waits)
	}
}

// A stopRetrying error ends the retries at once, unwrapped; so does a
// context that ended.
func TestRetryStops(t *testing.T) {
	var waits []time.Duration
	exited := errors.New("server 2 exited")
	if err := fakeRetrier(&waits).retry(context.Background(), time.Hour, "x",
		func() error { return stopRetrying{exited} }); err != exited || len(waits) != 0 {
		t.Fatalf("err %v after %d waits, want %v at once", err, len(waits), exited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := fakeRetrier(&waits).retry(ctx, time.Hour, "x",
		func() error { return errors.New("refused") }); err != context.Canceled || len(waits) != 0 {
		t.Fatalf("err %v after %d waits, want context.Canceled at once", err, len(waits))
	}
}
