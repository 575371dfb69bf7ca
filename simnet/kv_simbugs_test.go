//go:build simbugs

package simnet

import "testing"

// The compacted-topic workload's reads (wire_kv.go) catch
// CompactKeepsOlder (a pass keeps a key's oldest value in the dirty
// section and removes the newer ones): a read finds a key's latest
// acknowledged write gone: 6 of seeds 1-6 with the workload on.
func TestSimCatchesCompactKeepsOlder(t *testing.T) {
	requireCatches(t, "CompactKeepsOlder", 1, 6, 4, "kv:", kvOptions, nil)
}

// The reads catch TombstoneEarly (a tombstone removed by the first pass
// that sees it) where a key rests deleted after its tombstone and the
// clocks' spread leaves delete.retention.ms room to tell (seeds whose
// clocks jumped by a minute or more cannot tell): 11 of seeds 1-30 with the
// workload on (6 of 1-16), below the half issue 24 asks for.
func TestSimCatchesTombstoneEarly(t *testing.T) {
	requireCatches(t, "TombstoneEarly", 1, 16, 5, "kv:", kvOptions, nil)
}
