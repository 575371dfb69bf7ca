package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// retryBackoff is the wait between two tries of something the cluster is
// not ready for yet (registration, leaders, an admin listener): clientlib's
// jittered backoff, the one every client of this module retries with, from
// 50 ms doubling to 1 s.
var retryBackoff = clientlib.Backoff{Base: 50 * time.Millisecond, Max: time.Second}

// stopRetrying wraps an error no later try can fix (a server exited):
// retry returns the wrapped error at once.
type stopRetrying struct{ err error }

func (s stopRetrying) Error() string { return s.err.Error() }

// retry calls try until it returns nil, returns a stopRetrying, ctx ends
// or within passes, waiting retryBackoff's jittered delays in between.
// what names the awaited condition in the error that says it never came.
func retry(ctx context.Context, within time.Duration, what string, try func() error) error {
	r := retrier{backoff: retryBackoff, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		now: time.Now, wait: sleepCtx}
	return r.retry(ctx, within, what, try)
}

// retrier is retry's loop. Its clock and its wait are fields, so a test
// runs it on a fake clock and checks every wait it asked for.
type retrier struct {
	backoff clientlib.Backoff
	rng     *rand.Rand
	now     func() time.Time
	wait    func(ctx context.Context, d time.Duration) error
}

// retry is the loop of the function retry. No wait runs past the
// deadline, so the last try happens at it.
func (r retrier) retry(ctx context.Context, within time.Duration, what string, try func() error) error {
	deadline := r.now().Add(within)
	for attempt := 1; ; attempt++ {
		err := try()
		var stop stopRetrying
		switch {
		case err == nil:
			return nil
		case errors.As(err, &stop):
			return stop.err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		left := deadline.Sub(r.now())
		if left <= 0 {
			return fmt.Errorf("bench cluster: %s: not within %s: %w", what, within, err)
		}
		if werr := r.wait(ctx, min(r.backoff.Delay(attempt, r.rng), left)); werr != nil {
			return werr
		}
	}
}

// sleepCtx waits d, or returns ctx's error when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
