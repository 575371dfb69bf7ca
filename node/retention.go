package node

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/raftlog"
)

// Retention (R5) in three steps, each a replica's own decision except the
// one that must be agreed:
//
//  1. Segments roll by size (segment.bytes, raftlog) and by age (segment.ms,
//     here, measured on the node's monotonic Clock), so old data sits in
//     whole segments.
//  2. The partition's leader proposes a TRIM entry when the oldest segments
//     are past retention.ms (by the newest record timestamp in them, as
//     Kafka) or the log is over retention.bytes. The new log start is the
//     first offset of the first batch of the first segment kept: a segment
//     boundary of the leader's log. Every replica applies the TRIM at the
//     same index, so all agree on the log start through the log; fetches
//     below it are OFFSET_OUT_OF_RANGE.
//  3. Each replica then compacts its own raft log: the whole segments that
//     hold nothing at or after the first retained batch go behind a raft
//     snapshot (snapshot.go). Segment boundaries differ between replicas;
//     the agreed offset never depends on them.
//
// Rejected: deleting on every replica by its own clock (replicas would
// disagree on the log start, and a fetch could see data on one replica that
// another deleted); rewriting a segment to cut it at the exact offset (O(n)
// per trim, R5 asks for O(1)).

// Retention defaults of the node (Config fields left zero).
const (
	// retentionCheckTicksDefault: how often (in ticks, ≈ 1 s) a replica
	// looks at its segments, and a leader at its retention.
	retentionCheckTicksDefault = 100
	// compactEntriesPerTick and compactBytesPerTick bound the entries a
	// replica replays per tick to build a compaction snapshot, so one
	// partition's trim never stalls the node.
	compactEntriesPerTick = 4096
	compactBytesPerTick   = 8 << 20
)

// retentionState is a replica's retention bookkeeping.
type retentionState struct {
	// config is the topic's configuration as of configVersion of the
	// metadata state (looked up again only when the version moves).
	config        metadata.TopicConfig
	configVersion uint64
	configKnown   bool
	// segmentBase is the base of the active segment when it was first
	// seen, at segmentSince on the monotonic clock: segment.ms counts
	// from there.
	segmentBase  uint64
	segmentSince time.Duration
	// trimOffset is the log start of a TRIM this replica proposed and has
	// not seen applied, until tick trimDeadline; 0: none in flight.
	trimOffset   int64
	trimDeadline uint64
	// compactor builds the snapshot a compaction needs; nil when none runs.
	compactor *compactor
	// decided and done count this replica's compactions decided and
	// finished (TierLocalStart: the simulator's local deletion check).
	decided, done uint64
	// logStart is the log start at the last check: a TRIM applied since
	// makes the group due (retentionDue), as does due, set when a
	// compaction finishes.
	logStart int64
	due      bool
	// deletes are the DeleteRecords requests waiting for their trim.
	deletes []*deleteWait
	segs    []raftlog.SegmentInfo // scratch
	// compactGen is the generation of a COMPACT this leader proposed and
	// has not seen applied, until tick compactDeadline; 0: none in flight.
	compactGen      uint64
	compactDeadline uint64
	dirty           []engine.BatchLocation // scratch
	// seenApplied is the applied index retentionTick last looked at g
	// with: until it moves nothing of g's retention can change but with
	// time, which the periodic check covers.
	seenApplied uint64
}

// retentionTick runs every replica's retention work for this tick: the
// waits of DeleteRecords and the compaction in progress (a bounded step)
// every tick; the segment roll, the start of a compaction and, on the
// leader, the retention decision every RetentionCheckTicks and, sooner,
// whenever retentionDue says one of them has work. A running compaction
// does not hold back the leader's next TRIM.
func (c *Core) retentionTick() {
	check := c.ticks%uint64(c.cfg.RetentionCheckTicks) == 0
	for _, g := range c.groups {
		if g.part == nil || c.fatal != nil {
			continue
		}
		if g.pass.flight != nil && c.passActive(g) {
			c.passStep(g) // a pass gathering its entries: a bounded step each tick
		}
		if !check && g.appliedRaft == g.ret.seenApplied && len(g.ret.deletes) == 0 && g.ret.compactor == nil && !g.ret.due {
			// Nothing applied since the last look (a write, a TRIM and a
			// new leader all apply an entry): only time moved, which the
			// periodic check covers. Skipping such groups took an idle
			// node with 2,000 replicas from ~2% of a core spent here to
			// almost none.
			continue
		}
		g.ret.seenApplied = g.appliedRaft
		c.finishDeletes(g)
		if g.ret.compactor != nil {
			c.compactStep(g)
		}
		c.refreshTopicConfig(g) // O(1) unless the metadata moved
		if !check && !c.retentionDue(g) {
			continue
		}
		g.ret.due = false
		g.ret.logStart = g.part.LogStartOffset()
		if err := c.rollByAge(g); err != nil {
			c.failStorage(g, err)
			continue
		}
		if g.ret.compactor == nil {
			c.maybeCompact(g)
		}
		c.maybeTrim(g)
		c.maybeProposeCompact(g)
		c.passCheck(g) // compaction_replica.go
		c.tierCheck(g) // tier.go
	}
	c.flushHeld() // compaction_held.go
}

// retentionDue reports whether g has retention work before its next
// periodic check: a TRIM applied since the last check (the replica can
// compact, the leader may propose the next trim), a compaction finished
// (g.ret.due), or, on the leader, retention.bytes allows dropping the oldest
// segment (retentionOffset's rule). Without these the log grows by all that
// is written between checks (1 s, longer when the loop is slow) plus the
// compaction's own lag. O(segments); retention.ms waits for the check.
func (c *Core) retentionDue(g *group) bool {
	if g.ret.due || g.part.LogStartOffset() != g.ret.logStart {
		return true
	}
	cfg := g.ret.config
	if !g.ret.configKnown || cfg.RetentionBytes < 0 || !cfg.CleanupPolicy.Deletes() || isCoordinatorTopic(g.tp.Topic) {
		return false
	}
	if g.ret.trimOffset != 0 && g.part.LogStartOffset() < g.ret.trimOffset && c.ticks < g.ret.trimDeadline {
		return false // our TRIM is in flight: its apply makes the group due
	}
	if _, _, leading := g.leadership(); !leading {
		return false
	}
	g.ret.segs = g.log.Segments(g.ret.segs[:0])
	oldest := g.ret.segs[0]
	return len(g.ret.segs) > 1 && oldest.Last <= g.appliedRaft && g.log.SizeBytes()-oldest.Bytes >= cfg.RetentionBytes
}

// failStorage makes a write error fatal: the next Process returns it and
// the node fail-stops, as for any failed raft log write.
func (c *Core) failStorage(g *group, err error) {
	g.logs.log(slog.LevelError, "raft log write failed in retention; the node stops (fail-stop)", slog.Any("err", err))
	if c.fatal == nil {
		c.fatal = fmt.Errorf("node: %s/%d: retention: %w", g.tp.Topic, g.tp.Partition, err)
	}
}

// refreshTopicConfig reads g's topic configuration when the metadata state
// moved, and sets the raft log's segment size from it (capped by
// Config.SegmentBytesMax when set).
func (c *Core) refreshTopicConfig(g *group) {
	if c.meta == nil || g.ret.configKnown && g.ret.configVersion == c.meta.meta.Version() {
		return
	}
	id, cfg, ok := c.meta.meta.TopicConfig(g.tp.Topic)
	if !ok || id != g.topicID {
		return // deleted: reconcile stops the replica
	}
	g.ret.config, g.ret.configVersion, g.ret.configKnown = cfg, c.meta.meta.Version(), true
	size := cfg.SegmentBytes
	if c.cfg.SegmentBytesMax > 0 {
		size = min(size, c.cfg.SegmentBytesMax)
	}
	g.log.SetSegmentBytesMax(size)
}

// segmentAge is the age at which g's active segment rolls: segment.ms,
// capped by Config.SegmentAgeMax when set.
func (c *Core) segmentAge(g *group) time.Duration {
	age := time.Duration(g.ret.config.SegmentMs) * time.Millisecond
	if c.cfg.SegmentAgeMax > 0 {
		age = min(age, c.cfg.SegmentAgeMax)
	}
	return age
}

// rollByAge rolls g's active segment once it has been active for
// segment.ms (from when this replica first saw it: a restart restarts the
// count, which only delays deletion). The seal's fsync is a storage job
// (issue 22): the log seals the segment as a pending write, the group's
// sync job writes and syncs it off the loop, and the next segment is
// created by the next append or, on an idle partition, by the next call
// here once that job is done. With the write-ahead log the roll stays
// whole on the loop, as its appends do (wal.go).
func (c *Core) rollByAge(g *group) error {
	if !g.ret.configKnown || g.pipe.syncing != 0 {
		return nil // a roll writes the log: not while its sync runs (pipeline.go)
	}
	if c.wal == nil && g.log.RollPending() {
		_, err := g.log.Roll() // sealed and synced: start the next segment
		return err
	}
	g.ret.segs = g.log.Segments(g.ret.segs[:0])
	active := g.ret.segs[len(g.ret.segs)-1]
	now := c.cfg.Clock.Monotonic()
	if active.Base != g.ret.segmentBase {
		g.ret.segmentBase, g.ret.segmentSince = active.Base, now
		return nil
	}
	if now-g.ret.segmentSince < c.segmentAge(g) {
		return nil
	}
	if c.wal != nil {
		rolled, err := g.log.Roll()
		if rolled {
			c.stats.SegmentRolls++
		}
		return err
	}
	sealed, err := g.log.SealActive()
	if err != nil {
		return err
	}
	if sealed {
		c.stats.SegmentRolls++
		c.startSync(g)
	}
	return nil
}

// maybeTrim is the leader's retention decision: propose a TRIM to the
// segment boundary that retention.ms and retention.bytes allow, when it is
// above the log start and no trim of ours is in flight.
func (c *Core) maybeTrim(g *group) {
	if !g.ret.configKnown || !g.ret.config.CleanupPolicy.Deletes() {
		return
	}
	if isCoordinatorTopic(g.tp.Topic) {
		return // the coordinators' log is their state (groups.go, txn.go), even if altered
	}
	if _, _, leading := g.leadership(); !leading {
		return
	}
	if g.ret.trimOffset != 0 && g.part.LogStartOffset() < g.ret.trimOffset && c.ticks < g.ret.trimDeadline {
		return
	}
	g.ret.trimOffset = 0
	g.ret.segs = g.log.Segments(g.ret.segs[:0])
	offset := c.retentionOffset(g, c.cfg.Clock.Realtime().UnixMilli())
	if offset <= g.part.LogStartOffset() {
		return
	}
	if c.proposeTrim(g, offset) == nil {
		g.ret.trimOffset, g.ret.trimDeadline = offset, c.ticks+uint64(c.cfg.RequestTimeoutTicks)
	}
}

// retentionOffset is the log start retention asks for: the first offset of
// the first segment kept after dropping, oldest first, every segment (never
// the active one, nor one holding unapplied entries) whose newest record is
// older than retention.ms or without which the log still holds
// retention.bytes, of the segments in g.ret.segs.
func (c *Core) retentionOffset(g *group, nowMs int64) int64 {
	cfg := g.ret.config
	segs := g.ret.segs
	floor := int64(0) // the log start if no raft segment goes
	if covered, ok := c.prefixTrimBound(g); ok {
		// A partition that compacts: its oldest records are in the
		// compacted prefix, which retention weighs first
		// (prefixRetention); the raft segments it covers are skipped.
		for len(segs) > 1 && segs[0].Last <= covered {
			segs = segs[1:]
		}
		var raftBytes int64
		for _, s := range segs {
			raftBytes += s.Bytes
		}
		offset, stop := c.prefixRetention(g, nowMs, raftBytes)
		if stop {
			return offset
		}
		floor = offset
	}
	if g.part.TierActive() {
		// A tiered partition: its oldest records are remote, weighed
		// first (remoteRetention, tier.go); the raft segments whose
		// records are all remote too are weighed as remote.
		covered := g.part.RaftTrimBound(g.part.TierNext())
		for len(segs) > 1 && segs[0].Last <= covered {
			segs = segs[1:]
		}
		var raftBytes int64
		for _, s := range segs {
			raftBytes += s.Bytes
		}
		offset, stop := remoteRetention(g.part.Tier(), cfg, nowMs, raftBytes)
		if stop {
			return offset
		}
		floor = max(floor, offset)
	}
	var total int64
	for _, s := range segs {
		total += s.Bytes
	}
	drop := -1
	for k := 0; k < len(segs)-1 && segs[k].Last <= g.appliedRaft; k++ {
		s := segs[k]
		expired := false
		if cfg.RetentionMs >= 0 {
			newest, ok := g.part.LastBatchThrough(s.Last)
			expired = !ok || newest.MaxTimestampMs < nowMs-cfg.RetentionMs
		}
		oversize := cfg.RetentionBytes >= 0 && total-s.Bytes >= cfg.RetentionBytes
		if !expired && !oversize {
			break
		}
		total -= s.Bytes
		drop = k
	}
	if drop < 0 {
		return floor
	}
	if b, ok := g.part.FirstBatchFrom(segs[drop].Last + 1); ok {
		return b.BaseOffset
	}
	return g.part.HighWatermark()
}

// prefixRetention is retention over g's compacted prefix (compact,delete:
// Kafka deletes cleaned segments older than retention.ms or beyond
// retention.bytes like any other): the log start retention.ms asks for
// within it is the first prefix batch whose running maximum timestamp is
// at or after nowMs−retention.ms (Store.OffsetForTimestamp: batch
// granularity, the prefix is not rewritten for it, the next pass drops what
// lies below), and retention.bytes drops its segments oldest first while
// the prefix's rest and raftBytes still hold retention.bytes; the further
// of the two. stop is false when the whole prefix may go, with offset its
// end (or 0 when it holds nothing past the log start): the raft segments
// past it are weighed next, by the running maximum that covers the prefix
// too. stop is true with offset 0 while this replica's prefix is unknown
// (stuck, unreadable): no trim then.
func (c *Core) prefixRetention(g *group, nowMs, raftBytes int64) (offset int64, stop bool) {
	cfg := g.ret.config
	if g.pass.stuck != "" || !c.openPrefix(g) {
		return 0, true
	}
	s := g.pass.store
	logStart := g.part.LogStartOffset()
	if s.Generation() == 0 || s.End() <= logStart {
		return 0, false
	}
	cut := logStart
	if cfg.RetentionMs >= 0 {
		from, found, err := s.OffsetForTimestamp(nowMs - cfg.RetentionMs)
		switch {
		case err != nil:
			return 0, true
		case !found:
			cut = s.End()
		default:
			cut = max(cut, from)
		}
	}
	if cfg.RetentionBytes >= 0 {
		total := raftBytes
		segs := s.Segments(nil)
		for _, seg := range segs {
			total += seg.Bytes
		}
		for _, seg := range segs {
			if total-seg.Bytes < cfg.RetentionBytes {
				break
			}
			total -= seg.Bytes
			cut = max(cut, seg.End)
		}
	}
	if cut >= s.End() {
		return s.End(), false
	}
	return cut, true
}

// proposeTrim proposes a TRIM entry moving g's log start to offset.
func (c *Core) proposeTrim(g *group, offset int64) error {
	c.nextProposalID++
	data := engine.EncodeTrimEntry(nil, c.cfg.Clock.Realtime().UnixMilli(), c.nextProposalID, offset)
	c.touch(g) // ready.go, quiesce.go
	if err := g.raw.Propose(data); err != nil {
		return err
	}
	c.stats.TrimsProposed++
	g.logs.log(slog.LevelDebug, "trim proposed", slog.Int64("log_start", offset))
	return nil
}

// deleteWait is a DeleteRecords partition waiting for its log start.
type deleteWait struct {
	offset   int64
	deadline uint64
	done     func(logStart int64, err error)
}

// finishDeletes answers the DeleteRecords waits whose offset the log start
// reached, and fails those past their deadline with ErrTimeout
// (indefinite: the trim may still apply).
func (c *Core) finishDeletes(g *group) {
	if len(g.ret.deletes) == 0 {
		return
	}
	kept := g.ret.deletes[:0]
	logStart := g.part.LogStartOffset()
	for _, w := range g.ret.deletes {
		switch {
		case logStart >= w.offset:
			c.completions = append(c.completions, func() { w.done(logStart, nil) })
		case c.ticks >= w.deadline:
			c.completions = append(c.completions, func() { w.done(-1, ErrTimeout) })
		default:
			kept = append(kept, w)
		}
	}
	clear(g.ret.deletes[len(kept):])
	g.ret.deletes = kept
}
