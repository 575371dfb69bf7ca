package clientlib

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestSimulatedGroupConsumerBacksOffAnUnavailableCoordinator: a member
// whose coordinator answers not_coordinator to every heartbeat (a group
// whose offsets partition has no quorum) heart-beats again after a
// growing backoff, not at the first backoff step each time, and a Poll
// that owns nothing waits for the next heartbeat instead of returning at
// once: over a second of virtual time it sends a few dozen heartbeats and
// returns a few dozen Polls, not hundreds (the simulator's seed 253 spent
// its event budget on two such members during a 40 s coordinator outage).
func TestSimulatedGroupConsumerBacksOffAnUnavailableCoordinator(t *testing.T) {
	w := &scriptedWorld{}
	beats := 0
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetFindCoordinator() != nil:
			return &strandpb.Response{Body: &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{Address: "n1"}}}
		case req.GetGroupHeartbeat() != nil:
			beats++
			return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, Message: "not the group's coordinator"}}
		}
		t.Fatalf("unexpected request %T", req.GetBody())
		return nil
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), RetryBackoff(5*time.Millisecond, 160*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGroupConsumer(c, "g", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	polls := 0
	c.SimRun(func(ctx context.Context) {
		for i := 0; i < 100000 && w.now < time.Second; i++ {
			g.Poll(ctx)
			polls++
		}
	}, func() {})
	w.run(t, 1000000)
	if w.now < time.Second {
		t.Fatalf("virtual time %v: the polls did not last a second", w.now)
	}
	t.Logf("%d heartbeats, %d Polls", beats, polls)
	if beats > 40 || polls > 40 {
		t.Fatalf("%d heartbeats and %d Polls in %v of an unavailable coordinator: want at most 40 each (a growing backoff)", beats, polls, w.now)
	}
	if beats < 5 {
		t.Fatalf("%d heartbeats in %v: want it to keep trying", beats, w.now)
	}
}
