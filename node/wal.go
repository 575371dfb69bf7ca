package node

import (
	"errors"
	"fmt"
	"log/slog"
	"path"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/wal"
)

// The node-wide write-ahead log (Config.WAL; package raftlog/wal). Each
// round every group's appends go to the group's own log without an fsync
// and, just before, the same write as a record of this log; one sync job
// for the whole node then makes the round durable, and SyncDone releases
// every group's held responses and acks=1 waits. raft.MustSync still
// decides whether a round needs a sync at all. At most one sync of this log
// is in flight; groups with appends wait for it (group commit per node).
//
// The logs are synced lazily: every Config.WALLogFlushBytes a log is
// written it is fsynced in the background (walFlushEarly); past
// Config.WALBytesMax the write-ahead log rolls, every log written since is
// synced, one at a time, and a job removes the older segments; none of it
// on the loop, and no acknowledgement waits for it. Every fsync a log makes
// on its own (a roll, a truncation, a checkpoint's sync, a snapshot) first
// makes the write-ahead log durable (raftlog Options.BeforeSync), so a log
// never holds durably a write the write-ahead log could lose. When a log's
// past stops mattering (a leader's snapshot replaces it, a repair or a
// delete removes it) a reset record voids its earlier records, durably,
// before the change.
//
// Recovery (openWAL, before the metadata group opens): every log the
// write-ahead log names is opened and brought up to date (wal.Replay) and
// synced, so the replicas then open on logs that hold every write the
// node promised.
//
// Rejected: syncfs(2) per round (flushes the whole file system, measured
// worse); one segment stream shared by all groups as their only log
// (every read and compaction would need a per-group index over shared
// files).

// walState is the Core's write-ahead log state.
type walState struct {
	wal *wal.WAL // nil without Config.WAL
	// walSyncing is the token of the write-ahead log's sync in flight, 0
	// when none.
	walSyncing uint64
	// walFlushing counts the log syncs of a rotation not yet done;
	// walFlushQueue holds those not yet started (they run one at a time).
	walFlushing   int
	walFlushQueue []SyncJob
	// walRemoving is the token of the job removing the segments a
	// rotation retired, 0 when none; the next rotation waits for it.
	walRemoving uint64
}

const (
	// walDir is the write-ahead log's directory on the Disk.
	walDir = "wal"
	// walBytesMaxDefault is the default Config.WALBytesMax.
	walBytesMaxDefault = 64 << 20
	// walLogFlushBytesDefault is the default Config.WALLogFlushBytes.
	walLogFlushBytesDefault = 1 << 20
)

// openWAL opens the write-ahead log and replays it into every log it
// names, in the order the records first name them.
func (c *Core) openWAL() error {
	w, recs, err := wal.Open(c.cfg.Disk, walDir)
	if err != nil {
		return fmt.Errorf("node: open the write-ahead log: %w", err)
	}
	c.wal = w
	byDir := wal.ByDir(recs)
	seen := make(map[string]bool)
	for _, r := range recs {
		if seen[r.Dir] {
			continue
		}
		seen[r.Dir] = true
		if err := c.replayWAL(r.Dir, byDir[r.Dir]); err != nil {
			return err
		}
	}
	return nil
}

// dropWAL, without Config.WAL, replays a write-ahead log a run with it
// left (its records may be the only durable copy of the last writes), then
// removes it: the logs now hold everything durably. With no segment
// listed it still syncs the directory: a process kill between an earlier
// dropWAL's unlinks and their SyncDir left the segments gone from the
// listing but durable, and a power loss would bring them back, their old
// records replayed over logs that moved on since
// (TestDroppedWALSurvivesKillAnywhere). On the OS disk that sync creates
// an empty "wal" directory.
func (c *Core) dropWAL() error {
	if c.cfg.WAL {
		return nil
	}
	names, err := c.cfg.Disk.List(walDir)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return c.cfg.Disk.SyncDir(walDir)
	}
	if err := c.openWAL(); err != nil {
		if c.wal != nil {
			_ = c.wal.Close()
		}
		return err
	}
	_ = c.wal.Close()
	c.wal = nil
	if err := removeDir(c.cfg, walDir); err != nil {
		return fmt.Errorf("node: remove the write-ahead log after replaying it: %w", err)
	}
	c.log.log(slog.LevelInfo, "write-ahead log replayed and removed (Config.WAL is off)")
	return nil
}

// replayWAL brings the log in dir up to date with its records. A log whose
// replica was deleted is skipped; a partition log that is damaged, or that
// lost what its records continue, is discarded and rebuilt from its peers
// (repair.go).
func (c *Core) replayWAL(dir string, recs []wal.Record) error {
	writes := false
	for _, r := range recs {
		writes = writes || len(r.Entries) > 0 || r.Hard != nil
	}
	replica := path.Dir(dir)
	if names, err := c.cfg.Disk.List(dir); !writes || err != nil || len(names) == 0 || deletedHere(c.cfg, replica) {
		return nil
	}
	opts := raftlog.Options{SegmentBytesMax: c.cfg.SegmentBytesMax, TailCacheBytesMax: -1}
	c.bugLogOptions(&opts)
	l, err := raftlog.Open(c.cfg.Disk, dir, opts)
	if errors.Is(err, raftlog.ErrCorrupt) && dir != metaDir+"/log" {
		return nil // the replica's own open finds it and repairs it (repair.go)
	}
	if err == nil {
		err = wal.Replay(l, recs)
		if cerr := l.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		return nil
	}
	isMeta := dir == metaDir+"/log"
	if isMeta || !(errors.Is(err, raftlog.ErrCorrupt) || errors.Is(err, wal.ErrCorrupt)) {
		return fmt.Errorf("node: replay the write-ahead log into %s: %w", dir, err)
	}
	c.log.log(slog.LevelWarn, "replica log damaged at recovery; rebuilding it from its peers",
		slog.String("dir", replica), slog.Any("err", err))
	return c.discardReplica(replica)
}

// walBeforeSync is every log's raftlog Options.BeforeSync in WAL mode.
func (c *Core) walBeforeSync() error { return c.wal.Sync() }

// walVoid writes a durable reset record for the log in dir, whose past no
// longer matters (it is removed, or replaced by a snapshot), so recovery
// never replays old writes over what comes next. A no-op without the WAL.
func (c *Core) walVoid(dir string) error {
	if c.wal == nil {
		return nil
	}
	if err := c.wal.Append(wal.Record{Dir: dir, Reset: true}); err != nil {
		return err
	}
	return c.wal.Sync()
}

// walAppend appends the record of g's write of entries and hs, before the
// write itself.
func (c *Core) walAppend(g *group, rec wal.Record) error {
	if err := c.wal.Append(rec); err != nil {
		g.logs.log(slog.LevelError, "write-ahead log write failed", slog.Any("err", err))
		return fmt.Errorf("node: %s/%d: write-ahead log: %w", g.tp.Topic, g.tp.Partition, err)
	}
	return nil
}

// writeAppendsWAL is writeAppends in WAL mode: with no sync of the
// write-ahead log in flight, it writes every group's queued appends and
// starts one sync covering all that need one.
func (c *Core) writeAppendsWAL() (int, error) {
	if c.walSyncing != 0 {
		return 0, nil
	}
	if err := c.rotateWAL(); err != nil {
		return 0, err
	}
	n := 0
	var synced []*group
	for _, g := range c.groups {
		if len(g.pipe.appends) == 0 || g.pipe.syncing != 0 { // a rotation's flush
			continue
		}
		n++
		mustSync, err := c.writeGroup(g)
		if err != nil {
			if c.writeRefused(g, err) { // disk full: g reopened (diskfull.go)
				continue
			}
			return n, err
		}
		if !mustSync {
			c.release(g)
			continue
		}
		synced = append(synced, g)
	}
	if len(synced) > 0 {
		c.startWALSync(synced)
	}
	limit := c.cfg.WALLogFlushBytes
	if limit <= 0 {
		limit = walLogFlushBytesDefault
	}
	for _, g := range synced {
		if g.pipe.unflushed >= limit && !g.pipe.flushing {
			c.walFlushEarly(g)
		}
	}
	return n, nil
}

// walFlushEarly starts a background fsync of g's log through handles of
// its own (raftlog.Log.Flush), as RocksDB's bytes_per_sync: every
// Config.WALLogFlushBytes a log was written, so its pages reach the device
// in steady pieces. Without it a rotation fsyncs every log's 64 MiB at
// once and the write-ahead log's own fsyncs queue behind them on the
// device: bench-cluster's e2e p99 at 5,000 msgs/s, 6 partitions, was
// 161-247 ms with rotations against 17-21 ms without. Nothing waits for
// it; a rotation still flushes every log written since it rolled (cheap
// once the pages are clean). A failed fsync stops the node, as every
// other (fsyncgate).
func (c *Core) walFlushEarly(g *group) {
	g.pipe.unflushed, g.pipe.flushing = 0, true
	c.queueJob(syncJob{g: g, run: g.log.Flush(), flush: true, early: true})
	c.stats.WALEarlyFlushes++
}

// rotateWAL starts a rotation once the write-ahead log passed
// Config.WALBytesMax and none is in flight: it rolls the write-ahead log to
// a new segment (durably), then fsyncs every log written since its last
// sync as a sync job of its own through handles of its own
// (raftlog.Log.Flush), so the groups go on being written meanwhile; when
// the last completes, the older segments go (flushDone). A first version
// held each group's writes during its log's fsync: bench-cluster's e2e p99
// at 5,000 msgs/s rose to 260-370 ms (a log's fsync after a produce burst).
func (c *Core) rotateWAL() error {
	limit := c.cfg.WALBytesMax
	if limit <= 0 {
		limit = walBytesMaxDefault
	}
	if c.walFlushing > 0 || c.walRemoving != 0 || c.wal.Bytes() < limit {
		return nil
	}
	if err := c.wal.Roll(); err != nil {
		c.log.log(slog.LevelError, "write-ahead log rotation failed; the node stops (fail-stop)", slog.Any("err", err))
		return fmt.Errorf("node: roll the write-ahead log: %w", err)
	}
	c.stats.WALRotations++
	for _, g := range c.groups {
		if g.log.Dirty() {
			c.startFlush(g)
		}
	}
	if len(c.walFlushQueue) > 0 {
		c.syncQueue = append(c.syncQueue, c.walFlushQueue[0])
		c.walFlushQueue = c.walFlushQueue[1:]
	}
	if c.walFlushing == 0 {
		c.removeOldWAL()
	}
	return nil
}

// startFlush prepares the fsync of g's log for a rotation (its handles
// are taken now, so it covers every write before the roll even if the
// replica goes meanwhile) and queues it: a rotation's flushes run one at a
// time, each started as the previous completes, so they reach the device
// in turn rather than together ahead of the write-ahead log's fsyncs.
func (c *Core) startFlush(g *group) {
	c.walFlushQueue = append(c.walFlushQueue, c.newJob(syncJob{g: g, run: g.log.Flush(), flush: true}))
	c.walFlushing++
}

// finishFlush ends a rotation's log fsync: an error is fatal (fsyncgate),
// even for a replica removed meanwhile (its files stayed open through the
// job's own handles).
func (c *Core) finishFlush(job syncJob, err error) {
	if err != nil {
		job.g.logs.log(slog.LevelError, "raft log sync failed; the node stops (fail-stop)", slog.Any("err", err))
		if c.fatal == nil {
			c.fatal = fmt.Errorf("node: %s/%d: flush: %w", job.g.tp.Topic, job.g.tp.Partition, err)
		}
	}
	c.stats.Syncs++
	if job.early {
		job.g.pipe.flushing = false
		return
	}
	if len(c.walFlushQueue) > 0 {
		c.syncQueue = append(c.syncQueue, c.walFlushQueue[0])
		c.walFlushQueue[0] = SyncJob{}
		c.walFlushQueue = c.walFlushQueue[1:]
	}
	c.flushDone()
}

// flushDone counts a rotation's log sync done; after the last, the
// write-ahead log's older segments go.
func (c *Core) flushDone() {
	c.walFlushing--
	if c.walFlushing == 0 && c.fatal == nil && !c.closed {
		c.removeOldWAL()
	}
}

// removeOldWAL retires the write-ahead log's segments before the last and
// starts the job that removes their files (off the loop: an unlink of a
// 64 MiB segment and the directory's fsync held every round ~100 ms).
func (c *Core) removeOldWAL() {
	c.walRemoving = c.queueJob(syncJob{run: c.wal.StartRemoveOld(), walRemove: true})
}

// finishWALRemove ends the removal of retired segments: an error stops
// the node (fail-stop), as every other write-ahead log failure.
func (c *Core) finishWALRemove(err error) {
	c.walRemoving = 0
	if err != nil {
		c.log.log(slog.LevelError, "write-ahead log rotation failed; the node stops (fail-stop)", slog.Any("err", err))
		c.fatal = fmt.Errorf("node: remove old write-ahead log segments: %w", err)
	}
}

// startWALSync starts the sync of the write-ahead log that makes the
// round's writes of groups durable, holding their responses for it.
func (c *Core) startWALSync(groups []*group) {
	run := c.wal.StartSync()
	if c.bugSkipFsync() {
		run = func() error { return nil }
	}
	token := c.queueJob(syncJob{groups: groups, run: run})
	c.walSyncing = token
	for _, g := range groups {
		g.pipe.syncing = token
		g.pipe.heldTerm, g.pipe.heldCommit = g.pipe.hard.GetTerm(), g.pipe.hard.GetCommit()
	}
	for _, g := range groups {
		c.bugReleaseBeforeSync(g)
		c.bugWALAckEarly(g)
	}
}

// finishWALSync ends the write-ahead log's sync token with err and
// releases what it made durable in every group it covered that still
// lives.
func (c *Core) finishWALSync(token uint64, job syncJob, err error) {
	if c.walSyncing != token {
		panic(fmt.Sprintf("node: write-ahead log sync %d done while %d is in flight", token, c.walSyncing))
	}
	c.walSyncing = 0
	if err := c.wal.FinishSync(err); err != nil {
		c.log.log(slog.LevelError, "write-ahead log sync failed; the node stops (fail-stop)", slog.Any("err", err))
		c.fatal = fmt.Errorf("node: sync the write-ahead log: %w", err)
		return
	}
	c.stats.Syncs++
	for _, g := range job.groups {
		if !c.hosted(g) || g.pipe.syncing != token {
			continue // removed or reopened meanwhile
		}
		g.pipe.syncing = 0
		g.pipe.durableTerm = max(g.pipe.durableTerm, g.pipe.heldTerm)
		g.pipe.durableCommit = max(g.pipe.durableCommit, g.pipe.heldCommit)
		c.release(g)
		c.checkpointAfterSync(g, token) // checkpoint_job.go
	}
}
