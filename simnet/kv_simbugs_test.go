//go:build simbugs

package simnet

import "testing"

// The compacted-topic workload's reads (wire_kv.go) catch
// CompactKeepsOlder (a pass keeps a key's oldest value in the dirty
// section and removes the newer ones): a read during the run finds a
// key's latest acknowledged write gone. 20 of seeds 1-20.
func TestSimCatchesCompactKeepsOlder(t *testing.T) {
	requireCatches(t, "CompactKeepsOlder", 1, 6, 4, "kv:", kvOptions, nil)
}

// The reads catch TombstoneEarly (a tombstone removed by the first pass
// that sees it) where a key rests deleted after its tombstone and the
// clocks' spread leaves delete.retention.ms room to tell: 13 of seeds
// 1-20 (seeds whose clocks jumped by a minute or more cannot tell).
func TestSimCatchesTombstoneEarly(t *testing.T) {
	requireCatches(t, "TombstoneEarly", 1, 8, 4, "kv:", kvOptions, nil)
}
