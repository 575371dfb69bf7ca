//go:build !simbugs

package raftlog

// Production builds carry no planted bug: plantedBugs is empty and the
// hooks are constant false. The simulator's bug-planting build (-tags
// simbugs, bugs_simbugs.go) gives them content.

// plantedBugs is embedded in Options and in a recovery; empty without the
// simbugs tag.
//
//lint:ignore U1000 the field's content exists only with -tags simbugs
type plantedBugs struct{}

func (r *recovery) bugTrustPageCache() bool { return false }
