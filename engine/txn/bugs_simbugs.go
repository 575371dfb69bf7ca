//go:build simbugs

package txn

// The coordinator's planted bug, for proving the checks that must catch it
// (issue 23's "a fencing check skipped"); set with SetBugs before a run,
// never present in production builds.
var bugSkipFence = false

// SetBugs switches the planted bugs on or off.
func SetBugs(skipFence bool) { bugSkipFence = skipFence }
