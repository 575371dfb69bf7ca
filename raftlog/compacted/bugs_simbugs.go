//go:build simbugs

package compacted

// bugSwitchNotAtomic is the planted switch bug, for proving the checks
// that must catch it (issue 24: a crash mid-compaction keeps both
// generations or neither); set with SetBugs before a run, never present
// in production builds. Commit removes the older generations' segments
// (to free their space first) before the new manifest is written and
// renamed: a crash between that removal and the rename leaves the old
// manifest naming files that are gone, and no generation opens.
var bugSwitchNotAtomic = false

// SetBugs switches the planted bug on or off.
func SetBugs(switchNotAtomic bool) { bugSwitchNotAtomic = switchNotAtomic }

// bugCommitUnchecked is half of the node's planted PrefixInstallUnchecked:
// Commit takes the digest it is given without hashing what was written.
var bugCommitUnchecked = false

// SetInstallBugs switches the planted unchecked commit on or off.
func SetInstallBugs(commitUnchecked bool) { bugCommitUnchecked = commitUnchecked }
