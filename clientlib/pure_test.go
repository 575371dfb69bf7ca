package clientlib

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// Backoff delays grow exponentially, stay in [step/2, step], cap at Max,
// and depend only on the random source handed in.
func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	rng := rand.New(rand.NewPCG(1, 1))
	for attempt, step := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		for i := 0; i < 100; i++ {
			if d := b.Delay(attempt, rng); d < step/2 || d > step {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, step/2, step)
			}
		}
	}
	a, c := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	for i := 1; i < 10; i++ {
		if b.Delay(i, a) != b.Delay(i, c) {
			t.Fatal("same seed, different delays")
		}
	}
}

// The classifier sends leader errors to a metadata refresh, marks
// timeouts as maybe-written, and refuses to retry definite errors.
func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Action
	}{
		{&Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER}, Action{Retriable: true, RefreshMetadata: true}},
		{&Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT}, Action{Retriable: true, MaybeWritten: true}},
		{&Error{Code: strandpb.ErrorCode_ERROR_CODE_BUSY}, Action{Retriable: true}}, // the leader has not moved
		{&Error{Code: strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE}, Action{}},
		{&Error{Code: strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE}, Action{}},
		{&ConnError{Addr: "a", Sent: true, Err: errors.New("x")}, Action{Retriable: true, RefreshMetadata: true, MaybeWritten: true}},
		{&ConnError{Addr: "a", Err: errors.New("x")}, Action{Retriable: true, RefreshMetadata: true}},
		{errors.New("other"), Action{}},
	}
	for _, c := range cases {
		if got := ClassifyErr(c.err); got != c.want {
			t.Errorf("%v: %+v, want %+v", c.err, got, c.want)
		}
	}
	if !errors.Is(&Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, Message: "m"}, ErrNotLeader) {
		t.Error("an *Error does not match its sentinel")
	}
}
