//go:build !simbugs

package engine

// Planted bugs are compiled in only with -tags simbugs (see
// bugs_simbugs.go); in a default build these are constant false and the
// compiler drops their hooks.
const (
	bugLSOPassesOpenTxn   = false
	bugDropAbortOnRestore = false
)
