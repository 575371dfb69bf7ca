package node

import (
	"errors"

	"go.etcd.io/raft/v3"
)

// A compaction's snapshot as a storage job (issue 22). CreateSnapshot
// wrote the snapshot file and fsynced it and its directory (and the log
// first) on the loop, once per compaction: with retention deleting
// segments, once per segment roll per replica. Now, without the
// write-ahead log, the loop only encodes it (raftlog StartCreateSnapshot)
// and a job writes and syncs the file; its completion installs it and
// compacts (FinishCreateSnapshot), then the retired segments' unlink
// starts as before. The log's own pre-sync is not needed: raft applies
// only entries stable locally and a compaction stays at or below the
// applied index. Meanwhile the compactor stays in place (no second
// compaction starts), and a leader's snapshot waits in the group's queue
// (snapshotWaits: raftlog refuses ApplySnapshot while one is being
// written). A crash between the job and its completion reopens on the new
// snapshot file with the segments it covers discarded (raftlog's recovery
// rules 1 and 4); one before it, on the previous snapshot. The replica's
// job guard (checkpoint_job.go) stops the job once its files are removed.

// startSnapshotJob queues the job writing the snapshot of compactor k.
func (c *Core) startSnapshotJob(g *group, k *compactor) {
	run, err := g.log.StartCreateSnapshot(k.target, k.conf, k.part.RaftSnapshotState())
	if err != nil {
		g.ret.compactor = nil
		if !errors.Is(err, raft.ErrSnapOutOfDate) {
			c.failStorage(g, err)
		}
		return
	}
	guard := c.replicaGuard(g.dir)
	k.job = c.queueJob(syncJob{g: g, run: func() error { return guard.do(run) }, snapshot: k.target})
}

// finishSnapshotJob ends a compaction's snapshot job: the log installs the
// snapshot and compacts, or fails.
func (c *Core) finishSnapshotJob(token uint64, job syncJob, err error) {
	g := job.g
	if !c.hosted(g) {
		return // removed meanwhile: its log is closed
	}
	if k := g.ret.compactor; k != nil && k.job == token {
		g.ret.compactor = nil
	}
	if err := g.log.FinishCreateSnapshot(err); err != nil {
		if !errors.Is(err, raft.ErrSnapOutOfDate) {
			c.failStorage(g, err)
		}
		return
	}
	c.compacted(g, job.snapshot)
}

// snapshotWaits reports whether g's queued appends must wait because one
// installs a leader's snapshot while g's own snapshot is being written.
func (c *Core) snapshotWaits(g *group) bool {
	if k := g.ret.compactor; k == nil || k.job == 0 {
		return false
	}
	for _, m := range g.pipe.appends {
		if snap := m.GetSnapshot(); snap != nil && !raft.IsEmptySnap(snap) {
			return true
		}
	}
	return false
}
