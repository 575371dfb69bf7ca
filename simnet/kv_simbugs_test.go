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
// clocks' spread since the tombstone was sent leaves delete.retention.ms
// room to tell: 17 of seeds 1-30 with the workload on (7 of 1-12). With
// the spread over the whole run, any clock jump of a minute, even before
// the tombstone, hid it: 11 of 30.
func TestSimCatchesTombstoneEarly(t *testing.T) {
	requireCatches(t, "TombstoneEarly", 1, 12, 6, "kv:", kvOptions, nil)
}
