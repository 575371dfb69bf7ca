//go:build simbugs

package simnet

import (
	"runtime/debug"
	"testing"
)

// clientlib's admin calls forgetting, within one attempt, a node that took
// the request and never answered once another node answers
// (LibUnsureForgotten: a CreateTopic applied by a node whose answer was
// lost, then refused TOPIC_EXISTS by the next node, reported as a definite
// refusal, "not created") are caught by the admin's topic creates, which
// go through clientlib's CreateTopic since the eleventh session: TOPIC_EXISTS
// with no attempt that may have created it (or the re-creation's delete:
// UNKNOWN_TOPIC with no attempt that may have deleted it, seed 34). make sim-bugs
// BUGS=LibUnsureForgotten: 49 of seeds 1-200 on its branch, 4 of seeds 1-40
// (32, 34, 35, 37) on the merged tree, 10 of 1-40 (6 18 24 25 28 32 36 37 39 40) after the
// thirteenth session's merges moved seed 34's trace (the creates at the start,
// while the metadata group elects, and the re-creations; a rare path: a
// lost answer followed, in the same attempt, by another node's refusal);
// 12 of 20-59 (32 37 40 41 44 45 47 48 51 52 57 58) after the fifteenth
// session's merges (a coordinator connection per client) moved seed 36's.
// clientlib's own check is TestAdminLostAnswerAtOneNodeIsMaybeWritten. The
// same seed without the bug passes.
func TestSimCatchesLibUnsureForgotten(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	options := func(seed uint64, bug string) Options {
		o := sampleOptions(t, seed, "mixed", bug)
		o.GroupMembers = 4 // as the catch-rate sweep runs the client bugs
		return o
	}
	for _, seed := range []uint64{32, 37} {
		o := options(seed, "LibUnsureForgotten")
		o.StopAtFailure = true
		if res := runSeed(t, o, ""); !failsWith(res, "although no earlier attempt may have") {
			t.Errorf("seed %d: LibUnsureForgotten not caught by the admin's creates or deletes: %q", seed, res.Failures)
		}
	}
	if res := runSeed(t, options(32, ""), ""); res.Failed() {
		t.Errorf("seed 32 without the bug failed: %s", firstLine(res.Failures[0]))
	}
}
