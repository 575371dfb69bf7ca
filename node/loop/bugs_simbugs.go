//go:build simbugs

package loop

import "sync/atomic"

// staleSecurity is the planted bug StaleSecurityView: the round rebuilds
// the security view only when the metadata leader moved, not when the
// metadata version did, so a user created (or a quota set) under a stable
// leader stays unknown to the SASL lookups until the next election. Set
// per run by the simulator (SetBugs).
var staleSecurity atomic.Bool

// SetBugs plants (or clears) the package's bugs; only in simbugs builds.
func SetBugs(stale bool) { staleSecurity.Store(stale) }

func bugStaleSecurity() bool { return staleSecurity.Load() }
