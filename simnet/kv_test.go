package simnet

import (
	"flag"
	"runtime/debug"
	"strings"
	"testing"
)

var flagCompacted = flag.Bool("sim.compacted", false, "run the compacted-topic workload (wire_kv.go): TestSimCompacted, and in every seed of TestSim")

// kvOptions is the standard sample's seed with the compacted-topic
// workload on.
func kvOptions(t *testing.T, seed uint64, profile, bug string) Options {
	return WithCompacted(sampleOptions(t, seed, profile, bug))
}

// kvSeeds is TestSimCompacted's seed count.
const kvSeeds = 10

// TestSimCompacted runs the first seeds of the standard sample with the
// compacted-topic workload (wire_kv.go; the sample runs it in every seed,
// capped as here in one in four): every check passes, passes compact records away, tombstones are
// written and some removed after delete.retention.ms, bursts are written,
// replicas' prefixes are compared (prefixes.go) at every durable step of
// a pass, a cut strikes inside a pass (compaction_cuts.go), and the
// compact,delete seeds' retention removes keys below the log start.
func TestSimCompacted(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	seeds := uint64(kvSeeds)
	if testing.Short() {
		seeds = 4
	}
	coverage := newRunCoverage()
	for seed := uint64(1); seed <= seeds; seed++ {
		res := runSeed(t, kvOptions(t, seed, "mixed", ""), "")
		coverage.Merge(res.Coverage)
		if res.Failed() {
			t.Errorf("seed %d with the compacted topic:\n  %s\n  replay: %s -sim.compacted", seed,
				strings.Join(res.Failures, "\n  "), replayCommand(seed, "mixed", ""))
		}
	}
	for _, name := range []string{"kv/topic-created", "kv/acked", "kv/tombstone-acked", "kv/read", "kv/compacted-read", "kv/burst",
		"kv/compact-delete", "kv/retention-removed", "kv/altered-to-compact", "kv/delete-records", "check/prefix-compared", "check/prefix-step", "fault/cut-in-compaction"} {
		if coverage.Count(name) == 0 {
			t.Errorf("coverage row %s is zero over %d seeds", name, seeds)
		}
	}
	t.Logf("kv rows: read %d compacted-read %d tombstone-removed %d acked %d maybe %d burst %d compact-delete %d retention-removed %d",
		coverage.Count("kv/read"), coverage.Count("kv/compacted-read"), coverage.Count("kv/tombstone-removed"),
		coverage.Count("kv/acked"), coverage.Count("kv/maybe"), coverage.Count("kv/burst"),
		coverage.Count("kv/compact-delete"), coverage.Count("kv/retention-removed"))
	t.Logf("prefix rows: decided %d opened %d compared %d steps %d; cuts armed %d: power-cut-compaction %d kill-compaction %d cut-in-compaction %d",
		coverage.Count("event/compaction-decided"), coverage.Count("check/prefix-opened"), coverage.Count("check/prefix-compared"),
		coverage.Count("check/prefix-step"), coverage.Count("fault/compaction-cut-armed"),
		coverage.Count("fault/power-cut-compaction"), coverage.Count("fault/kill-compaction"), coverage.Count("fault/cut-in-compaction"))
}
