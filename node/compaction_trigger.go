package node

import (
	"log/slog"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
)

// The leader's half of step 2 of compacted topics, wired: at each
// retention check the leader of a partition whose topic compacts weighs a
// pass (decideCompaction) and proposes it as a COMPACT entry every replica
// applies. Each replica then runs the pass (compaction_replica.go); the
// decision stays pending, and no further one is proposed, until a
// COMPACT_DONE of its generation is applied.

const (
	// compactionMapBytes sizes a pass's offset map (Kafka's
	// log.cleaner.dedupe.buffer.size, per pass): 8 MiB is about 350,000
	// keys of the dirty section a pass.
	compactionMapBytes = 8 << 20
	// compactionScanBatches bounds the indexed batches a decision looks
	// at (for min.compaction.lag.ms and the oldest dirty append time): a
	// bounded step on the loop; a longer dirty section is decided over
	// its first part.
	compactionScanBatches = 4096
)

// maybeProposeCompact proposes the next COMPACT when g leads, its topic
// compacts (or did: dropPass), none of ours is in flight and decideCompaction finds a pass
// due.
func (c *Core) maybeProposeCompact(g *group) {
	if !g.ret.configKnown || isCoordinatorTopic(g.tp.Topic) {
		return
	}
	if !g.ret.config.CleanupPolicy.Compacts() && g.part.Compaction().Decision.Generation == 0 {
		return // never compacted (one altered to delete since still drops: dropPass)
	}
	if _, _, leading := g.leadership(); !leading || g.pass.stuck != "" {
		// A stuck leader (compaction_install.go) decides nothing: its
		// peers would pass the decision and then no longer serve the
		// record's generation it must install first.
		return
	}
	if g.pass.askedAt != 0 && c.ticks < g.pass.askedAt+c.installHoldTicks() {
		// A stuck peer is installing (or about to install) a prefix: a
		// new decision would replace the generation it needs on every
		// replica that passes it, and the peer would chase generations
		// for as long as passes come faster than an install (the
		// simulator's seed 230: every replica stuck, none serving).
		return
	}
	st := g.part.Compaction()
	if g.ret.compactGen > st.Decision.Generation && c.ticks < g.ret.compactDeadline {
		return // ours is in flight: its apply or the deadline ends the wait
	}
	g.ret.compactGen = 0
	nowMs := c.cfg.Clock.Realtime().UnixMilli()
	cfg, facts := g.ret.config.Compaction(), c.compactionFacts(g)
	d, due := decideCompaction(cfg, facts, nowMs)
	if !due {
		c.checkpointForCompaction(g, cfg, facts, nowMs)
		return
	}
	c.nextProposalID++
	c.touch(g)
	if err := g.raw.Propose(engine.EncodeCompactEntry(nil, c.nextProposalID, d)); err != nil {
		return // leadership moved or the tail is full: the next check retries
	}
	g.ret.compactGen, g.ret.compactDeadline = d.Generation, c.ticks+uint64(c.cfg.RequestTimeoutTicks)
	g.logs.log(slog.LevelDebug, "compaction proposed", slog.Uint64("generation", d.Generation),
		slog.Int64("cleanable_end", d.CleanableEnd))
}

// installHoldTicks is how long a leader asked for its prefix decides no
// pass: a stuck peer asks its peers in turn at each retention check and
// waits up to a request timeout for each answer, so its next question to
// this replica comes within two timeouts and a few checks; every chunk it
// asks renews the hold.
func (c *Core) installHoldTicks() uint64 {
	return 2*uint64(c.cfg.RequestTimeoutTicks) + 4*uint64(c.cfg.RetentionCheckTicks)
}

// checkpointForCompaction starts the leader's checkpoint at once when it
// alone holds a pass back. A cleanable end stops at the leader's
// checkpoint (a restart replays what lies above it), and checkpoints come
// every Config.CheckpointEntries applied entries: a quiet compacted topic
// (a connector's config topic, a few hundred records) waited for traffic
// that never came and never compacted. At most one such checkpoint per
// pass: none while one is in flight, none with nothing applied since the
// last, and none while a decision is pending. Like rollByAge, it runs in
// the retention check, with no appends queued (so checkpointNow writes
// none).
func (c *Core) checkpointForCompaction(g *group, cfg compact.Config, f compactionFacts, nowMs int64) {
	if g.appliedRaft <= g.checkpointIndex || len(g.pipe.appends) > 0 || !c.checkpointReady(g) {
		return // nothing new, or appends to write first (the next round's)
	}
	f.checkpointed = f.highWatermark
	if _, due := decideCompaction(cfg, f, nowMs); !due {
		return
	}
	if err := c.checkpointNow(g); err != nil {
		c.failStorage(g, err)
	}
}

// compactionFacts gathers what decideCompaction weighs, from g's engine
// and raft log: the offsets its own checkpoint and its open segment
// begin at, and up to compactionScanBatches indexed batches from the
// compacted prefix's end. Sizes: the clean side is this replica's prefix
// (its store's bytes), the dirty side the raft log's segments not wholly
// at or below RaftTrimBound of the prefix's end (the raft log is not
// trimmed up to the prefix yet, so the part the prefix covers is left
// out, to a segment's granularity).
func (c *Core) compactionFacts(g *group) compactionFacts {
	st := g.part.Compaction()
	from := max(st.CleanedTo, g.part.LogStartOffset())
	f := compactionFacts{state: st, lastStable: g.part.LastStableOffset(), highWatermark: g.part.HighWatermark(),
		checkpointed: from, activeSegment: g.part.HighWatermark(), offsetMapBytes: compactionMapBytes,
		logStart: g.part.LogStartOffset()}
	if first := g.part.AppendPassLocations(g.ret.dirty[:0], st.CleanedTo, 1); len(first) > 0 {
		f.belowStart = first[0].BaseOffset+int64(first[0].RecordCount) <= f.logStart
	}
	if b, ok := g.part.LastBatchThrough(g.checkpointIndex); ok {
		f.checkpointed = b.BaseOffset + int64(b.RecordCount)
	}
	g.ret.segs = g.log.Segments(g.ret.segs[:0])
	if n := len(g.ret.segs); n > 0 {
		if b, ok := g.part.FirstBatchFrom(g.ret.segs[n-1].Base); ok {
			f.activeSegment = b.BaseOffset
		}
	}
	var prefixEnd int64
	if st.Decision.Generation > 0 && c.openPrefix(g) {
		f.cleanBytes, prefixEnd = g.pass.store.Bytes(), g.pass.store.End()
	}
	covered := g.part.RaftTrimBound(prefixEnd)
	for _, s := range g.ret.segs {
		if s.Last > covered {
			f.dirtyBytes += s.Bytes
		}
	}
	dirty, err := g.part.AppendLocations(g.ret.dirty[:0], from, compactionScanBatches)
	if err == nil {
		g.ret.dirty, f.dirty = dirty, dirty
	}
	return f
}

// compactionDecision is the engine's compaction record of tp on this
// replica, for tests and status.
func (c *Core) compactionDecision(tp TopicPartition) (compact.Decision, bool) {
	g := c.byTP[tp]
	if g == nil || g.part == nil {
		return compact.Decision{}, false
	}
	return g.part.Compaction().Decision, true
}
