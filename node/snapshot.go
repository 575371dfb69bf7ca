package node

import (
	"errors"
	"fmt"
	"log/slog"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
)

// Raft snapshots of a partition, and raft log compaction behind them.
//
// A replica compacts its raft log once whole segments lie below its first
// retained batch (after a TRIM applied, see retention.go). The snapshot
// index S is the last index of the newest such segment, so compaction
// removes exactly whole segment files (raftlog.CompactionPoint) and the log
// continues at a segment's base. The snapshot's data is the engine state at
// S as the log defines it — the producer table and next offset as of S —
// with every batch dropped from the offset index and the log start at the
// next offset (engine.Partition.Compacted(S)): nothing at or below S can be
// served, and nothing at or below S is needed, since the agreed log start is
// above it. On a compacted topic the limit is the prefix instead
// (prefixTrimBound): the log start and the compaction record stay, only the
// index entries the record covers go (CompactedTopicTrim: the state at S
// may predate its first COMPACT), and the snapshot carries the others
// inline (RaftSnapshotState); the records below S are in the prefixes, and
// a follower restored from it installs one from a peer
// (compaction_install.go). It is built by a compactor that replays the entries from the
// previous snapshot to S into a scratch engine, a bounded step per tick,
// before the segments go: pure engine work over entries still on disk.
//
// A follower whose next index is below the leader's first index gets that
// snapshot (MsgSnap, one message: the state holds no batches, so it is
// small), installs it (raftlog.ApplySnapshot, durable before raft hears of
// it) and applies S+1… exactly like the others. Its engine differs from the
// others' only in the batches below the agreed log start that they still
// index until they apply the TRIM that the snapshot already reflects; from
// that TRIM on the states are equal. Until then its state (the TRIM's log
// start, an older high-water mark) is one the log never had, so no read is
// served from it: the reads a deposed leader still holds fail at the
// install (restoreFromSnapshot).
//
// Restart: the newest checkpoint at or above the raft snapshot is restored
// (its index entries below the first retained batch are dropped when the
// replay reaches the TRIM, and no read is served before the replay passes
// the commit index); with none, the engine is restored from the snapshot.
//
// Crashes: CreateSnapshot writes the snapshot durably before any segment
// goes, and Open removes segments left below it; ApplySnapshot is durable
// when it returns, and Open discards the old segments a crash left behind.
// The engine is in memory only, rebuilt on restart as above.
//
// Rejected: snapshot index = the TRIM's index with the batches between the
// first retained one and the TRIM shipped inside the snapshot (a snapshot as
// big as a segment, over the frame limit); the real engine state at S with
// its index (a replica could then hold index entries pointing at entries it
// never had); capturing the engine state at each segment roll (the state at
// a segment's last index is not known when the next segment is created, as
// entries are written before they apply).

// compactor builds the snapshot for a compaction to target.
type compactor struct {
	part   *engine.Partition // the engine replayed up to next-1
	conf   *raftpb.ConfState // the raft configuration as of next-1 (moves.go, confAfter)
	next   uint64
	target uint64
	// job is the token of the storage job writing the snapshot, 0 before
	// it starts (startSnapshotJob).
	job uint64
}

// maybeCompact starts a compaction when whole segments lie below g's first
// retained batch and none runs.
func (c *Core) maybeCompact(g *group) {
	if g.confState == nil || len(g.confState.GetVoters()) == 0 {
		return
	}
	first := g.appliedRaft + 1
	if b, ok := g.part.FirstBatchFrom(0); ok {
		first = b.RaftIndex
	}
	limit := min(first-1, g.appliedRaft)
	if bound, ok := c.prefixTrimBound(g); ok {
		// compaction_replica.go: a compacted topic trims up to its prefix,
		// and compaction_held.go: to what a majority of its voters'
		// prefixes hold.
		limit = min(bound, g.part.RaftTrimBound(c.heldQuorumEnd(g)), g.appliedRaft)
	}
	limit = max(limit, c.tierLocalLimit(g)) // tier.go: local retention of what is remote
	limit = c.bugCompactLimit(g, limit)
	target := g.log.CompactionPoint(limit)
	if target == 0 {
		return
	}
	snap, err := g.log.Snapshot()
	if err != nil {
		c.failStorage(g, err)
		return
	}
	k := &compactor{part: engine.NewPartition(), conf: &raftpb.ConfState{}, next: 1, target: target}
	if index := snap.GetMetadata().GetIndex(); index > 0 {
		k.conf = snap.GetMetadata().GetConfState()
		part, err := engine.RestorePartitionIndexed(snap.GetData(), nil)
		if err != nil {
			c.failStorage(g, fmt.Errorf("%w: raft snapshot %d: %v", ErrStorage, index, err))
			return
		}
		k.part, k.next = part, index+1
	}
	g.ret.compactor = k
	g.ret.decided++
	c.stats.CompactionsDecided++
	c.compactStep(g)
}

// compactStep replays a bounded number of entries into the compactor's
// engine; once it reaches the target it writes the snapshot and removes
// the segments below it.
func (c *Core) compactStep(g *group) {
	k := g.ret.compactor
	if k.job != 0 {
		return // its snapshot is being written (startSnapshotJob)
	}
	if k.next <= k.target {
		hi := min(k.target+1, k.next+compactEntriesPerTick)
		entries, err := g.log.Entries(k.next, hi, compactBytesPerTick)
		if err != nil {
			if !c.corruptFound(g, err) { // a sealed segment found damaged: rebuilt, not fatal
				c.failStorage(g, fmt.Errorf("%w: replay %d..%d: %v", ErrStorage, k.next, hi, err))
			}
			return
		}
		for _, e := range entries {
			c.replayEntry(k.part, e)
			if k.conf, err = confAfter(k.conf, e); err != nil {
				c.failStorage(g, fmt.Errorf("%w: replay conf change %d: %v", ErrStorage, e.GetIndex(), err))
				return
			}
			k.next++
		}
		if k.next <= k.target {
			return
		}
	}
	if g.pipe.syncing != 0 {
		return // the log is not written while its sync runs (pipeline.go): next tick
	}
	if g.part.Compaction().Decision.Generation != 0 || g.part.TierActive() || c.tiered(g) {
		// The state at the target may predate the first COMPACT or
		// TIER_ADD: only what it covers goes, the log start stays.
		k.part.CompactedTopicTrim(k.target)
	} else {
		k.part.Compacted(k.target)
	}
	if c.wal == nil {
		c.startSnapshotJob(g, k) // snapshot_job.go
		return
	}
	// With the write-ahead log the entries up to the target may be
	// durable only in it: CreateSnapshot syncs the log first, inline.
	g.ret.compactor = nil
	if err := g.log.CreateSnapshot(k.target, k.conf, k.part.RaftSnapshotState()); err != nil {
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			return // a snapshot installed meanwhile
		}
		c.failStorage(g, err)
		return
	}
	c.compacted(g, k.target)
}

// compacted follows the compaction of g's log to target: the engine drops
// what it covers and the retired segments' unlink starts.
func (c *Core) compacted(g *group, target uint64) {
	g.part.Compacted(target)
	g.ret.due = true // a TRIM applied meanwhile may allow the next one (retention.go)
	c.stats.Compactions++
	g.ret.done++
	if run := g.log.TakeTrash(); run != nil {
		c.startTrash(g, run)
	}
	g.logs.log(slog.LevelDebug, "raft log compacted", slog.Uint64("snapshot_index", target))
}

// replayEntry applies one entry to a compactor's engine, as applyEntry
// applies it to the live one.
func (c *Core) replayEntry(part *engine.Partition, e *raftpb.Entry) {
	if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 || c.bugReplayEmpty() {
		part.ApplyEmpty(e.GetIndex())
		return
	}
	part.Apply(e.GetIndex(), e.GetData())
}

// sentSnapshot tells raft that a MsgSnap to node to went out: sending is
// one frame, so it is finished; a lost one shows as the follower still
// lagging, and raft sends the snapshot again.
func (c *Core) sentSnapshot(g *group, to NodeID) {
	c.markReady(g) // ready.go
	g.raw.ReportSnapshot(uint64(to), raft.SnapshotFinish)
	c.stats.SnapshotsSent++
}

// installSnapshot makes a snapshot from the leader g's state: durably in
// the raft log first (raftlog.ApplySnapshot discards the whole log), then
// the engine restored from it. Receive checked the snapshot (saneSnapshot),
// so bad data here is a bug.
func (c *Core) installSnapshot(g *group, snap *raftpb.Snapshot) error {
	index := snap.GetMetadata().GetIndex()
	part, err := engine.RestorePartitionIndexed(snap.GetData(), nil)
	if err != nil || part.AppliedIndex() != index || !g.sm.policy().raftSnapshots {
		panic(fmt.Sprintf("node: %s/%d: raft snapshot %d not checked: %v", g.tp.Topic, g.tp.Partition, index, err))
	}
	if c.wal != nil {
		// The log's unsynced tail must not depend on records the reset
		// voids before the snapshot replaces it (wal.go).
		if err := g.log.Sync(); err != nil {
			return fmt.Errorf("node: %s/%d: sync before snapshot %d: %w", g.tp.Topic, g.tp.Partition, index, err)
		}
		if err := c.walVoid(g.log.Dir()); err != nil {
			return fmt.Errorf("node: %s/%d: write-ahead log reset: %w", g.tp.Topic, g.tp.Partition, err)
		}
	}
	if err := g.log.ApplySnapshot(snap); err != nil {
		g.logs.log(slog.LevelError, "raft snapshot install failed; the node stops (fail-stop)", slog.Any("err", err))
		return fmt.Errorf("node: %s/%d: install snapshot %d: %w", g.tp.Topic, g.tp.Partition, index, err)
	}
	if run := g.log.TakeTrash(); run != nil {
		c.startTrash(g, run) // the old segments' unlinks, off the loop
	}
	c.restoreFromSnapshot(g, part, snap.GetMetadata().GetConfState())
	c.stats.SnapshotsInstalled++
	g.logs.log(slog.LevelInfo, "raft snapshot installed", slog.Uint64("snapshot_index", index),
		slog.Int64("log_start", part.LogStartOffset()))
	return nil
}

// restoreFromSnapshot makes part, the engine state of g's raft snapshot,
// g's engine. The checkpoint chunks no longer match its ordinals: the next
// checkpoint rewrites them.
//
// The reads still waiting here fail with ErrNotLeader naming the leader
// (the client retries there): those waiting for their index or its apply,
// and the fetches waiting for a cold read's job (fetch_cold.go, served
// again from the state at the job's end). Only a deposed leader has any,
// reads whose index it learned while leading. Serving them from this state
// would serve a state the log never had: the snapshot's log start is the
// one of a TRIM applied after its index (Compacted: everything at or below
// the index is gone), its high-water mark the one at its index, and so for
// every state here until that TRIM applies (a fetch below it answered out
// of range, naming a log start equal to a stale high-water mark: simnet
// seed 184, found with the compacted-topic workload in every seed). A
// leader never installs a snapshot, and a replica leading again serves a
// read only once it applied its new term's first entry, past that TRIM.
func (c *Core) restoreFromSnapshot(g *group, part *engine.Partition, conf *raftpb.ConfState) {
	for _, r := range g.reads {
		if !r.finished {
			lead, _, _ := g.leadership()
			c.failRead(g, r, ErrNotLeader, lead)
		}
	}
	for _, f := range c.coldReads {
		f.replaced = f.replaced || f.g == g
	}
	for _, f := range c.coldWaiting {
		f.replaced = f.replaced || f.g == g
	}
	g.part = part
	c.statusChanged()
	g.appliedRaft = part.AppliedIndex()
	g.checkpointIndex = part.AppliedIndex()
	g.confState = proto.Clone(conf).(*raftpb.ConfState)
	g.storage.confState = g.confState
	c.noteConfApplied(g, g.appliedRaft)
	g.sm.replacedBySnapshot()
	g.ret.compactor = nil
	c.passesReset(g) // compaction_replica.go
}

// restoreSnapshotAtOpen restores g's engine from its raft snapshot when
// that is newer than the checkpoint loaded at ckIndex (0: none); it
// reports the applied index and whether it did.
func (c *Core) restoreSnapshotAtOpen(g *group, ckIndex uint64) (uint64, bool, error) {
	snap, err := g.log.Snapshot()
	if err != nil {
		return 0, false, err
	}
	index := snap.GetMetadata().GetIndex()
	if !g.sm.policy().raftSnapshots || index == 0 || index <= ckIndex {
		return 0, false, nil
	}
	part, err := engine.RestorePartitionIndexed(snap.GetData(), nil)
	if err != nil || part.AppliedIndex() != index {
		return 0, false, fmt.Errorf("%w: %s/%d: raft snapshot %d: %v", ErrStorage, g.tp.Topic, g.tp.Partition, index, err)
	}
	c.restoreFromSnapshot(g, part, snap.GetMetadata().GetConfState())
	return index, true, nil
}

// saneSnapshot checks a MsgSnap before raft sees it: a partition group's,
// with the group's voters and engine state that restores at the snapshot's
// index. A snapshot raft accepts is installed; it must never fail later.
func saneSnapshot(g *group, m *raftpb.Message) bool {
	snap := m.GetSnapshot()
	if !g.sm.policy().raftSnapshots || snap == nil || len(m.GetEntries()) != 0 || snap.GetMetadata().GetIndex() == 0 {
		return false
	}
	if !saneConfState(snap.GetMetadata().GetConfState()) {
		return false
	}
	part, err := engine.RestorePartitionIndexed(snap.GetData(), nil)
	return err == nil && part.AppliedIndex() == snap.GetMetadata().GetIndex()
}

// startTrash queues the job that unlinks the segments g's compaction
// retired (raftlog.Log.TakeTrash), off the loop: unlinking a 64 MiB
// segment takes 17-28 ms on this machine, which every partition of the
// node would otherwise wait for each time retention deletes one. Nothing
// waits for it.
func (c *Core) startTrash(g *group, run func() error) {
	c.queueJob(syncJob{g: g, run: run, trash: true})
	c.stats.TrashJobs++
}

// finishTrash ends a trash job: a failure leaves files the log's next
// recovery removes, so it is logged, never fatal.
func (c *Core) finishTrash(job syncJob, err error) {
	if err != nil {
		job.g.logs.log(slog.LevelWarn, "removing retired segments (raft log or compacted prefix) failed; the next restart removes them", slog.Any("err", err))
	}
}
