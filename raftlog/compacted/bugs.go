//go:build !simbugs

package compacted

// Planted bugs are compiled in only with -tags simbugs (see
// bugs_simbugs.go); in a default build this is constant false and the
// compiler drops it.
const bugSwitchNotAtomic = false

// bugCommitUnchecked is the planted unchecked install (off).
const bugCommitUnchecked = false
