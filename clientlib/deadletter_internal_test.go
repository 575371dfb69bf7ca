package clientlib

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// The retry policy tries MaxAttempts times, waits a jittered backoff
// before each retry (never before the first attempt), stops at the first
// success, and bounds the total by MaxDelay.
func TestRetryPolicyAttemptsAndWaits(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 4, Backoff: Backoff{Base: 100 * time.Millisecond, Max: 250 * time.Millisecond}, AttemptTimeout: time.Second}
	var waits []time.Duration
	wait := func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	calls := 0
	n, err := p.retry(context.Background(), rand.New(rand.NewPCG(1, 2)), wait, func(ctx context.Context) error {
		calls++
		if HandlerAttempt(ctx) != calls {
			t.Errorf("HandlerAttempt %d on call %d", HandlerAttempt(ctx), calls)
		}
		return errors.New("bad record")
	})
	if n != 4 || calls != 4 || err == nil || err.Error() != "bad record" {
		t.Fatalf("attempts %d, calls %d, err %v; want 4, 4, the last error", n, calls, err)
	}
	if len(waits) != 3 {
		t.Fatalf("waited %d times, want 3 (between 4 attempts)", len(waits))
	}
	for i, step := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond} {
		if waits[i] < step/2 || waits[i] > step {
			t.Fatalf("wait %d = %v outside [%v, %v]", i+1, waits[i], step/2, step)
		}
	}
	if want := 4*time.Second + 550*time.Millisecond; p.MaxDelay() != want {
		t.Fatalf("MaxDelay %v, want %v (4 attempt timeouts + 100+200+250 ms)", p.MaxDelay(), want)
	}
	waits, calls = nil, 0
	n, err = p.retry(context.Background(), rand.New(rand.NewPCG(1, 2)), wait, func(context.Context) error {
		calls++
		if calls < 2 {
			return errors.New("transient")
		}
		return nil
	})
	if n != 2 || err != nil || len(waits) != 1 {
		t.Fatalf("attempts %d, err %v, waits %d; want success at attempt 2 after one wait", n, err, len(waits))
	}
}

// Each attempt runs under AttemptTimeout; a panic is a failed attempt
// (HandlerPanicError), not a crash; an ended ctx stops the retries.
func TestRetryPolicyDeadlinePanicAndStop(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 2, AttemptTimeout: time.Millisecond}
	noWait := func(context.Context, time.Duration) error { return nil }
	_, err := p.retry(context.Background(), rand.New(rand.NewPCG(1, 1)), noWait, func(ctx context.Context) error {
		<-ctx.Done() // a handler stuck until its deadline
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the attempt's deadline", err)
	}
	_, err = p.retry(context.Background(), rand.New(rand.NewPCG(1, 1)), noWait, func(context.Context) error { panic("boom") })
	var pe *HandlerPanicError
	if !errors.As(err, &pe) || pe.Value != "boom" {
		t.Fatalf("err %v, want a HandlerPanicError", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	n, _ := RetryPolicy{MaxAttempts: 5}.retry(ctx, rand.New(rand.NewPCG(1, 1)), noWait, func(context.Context) error {
		calls++
		cancel()
		return errors.New("failed while stopping")
	})
	if n != 1 || calls != 1 {
		t.Fatalf("attempts %d, calls %d after ctx ended; want 1", n, calls)
	}
}

// A policy that cannot bound a record is refused with the field named.
func TestRetryPolicyValidate(t *testing.T) {
	for _, p := range []RetryPolicy{{MaxAttempts: 0}, {MaxAttempts: -1}, {MaxAttempts: 1, AttemptTimeout: -1},
		{MaxAttempts: 1, Backoff: Backoff{Base: -1}}} {
		var oe *OptionError
		if err := p.validate(); !errors.As(err, &oe) {
			t.Fatalf("%+v: %v, want an OptionError", p, err)
		}
	}
	if err := DefaultRetryPolicy.validate(); err != nil {
		t.Fatal(err)
	}
}

// A Handle call's retry jitter replays under the Client's RandSeed: two
// clients seeded alike draw the same source, two seeded apart do not.
// Before, it was seeded from the wall clock whatever RandSeed said.
func TestHandlingJitterFromClientSeed(t *testing.T) {
	draw := func(seed uint64) uint64 {
		c, err := NewClient(SeedAddresses("127.0.0.1:1"), RandSeed(seed))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		g, err := NewGroupConsumer(c, "g", []string{"t"})
		if err != nil {
			t.Fatal(err)
		}
		hs, err := g.newHandling(Handling{})
		if err != nil {
			t.Fatal(err)
		}
		return hs.rng.Uint64()
	}
	if a, b := draw(7), draw(7); a != b {
		t.Fatalf("seed 7 drew %d, then %d", a, b)
	}
	if a, b := draw(7), draw(8); a == b {
		t.Fatalf("seeds 7 and 8 both drew %d", a)
	}
}
