package simnet

import (
	"flag"
	"runtime/debug"
	"strings"
	"testing"
)

var flagCompacted = flag.Bool("sim.compacted", false, "run the compacted-topic workload (wire_kv.go) in every seed")

// kvOptions is the standard sample's seed with the compacted-topic
// workload on.
func kvOptions(t *testing.T, seed uint64, profile, bug string) Options {
	return WithCompacted(sampleOptions(t, seed, profile, bug))
}

// kvSeeds is TestSimCompacted's seed count.
const kvSeeds = 20

// TestSimCompacted runs the first seeds with the compacted-topic workload
// (wire_kv.go) on the standard sample's options: every check passes,
// passes run and compact records away, and tombstones are written.
func TestSimCompacted(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	seeds := uint64(kvSeeds)
	if testing.Short() {
		seeds = 4
	}
	coverage := newRunCoverage()
	for seed := uint64(1); seed <= seeds; seed++ {
		o := kvOptions(t, seed, "mixed", "")
		res := runSeed(t, o, "")
		coverage.Merge(res.Coverage)
		if res.Failed() {
			t.Errorf("seed %d with the compacted topic:\n  %s\n  replay: %s -sim.compacted", seed,
				strings.Join(res.Failures, "\n  "), replayCommand(seed, "mixed", ""))
		}
	}
	for _, name := range []string{"kv/topic-created", "kv/acked", "kv/tombstone-acked", "kv/read", "kv/compacted-read"} {
		if coverage.Count(name) == 0 {
			t.Errorf("coverage row %s is zero over %d seeds", name, seeds)
		}
	}
	t.Logf("kv rows: read %d compacted-read %d tombstone-removed %d acked %d maybe %d",
		coverage.Count("kv/read"), coverage.Count("kv/compacted-read"), coverage.Count("kv/tombstone-removed"),
		coverage.Count("kv/acked"), coverage.Count("kv/maybe"))
}
