package node

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/strandlog/strand/raftlog"
)

// Checkpoints as storage jobs (issue 22). A checkpoint's 4–6 fsyncs used
// to run on the loop, stalling every partition of the node each time one
// replica passed CheckpointEntries. Now the loop only prepares it, in
// memory, and the host runs its writes and fsyncs like a log's sync:
//
//  1. checkpointNow (on the loop, when due): writes the group's queued
//     appends (the hard state whose commit covers the applied index may be
//     among them) and encodes everything the checkpoint writes — the new
//     index records, the header — into a checkpointWrite. The format
//     requires the durable commit to cover the header's index (raft
//     refuses Applied > commit), so unless an earlier sync already made it
//     durable, the group's log sync starts (a SyncJob like any other,
//     holding the round's responses) and the checkpoint waits for it.
//  2. The write job (off the loop): clears stale index chunks when the
//     engine's ordinals changed (the older headers, which name records in
//     them, go first), appends and syncs the new records, syncs the index
//     directory when it began a chunk, writes and syncs the header, syncs
//     the checkpoint directory: the old order, so a crash anywhere leaves
//     every header on disk and every record it names intact.
//  3. Its completion (on the loop): only now does the checkpoint count —
//     checkpointIndex moves, Stats.Checkpoints counts it — and the trim job
//     starts.
//  4. The trim job (off the loop): removes the older headers and the chunks
//     wholly below the new header's index_start, which nothing names any
//     more. A failure there is logged, never fatal: leftovers cost space,
//     and the next trim removes them.
//
// One checkpoint per group is in flight at a time (sync, write, trim), so
// the jobs of one replica never touch its files concurrently. A replica
// whose files are removed (a delete, a move away, a repair, the sweep)
// cancels its jobs first (cancelReplicaJobs): each checkpoint or snapshot
// job (snapshot.go) holds the replica directory's guard while it runs, so
// once cancel returns no job writes there again, and a replica placed in
// the same directory later never meets a stale header or snapshot. The cancel may wait for a job's fsync on the loop; it runs only
// where the loop then removes files anyway.
//
// A failed write is fatal (fsyncgate), except a write refused for space,
// which skips the checkpoint (diskfull.go), as before.
//
// Rejected: one job doing sync, write and trim (the log could not be
// written meanwhile, and the old headers would go before the loop knew the
// new one was durable); syncing the log from the write job through
// handles of its own (in WAL mode the commit is durable in the write-ahead
// log, not the log).

// checkpointWrite is a checkpoint prepared on the loop: every byte its
// jobs write, computed in memory, and the files they touch. The jobs read
// it and the Disk only, never the Core.
type checkpointWrite struct {
	disk raftlog.Disk
	dir  string // the replica's checkpoint directory
	name string // the header's name: the raft index, 20 digits
	// raftIndex is the header's raft index; indexStart the first ordinal it
	// names.
	raftIndex  uint64
	indexStart int64
	header     []byte
	// clearIndex: remove every index chunk first (they number the batches
	// differently from the engine: appendIndex's old rule).
	clearIndex bool
	chunks     []chunkWrite
	// freeBelow: the trim removes the chunks whose name sorts below it
	// ("": none).
	freeBelow string
	guard     *jobGuard
}

// chunkWrite is one write of index records into a chunk.
type chunkWrite struct {
	name    string
	off     int64
	data    []byte
	created bool // the write begins the chunk
}

// checkpointFlight is a group's checkpoint between checkpointNow and the
// end of its trim job.
type checkpointFlight struct {
	w *checkpointWrite
	// afterSync is the token of the log sync the write waits for (0: not
	// waiting); job the token of its write or trim job in flight.
	afterSync uint64
	job       uint64
}

// errJobCancelled is a cancelled job's result: its replica's files were
// removed.
var errJobCancelled = errors.New("node: storage job cancelled: its replica's files were removed")

// jobGuard lets the loop cancel a job that may be running on another
// goroutine: the job runs under mu, and does nothing once cancelled.
type jobGuard struct {
	mu        sync.Mutex
	cancelled bool
}

// do runs f unless the guard was cancelled.
func (j *jobGuard) do(f func() error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cancelled {
		return errJobCancelled
	}
	return f()
}

// cancel waits for a running job to return and stops any later one.
func (j *jobGuard) cancel() {
	j.mu.Lock()
	j.cancelled = true
	j.mu.Unlock()
}

// prepareCheckpoint encodes g's checkpoint as of its applied index. Pure:
// no I/O (the engine state and the new index records are copied out).
func (c *Core) prepareCheckpoint(g *group) *checkpointWrite {
	dir := g.dir + "/checkpoint"
	w := &checkpointWrite{disk: c.cfg.Disk, dir: dir, name: fmt.Sprintf("%020d", g.appliedRaft),
		raftIndex: g.appliedRaft, guard: c.replicaGuard(g.dir)}
	ck := &checkpoint{raftIndex: g.appliedRaft, confState: g.confState}
	state := g.sm.prepareCheckpoint(c, g, ck, w)
	w.indexStart = ck.indexStart
	w.header = encodeCheckpoint(ck, state)
	return w
}

// write is the write job: the records, then the header (see above).
func (w *checkpointWrite) write() error {
	return w.guard.do(func() error {
		index := w.dir + "/index"
		if w.clearIndex {
			// The headers on disk name records in the chunks about to go:
			// they go first, durably, or a crash before the new header's
			// SyncDir would leave one naming removed or rewritten records
			// (the simulator's seed 155 found it restored as "batch 0: 0
			// records at offset 0" after a power loss). One at this very
			// index (the same name: a replica checkpointing again before
			// it applied anything new) goes too: kept, it named the
			// removed chunks until its rewrite in place, itself torn by a
			// cut (seed 161: a durable header that does not parse).
			headers, err := w.disk.List(w.dir)
			if err != nil {
				return err
			}
			if err := removeFiles(w.disk, w.dir, headers, func(string) bool { return true }); err != nil {
				return err
			}
			names, err := w.disk.List(index)
			if err != nil {
				return err
			}
			if err := removeFiles(w.disk, index, names, func(string) bool { return true }); err != nil {
				return err
			}
		}
		created := false
		for _, ch := range w.chunks {
			if err := writeAtSync(w.disk, index+"/"+ch.name, ch.data, ch.off); err != nil {
				return err
			}
			created = created || ch.created
		}
		if created {
			if err := w.disk.SyncDir(index); err != nil {
				return err
			}
		}
		if err := writeFile(w.disk, w.dir+"/"+w.name, w.header); err != nil {
			return err
		}
		return w.disk.SyncDir(w.dir)
	})
}

// trim is the trim job: older headers, then chunks nothing names.
func (w *checkpointWrite) trim() error {
	return w.guard.do(func() error {
		names, err := w.disk.List(w.dir)
		if err != nil {
			return err
		}
		if err := removeFiles(w.disk, w.dir, names, func(n string) bool { return n != w.name }); err != nil {
			return err
		}
		if w.freeBelow == "" {
			return nil
		}
		index := w.dir + "/index"
		if names, err = w.disk.List(index); err != nil {
			return err
		}
		return removeFiles(w.disk, index, names, func(n string) bool { return n < w.freeBelow })
	})
}

// checkpointDue reports whether g should start a checkpoint now: enough
// applied since the last (CheckpointEntries) and checkpointReady.
func (c *Core) checkpointDue(g *group) bool {
	return g.appliedRaft >= g.checkpointIndex+c.cfg.CheckpointEntries && c.checkpointReady(g)
}

// checkpointReady reports whether g may start a checkpoint now: none in
// flight, no sync of g in flight (the checkpoint may start one), and in
// WAL mode none of the write-ahead log.
func (c *Core) checkpointReady(g *group) bool {
	if g.pipe.syncing != 0 || c.bugNoCheckpoint(g) || c.snapshotWaits(g) {
		return false
	}
	if c.wal != nil && c.walSyncing != 0 {
		return false
	}
	if f := g.ck; f != nil {
		if f.afterSync == 0 || f.afterSync == g.pipe.syncing {
			return false
		}
		// The sync it waited for was dropped (the log reopened after a
		// full disk): start over. Its index records were never written,
		// though prepareIndex counted them written, so the next
		// checkpoint must rewrite the chunks, or a later header would
		// name ordinals no chunk holds (TestDroppedCheckpointRewritesItsIndex;
		// only reopenMeta resets a pipeline in place today).
		g.sm.checkpointDone(f.w, errCheckpointAbandoned)
		c.dropCheckpoint(g)
	}
	return true
}

// checkpointNow starts g's checkpoint (see above). It first writes g's
// queued appends; their responses go out after the sync that makes them
// durable, the one the checkpoint waits for.
func (c *Core) checkpointNow(g *group) error {
	mustSync := false
	queued := len(g.pipe.appends) > 0
	if queued {
		var err error
		if mustSync, err = c.writeGroup(g); err != nil {
			return err
		}
		if len(g.pipe.appends) > 0 {
			// The log rolled its segment and holds the rest back: sync
			// it; the checkpoint comes at a later round.
			c.startSync(g)
			return nil
		}
	}
	w := c.prepareCheckpoint(g)
	g.ck = &checkpointFlight{w: w}
	if !mustSync && g.pipe.durableCommit >= w.raftIndex {
		if queued {
			c.release(g)
		}
		c.startCheckpointWrite(g)
		return nil
	}
	if c.wal != nil {
		c.startWALSync([]*group{g})
	} else {
		c.startSync(g)
	}
	g.ck.afterSync = g.pipe.syncing
	return nil
}

// checkpointAfterSync starts g's checkpoint write once the sync token it
// waited for completed.
func (c *Core) checkpointAfterSync(g *group, token uint64) {
	if g.ck != nil && g.ck.afterSync == token {
		g.ck.afterSync = 0
		c.startCheckpointWrite(g)
	}
}

// startCheckpointWrite queues g's checkpoint write job.
func (c *Core) startCheckpointWrite(g *group) {
	g.ck.job = c.queueJob(syncJob{g: g, run: g.ck.w.write, ckWrite: g.ck.w})
}

// finishCheckpointWrite ends a write job: on success the checkpoint
// counts and its trim starts; a failure is fatal unless refused for space.
func (c *Core) finishCheckpointWrite(token uint64, job syncJob, err error) {
	g, w := job.g, job.ckWrite
	if !c.hosted(g) || g.ck == nil || g.ck.job != token {
		return
	}
	g.sm.checkpointDone(w, err)
	if err != nil {
		c.dropCheckpoint(g)
		if errors.Is(err, raftlog.ErrNoSpace) && g.sm.policy().skipCheckpointOnFull {
			// A checkpoint is an optimisation: skipped on a full disk
			// (diskfull.go), tried again CheckpointEntries later.
			g.logs.log(slog.LevelWarn, "checkpoint skipped: disk full", slog.Any("err", err))
			c.noSpace()
			g.checkpointIndex = w.raftIndex
			return
		}
		g.logs.log(slog.LevelError, "checkpoint write failed; the node stops (fail-stop)", slog.Any("err", err))
		c.fatal = fmt.Errorf("node: %s/%d: checkpoint: %w", g.tp.Topic, g.tp.Partition, err)
		return
	}
	g.checkpointIndex = w.raftIndex
	c.stats.Checkpoints++
	g.ck.job = c.queueJob(syncJob{g: g, run: w.trim, ckWrite: w, ckTrim: true})
}

// finishCheckpointTrim ends a trim job, and with it g's checkpoint.
func (c *Core) finishCheckpointTrim(token uint64, job syncJob, err error) {
	g, w := job.g, job.ckWrite
	if !c.hosted(g) || g.ck == nil || g.ck.job != token {
		return
	}
	c.dropCheckpoint(g)
	if err != nil {
		g.logs.log(slog.LevelWarn, "removing older checkpoints failed; the next checkpoint tries again", slog.Any("err", err))
		return
	}
	g.sm.checkpointTrimmed(w)
}

// dropCheckpoint ends g's checkpoint in flight, if any.
func (c *Core) dropCheckpoint(g *group) { g.ck = nil }

// errCheckpointAbandoned is the outcome a checkpoint prepared and never
// written reports to its state machine (checkpointDone).
var errCheckpointAbandoned = errors.New("node: checkpoint abandoned before its write")

// replicaGuard is the guard of the jobs writing in the replica directory
// dir, made on first use.
func (c *Core) replicaGuard(dir string) *jobGuard {
	guard := c.replicaGuards[dir]
	if guard == nil {
		if c.replicaGuards == nil {
			c.replicaGuards = make(map[string]*jobGuard)
		}
		guard = &jobGuard{}
		c.replicaGuards[dir] = guard
	}
	return guard
}

// cancelReplicaJobs stops the checkpoint and snapshot jobs of the replica
// in dir before its files are removed: once it returns none writes there
// again. A replica opened there later gets a new guard.
func (c *Core) cancelReplicaJobs(dir string) {
	if guard := c.replicaGuards[dir]; guard != nil {
		guard.cancel()
		delete(c.replicaGuards, dir)
	}
}

// writeCheckpoint writes g's checkpoint synchronously, every step on the
// calling goroutine: the log sync, the write, its completion, the trim.
// Tests and benchmarks use it; the loop uses checkpointNow.
func (c *Core) writeCheckpoint(g *group) error {
	sync := g.log.Sync
	if c.wal != nil {
		sync = c.wal.Sync
	}
	if err := sync(); err != nil {
		return fmt.Errorf("node: %s/%d: checkpoint: sync raft log: %w", g.tp.Topic, g.tp.Partition, err)
	}
	w := c.prepareCheckpoint(g)
	err := w.write()
	g.sm.checkpointDone(w, err)
	if err != nil {
		if errors.Is(err, raftlog.ErrNoSpace) && g.sm.policy().skipCheckpointOnFull {
			c.noSpace()
			g.checkpointIndex = w.raftIndex
			return nil
		}
		return fmt.Errorf("node: %s/%d: checkpoint: %w", g.tp.Topic, g.tp.Partition, err)
	}
	g.checkpointIndex = w.raftIndex
	c.stats.Checkpoints++
	if err := w.trim(); err != nil {
		return fmt.Errorf("node: %s/%d: checkpoint trim: %w", g.tp.Topic, g.tp.Partition, err)
	}
	g.sm.checkpointTrimmed(w)
	return nil
}

// finishCheckpointJob ends one of a checkpoint's jobs.
func (c *Core) finishCheckpointJob(token uint64, job syncJob, err error) {
	if job.ckTrim {
		c.finishCheckpointTrim(token, job, err)
		return
	}
	c.finishCheckpointWrite(token, job, err)
}
