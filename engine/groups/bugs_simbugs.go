//go:build simbugs

package groups

// The coordinator's planted bugs, for proving the simulator's checks; set
// with SetBugs before a run, never present in production builds.
var (
	// bugAssignBeforeRevoke hands a partition to its new owner without
	// waiting for the old owner to revoke it.
	bugAssignBeforeRevoke = false
	// bugCommitSkipsEpoch accepts an offset commit whatever its member epoch.
	bugCommitSkipsEpoch = false
	// bugClassicForgotten drops classic members when a new coordinator
	// restores a snapshot: a classic group loses its members on
	// coordinator fail-over, as if their state were the old
	// coordinator's memory.
	bugClassicForgotten = false
	// bugOffsetsOnAbort commits a transaction's pending offsets on its
	// abort marker too: the group's offsets move past input whose output
	// was aborted.
	bugOffsetsOnAbort = false
)

// SetTxnOffsetsBug switches bugOffsetsOnAbort on or off.
func SetTxnOffsetsBug(on bool) { bugOffsetsOnAbort = on }

// SetClassicBug switches bugClassicForgotten on or off.
func SetClassicBug(on bool) { bugClassicForgotten = on }

// SetBugs switches the planted bugs on or off.
func SetBugs(assignBeforeRevoke, commitSkipsEpoch bool) {
	bugAssignBeforeRevoke, bugCommitSkipsEpoch = assignBeforeRevoke, commitSkipsEpoch
}
