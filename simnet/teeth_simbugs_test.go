//go:build simbugs

package simnet

import (
	"runtime/debug"
	"strings"
	"testing"
)

// failsWith reports whether res failed with a message containing marker.
func failsWith(res Result, marker string) bool {
	for _, f := range res.Failures {
		if strings.Contains(f, marker) {
			return true
		}
	}
	return false
}

// The durability audit catches SkipFsync in every seed, at the first
// promise it breaks; without it most seeds pass (5 of seeds 1-20 fail).
func TestAuditCatchesSkipFsync(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for seed := uint64(1); seed <= 3; seed++ {
		o := seedOptions(t, seed, "mixed", "SkipFsync")
		o.EventsMax = 5_000 // the first broken promise comes early; skip the event storm after it
		if res := runSeed(t, o, ""); !failsWith(res, "durability:") {
			t.Errorf("seed %d: SkipFsync not caught by the audit: %q", seed, res.Failures)
		}
	}
}

// The digest comparison catches checkpoints written without the producer
// table at the first checkpoint (fixed knobs: production's 1,024-entry
// checkpoint interval writes none in a run); the older checks see it only when a
// replica restarts from one and a producer continues.
func TestDigestsCatchCheckpointForgetsProducers(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	caught := 0
	for seed := uint64(1); seed <= 6; seed++ { // not every seed: 46 of 50 caught it since the incidents
		if res := runSeed(t, fixedKnobsOptions(t, seed, "mixed", "CheckpointForgetsProducers"), ""); failsWith(res, "digest:") {
			caught++
		}
	}
	if caught < 4 {
		t.Errorf("CheckpointForgetsProducers caught by the digests in %d of seeds 1-6, want at least 4", caught)
	}
}

// A kill inside a round leaves that round's unsynced writes in the page
// cache; the recovery check (audit.go afterOpen) catches a recovery that
// reports them stable at the restart. Without kills inside rounds (the
// old fault mix) seeds 1-50 all pass.
func TestRecoveryCheckCatchesRecoverTrustsPageCache(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for seed := uint64(4); seed <= 6; seed++ {
		res := runSeed(t, fixedKnobsOptions(t, seed, "mixed", "RecoverTrustsPageCache"), "")
		if !failsWith(res, "recovery reported unsynced data as stable") {
			t.Errorf("seed %d: RecoverTrustsPageCache not caught by the recovery check: %q", seed, res.Failures)
		}
	}
}

// Multi-record batches and random readers make fetches start inside a
// batch, so a node that numbers such a batch from the requested offset is
// caught in every seed; with one record per batch no fetch starts inside
// one and 0 of seeds 1-50 failed.
func TestWorkloadCatchesFetchRenumbersInsideBatch(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for seed := uint64(1); seed <= 3; seed++ {
		if res := runSeed(t, seedOptions(t, seed, "mixed", "FetchRenumbersInsideBatch"), ""); !res.Failed() {
			t.Errorf("seed %d: FetchRenumbersInsideBatch not caught", seed)
		}
	}
}

// The per-index status digest catches a restore that got the offset
// index's timestamps wrong, at the first event after the restart;
// nothing else in the run sees it (0 of seeds 1-50 with the digests off).
func TestStatusDigestCatchesRestoreIndexTimes(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	caught := 0
	for seed := uint64(9); seed <= 12; seed++ {
		if res := runSeed(t, fixedKnobsOptions(t, seed, "mixed", "RestoreIndexTimes"), ""); failsWith(res, "at applied index") {
			caught++
		}
	}
	if caught < 3 {
		t.Errorf("RestoreIndexTimes caught by the status digest in %d of seeds 9-12, want at least 3", caught)
	}
}

// Acks=1 produces (the non-idempotent producer's mix) let the durability
// audit catch a leader that answers them before its log holds the entry;
// a workload of acks=all produces never sends one, and 0 of seeds 1-50
// failed.
func TestWorkloadCatchesAckLeaderEarly(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	caught := 0
	for seed := uint64(1); seed <= 5; seed++ { // not every seed: 46 of 50 caught it since the incidents
		if res := runSeed(t, seedOptions(t, seed, "mixed", "AckLeaderEarly"), ""); failsWith(res, "durability:") {
			caught++
		}
	}
	if caught < 3 {
		t.Errorf("AckLeaderEarly caught by the audit in %d of seeds 1-5, want at least 3", caught)
	}
}
