//go:build !simbugs

package compact

// Planted bugs are compiled in only with -tags simbugs (see
// bugs_simbugs.go); in a default build these are constant false and the
// compiler drops them.
const (
	bugKeepsOlder      = false
	bugTombstoneEarly  = false
	bugDropsLastRecord = false
)
