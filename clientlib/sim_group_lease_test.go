package clientlib

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestSimulatedGroupConsumerTakesPartitionsOnlyUnderAFreshLease: the
// heartbeat answer gives t/0, and the member's read of its committed
// offset is lost (a second to time out) before a retry answers. By then
// the session (1 s) the answer started has lapsed: the coordinator may
// have expired the member and given t/0 to another. OnAssigned must not
// run on that stale answer; the member heart-beats again (rejoining) and
// takes t/0 from a fresh answer, less than half a session after that
// heartbeat was sent. Before, OnAssigned ran 1.06 s after the heartbeat
// (the simulator's seed 114: 1.18 s, while another member held the
// partition under a newer epoch).
func TestSimulatedGroupConsumerTakesPartitionsOnlyUnderAFreshLease(t *testing.T) {
	w := newGroupWorld(t)
	answer := w.answer
	var beatSent time.Duration
	fetches := 0
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetGroupHeartbeat() != nil:
			beatSent = w.now
		case req.GetOffsetFetch() != nil:
			if fetches++; fetches == 1 {
				return nil // lost: the call times out after a second
			}
		}
		return answer(addr, req)
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	var late []time.Duration // how long after its heartbeat each OnAssigned ran
	g, err := NewGroupConsumer(c, "g", []string{"t"}, AutoCommitInterval(0),
		OnAssigned(func(context.Context, []TopicPartition) { late = append(late, w.now-beatSent) }))
	if err != nil {
		t.Fatal(err)
	}
	c.SimRun(func(ctx context.Context) {
		for i := 0; i < 100 && len(late) == 0; i++ {
			g.Poll(ctx)
		}
	}, func() {})
	w.run(t, 100000)
	if fetches < 2 {
		t.Fatalf("%d committed-offset reads: the lost one was never retried", fetches)
	}
	if len(late) == 0 {
		t.Fatalf("never took t/0 (virtual time %v)", w.now)
	}
	for _, d := range late {
		if d > 500*time.Millisecond {
			t.Fatalf("OnAssigned ran %v after the heartbeat whose answer gave the partition (session 1 s): its lease was stale", d)
		}
	}
}
