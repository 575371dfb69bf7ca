package node

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"sort"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog/compacted"
)

// The node side of compacted topics (engine/compact's doc, "Next: node
// integration"): what a replica hands a pass (passLog; its write runs as
// compact.Pass steps, compaction_replica.go's queuePassStep), and the
// leader's choice of when a pass is due and over what (decideCompaction). The leader's trigger (compaction_trigger.go)
// and each replica's passes (compaction_replica.go) call them. A node
// takes cleanup.policy=compact and compact,delete (a TRIM cuts the prefix
// at the new log start: engine/compact's rule 8).

// dirtyEntry is one indexed batch of a partition's raft log at or past the
// compacted prefix's end: its location in the engine's index and the Data
// of the raft entry at loc.RaftIndex.
type dirtyEntry struct {
	loc  engine.BatchLocation
	data []byte
}

// passInput is one dirty entry as a pass reads it: a produce entry's batch
// (either form) with its producer and transactional flag, or a marker
// entry, whose one record takes the entry's append time. Any other entry
// kind at an indexed location is a broken log: ErrStorage.
func passInput(e dirtyEntry) (compact.Input, error) {
	in := compact.Input{BaseOffset: e.loc.BaseOffset}
	f, err := engine.DecodeEntry(e.data)
	if err != nil {
		return in, fmt.Errorf("%w: entry %d at offset %d: %w", ErrStorage, e.loc.RaftIndex, e.loc.BaseOffset, err)
	}
	switch f.Kind {
	case strandpb.EntryKind_ENTRY_KIND_PRODUCE:
		in.Data, in.Transactional = f.Batch, f.Transactional
		in.Producer = compact.Producer{ID: f.ProducerID, Epoch: f.ProducerEpoch, BaseSequence: f.BaseSequence}
		return in, nil
	case strandpb.EntryKind_ENTRY_KIND_TXN_MARKER:
		m, err := engine.EntryMarker(e.data)
		if err != nil {
			return in, fmt.Errorf("%w: marker entry %d at offset %d: %w", ErrStorage, e.loc.RaftIndex, e.loc.BaseOffset, err)
		}
		in.Producer = compact.Producer{ID: m.ProducerID, Epoch: m.ProducerEpoch, BaseSequence: -1}
		in.Transactional = true
		in.Marker = &compact.Marker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch, TimestampMs: e.loc.AppendTimeMs}
		return in, nil
	}
	return in, fmt.Errorf("%w: entry %d of kind %v at indexed offset %d", ErrStorage, e.loc.RaftIndex, f.Kind, e.loc.BaseOffset)
}

// prefixInputs yields a pass's compacted prefix input (Data in the
// compacted form, in offset order) afresh at each call, from the batch
// holding offset from or the first after it (math.MinInt64: all of it).
type prefixInputs func(from int64) iter.Seq2[compact.Input, error]

// passLog is the log a pass reads: the compacted prefix's batches and
// then the dirty entries from firstDirty on, with the partition's aborted
// index; its From resumes both at an offset (a pass run in steps). Both
// of the pass's walks see the same sequence.
func passLog(prefix prefixInputs, dirty []dirtyEntry, firstDirty int64, aborted []engine.AbortedTxn) compact.Log {
	ab := make([]compact.AbortedTxn, len(aborted))
	for i, a := range aborted {
		ab[i] = compact.AbortedTxn(a)
	}
	from := func(offset int64) iter.Seq2[compact.Input, error] {
		return func(yield func(compact.Input, error) bool) {
			for in, err := range prefix(offset) {
				if !yield(in, err) || err != nil {
					return
				}
			}
			i := sort.Search(len(dirty), func(i int) bool { return dirty[i].loc.BaseOffset >= offset })
			for _, e := range dirty[i:] {
				in, err := passInput(e)
				if !yield(in, err) || err != nil {
					return
				}
			}
		}
	}
	batches := func() iter.Seq2[compact.Input, error] { return from(math.MinInt64) }
	return compact.Log{Batches: batches, From: from, FirstDirty: firstDirty, Aborted: ab}
}

// storeInputs yields the store's current generation as a pass's prefix
// input, read from its files at each walk (memory: one batch). Each
// batch is copied, since the store reuses its buffer.
func storeInputs(s *compacted.Store) prefixInputs {
	return func(from int64) iter.Seq2[compact.Input, error] {
		return func(yield func(compact.Input, error) bool) {
			for b, err := range s.BatchesFrom(from) {
				if err != nil {
					yield(compact.Input{}, err)
					return
				}
				dec, err := compact.DecodeBatch(b)
				if err != nil {
					yield(compact.Input{}, fmt.Errorf("%w: compacted prefix: %w", ErrStorage, err))
					return
				}
				if !yield(compact.Input{BaseOffset: dec.BaseOffset, Data: slices.Clone(b)}, nil) {
					return
				}
			}
		}
	}
}

// compactionFacts is what the leader knows of a partition when it weighs
// a pass: the engine's compaction record and offsets, where its own
// checkpoint and its raft log's open segment begin (as offsets), the
// indexed batches from the prefix's end on, and the sizes to weigh.
type compactionFacts struct {
	state          engine.CompactionState
	lastStable     int64
	checkpointed   int64
	activeSegment  int64
	dirty          []engine.BatchLocation
	cleanBytes     int64
	dirtyBytes     int64
	offsetMapBytes int64
	highWatermark  int64
	// logStart is the partition's log start; belowStart says a batch no
	// reported pass covers lies wholly below it (a TRIM since).
	logStart   int64
	belowStart bool
}

// decideCompaction is the leader's trigger (Kafka's choice of the
// dirtiest log, per partition): no pass while one is decided and not yet
// reported; else the cleanable end is the least of the bounds
// (compact.CleanableEnd: LSO, the leader's checkpoint, its open segment,
// and min.compaction.lag.ms measured on append times from the clock), and
// a pass is due when it would move the prefix (past the last pass's
// CleanedTo: a pass a full map or its input bound stopped short of its
// cleanable end is followed by one over the rest) and compact.Due says the
// dirty ratio or max.compaction.lag.ms calls for it. The decision's
// generation is one more than the last and TimeMs is nowMs (the COMPACT
// entry's append time). On a topic altered from compact to delete
// (a record exists, the policy no longer compacts) a pass is due only to
// drop what a TRIM left below the log start (dropPass).
func decideCompaction(cfg compact.Config, f compactionFacts, nowMs int64) (compact.Decision, bool) {
	st := f.state
	if !cfg.Policy.Compacts() {
		return dropPass(cfg, f, nowMs)
	}
	if st.Decision.Generation > st.DoneGeneration || len(f.dirty) == 0 {
		return compact.Decision{}, false
	}
	end := compact.CleanableEnd(compact.Bounds{
		LastStableOffset:  f.lastStable,
		Checkpointed:      f.checkpointed,
		ActiveSegmentBase: f.activeSegment,
		LagEnd:            lagEnd(f.dirty, nowMs-cfg.MinCompactionLagMs, f.highWatermark),
	})
	if end <= st.CleanedTo || end <= f.dirty[0].BaseOffset {
		return compact.Decision{}, false
	}
	if !compact.Due(cfg, f.cleanBytes, f.dirtyBytes, f.dirty[0].AppendTimeMs, nowMs) {
		return compact.Decision{}, false
	}
	return compact.Decision{Generation: st.Decision.Generation + 1, CleanableEnd: end, TimeMs: nowMs,
		DeleteRetentionMs: cfg.DeleteRetentionMs, OffsetMapBytes: f.offsetMapBytes}, true
}

// dropPass is the pass a partition that once compacted still needs after
// its topic was altered to delete: with a batch no pass covers wholly
// below the log start, a decision whose cleanable end is the log start
// (or the last decision's, if further: taken while the topic compacted),
// so the pass drops those batches (engine/compact's rule 8) and the raft
// log below them can go; nothing past it is compacted.
func dropPass(cfg compact.Config, f compactionFacts, nowMs int64) (compact.Decision, bool) {
	st := f.state
	if st.Decision.Generation == 0 || st.Decision.Generation > st.DoneGeneration || !f.belowStart {
		return compact.Decision{}, false
	}
	return compact.Decision{Generation: st.Decision.Generation + 1, CleanableEnd: max(f.logStart, st.Decision.CleanableEnd),
		TimeMs: nowMs, DeleteRetentionMs: cfg.DeleteRetentionMs, OffsetMapBytes: f.offsetMapBytes}, true
}

// lagEnd is the base offset of the first batch appended after cutoffMs
// (min.compaction.lag.ms not yet passed), or end when every batch is
// older. Append times come from the leader's clock at proposal and are
// not monotonic across leaders, so the first young batch bounds it, not
// a binary search.
func lagEnd(dirty []engine.BatchLocation, cutoffMs, end int64) int64 {
	for _, b := range dirty {
		if b.AppendTimeMs > cutoffMs {
			return b.BaseOffset
		}
	}
	return end
}
