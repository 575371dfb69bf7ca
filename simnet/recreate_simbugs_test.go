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
// fails: the ids never differ.
func TestRecreateCatchesTopicIDUnchecked(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for seed := uint64(1); seed <= 3; seed++ {
		if res := runSeed(t, seedOptions(t, seed, "mixed", "TopicIDUnchecked"), ""); !res.Failed() {
			t.Errorf("seed %d: TopicIDUnchecked not caught", seed)
		}
	}
}
