package simnet

import (
	"testing"
	"time"
)

// The disk-stall check's bound counts the watchdog's threshold in the
// victim's ticks and the handover's election timeouts in the slowest
// node's ticks (node/stall.go counts ticks, not time): a victim whose
// timer drifts 50% slow enters the stalled state at 1.5 times the
// threshold in virtual time, 4.5 s for 3 s, past the nominal bound of
// threshold + two election timeouts + 1 s. Without drift the bound is
// the nominal one.
func TestStallBoundCountsTicks(t *testing.T) {
	o := Choose(Standard(1, Mixed))
	o.TickInterval = 10 * time.Millisecond
	o.Knobs.DiskStallAfter = 3 * time.Second
	o.Knobs.ElectionTicks, o.Knobs.TicksPerRaftTick = 10, 2
	w := newWorld(o)
	for _, n := range w.nodes {
		n.tickInterval = o.TickInterval
	}
	const slack = time.Second
	election := 200 * time.Millisecond
	if got, want := w.stallBound(0), 3*time.Second+2*election+slack; got != want {
		t.Errorf("stallBound without drift = %v, want %v", got, want)
	}

	w.nodes[0].tickInterval = 15 * time.Millisecond // the victim: 50% slow
	w.nodes[1].tickInterval = 12 * time.Millisecond // the slowest peer
	w.nodes[2].tickInterval = 5 * time.Millisecond  // fast: never shortens it
	stallTicks := time.Duration(3*time.Second/o.TickInterval) * w.nodes[0].tickInterval
	handover := 2 * time.Duration(10*2) * w.nodes[0].tickInterval // the slowest node is the victim
	if got, want := w.stallBound(0), stallTicks+handover+slack; got < want {
		t.Errorf("stallBound of a victim ticking every %v = %v, want at least %v (watchdog fires at %v)",
			w.nodes[0].tickInterval, got, want, stallTicks)
	}
	if got, want := w.stallBound(2), 3*time.Second+2*time.Duration(10*2)*w.nodes[0].tickInterval+slack; got != want {
		t.Errorf("stallBound of a fast victim = %v, want %v (its threshold nominal, the handover in the slowest ticks)",
			got, want)
	}
}

// Seed 39 drew production-like disk-stall knobs (DiskStallAfter 3 s,
// election 10 raft ticks of 2) and 50% tick drift: its victim, node 3,
// ticked every 14.7 ms, so its watchdog fired 300 ticks = 4.41 s after
// the first hung fsync, 10 ms past the nominal bound of 4.4 s, and the
// check failed with every leadership moving within milliseconds of it.
// Pinned: a change to the draws moves the schedule.
func TestSimDiskStallOnSlowTicks(t *testing.T) {
	o := seedOptions(t, 39, "mixed", "")
	if res := runSeed(t, o, ""); res.Failed() {
		t.Fatalf("seed 39: %s", res.Failures[0])
	}
}
