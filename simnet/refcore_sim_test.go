package simnet

import (
	"strings"
	"testing"
	"time"
)

// refOptions is a scenario for the reference cluster: crashes and network
// faults only (it has no disk).
func refOptions(seed uint64, profile Profile) Options {
	o := Choose(Standard(seed, profile))
	o.Ops = 600
	o.Faults.BitFlip, o.Faults.FailRead, o.Faults.FailSync = 0, 0, 0
	return o
}

// The world, workload and checks pass a correct reference cluster under
// crashes and network faults, in both profiles.
func TestRefClusterPasses(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		for _, profile := range []Profile{Safety, Liveness} {
			res := run(refOptions(seed, profile), "", newRefCluster().open)
			if res.Failed() {
				t.Fatalf("%s: %s", res.Options, strings.Join(res.Failures, "\n"))
			}
			if res.Ops < 600 {
				t.Fatalf("%s: only %d ops recorded", res.Options, res.Ops)
			}
		}
	}
}

// A reference cluster that loses its last record on failover is caught.
func TestRefClusterLostWriteCaught(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rc := newRefCluster()
		rc.loseOnFailover, rc.quiet = true, true
		o := refOptions(seed, Liveness)
		o.Faults.Interval, o.Faults.Crash = 100e6, 4
		res := run(o, "", rc.open)
		if !res.Failed() {
			continue
		}
		t.Logf("caught at seed %d: %s", seed, strings.Join(res.Failures, "\n"))
		if !strings.Contains(strings.Join(res.Failures, "\n"), "linearizability") {
			t.Fatal("the history checks missed it")
		}
		return
	}
	t.Fatal("a cluster losing acknowledged writes passed 20 seeds")
}

// The same seed replays the same trace; another seed does not.
func TestRefClusterDeterministic(t *testing.T) {
	a := run(refOptions(3, Safety), "", newRefCluster().open)
	b := run(refOptions(3, Safety), "", newRefCluster().open)
	c := run(refOptions(4, Safety), "", newRefCluster().open)
	if a.Hash != b.Hash || a.Events != b.Events {
		t.Fatalf("seed 3 twice: %016x/%d vs %016x/%d", a.Hash, a.Events, b.Hash, b.Events)
	}
	if a.Hash == c.Hash {
		t.Fatalf("seeds 3 and 4 share hash %016x", a.Hash)
	}
}

// A reference cluster whose produces hang after a while fails liveness mode
// (and passes safety mode, which does not require progress).
func TestRefClusterStallCaughtInLivenessOnly(t *testing.T) {
	for _, profile := range []Profile{Liveness, Safety} {
		rc := newRefCluster()
		rc.stallAfter = 200
		o := refOptions(1, profile)
		o.TimeLimit = 30 * time.Second
		res := run(o, "", rc.open)
		joined := strings.Join(res.Failures, "\n")
		if profile == Liveness && !strings.Contains(joined, "liveness:") {
			t.Fatalf("liveness mode missed a stalled cluster: %v %s virtual=%v ops=%d", res.Failures, res.Stats, res.Virtual, res.Ops)
		}
		if profile == Safety && res.Failed() {
			t.Fatalf("safety mode failed a stalled but safe cluster: %v", res.Failures)
		}
	}
}
