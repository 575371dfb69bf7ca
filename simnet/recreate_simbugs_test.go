//go:build simbugs

package simnet

import (
	"runtime/debug"
	"testing"
)

// With the topic deleted and re-created mid-run, a node that ignores the
// topic id a request names (TopicIDUnchecked) serves and takes writes of
// the new incarnation for clients that still hold the old id, and the
// per-incarnation history sees the logs mix (lost writes, key order, hwm
// going back). Without re-creations (-sim.recreate=false) no seed of 1-20
// fails: the ids never differ. Seeds 2-4: once the re-creation went
// through clientlib's DeleteTopic and CreateTopic the traces moved and
// seed 1 no longer catches it (7 of seeds 1-8 do).
func TestRecreateCatchesTopicIDUnchecked(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for seed := uint64(2); seed <= 4; seed++ {
		if res := runSeed(t, seedOptions(t, seed, "mixed", "TopicIDUnchecked"), ""); !res.Failed() {
			t.Errorf("seed %d: TopicIDUnchecked not caught", seed)
		}
	}
}

// With client frames damaged in flight, a node whose produce path skips
// the batch CRC (ProduceSkipsCRC) accepts or commits a damaged batch, and
// the corruption checks see it (corrupt.go). Without the damage
// (-sim.corrupt=false) no seed of 1-20 fails.
func TestCorruptionCatchesProduceSkipsCRC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, seed := range []uint64{1, 3, 4} {
		o := seedOptions(t, seed, "mixed", "ProduceSkipsCRC")
		o.Faults.ClientCorrupt = 0.03
		if res := runSeed(t, o, ""); !res.Failed() {
			t.Errorf("seed %d: ProduceSkipsCRC not caught", seed)
		}
	}
}
