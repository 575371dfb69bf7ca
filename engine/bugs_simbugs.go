//go:build simbugs

package engine

// The partition's planted transaction bugs, for proving the checks that
// must catch them (issue 23); set with SetTxnBugs before a run, never
// present in production builds.
var (
	// bugLSOPassesOpenTxn: the last stable offset is the newest open
	// transaction's first offset, not the oldest's, so read_committed
	// readers see an older open transaction's records.
	bugLSOPassesOpenTxn = false
	// bugDropAbortOnRestore: a restore loses the newest aborted
	// transaction, so a fetch no longer lists it and a read_committed
	// consumer reads its records.
	bugDropAbortOnRestore = false
)

// SetTxnBugs switches the planted transaction bugs on or off.
func SetTxnBugs(lsoPassesOpenTxn, dropAbortOnRestore bool) {
	bugLSOPassesOpenTxn, bugDropAbortOnRestore = lsoPassesOpenTxn, dropAbortOnRestore
}
