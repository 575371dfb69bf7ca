//go:build !simbugs

package groupsvc

import "github.com/strandlog/strand/engine/recordbatch"

// Planted bugs are compiled in only with -tags simbugs (see
// bugs_simbugs.go); in a default build these are constant false and the
// compiler drops them.
const bugRestoreSkipsTail = false

// inFlightTombstones is empty without -tags simbugs.
func (co *Coordinator) inFlightTombstones(int64) []recordbatch.Record { return nil }
