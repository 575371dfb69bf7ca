package simnet

import (
	"testing"
	"time"
)

// A safety run that reaches its time limit issues nothing more, heals,
// drains and runs every final check within DrainGrace, the same twice
// (overtime.go). Before, it stopped at the limit without the drain. The
// limit is cut to 6 s so the seed reaches it with the workload under way.
func TestSimTimeLimitThenDrain(t *testing.T) {
	o := sampleOptions(t, 3, "safety", "")
	o.TimeLimit = 6 * time.Second
	a := runSeed(t, o, "")
	if a.Failed() {
		t.Fatalf("failures: %q", a.Failures)
	}
	if !a.Stats.TimeLimited || a.Coverage.Count("event/time-limit-grace") != 1 ||
		a.Coverage.Count("event/time-limit-drained") != 1 {
		t.Fatalf("time limited %v, grace %d, drained in it %d; want true, 1, 1 (virtual %v)", a.Stats.TimeLimited,
			a.Coverage.Count("event/time-limit-grace"), a.Coverage.Count("event/time-limit-drained"), a.Virtual)
	}
	if a.Virtual > o.TimeLimit+DrainGrace {
		t.Fatalf("the run lasted %v, past the limit and its grace", a.Virtual)
	}
	if b := runSeed(t, o, ""); b.Hash != a.Hash || b.Events != a.Events {
		t.Fatalf("twice: hash %016x/%016x events %d/%d", a.Hash, b.Hash, a.Events, b.Events)
	}
}
