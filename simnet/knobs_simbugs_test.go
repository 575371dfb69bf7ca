//go:build simbugs

package simnet

import (
	"flag"
	"runtime/debug"
	"testing"
)

// flagKnobCatchSeeds is how many seeds TestSimCatchesElectionInCoreTicksWithKnobs
// runs each way (make sim-bugs measures 200: see knobs.go's figures).
var flagKnobCatchSeeds = flag.Int("sim.knob-catch-seeds", 20, "TestSimCatchesElectionInCoreTicksWithKnobs: seeds per configuration")

// ElectionInCoreTicks (raft's election timeout counted in Core ticks) is a
// bug only production's tick settings show: with the simulator's old fixed
// configuration (raft ticked every Core tick) no seed can catch it, with
// the drawn knobs at least half of the seeds must. Only the seeds that
// draw 10 Core ticks per raft tick show it plainly (production's ticks in
// half the seeds, a third of the other draws): their elections take 10 to
// 20 s where the draw promises 1 to 2 s. Before the election watch
// (elections.go) only the liveness checks after a heal and the quiet probe
// saw it, in the seeds that reached them: 9 or 10 of these 20, 82 of the
// standard sample's 200; the watch sees it under the faults too: 12 of these
// 20, 120 of the 200 (119 of the 123 that draw 10 Core ticks per raft tick).
// The fixed-knob control runs the first fixedSeeds seeds only (each a whole
// run that finds nothing; the claim is about the mechanism), and the drawn
// count stops once it reaches half.
func TestSimCatchesElectionInCoreTicksWithKnobs(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	const fixedSeeds = 6
	caught := func(fixed bool, seeds, enough int) int {
		n := 0
		for seed := uint64(1); seed <= uint64(seeds) && n < enough; seed++ {
			base := Standard(seed, Mixed)
			base.FixedKnobs = fixed
			o := Choose(base)
			o.Bug, o.Faults.WipeRejoin, o.StopAtFailure = "ElectionInCoreTicks", true, true
			if runSeed(t, o, "").Failed() {
				n++
			}
		}
		return n
	}
	seeds := *flagKnobCatchSeeds
	fixed, drawn := caught(true, fixedSeeds, 1), caught(false, seeds, (seeds+1)/2)
	t.Logf("ElectionInCoreTicks caught in %d of %d seeds with fixed knobs, %d of %d with drawn knobs (stopping at half)", fixed, fixedSeeds, drawn, seeds)
	if fixed != 0 {
		t.Errorf("caught in %d seeds with fixed knobs: the bug should be invisible when raft ticks every Core tick", fixed)
	}
	if 2*drawn < seeds {
		t.Errorf("caught in %d of %d seeds with drawn knobs, below half", drawn, seeds)
	}
}

// fixedKnobsOptions is seedOptions with FixedKnobs: for tests of a
// checker's teeth calibrated on seeds of the old fixed configuration, whose
// bugs need its small checkpoint interval and segments to show at all.
func fixedKnobsOptions(t *testing.T, seed uint64, profile, bug string) Options {
	t.Helper()
	return knobOptions(t, seed, profile, bug, false)
}
