//go:build simbugs

package raftlog

// Bugs plants known bugs in a log so the simulator can prove its checkers
// catch them. It exists only in builds with the simbugs tag.
type Bugs struct {
	// RecoverTrustsPageCache: recovery does not mark the recovered active
	// segment dirty, so bytes that survived a process kill unsynced in the
	// page cache are reported stable to raft without a sync (rule 8
	// broken). A power loss drops such bytes before recovery sees them, so
	// only a process kill followed by a power loss can show it.
	RecoverTrustsPageCache bool
}

// plantedBugs is embedded in Options and in a recovery.
type plantedBugs struct {
	Bugs Bugs
}

func (r *recovery) bugTrustPageCache() bool { return r.Bugs.RecoverTrustsPageCache }

// StartWriteOnly is StartSyncPhases whose sync phase skips every fsync
// (write still issues the pending writes): the node's planted SkipFsync
// bug.
func (l *Log) StartWriteOnly() (write, sync func() error) { return l.startSync(false) }
