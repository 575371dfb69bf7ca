//go:build simbugs

package groupsvc

import (
	"maps"
	"slices"

	"github.com/strandlog/strand/engine/recordbatch"
)

// The coordinator log's planted bugs, for proving the simulator's restore
// check (simnet/offsets_replay.go); set with SetBugs before a run, never
// present in production builds.
var (
	// bugRestoreSkipsTail: a restore goes on after the snapshot record,
	// not from its as_of, so the commands written between the snapshot's
	// proposal and its commit are lost: the group keeps an older commit.
	bugRestoreSkipsTail = false
	// bugTombstoneInFlight: a snapshot's batch also tombstones the
	// commands proposed and not read back; those that land before it, at
	// or above its as_of, are removed by the next pass while a restore
	// from the snapshot still needs them.
	bugTombstoneInFlight = false
)

// SetBugs switches the planted bugs on or off.
func SetBugs(restoreSkipsTail, tombstoneInFlight bool) {
	bugRestoreSkipsTail, bugTombstoneInFlight = restoreSkipsTail, tombstoneInFlight
}

// inFlightTombstones are the planted bugTombstoneInFlight's tombstones:
// one for each command waited for, in request-id order.
func (co *Coordinator) inFlightTombstones(nowMs int64) []recordbatch.Record {
	if !bugTombstoneInFlight {
		return nil
	}
	var out []recordbatch.Record
	for _, id := range slices.Sorted(maps.Keys(co.m)) {
		out = append(out, recordbatch.Record{TimestampMs: nowMs, Key: CommandKey(co.Term, id)})
	}
	return out
}
