//go:build !simbugs

package frame

// Production builds carry no planted bug: the hook below is constant false
// and the compiler removes it. The simulator's bug-planting build (-tags
// simbugs, bugs_simbugs.go) gives it a switch.

// bugSpliceStaleHead: AppendSpliced writes a spliced batch, after the
// first of a partition, with the head piece of the batch before it (its
// base offset and append time) — a write vector reused: the reader files
// the batch's records at the offsets of the one before.
func bugSpliceStaleHead() bool { return false }
