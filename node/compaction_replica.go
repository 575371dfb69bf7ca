package node

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/compacted"
	"go.etcd.io/raft/v3"
)

// Each replica's compaction passes (issue 24, engine/compact's doc,
// "Replicas"). Every replica of a compacted partition runs the pass of
// every COMPACT decision it applies, in generation order, into its own
// compacted prefix (raftlog/compacted, in <replica>/compacted), and
// reports the outcome in a COMPACT_DONE entry:
//
//  1. Noting (on the loop, at apply): a COMPACT applied appends its
//     decision to the replica's pending list (noteDecision); the engine's
//     decision as of the replica's open (its checkpoint or raft snapshot)
//     is noted first, so a restart picks up a decision whose pass had not
//     finished and the COMPACT entries replayed after it. A decision stays
//     pending until this replica's pass of it is current.
//  2. Gathering (on the loop, bounded per tick): the store is opened; the
//     first pending decision must be the store's generation + 1 (else this
//     replica missed a pass and must install a prefix from a peer, not
//     built: the replica is "stuck" and says why). The raft entries of the
//     indexed batches from the prefix's end up to the decision's cleanable
//     end are read from the raft log, at most passEntriesPerTick entries
//     and passBytesPerTick bytes a tick (the Core owns the log).
//  3. The write (off the loop): a compact.Pass over (the store's prefix,
//     read from its files; the gathered entries; the engine's aborted
//     index) straight into a Writer of the new generation, in step jobs
//     (one without an I/O budget, see passBudget). The Writer syncs
//     nothing before Commit, so these jobs do no fsync and the disk
//     watchdog does not time them (syncJob.untimed): their length is CPU
//     and the size of the live set, not the disk's health, and their
//     writes go to the same disk as the log syncs the watchdog does time.
//  4. The commit job (off the loop, timed like every fsync): Commit syncs
//     the segments, writes and renames the manifest (the switch).
//  5. Completion (on the loop): Finish makes the new generation current, the
//     decision leaves the pending list, the old generation's files go in a
//     job nothing waits for, and a leading replica proposes COMPACT_DONE
//     with its generation, cleaned-to offset and digest (partition groups
//     do not forward proposals, so followers do not). The first applied is
//     the record; a later report of the same generation is checked against
//     it at apply (the engine's ErrCompactionDiverged, logged here and
//     counted in Stats.CompactionsDiverged), and every replica compares its
//     own outcome with the record once the record reaches its generation
//     (a mismatch stops its passes: its prefix must be installed again from
//     a peer). A leader whose generation the record lacks (a report
//     dropped, a crash after the switch, leadership moved) proposes again
//     at each retention check, at most once every RequestTimeoutTicks.
//
// Crashes: before the commit point the store reopens on the old generation
// (raftlog/compacted's Open removes the half-written one) and the decision
// is pending again, so the pass reruns and, deterministic, writes the same
// bytes; after it the store reopens on the new generation and the replica
// reports it. One pass per replica is in flight; the job holds the
// replica directory's guard (checkpoint_job.go), so a replica removed or
// repaired stops it first.
//
// The raft log is trimmed up to the prefix: on a compacted partition the
// raft-log compaction's limit (snapshot.go maybeCompact) is engine's
// RaftTrimBound of the least of the store's end and the record's
// CleanedTo (prefixTrimBound; none past the first batch while stuck) and
// of what a majority of the voters' prefixes hold (compaction_held.go), so
// a replica's disk holds its prefix and the raft log past it. A replica
// whose raft log starts past its prefix (a raft snapshot, sent when a
// follower lags past the leader's trim) is stuck and installs the
// record's generation from a peer (compaction_install.go), as is one
// whose prefix does not open, was found damaged, or differs from the
// record.
//
// Fetch and ListOffsets read the prefix below its end (compaction_fetch.go).
//
// Memory: the gathered entries are held for the pass's write job, at most
// passInputBytes of the decision (8 times its offset map) plus one entry;
// a pass whose input stops there cleans to there, like a full map.
//
// compact,delete and DeleteRecords: a TRIM moves the log start inside or
// past the prefix. On a compacted partition a TRIM drops no index entry
// (this replica's own raft-log trim drops what its own prefix covers), and
// the engine records the log start in each decision; a pass drops every batch wholly below the decision's log
// start (engine/compact's rule 8), so the next generation is cut at the
// new log start (or empty) on every replica alike, whenever it runs.
// Until then nothing below the log start is served (engine's Locate).

const (
	// passEntriesPerTick and passBytesPerTick bound the raft entries a
	// pass gathers on the loop in one tick.
	passEntriesPerTick = 4096
	passBytesPerTick   = 8 << 20
	// passPendingMax bounds the decisions noted and not yet passed; more
	// means this replica's passes fell far behind the others': it is stuck
	// (a prefix must be installed from a peer).
	passPendingMax = 16
	// compactedDir is the replica's compacted prefix, below its directory.
	compactedDir = "/compacted"
	// passInputMapMultiple bounds the raft entry bytes a pass gathers
	// (held in memory for its write job): that many times the decision's
	// offset map (64 MiB with the default 8 MiB map), at least one entry.
	// A function of the replicated decision, so every replica stops at the
	// same batch; the rest goes to the next decision.
	passInputMapMultiple = 8
)

// passInputBytes is the most raft entry bytes a pass of d gathers.
func passInputBytes(d compact.Decision) int64 { return passInputMapMultiple * d.OffsetMapBytes }

// passState is a replica's compaction passes (group.pass).
type passState struct {
	// store is the replica's compacted prefix, opened on first need.
	store *compacted.Store
	// seeded: the engine's decision as of the replica's open was noted;
	// noted is the last generation put in pending.
	seeded bool
	noted  uint64
	// pending are the decisions noted and not yet current in the store,
	// in generation order.
	pending []compact.Decision
	// flight is the pass in progress, nil when none.
	flight *passFlight
	// stuck says why no pass can run on this replica ("": none).
	stuck string
	// reportGen is the generation of the COMPACT_DONE last proposed,
	// until tick reportDeadline.
	reportGen      uint64
	reportDeadline uint64
	// install is the prefix install in progress while stuck, nil when
	// none; installTurn picks the next peer asked (compaction_install.go).
	install     *prefixInstall
	installTurn int
	// stuckPeers and freePeers are the voters whose last answer to a
	// prefix request said they are stuck too, or not (sorted): a stuck
	// leader hands its leadership only to a free one (handOffStuck),
	// asking the voters it knows nothing of every probeAt.
	stuckPeers, freePeers []NodeID
	probeAt               uint64
	// askedAt is the tick a stuck peer last asked this replica for its
	// prefix (0: never): a leader decides no pass for installHoldTicks
	// after it (compaction_trigger.go), so the generation the peer is
	// installing stays current long enough to be served whole.
	askedAt uint64
	// damaged: a read of the prefix failed its checks (ErrCorrupt): it is
	// installed again whatever its generation.
	damaged bool
	locs    []engine.BatchLocation // scratch
	// held are the other voters' last PrefixHeld reports, by node ID
	// (compaction_held.go); heldSent and heldSentAt the end this replica
	// last reported and the tick it did.
	held       []heldReport
	heldSent   int64
	heldSentAt uint64
	// last is the last pass made current on this replica since it opened
	// (CompactionView's LastPass fields; zero: none).
	last passFigures
}

// passFigures are what one pass read and wrote and how long it took on
// the Clock's monotonic time, from the start of its gathering to its
// switch (Finish on the loop).
type passFigures struct {
	bytesIn, bytesOut int64
	took              time.Duration
}

// passFlight is one pass from gathering to its completion.
type passFlight struct {
	d compact.Decision
	// started is the Clock's monotonic time the pass began gathering.
	started    time.Duration
	firstDirty int64
	// fromLogStart: a first pass, whose dirty section begins at the batch
	// holding the decision's log start.
	fromLogStart bool
	next         int64 // the next offset to gather
	dirty        []dirtyEntry
	bytes        int64 // the entry bytes in dirty
	gathered     bool
	w            *compacted.Writer
	// job is the token of the write step or (commit) the commit job in
	// flight.
	job    uint64
	commit bool
	// The write runs as steps (compact.Pass), each a job of its own, of
	// passStepBytes each: log is what they read, pass the Pass (made by
	// the first step), written set by the step that ended it, res its
	// outcome; all set by the jobs and read on the loop after their
	// SyncDone. steps counts the step jobs done, charged the bytes the
	// budget was charged for them so far (prefix read and batches
	// written).
	log     compact.Log
	pass    *compact.Pass
	written bool
	res     compact.Result
	steps   int
	charged int64
	// held: the next job (the first write step once gathered, the next
	// step, or the commit once written) waits for the node's compaction
	// I/O budget (passBudgetHeld); passStep queues it when the budget is
	// paid.
	held bool
}

// The I/O budget (Config.CompactionBytesPerSec, Kafka's
// log.cleaner.io.max.bytes.per.second): one per node, shared by all its
// replicas' passes as Kafka's throttler is by its cleaner threads, measured
// on the Clock's monotonic time. A pass is charged, as debt, every byte it
// reads and writes: the raft entry bytes each gathering step read (when
// the step ends), then at the end of each write step the compacted
// prefix's bytes it read (both of a pass's walks read them) and the
// batches it wrote (compact.Pass's Progress). The write runs in steps of
// passStepBytes of input (a tenth of a second of the budget), each a job
// of its own: a gathering step, each write step and the commit job start
// only once the debt so far is paid (now at or past freeAt); until then
// the pass holds (passFlight.held) and passStep, which the loop calls
// every tick while a pass is active, looks again. So a pass that read
// and wrote N bytes at B bytes a second takes at least N/B from its first
// gathering step to its switch, the rate holds within its write (to a
// step's bytes), not only on average over it, and nothing else on the
// loop waits for it: produce and fetch go on. 0: unlimited, no pass ever
// holds (and the clock is not read for it), and the write is one step.
type passBudget struct {
	freeAt time.Duration
}

// passBudgetHeld reports whether the node's compaction I/O budget is in
// debt: the next pass step must wait.
func (c *Core) passBudgetHeld() bool {
	return c.cfg.CompactionBytesPerSec > 0 && c.cfg.Clock.Monotonic() < c.passBudget.freeAt
}

// passStepsPerSec is how many write steps a second of the budget pays
// for: a step reads about CompactionBytesPerSec/passStepsPerSec bytes.
const passStepsPerSec = 10

// passStepBytes is the input bytes one write step reads (at least one
// batch): all of it without a budget.
func (c *Core) passStepBytes() int64 {
	if rate := c.cfg.CompactionBytesPerSec; rate > 0 {
		return max(rate/passStepsPerSec, 1)
	}
	return math.MaxInt64
}

// passCharge adds n bytes of pass I/O to the node's budget debt.
func (c *Core) passCharge(n int64) {
	rate := c.cfg.CompactionBytesPerSec
	if rate <= 0 || n <= 0 {
		return
	}
	d := time.Duration(n/rate)*time.Second + time.Duration(n%rate)*time.Second/time.Duration(rate)
	c.passBudget.freeAt = max(c.passBudget.freeAt, c.cfg.Clock.Monotonic()) + d
}

// noteDecision appends d to g's pending passes when it is newer than the
// last noted.
func (c *Core) noteDecision(g *group, d compact.Decision) {
	p := &g.pass
	p.seeded = true
	if d.Generation == 0 || d.Generation <= p.noted {
		return
	}
	p.noted = d.Generation
	if len(p.pending) >= passPendingMax {
		c.passStuck(g, fmt.Sprintf("more than %d compaction decisions pending", passPendingMax))
		return
	}
	p.pending = append(p.pending, d)
}

// decisionApplied is called after each entry g applies with the engine's
// decision before it: a new decision is noted (the one before it first,
// when the replica's open decision was not noted yet).
func (c *Core) decisionApplied(g *group, before compact.Decision, res engine.Result) {
	if errors.Is(res.Err, engine.ErrCompactionDiverged) {
		c.stats.CompactionsDiverged++
		g.logs.log(slog.LevelError, "a replica reported another compaction outcome", slog.Any("err", res.Err))
	}
	d := g.part.Compaction().Decision
	if d.Generation == before.Generation {
		return
	}
	if !g.pass.seeded {
		c.noteDecision(g, before)
	}
	c.noteDecision(g, d)
}

// passesReset forgets the noted decisions after g's engine was replaced by
// a raft snapshot: the engine's decision is noted again at the next check
// (a replica whose prefix is then behind by more than one is stuck).
func (c *Core) passesReset(g *group) {
	g.pass.seeded, g.pass.noted, g.pass.pending = false, 0, nil
}

// passStuck records why g can run no pass, once.
func (c *Core) passStuck(g *group, why string) {
	if g.pass.stuck == "" {
		g.pass.stuck = why
		g.logs.log(slog.LevelWarn, "compaction passes stopped on this replica; its prefix is installed from a peer",
			slog.String("why", why))
	}
}

// passCheck is a replica's periodic compaction work: note the engine's
// decision when not yet seeded, run or continue a pass, and report a pass
// the record does not hold yet.
func (c *Core) passCheck(g *group) {
	st := g.part.Compaction()
	if st.Decision.Generation == 0 && g.pass.store == nil {
		return // never decided: nothing to open
	}
	if !g.pass.seeded {
		c.noteDecision(g, st.Decision)
	}
	if g.pass.stuck == "" && c.openPrefix(g) {
		if first, ok := c.firstInRaftLog(g); ok && first > max(g.pass.store.End(), g.part.LogStartOffset()) {
			// A raft snapshot past this replica's prefix (the others
			// trimmed their raft logs up to theirs).
			c.passStuck(g, fmt.Sprintf("raft log starts at offset %d, past the compacted prefix's end %d", first, g.pass.store.End()))
		}
	}
	if c.passActive(g) {
		c.passStep(g)
	}
	if g.pass.stuck != "" {
		c.installStep(g) // compaction_install.go
		c.handOffStuck(g)
	}
	c.maybeReportPass(g)
	if end := c.ownHeldEnd(g); end != g.pass.heldSent || c.ticks >= g.pass.heldSentAt+uint64(c.cfg.RetentionCheckTicks) {
		g.pass.heldSent, g.pass.heldSentAt = end, c.ticks
		c.reportHeld(g) // compaction_held.go
	}
}

// handOffStuck, on a stuck replica leading g while the engine's record is
// behind its decision, starts a leadership transfer to the next voter
// after this node (in ID order, cyclic) that raft saw active, unless a
// transfer is in flight. Only a leader reports a pass (COMPACT_DONE), and
// a stuck one runs none: while it leads, the record stays behind the
// decision the other replicas passed, they no longer serve the record's
// generation (servePrefix serves a replica's current one), and every
// stuck replica, this one included, asks for it for ever (simnet seeds 9,
// 12 and 98 with the compacted topic in every seed: the reads from
// offset 0 failed on ErrReplicaRecovering 30 s long). A next voter stuck
// too hands on in turn, so the leadership reaches a replica that passed.
// It hands on only to a voter whose last answer to a prefix request said
// it is not stuck (the leader probes the others every request timeout):
// with the one replica that passed down, two stuck ones handed the
// leadership to each other at every check (simnet seed 198:
// __strand_offsets/1 between nodes 2 and 4 for 12 s; its group
// coordinator's requests were dropped or queued until the queue was
// full, and the consumer group never converged). A stuck leader with no
// free voter keeps leading: the record waits, the partition serves.
func (c *Core) handOffStuck(g *group) {
	st := g.part.Compaction()
	if st.Decision.Generation <= st.DoneGeneration {
		return // the record's generation is current on the replicas that passed it
	}
	rs := g.raw.Status()
	if rs.RaftState != raft.StateLeader || rs.LeadTransferee != 0 {
		return
	}
	voters := slices.Sorted(slices.Values(g.confState.GetVoters()))
	at, _ := slices.BinarySearch(voters, uint64(c.cfg.ID))
	probe := c.ticks >= g.pass.probeAt
	if probe {
		g.pass.probeAt = c.ticks + uint64(c.cfg.RequestTimeoutTicks)
	}
	for i := 1; i < len(voters); i++ {
		id := voters[(at+i)%len(voters)]
		if id == uint64(c.cfg.ID) {
			continue
		}
		if _, free := slices.BinarySearch(g.pass.freePeers, NodeID(id)); !free {
			if probe {
				c.probeStuck(g, NodeID(id), st.Decision.Generation)
			}
			continue
		}
		if pr, ok := rs.Progress[id]; ok && pr.RecentActive {
			g.logs.log(slog.LevelWarn, "compaction stuck on the leader: handing the leadership on so a replica that passed reports it",
				slog.Uint64("to", id), slog.String("why", g.pass.stuck))
			c.touch(g)
			g.raw.TransferLeader(id)
			return
		}
	}
}

// passActive reports whether g has a pass to start or entries to gather.
func (c *Core) passActive(g *group) bool {
	p := &g.pass
	if f := p.flight; f != nil && f.held && f.w != nil {
		return true // a written pass's commit waits for the budget: it goes on as a queued one would
	}
	if p.stuck != "" {
		return false
	}
	if p.flight != nil {
		return !p.flight.gathered || p.flight.held
	}
	return len(p.pending) > 0
}

// openPrefix opens g's compacted prefix on first need.
func (c *Core) openPrefix(g *group) bool {
	if g.pass.store != nil {
		return true
	}
	s, err := compacted.Open(c.cfg.Disk, g.dir+compactedDir, compacted.Options{})
	if err != nil {
		c.passStuck(g, fmt.Sprintf("compacted prefix: %v", err))
		return false
	}
	g.pass.store = s
	return true
}

// closePrefix closes g's compacted prefix, if open.
func (c *Core) closePrefix(g *group) {
	if s := g.pass.store; s != nil {
		g.pass.store, g.pass.flight, g.pass.install = nil, nil, nil
		if err := s.Close(); err != nil {
			g.logs.log(slog.LevelWarn, "closing the compacted prefix", slog.Any("err", err))
		}
	}
}

// passStep starts g's next pass or gathers more of its entries (a bounded
// step); once all are gathered it queues the write job.
func (c *Core) passStep(g *group) {
	p := &g.pass
	if !c.openPrefix(g) {
		return
	}
	if p.flight == nil {
		gen := p.store.Generation()
		for len(p.pending) > 0 && p.pending[0].Generation <= gen {
			p.pending = p.pending[1:] // passed before a restart
		}
		if len(p.pending) == 0 {
			return
		}
		if d := p.pending[0]; d.Generation != gen+1 {
			c.passStuck(g, fmt.Sprintf("prefix of generation %d, next decision of generation %d", gen, d.Generation))
			return
		}
		// The pass starts at the prefix's end, or at the decision's log
		// start on a first pass (gatherPass lowers it to the base of the
		// batch holding it). A log start past the prefix's end (a TRIM:
		// compact,delete, delete-records) changes nothing here: a TRIM
		// drops no index entry of a compacted partition, and the pass
		// drops what lies wholly below the decision's log start
		// (engine/compact's rule 8), so every replica writes the same
		// prefix whenever its pass runs.
		first := p.store.End()
		if gen == 0 {
			first = p.pending[0].LogStart
		}
		p.flight = &passFlight{d: c.bugPassDecision(g, p.pending[0]), firstDirty: first, next: first, fromLogStart: gen == 0,
			started: c.cfg.Clock.Monotonic()} // planted-bug hook (-tags simbugs)
	}
	f := p.flight
	if f.w != nil && !f.held {
		return // a job of the pass is in flight
	}
	if c.passBudgetHeld() {
		f.held = f.gathered
		return // the I/O budget is in debt: the next tick looks again
	}
	if f.held && f.w != nil {
		f.held = false
		if f.written {
			c.queuePassCommit(g, f)
		} else {
			c.queuePassStep(g, f)
		}
		return
	}
	f.held = false
	if !f.gathered {
		before := f.bytes
		err := c.gatherPass(g, f)
		c.passCharge(f.bytes - before)
		if err != nil {
			p.flight = nil
			if errors.Is(err, raft.ErrCompacted) {
				c.passStuck(g, fmt.Sprintf("raft entries of the dirty section are gone: %v", err))
				return
			}
			if !c.corruptFound(g, err) {
				c.failStorage(g, fmt.Errorf("%w: compaction pass: %v", ErrStorage, err))
			}
			return
		}
		if !f.gathered {
			return
		}
		if c.passBudgetHeld() {
			f.held = true // the write starts once the gathering is paid for
			c.stats.CompactionBudgetHolds++
			return
		}
	}
	c.startPassWrite(g, f)
}

// gatherPass reads the next bounded part of f's dirty section: the raft
// entries of the indexed batches from f.next that end at or below the
// cleanable end.
func (c *Core) gatherPass(g *group, f *passFlight) error {
	p := &g.pass
	if f.next >= f.d.CleanableEnd {
		f.gathered = true
		return nil
	}
	locs := g.part.AppendPassLocations(p.locs[:0], f.next, passEntriesPerTick)
	p.locs = locs
	if (len(locs) > 0 && locs[0].BaseOffset > f.next) || (len(locs) == 0 && f.next < g.part.HighWatermark()) {
		// The index no longer holds the pass's input (a raft snapshot
		// past this replica's prefix): stuck, never a pass over less.
		return fmt.Errorf("%w: the raft log holds no batch at offset %d of the pass", raft.ErrCompacted, f.next)
	}
	if len(locs) > 0 && len(f.dirty) == 0 && f.fromLogStart && locs[0].BaseOffset < f.next {
		// A first pass from a log start inside a batch (delete-records):
		// the dirty section begins at that batch, as on every replica.
		f.firstDirty, f.next = locs[0].BaseOffset, locs[0].BaseOffset
	}
	var bytes int
	for _, loc := range locs {
		if loc.BaseOffset+int64(loc.RecordCount) > f.d.CleanableEnd {
			f.gathered = true
			return nil
		}
		if bytes >= passBytesPerTick {
			return nil
		}
		ents, err := g.log.Entries(loc.RaftIndex, loc.RaftIndex+1, math.MaxUint64)
		if err != nil {
			return err
		}
		if len(ents) != 1 {
			return fmt.Errorf("raft entry %d of offset %d: %d entries read", loc.RaftIndex, loc.BaseOffset, len(ents))
		}
		if n := int64(len(ents[0].GetData())); len(f.dirty) > 0 && f.bytes+n > passInputBytes(f.d) {
			// The pass's input is bounded (memory): it cleans to here,
			// as every replica does (entry sizes are replicated).
			f.gathered = true
			return nil
		}
		f.bytes += int64(len(ents[0].GetData()))
		f.dirty = append(f.dirty, dirtyEntry{loc: loc, data: ents[0].GetData()})
		bytes += len(ents[0].GetData())
		f.next = loc.BaseOffset + int64(loc.RecordCount)
	}
	// The index ended (the decision is at most the LSO, so this is the
	// high-water mark) or this tick's count was used.
	f.gathered = len(locs) < passEntriesPerTick || f.next >= f.d.CleanableEnd
	return nil
}

// startPassWrite begins the new generation and queues the first write
// step.
func (c *Core) startPassWrite(g *group, f *passFlight) {
	s := g.pass.store
	if f.d.Generation <= s.Generation() {
		// The store reached this generation while the pass gathered (an
		// install from a peer): the pass is obsolete, not stuck. Before,
		// Begin refused the older generation and the replica stopped its
		// passes and its prefix reads for good (simnet seed 71: the
		// leader, holding the record's generation 2, answered every read
		// from offset 0 REPLICA_RECOVERING for 30 s).
		g.pass.flight = nil
		return
	}
	// The new prefix's start: at or below every batch the pass may keep,
	// one the log start falls inside included (DeleteRecords mid-batch).
	start := min(f.d.LogStart, f.firstDirty)
	if s.Generation() > 0 {
		start = min(start, s.Start())
	}
	w, err := s.Begin(f.d.Generation, start)
	if err != nil {
		g.pass.flight = nil
		c.passStuck(g, fmt.Sprintf("begin generation %d: %v", f.d.Generation, err))
		return
	}
	f.w = w
	aborted := g.part.AppendAbortedTxns(nil, 0, g.part.HighWatermark())
	f.log = passLog(storeInputs(s), f.dirty, f.firstDirty, aborted)
	c.queuePassStep(g, f)
}

// queuePassStep queues f's next write step: the first makes its Pass
// (over the store's prefix and the gathered entries, into the Writer),
// each goes on with it for passStepBytes, and the one that ends it sets
// f.res.
func (c *Core) queuePassStep(g *group, f *passFlight) {
	guard, step := c.replicaGuard(g.dir), c.passStepBytes()
	run := func() error {
		return guard.do(func() error {
			if f.pass == nil {
				p, err := compact.NewPass(f.log, f.d, f.w.Append)
				if err != nil {
					return fmt.Errorf("compaction pass of generation %d: %w", f.d.Generation, err)
				}
				f.pass = p
			}
			done, err := f.pass.Step(step)
			if err != nil {
				return fmt.Errorf("compaction pass of generation %d: %w", f.d.Generation, err)
			}
			if done {
				f.res, f.written = f.pass.Result(), true
			}
			return nil
		})
	}
	f.job = c.queueJob(syncJob{g: g, run: run, pass: f, untimed: true})
}

// finishPassJob ends a pass's write or commit job on the loop.
func (c *Core) finishPassJob(token uint64, job syncJob, err error) {
	g, f := job.g, job.pass
	if !c.hosted(g) || g.pass.flight != f || f.job != token {
		return
	}
	s := g.pass.store
	if err != nil {
		g.pass.flight = nil
		ferr := s.Finish(f.w) // drops the uncommitted generation
		switch {
		case errors.Is(err, errJobCancelled):
		case ferr != nil || errors.Is(err, compacted.ErrFailed):
			g.logs.log(slog.LevelError, "compaction switch failed; the node stops (fail-stop)", slog.Any("err", err))
			c.fatal = fmt.Errorf("node: %s/%d: compaction pass: %w", g.tp.Topic, g.tp.Partition, errors.Join(err, ferr))
		case errors.Is(err, raftlog.ErrNoSpace):
			c.noSpace()
			g.logs.log(slog.LevelWarn, "compaction pass skipped: disk full; the next check retries", slog.Any("err", err))
		case f.commit:
			g.logs.log(slog.LevelWarn, "compaction pass not committed; the next check retries", slog.Any("err", err))
		default:
			// The pass itself refused its input (deterministic: every
			// replica meets it) or its writes failed.
			c.passStuck(g, err.Error())
		}
		return
	}
	if !f.commit {
		f.steps++
		if f.pass != nil {
			pr := f.pass.Progress()
			c.passCharge(pr.PrefixBytesRead + pr.BytesWritten - f.charged)
			f.charged = pr.PrefixBytesRead + pr.BytesWritten
		}
		switch {
		case c.passBudgetHeld():
			f.held = true // passStep queues the next step or the commit once the pass is paid for
			c.stats.CompactionBudgetHolds++
		case !f.written:
			c.queuePassStep(g, f)
		default:
			c.queuePassCommit(g, f)
		}
		return
	}
	g.pass.flight = nil
	if err := s.Finish(f.w); err != nil {
		c.fatal = fmt.Errorf("node: %s/%d: compaction pass: %w", g.tp.Topic, g.tp.Partition, err)
		return
	}
	if len(g.pass.pending) > 0 && g.pass.pending[0].Generation == f.d.Generation {
		g.pass.pending = g.pass.pending[1:]
	}
	c.stats.CompactionPasses++
	c.stats.CompactionBytesIn += uint64(max(f.res.BytesIn, 0))
	c.stats.CompactionBytesOut += uint64(max(f.res.BytesOut, 0))
	g.pass.last = passFigures{bytesIn: f.res.BytesIn, bytesOut: f.res.BytesOut, took: c.cfg.Clock.Monotonic() - f.started}
	g.logs.log(slog.LevelDebug, "compaction pass done", slog.Uint64("generation", f.d.Generation),
		slog.Int64("cleaned_to", f.res.CleanedTo), slog.Int("dirty_batches", len(f.dirty)))
	// Bound now: the job may run beside the next pass's write and commit.
	guard, remove := c.replicaGuard(g.dir), s.StaleRemoval()
	c.queueJob(syncJob{g: g, run: func() error { return guard.do(remove) }, trash: true})
	if st := g.part.Compaction(); st.DoneGeneration <= f.d.Generation {
		c.proposePassDone(g) // the leader reports each pass once, even a reported one: checked at apply
	}
	c.maybeReportPass(g)
	if c.passActive(g) {
		c.passStep(g)
	}
}

// queuePassCommit queues f's commit job (its write job done).
func (c *Core) queuePassCommit(g *group, f *passFlight) {
	res, w, guard := f.res, f.w, c.replicaGuard(g.dir)
	f.commit = true
	run := func() error { return guard.do(func() error { return w.Commit(res.CleanedTo, res.Digest) }) }
	f.job = c.queueJob(syncJob{g: g, run: run, pass: f})
}

// prefixTrimBound is, on a partition that compacts (a decision exists),
// the highest raft index g's raft log may drop: every entry whose batches
// lie wholly below both this replica's own prefix end and the record's
// CleanedTo (engine's RaftTrimBound). The record's bound keeps the engine
// state of a raft snapshot consistent (Compacted drops only the batches
// the record covers) and keeps a replica whose own pass is not yet
// confirmed from trimming below a prefix it may have to replace; a stuck
// replica trims nothing more (RaftTrimBound(0): up to its first batch).
func (c *Core) prefixTrimBound(g *group) (uint64, bool) {
	st := g.part.Compaction()
	if st.Decision.Generation == 0 {
		return 0, false
	}
	var end int64
	if g.pass.stuck == "" && c.openPrefix(g) && g.pass.store.Generation() > 0 {
		end = min(g.pass.store.End(), st.CleanedTo)
	}
	return g.part.RaftTrimBound(end), true
}

// maybeReportPass proposes COMPACT_DONE for g's current generation again
// while the engine's record is behind it (after RequestTimeoutTicks: a
// proposal raft dropped, a crash after the switch), and compares the
// record with it once it is not.
func (c *Core) maybeReportPass(g *group) {
	s := g.pass.store
	if s == nil || s.Generation() == 0 {
		return
	}
	st, gen := g.part.Compaction(), s.Generation()
	switch {
	case st.DoneGeneration == gen:
		if st.CleanedTo != s.End() || st.Digest != s.Digest() {
			c.passStuck(g, fmt.Sprintf("generation %d: this replica cleaned to %d digest %x, the record says %d digest %x",
				gen, s.End(), s.Digest(), st.CleanedTo, st.Digest))
		}
		return
	case st.DoneGeneration > gen || gen > st.Decision.Generation:
		return
	}
	if g.pass.reportGen == gen && c.ticks < g.pass.reportDeadline {
		return
	}
	c.proposePassDone(g)
}

// proposePassDone proposes COMPACT_DONE with g's current generation, end
// and digest.
func (c *Core) proposePassDone(g *group) {
	if _, _, leading := g.leadership(); !leading {
		return // partition groups do not forward proposals (doc.go)
	}
	s := g.pass.store
	gen := s.Generation()
	c.nextProposalID++
	c.touch(g)
	data := engine.EncodeCompactDoneEntry(nil, c.cfg.Clock.Realtime().UnixMilli(), c.nextProposalID, gen, s.End(), s.Digest())
	if err := g.raw.Propose(data); err != nil {
		return // no leader known: the next check retries
	}
	g.pass.reportGen, g.pass.reportDeadline = gen, c.ticks+uint64(c.cfg.RequestTimeoutTicks)
}
