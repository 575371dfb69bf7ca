package node

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
)

// Replica repair (issue 9 item 5). A partition replica that finds its own
// committed data corrupt (raftlog's CRC check fails when it opens the log
// or reads a committed entry back) no longer stops the node: that replica
// alone is discarded and rebuilt from its peers, through the disk-loss
// recovery of rejoin.go, while the node's other replicas keep running.
// Order, so a crash anywhere is safe: the rejoin file (probing) is written
// durably first, then the files are removed; a replica dir with the rejoin
// file never trusts itself again. The rebuild copies from the group's raft
// leader, which a majority of replicas whose state was never lost elected
// (the recovering replica does not vote), so corruption is never "repaired"
// from a minority copy. The metadata group is not repaired: its corruption
// still stops the node (its loss would need the node-level recovery, and
// every node holds it).
//
// Rejected: truncating only the damaged suffix (raft may have counted the
// replica's acknowledgement of those entries in a commit, so the replica
// must anyway not vote until it has them again, which is what the rebuild
// does; a partial rebuild saves copying but needs a second recovery path);
// asking peers for the damaged entries by index outside raft (a second
// replication protocol).

// ErrReplicaRecovering: the replica is being rebuilt from its peers after
// its data was found corrupt; retriable, another replica may serve.
var ErrReplicaRecovering = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_REPLICA_RECOVERING, "node: replica is rebuilding from its peers")

// discardReplica marks the partition replica in dir as recovering and
// removes its raft log and checkpoints, so it reopens empty and rebuilds.
func (c *Core) discardReplica(dir string) error {
	// No checkpoint or snapshot job writes here once it returns
	// (checkpoint_job.go).
	c.cancelReplicaJobs(dir)
	if !c.bugRepairTrustsItself() {
		if err := c.saveRejoin(dir, &rejoin{phase: rejoinProbing}); err != nil {
			return err
		}
	}
	if err := c.walVoid(dir + "/log"); err != nil { // wal.go
		return err
	}
	// The headers before the index chunks they name: a power cut between
	// the two must not leave a header naming removed records.
	for _, sub := range []string{"/log", "/checkpoint", "/checkpoint/index", compactedDir} {
		if err := removeDir(c.cfg, dir+sub); err != nil {
			return err
		}
	}
	c.stats.ReplicasRepaired++
	return nil
}

// openGroupRepairing opens a partition replica, and when its files are
// corrupt discards them and opens it again, empty and recovering.
func (c *Core) openGroupRepairing(spec PartitionSpec, dir string, topicID uint64) (*group, error) {
	g, err := c.openGroup(spec, dir, topicID)
	if err == nil || !errors.Is(err, raftlog.ErrCorrupt) {
		return g, err
	}
	c.log.log(slog.LevelError, "replica data corrupt: discarding it and rebuilding from the peers",
		slog.String("topic", spec.Topic), slog.Int64("partition", int64(spec.Partition)), slog.Any("err", err))
	if err := c.discardReplica(dir); err != nil {
		return nil, fmt.Errorf("discard corrupt replica: %w", err)
	}
	return c.openGroup(spec, dir, topicID)
}

// corruptFound notes that g's log returned corrupt committed data at run
// time; the replica is rebuilt at the next Tick. It reports whether g can
// be repaired (a partition replica: the metadata group cannot).
func (c *Core) corruptFound(g *group, err error) bool {
	if !g.sm.policy().repairable || !errors.Is(err, raftlog.ErrCorrupt) {
		return false
	}
	if !slices.Contains(c.repairs, g) {
		g.logs.log(slog.LevelError, "replica data corrupt: it stops serving and rebuilds from the peers", slog.Any("err", err))
		c.repairs = append(c.repairs, g)
	}
	return true
}

// runRepairs rebuilds the replicas found corrupt since the last call: each
// stops (its waiting requests fail with ErrReplicaRecovering), is
// discarded and reopens recovering, in its place among the groups.
func (c *Core) runRepairs() {
	repairs := c.repairs
	c.repairs = nil
	for _, g := range repairs {
		if c.fatal != nil || c.byTP[g.tp] != g {
			continue
		}
		if err := c.rebuildReplica(g); err != nil {
			c.fatal = fmt.Errorf("node: %s/%d: repair: %w", g.tp.Topic, g.tp.Partition, err)
		}
	}
}

// rebuildReplica stops g, discards its files and reopens it recovering.
func (c *Core) rebuildReplica(g *group) error {
	c.failGroupWaits(g, ErrReplicaRecovering)
	c.cancelReplicaJobs(g.dir) // a pass job reads the prefix closePrefix closes
	c.closePrefix(g)
	if err := g.log.Close(); err != nil {
		g.logs.log(slog.LevelWarn, "close replica log", slog.Any("err", err))
	}
	if err := c.discardReplica(g.dir); err != nil {
		return err
	}
	return c.reopenReplica(g)
}

// failGroupWaits fails every produce, read and parked fetch part waiting
// on g with err (retriable).
func (c *Core) failGroupWaits(g *group, err error) {
	for _, w := range g.produces {
		if !w.finished {
			// Proposed already: it may still commit.
			c.finishProduce(g, w, ProduceResult{Err: ErrStoppedWaiting, BaseOffset: -1})
		}
	}
	for _, r := range g.reads {
		if !r.finished {
			c.failRead(g, r, err, 0)
		}
	}
	for _, s := range g.parked {
		if s.finished {
			continue
		}
		for i := range s.parts {
			if p := &s.parts[i]; p.tp == g.tp && !p.inflight {
				p.res, p.have = FetchResult{Err: err, HighWatermark: -1, LogStartOffset: -1}, true
			}
		}
		if s.complete() {
			c.finishSession(s)
		}
	}
	g.parked = nil
}
