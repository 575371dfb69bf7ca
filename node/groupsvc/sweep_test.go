package groupsvc

import (
	"testing"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/proto/strandpb"
)

// TestSweepExpiresSilentMembers shows the sweep's decisions from a
// Coordinator and the node's clocks alone: a member's timer starts when
// the coordinator first sees it, a member silent past the session is
// expired once (its key in flight until answered), one with a heartbeat in
// flight is not, and an applied expiry drops the member's timer.
func TestSweepExpiresSilentMembers(t *testing.T) {
	co := New(1, 1, 0)
	for i, m := range []string{"a", "b"} {
		if _, err := co.State.Heartbeat(groups.Heartbeat{Group: "g", MemberID: m, Seq: uint64(i + 1), Subscriptions: []string{"t"},
			Topics: []groups.TopicInfo{{Name: "t", Partitions: 2}}}); err != nil {
			t.Fatal(err)
		}
	}
	var proposed []*strandpb.GroupCommand
	var dones []func(Applied)
	sweep := func(now uint64) {
		s := co.NewSweep(func(cmd *strandpb.GroupCommand, done func(Applied)) {
			proposed, dones = append(proposed, cmd), append(dones, done)
		}, func(string, error) {})
		s.SweepMembers(Timers{Now: now, Session: 10, Rebalance: 100, OffsetsRetentionMs: 1 << 40})
	}
	sweep(5) // first seen: timers start at 5
	if len(proposed) != 0 || co.Live[LiveKey("g", "a")] != 5 {
		t.Fatalf("first sweep proposed %v, timer %d", proposed, co.Live[LiveKey("g", "a")])
	}
	co.Heartbeating[LiveKey("g", "b")] = 1 // b's heartbeat is in flight
	sweep(16)
	sweep(17) // a's expiry is in flight: not proposed again
	if len(proposed) != 1 || proposed[0].GetExpire().GetMemberId() != "a" {
		t.Fatalf("proposed %v, want a's expiry once", proposed)
	}
	dones[0](Applied{})
	if _, ok := co.Live[LiveKey("g", "a")]; ok || co.InFlight[LiveKey("g", "a")] {
		t.Fatalf("after a's expiry applied: timer kept %v, in flight %v", ok, co.InFlight[LiveKey("g", "a")])
	}
}
