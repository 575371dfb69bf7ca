package simnet

import (
	"testing"
	"time"

	"github.com/strandlog/strand/node"
)

// electionWatchWorld is a world of 3 nodes at production's ticks (a 1 s
// election timeout) whose watch looks at group 0, the poll driven by hand.
func electionWatchWorld() *world {
	o := Choose(Standard(1, Mixed))
	o.Nodes, o.Replication, o.TickInterval = 3, 3, 10*time.Millisecond
	o.Knobs.ElectionTicks, o.Knobs.TicksPerRaftTick = 10, 10
	w := newWorld(o)
	for _, n := range w.nodes {
		n.tickInterval, n.up = o.TickInterval, true
	}
	w.watchElections()
	return w
}

// watchStep advances w by one poll and has it look at group 0, whose three
// replicas vote, node 1 leading when leader; the nodes in healthy are left
// alone by the faults. It returns the failure, if any.
func watchStep(w *world, healthy uint32, leader bool) string {
	w.sched.now += electionWatchPoll
	var views []replicaView
	for _, n := range w.nodes {
		s := node.GroupStatus{Term: 1}
		if leader {
			s.Leader, s.IsLeader = 1, n.id == 1
		}
		views = append(views, replicaView{index: n.index, id: n.id, status: s, votes: true})
	}
	return w.watchGroup(0, healthy, views)
}

// The election watch fails a group that a healthy majority has not
// elected within the quiet probe's bound (3 s + 8 election timeouts), not
// before; a leader resets it.
func TestElectionWatchBound(t *testing.T) {
	w := electionWatchWorld()
	bound := probeBound(time.Second)
	for range 50 {
		if why := watchStep(w, 0b111, true); why != "" {
			t.Fatalf("failed with a leader: %s", why)
		}
	}
	lost := w.now()
	for w.now() < lost+2*bound {
		if why := watchStep(w, 0b111, false); why != "" {
			if since := w.now() - lost; since <= bound || since > bound+3*electionWatchPoll {
				t.Errorf("failed %v after the leader was lost, want just past the bound %v: %s", since, bound, why)
			}
			return
		}
	}
	t.Errorf("no failure %v after the leader was lost (bound %v)", 2*bound, bound)
}

// Time without a healthy majority does not count, and each window (a
// healthy majority forming anew) allows two more election timeouts:
// windows of 1.5 election timeouts never fail, whatever their number;
// windows of 3 fail once the time in them passes the bound plus two
// timeouts per window after the first: 2.9 s of each counts (the look
// that sees it begin counts none), 2.9 k > 11 s + 2 s (k-1) from the
// eleventh window.
func TestElectionWatchWindows(t *testing.T) {
	windows := func(healthyFor time.Duration, count int) (failedIn int) {
		w := electionWatchWorld()
		for i := 1; i <= count; i++ {
			for end := w.now() + healthyFor; w.now() < end; {
				if why := watchStep(w, 0b011, false); why != "" {
					return i
				}
			}
			for end := w.now() + time.Second; w.now() < end; {
				if why := watchStep(w, 0b001, false); why != "" { // a minority: not a window
					t.Fatalf("failed without a healthy majority: %s", why)
				}
			}
		}
		return 0
	}
	if got := windows(1500*time.Millisecond, 60); got != 0 {
		t.Errorf("60 windows of 1.5 s (90 s leaderless) failed in window %d, want never", got)
	}
	if got := windows(3*time.Second, 30); got != 11 {
		t.Errorf("windows of 3 s failed in window %d, want 11", got)
	}
}
