package node

import (
	"fmt"
	"log/slog"

	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/wal"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// The pipelined storage path. Raft runs with AsyncStorageWrites: a Ready's
// writes come as a MsgStorageAppend (entries, hard state, and the messages
// that may only leave once they are durable: append and vote responses,
// the self-acknowledgement that lets the leader count its own log), and
// its committed entries as a MsgStorageApply. Process sends the other
// messages at once (the leader's MsgApps go out while its own write is
// still to come: Raft thesis §10.2.1), applies, then writes each group's
// queued appends to its log and, when raft requires durability
// (raft.MustSync), starts a sync of that log: a SyncJob. The host runs the
// job's fsyncs on any goroutine and reports them with Core.SyncDone; only
// then are the held responses stepped or sent and acks=1 produces
// answered. A group has at most one sync in flight: appends that come
// meanwhile wait in order and share the next one (group commit per log).
//
// Rejected: keeping a synchronous round (the loop waits for every fsync);
// a node-wide ordered queue of batches (a slow log would hold back the
// others); writing while the log's sync is in flight (raftlog would need
// locking for nothing: the fsyncs of one file run one after another anyway).

// groupPipe is one group's storage pipeline.
type groupPipe struct {
	// appends are the MsgStorageAppends taken from Readies and not yet
	// written, in order (a message with only Responses holds back messages
	// that carry a term not yet durable).
	appends []*raftpb.Message
	// syncing is the token of the group's sync in flight, 0 when none; the
	// log is not written while it runs.
	syncing uint64
	// released on the sync's completion: responses to step or send, and
	// acks=1 waits whose entries it makes durable.
	held  []*raftpb.Message
	acked []*produceWait
	// hard is the last hard state written; durableTerm and durableCommit
	// the term and commit index of the last one synced, heldTerm and
	// heldCommit the ones the sync in flight makes durable. (A commit-only
	// hard state is written without a sync: durableCommit may trail.)
	hard          raftpb.HardState
	durableTerm   uint64
	heldTerm      uint64
	durableCommit uint64
	heldCommit    uint64
	// unflushed counts the entry bytes written to the log (WAL mode) since
	// its last background flush started; flushing says one is in flight.
	unflushed int64
	flushing  bool
}

// SyncJob is storage work (a log's fsync, a checkpoint's writes, an
// unlink) that the Core hands its host. Run it once, on any goroutine, then report its
// result with Core.SyncDone(Token, err).
type SyncJob struct {
	Token uint64
	// write, when not nil, is the job's first phase (a log sync's pending
	// writes), run its second (the fsyncs): see RunWrite.
	write func() error
	run   func() error
	// checkpoint: the job writes a checkpoint (checkpoint_job.go).
	checkpoint bool
	// passPhase: 1 a compaction pass's write job, 2 its commit job
	// (compaction_replica.go), 0 any other job.
	passPhase uint8
	// read: the job reads entries for a fetch (fetch_cold.go).
	read bool
}

// Read reports whether the job is a fetch's log read, which writes
// nothing: the simulator counts the crashes that land between it and its
// completion.
func (j SyncJob) Read() bool { return j.read }

// Checkpoint reports whether the job writes a checkpoint, whose completion
// is what makes it count: the simulator counts the crashes that land
// between the two.
func (j SyncJob) Checkpoint() bool { return j.checkpoint }

// Run performs the job: its writes, then, unless one failed, its fsyncs.
// It touches only the files and the Disk, not the Core: the host may run
// jobs concurrently with each other and with every Core call.
func (j SyncJob) Run() error {
	if err := j.RunWrite(); err != nil {
		return err
	}
	return j.RunSync()
}

// Writes reports whether the job has a write phase apart from its fsyncs:
// a log sync, whose job issues the log's pending writes first.
func (j SyncJob) Writes() bool { return j.write != nil }

// RunWrite performs the job's first phase, its writes (nothing for a job
// without one: Writes); RunSync its second, the fsyncs (all of the work
// for the others). Run is the two in order; a host that runs them as two
// steps (the simulator, so that a crash can land after the writes and
// before their fsync: a process kill there leaves written, unsynced bytes
// in the page cache) runs RunSync only after RunWrite returned nil, and
// reports the first error.
func (j SyncJob) RunWrite() error {
	if j.write == nil {
		return nil
	}
	return j.write()
}

// RunSync performs the job's second phase (see RunWrite).
func (j SyncJob) RunSync() error { return j.run() }

// syncJob is a job in flight: the group it belongs to and its fsyncs.
type syncJob struct {
	g *group
	// write and run: the job's two phases (SyncJob.RunWrite); write is
	// nil but for a log sync.
	write, run func() error
	// groups are those a sync of the write-ahead log covers (wal.go); g
	// is then nil.
	groups []*group
	// flush: the sync of g's log for a write-ahead log rotation (wal.go);
	// early: for its background flush (walFlushEarly), which no rotation
	// waits for; walRemove: the removal of a rotation's retired segments
	// (g nil); trash: the unlink of g's compacted segments (startTrash).
	flush, early, walRemove, trash bool
	// ckWrite: the write job of g's checkpoint, or with ckTrim its trim
	// job (checkpoint_job.go).
	ckWrite *checkpointWrite
	ckTrim  bool
	// snapshot: the raft index of the compaction snapshot the job writes
	// (snapshot_job.go), 0 for other jobs.
	snapshot uint64
	// pass: a compaction pass's write job, or with its commit set its
	// commit job (compaction_replica.go); untimed: the watchdog does not
	// time it (a pass's write, which does no fsync).
	pass    *passFlight
	untimed bool
	// install: a prefix install's append or commit job
	// (compaction_install.go).
	install *prefixInstall
	// cold: a fetch's log read (fetch_cold.go).
	cold *coldRead
	// tier: an upload, deletion or sweep in the bucket (tier.go).
	tier *tierJob
	// handed: the host took the job (TakeSyncJobs) at tick handedAt;
	// slowLogged: the watchdog logged it as slow (stall.go).
	handed     bool
	handedAt   uint64
	slowLogged bool
}

// TakeSyncJobs appends the sync jobs started since the last call to dst and
// returns it. The host calls it after every Process and runs each job off
// the loop: the Core itself never waits for the disk.
func (c *Core) TakeSyncJobs(dst []SyncJob) []SyncJob {
	for _, j := range c.syncQueue { // the watchdog times each from now (stall.go)
		job := c.syncsInFlight[j.Token]
		job.handed, job.handedAt = true, c.ticks
		c.syncsInFlight[j.Token] = job
	}
	dst = append(dst, c.syncQueue...)
	clear(c.syncQueue)
	c.syncQueue = c.syncQueue[:0]
	return dst
}

// SyncDone reports the result of the sync job token: on success the writes
// it covered are durable, so the responses and acknowledgements held for it
// go out now (the frames are sent before SyncDone returns); an error is
// fatal and the next Process returns it. The host calls Process after
// SyncDone, since the group may have more to write.
func (c *Core) SyncDone(token uint64, err error) {
	defer c.flush()
	job, ok := c.syncsInFlight[token]
	if !ok {
		panic(fmt.Sprintf("node: SyncDone of unknown sync %d", token))
	}
	delete(c.syncsInFlight, token)
	if c.closed || c.fatal != nil {
		return
	}
	c.finishSync(token, job, err)
	c.sendFrames()
}

// finishSync ends the group's sync in flight with err. The sync of a
// replica removed meanwhile ends silently (its files are closed).
func (c *Core) finishSync(token uint64, job syncJob, err error) {
	if job.walRemove {
		c.finishWALRemove(err)
		return
	}
	if job.cold != nil {
		c.finishColdRead(job.cold) // fetch_cold.go
		return
	}
	if job.pass != nil {
		c.finishPassJob(token, job, err) // compaction_replica.go
		return
	}
	if job.tier != nil {
		c.finishTierJob(token, job, err) // tier.go
		return
	}
	if job.install != nil {
		c.finishInstallJob(token, job, err) // compaction_install.go
		return
	}
	if job.trash {
		c.finishTrash(job, err)
		return
	}
	if job.ckWrite != nil {
		c.finishCheckpointJob(token, job, err) // checkpoint_job.go
		return
	}
	if job.snapshot != 0 {
		c.finishSnapshotJob(token, job, err) // snapshot_job.go
		return
	}
	if job.g == nil {
		c.finishWALSync(token, job, err)
		return
	}
	if job.flush {
		c.finishFlush(job, err) // wal.go
		return
	}
	g := job.g
	if !c.hosted(g) {
		return
	}
	if g.pipe.syncing != token {
		panic(fmt.Sprintf("node: %s/%d: sync %d done while %d is in flight", g.tp.Topic, g.tp.Partition, token, g.pipe.syncing))
	}
	g.pipe.syncing = 0
	if err := g.log.FinishSync(err); err != nil {
		if raftlog.WriteFailed(err) && c.writeRefused(g, err) { // disk full: g reopened (diskfull.go)
			return
		}
		g.logs.log(slog.LevelError, "raft log write or sync failed; the node stops (fail-stop)", slog.Any("err", err))
		c.fatal = fmt.Errorf("node: %s/%d: sync: %w", g.tp.Topic, g.tp.Partition, err)
		return
	}
	c.stats.Syncs++
	g.pipe.durableTerm = max(g.pipe.durableTerm, g.pipe.heldTerm)
	g.pipe.durableCommit = max(g.pipe.durableCommit, g.pipe.heldCommit)
	c.release(g)
	c.checkpointAfterSync(g, token) // checkpoint_job.go
}

// release delivers what g's last write made durable: the held responses
// (stepped into raft when addressed to this node, else queued to their
// node) and the acks=1 produces.
func (c *Core) release(g *group) {
	p := &g.pipe
	for _, w := range p.acked {
		if !w.finished {
			c.finishProduce(g, w, ProduceResult{BaseOffset: -1, Leader: c.cfg.ID})
		}
	}
	clear(p.acked)
	p.acked = p.acked[:0]
	held := p.held
	p.held = nil
	for _, m := range held {
		if NodeID(m.GetTo()) == c.cfg.ID {
			c.stepLocal(g, m)
			continue
		}
		c.queueMessage(g, m)
	}
}

// stepLocal steps a storage thread's response (or this node's own
// MsgAppResp) into g's raft.
func (c *Core) stepLocal(g *group, m *raftpb.Message) {
	c.markReady(g) // ready.go
	if err := g.raw.Step(m); err != nil {
		g.logs.log(slog.LevelDebug, "local message dropped", slog.String("type", m.GetType().String()), slog.Any("err", err))
	}
}

// routeMessages takes a Ready's messages: storage appends queue on the
// group's pipe, the apply message is kept for applyReady, and the rest go
// to their nodes at once, except those carrying a term this log has not
// made durable yet, which wait behind the append that writes it.
func (c *Core) routeMessages(gr *groupReady) {
	g := gr.g
	var later []*raftpb.Message
	for _, m := range gr.rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			g.pipe.appends = append(g.pipe.appends, m)
			continue
		case raft.LocalApplyThread:
			gr.apply = m
			continue
		}
		if m.GetType() != raftpb.MessageType_MsgPreVote && m.GetTerm() > g.pipe.durableTerm {
			later = append(later, m)
			continue
		}
		c.queueMessage(g, m)
	}
	if len(later) > 0 {
		g.pipe.appends = append(g.pipe.appends, &raftpb.Message{Responses: later})
	}
}

// lastQueuedIndex is the last index of g's log counting the appends queued
// behind its sync in flight: raft's last index, the entries a leader may
// already have sent its followers.
func (g *group) lastQueuedIndex() (uint64, error) {
	for i := len(g.pipe.appends) - 1; i >= 0; i-- {
		if ents := g.pipe.appends[i].GetEntries(); len(ents) > 0 {
			return ents[len(ents)-1].GetIndex(), nil
		}
	}
	return g.log.LastIndex()
}

// writeAppends writes the queued appends of every group with no sync in
// flight, and starts a sync where raft requires one. Where none is needed
// (a commit-only hard state, responses alone) the responses go at once:
// everything they depend on was made durable by an earlier sync. It
// returns how many groups it wrote.
func (c *Core) writeAppends() (int, error) {
	if c.wal != nil {
		return c.writeAppendsWAL() // wal.go
	}
	n := 0
	for _, g := range c.groups {
		if len(g.pipe.appends) == 0 || g.pipe.syncing != 0 || c.snapshotWaits(g) {
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
		c.startSync(g)
	}
	return n, nil
}

// writeGroup writes g's queued appends, moving their responses to held,
// and reports whether raft requires them durable before those go out.
func (c *Core) writeGroup(g *group) (bool, error) {
	c.groupStatusChanged(g) // a snapshot installed, entries written (StatusSeq)
	p := &g.pipe
	mustSync := false
	for i, m := range p.appends {
		p.appends[i] = nil
		if snap := m.GetSnapshot(); snap != nil && !raft.IsEmptySnap(snap) {
			// A leader's snapshot (snapshot.go): durably in the log, then
			// the engine restored from it, before the entries after it.
			if err := c.installSnapshot(g, snap); err != nil {
				return false, err
			}
			mustSync = true
		}
		var hs *raftpb.HardState
		if m.Term != nil {
			hs = &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		}
		entries := m.GetEntries()
		if hs != nil || len(entries) > 0 {
			if raft.MustSync(orHard(hs, &p.hard), &p.hard, len(entries)) {
				mustSync = true
			}
			n, err := c.saveAppend(g, entries, hs)
			if err != nil {
				return false, err
			}
			if n > 0 {
				p.acked = c.indexProposals(g, entries[:n], p.acked)
			}
			if n < len(entries) {
				// The log sealed its segment (raftlog SaveSome): the
				// rest, its hard state and its responses wait for the
				// sync that makes the sealed segment durable.
				p.appends[i] = &raftpb.Message{Term: m.Term, Vote: m.Vote, Commit: m.Commit,
					Entries: entries[n:], Responses: m.Responses}
				p.appends = append(p.appends[:0], p.appends[i:]...)
				return true, nil
			}
			if hs != nil {
				p.hard.Term, p.hard.Vote, p.hard.Commit = hs.Term, hs.Vote, hs.Commit
			}
		}
		p.held = append(p.held, m.GetResponses()...)
	}
	p.appends = p.appends[:0]
	return mustSync, nil
}

// saveAppend writes entries and hs to g's log and returns how many of
// entries it wrote: all, unless the log rolled its segment, whose fsync
// the group's next sync job makes, off the loop (raftlog SaveSome). In WAL
// mode all: the record in the write-ahead log names them all (the roll's
// fsync then stays in Save).
func (c *Core) saveAppend(g *group, entries []*raftpb.Entry, hs *raftpb.HardState) (int, error) {
	n, err := len(entries), error(nil)
	if c.wal != nil {
		if err := c.walAppend(g, wal.Prepare(g.log, entries, hs)); err != nil {
			return 0, err
		}
		for _, e := range entries {
			g.pipe.unflushed += int64(len(e.Data))
		}
		err = g.log.Save(entries, hs)
	} else {
		n, err = g.log.SaveSome(entries, hs)
	}
	if err != nil {
		if !c.spaceRefusable(g, err) { // else writeRefused logs what happens (diskfull.go)
			g.logs.log(slog.LevelError, "raft log write failed; the node stops (fail-stop)", slog.Any("err", err))
		}
		return 0, fmt.Errorf("node: %s/%d: save: %w", g.tp.Topic, g.tp.Partition, err)
	}
	return n, nil
}

// orHard is hs, or prev when hs is nil (no hard state in the append).
func orHard(hs, prev *raftpb.HardState) *raftpb.HardState {
	if hs == nil {
		return prev
	}
	return hs
}

// newJob registers job as in flight under a new token and returns the
// SyncJob to hand the host (queueJob queues it at once).
func (c *Core) newJob(job syncJob) SyncJob {
	c.nextSyncToken++
	c.syncsInFlight[c.nextSyncToken] = job
	j := SyncJob{Token: c.nextSyncToken, write: job.write, run: job.run, checkpoint: job.ckWrite != nil && !job.ckTrim, read: job.cold != nil}
	if job.pass != nil {
		j.passPhase = 1
		if job.pass.commit {
			j.passPhase = 2
		}
	}
	return j
}

// queueJob registers job and queues it for the host; it returns its token.
func (c *Core) queueJob(job syncJob) uint64 {
	j := c.newJob(job)
	c.syncQueue = append(c.syncQueue, j)
	return j.Token
}

// startSync starts the sync of g's log covering everything written, as a
// job for the host.
func (c *Core) startSync(g *group) {
	write, sync := c.bugStartSyncSkippingFsync(g) // planted-bug hook: nil in production
	if write == nil {
		write, sync = g.log.StartSyncPhases()
	}
	g.pipe.syncing = c.queueJob(syncJob{g: g, write: write, run: sync})
	g.pipe.heldTerm, g.pipe.heldCommit = g.pipe.hard.GetTerm(), g.pipe.hard.GetCommit()
	c.bugReleaseBeforeSync(g)
}
