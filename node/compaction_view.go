package node

import "time"

// What an operator sees of a replica's compaction (issue 24: `strand topic
// describe`, /metrics, the console). Read side only: everything here comes
// from what the engine's compaction record (engine.CompactionState), the
// replica's compacted prefix (raftlog/compacted) and its raft log already
// hold; nothing here changes them, opens a store or starts a pass.
//
// The last pass's figures (LastPass*) are this replica's own, kept on the
// loop when a pass completes (compaction_replica.go); a replica that
// restarted shows none until its next pass.

// CompactionView is one replica's compaction state. The zero value is a
// partition that never compacted on a topic that does not compact.
type CompactionView struct {
	// Compacts: the topic's cleanup.policy (as this replica last read it)
	// includes compact.
	Compacts bool
	// Decided is the last COMPACT the partition applied (0: none), taken
	// at DecidedTimeMs (the leader's clock) over the offsets below
	// CleanableEnd.
	Decided       uint64
	DecidedTimeMs int64
	CleanableEnd  int64
	// Done is the last generation a replica reported done (0: none) and
	// CleanedTo the end of that pass's prefix: every offset below it holds
	// only each key's latest record. Done < Decided: a pass is under way.
	Done      uint64
	CleanedTo int64
	// PrefixGeneration, PrefixEnd and PrefixBytes are this replica's own
	// compacted prefix (0 when it has none open): its generation, the
	// offset it ends at, and its size on disk, which is what the last
	// pass wrote.
	PrefixGeneration uint64
	PrefixEnd        int64
	PrefixBytes      int64
	// DirtyBytes are the raft log's bytes past what the prefix covers (to
	// a segment's granularity): what the next pass reads; the clean side
	// is PrefixBytes. The raft log is not trimmed to the prefix yet, so
	// the log's size (ReplicaView.SizeBytes) still holds the covered part.
	DirtyBytes int64
	// Stuck says why this replica runs no pass ("" when it can).
	Stuck string
	// LastPassBytesIn and LastPassBytesOut are what the last pass this
	// replica made current (since it opened) read (its prefix and the raft
	// entries it gathered) and wrote (the new prefix), and
	// LastPassDuration how long it took on the node's monotonic clock,
	// from the start of its gathering to its switch. All 0: no pass yet.
	LastPassBytesIn  int64
	LastPassBytesOut int64
	LastPassDuration time.Duration
}

// DirtyRatio is dirty / (clean + dirty), the figure min.cleanable.dirty.ratio
// is compared with (Kafka's cleanable ratio): 0 with nothing logged, 1
// before the first pass.
func (v CompactionView) DirtyRatio() float64 {
	total := v.PrefixBytes + v.DirtyBytes
	if total <= 0 {
		return 0
	}
	return float64(v.DirtyBytes) / float64(total)
}

// compactionView is g's CompactionView. Runs on the loop; reads only (a
// prefix not yet opened is reported as none, not opened here).
func (c *Core) compactionView(g *group) CompactionView {
	if g.part == nil {
		return CompactionView{}
	}
	st := g.part.Compaction()
	v := CompactionView{Compacts: g.ret.configKnown && g.ret.config.CleanupPolicy.Compacts(),
		Decided: st.Decision.Generation, DecidedTimeMs: st.Decision.TimeMs, CleanableEnd: st.Decision.CleanableEnd,
		Done: st.DoneGeneration, CleanedTo: st.CleanedTo, Stuck: g.pass.stuck,
		LastPassBytesIn: g.pass.last.bytesIn, LastPassBytesOut: g.pass.last.bytesOut, LastPassDuration: g.pass.last.took}
	if s := g.pass.store; s != nil {
		v.PrefixGeneration, v.PrefixEnd, v.PrefixBytes = s.Generation(), s.End(), s.Bytes()
	}
	if !v.Compacts && v.Decided == 0 {
		return v
	}
	covered := g.part.RaftTrimBound(v.PrefixEnd)
	for _, s := range g.log.Segments(nil) {
		if s.Last > covered {
			v.DirtyBytes += s.Bytes
		}
	}
	return v
}
