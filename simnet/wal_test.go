package simnet

import (
	"runtime/debug"
	"strings"
	"testing"
)

// walSeeds is how many seeds TestSimWAL runs (5 with -short).
const walSeeds = 20

// TestSimWAL runs the first seeds with the node-wide write-ahead log
// (Options.WAL, the server's default path) while TestSim's seeds run
// without it: every check passes, the write-ahead log rotates, and the
// pipeline's crash points strike its fsync. -sim.wal runs TestSim itself
// with it.
func TestSimWAL(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	seeds := uint64(walSeeds)
	if testing.Short() {
		seeds = 5
	}
	coverage := newRunCoverage()
	for seed := uint64(1); seed <= seeds; seed++ {
		// Production's configuration drawn per seed, as in the standard
		// sample (seed 19 once failed the durability audit with drawn
		// knobs: a duplicate answered from producer state restored by a
		// raft snapshot, below the log start, where the audit's Find
		// cannot look; it passes on today's schedule).
		o := knobOptions(t, seed, "mixed", "", true)
		o.WAL = true
		res := runSeed(t, o, "")
		coverage.Merge(res.Coverage)
		if res.Failed() {
			t.Errorf("seed %d with the write-ahead log:\n  %s\n  replay: %s -sim.wal", seed,
				strings.Join(res.Failures, "\n  "), replayCommand(seed, "mixed", ""))
		}
	}
	names := []string{"event/wal-rotation"}
	if !testing.Short() { // 5 seeds may write no log past walLogFlushBytesSim
		names = append(names, "event/wal-early-flush", "fault/crash-before-fsync", "fault/crash-after-fsync")
	}
	for _, name := range names {
		if coverage.Count(name) == 0 {
			t.Errorf("%s never happened in %d seeds with the write-ahead log", name, seeds)
		}
	}
}
