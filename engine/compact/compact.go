package compact

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
)

// Errors of Compact; callers match them with errors.Is.
var (
	// ErrInvalidDecision: a decision whose fields are out of range or
	// that does not fit the log (a cleanable end below the compacted
	// prefix's end).
	ErrInvalidDecision = errors.New("compact: invalid decision")
	// ErrInput: the log handed in breaks its contract (batches out of
	// order or with a gap, a raft batch below the first dirty offset or a
	// compacted one above it, a marker without a producer). A bug of the
	// caller, returned so it can stop without corrupting anything.
	ErrInput = errors.New("compact: bad input")
	// ErrOffsetMapTooSmall: one batch has more records than the whole
	// offset map holds, so no pass could ever get past it.
	ErrOffsetMapTooSmall = errors.New("compact: offset map too small for one batch")
)

// ProducerExpirationMs is Kafka's producer.id.expiration.ms (24 hours):
// a producer whose last batch's newest timestamp is this much older than a
// pass's decision has expired, and rule 6 keeps its last batch no longer
// when none of its records survive (engine's ProducerExpirationMs is this).
const ProducerExpirationMs int64 = 24 * 60 * 60 * 1000

// Decision is the replicated COMPACT decision the leader proposes (doc.go,
// "Replicas"): every replica compacts its log with the same decision and
// gets the same bytes.
type Decision struct {
	// Generation numbers decisions of a partition, one more each time.
	Generation uint64
	// CleanableEnd: only offsets below it are compacted.
	CleanableEnd int64
	// TimeMs is the leader's clock at the decision: horizons are stamped
	// from it and compared with it.
	TimeMs int64
	// DeleteRetentionMs is the topic's delete.retention.ms at the decision.
	DeleteRetentionMs int64
	// OffsetMapBytes sizes the offset map. It is part of the decision
	// because where a full map stops the pass must be the same everywhere.
	OffsetMapBytes int64
	// LogStart is the partition's log start when the decision applied
	// (stamped by the engine, not proposed: retention and delete-records
	// move it through replicated TRIMs): every batch wholly below it goes
	// (rule 8), whatever the other rules say.
	LogStart int64
}

// Producer is a raft batch's producer identity, from its entry (Strand's
// form carries none in the batch). ID -1: no idempotence.
type Producer struct {
	ID           int64
	Epoch        int32
	BaseSequence int32
}

// Marker is a transaction marker entry (it takes one offset).
type Marker struct {
	Commit           bool
	CoordinatorEpoch int32
	// TimestampMs is the marker entry's append time, its record's timestamp.
	TimestampMs int64
}

// AbortedTxn is an aborted transaction of ProducerID: its first offset and
// its marker's. It has engine.AbortedTxn's fields, so one converts to the
// other.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// Input is one batch of the partition's log as the caller reads it: a
// compacted batch (Data in the compacted form; the other fields are read
// from it and ignored here), a raft entry's batch (Strand's or Kafka's
// form, with its entry's producer and transactional flag) or a marker
// entry (Marker set, Data nil).
type Input struct {
	BaseOffset    int64
	Data          []byte
	Producer      Producer
	Transactional bool
	Marker        *Marker
}

// Log is what a pass reads: the batches in offset order from the log
// start, the compacted prefix [.., FirstDirty) first and then raft batches
// from FirstDirty on. Batches is called twice (the map pass and the
// rewrite); both calls must yield the same sequence. Aborted lists the
// aborted transactions whose markers are still in the log (the engine's
// aborted index), in any order.
//
// From, when set, yields what Batches does from the first batch that
// holds offset or comes after it: a Pass run in steps resumes its walk
// there (without it, a step walks Batches again from the start and skips
// what came before).
type Log struct {
	Batches    func() iter.Seq2[Input, error]
	From       func(offset int64) iter.Seq2[Input, error]
	FirstDirty int64
	Aborted    []AbortedTxn
}

// Stats counts what a pass read and wrote, up to Result.CleanedTo.
type Stats struct {
	BatchesIn, BatchesOut int64
	RecordsIn, RecordsOut int64
	// BytesIn is the input batches' stored size (a marker counts 0);
	// BytesOut the compacted batches'.
	BytesIn, BytesOut int64
	// RecordsSuperseded had a newer record of the same key.
	RecordsSuperseded int64
	// TombstonesRemoved were past their batch's delete horizon.
	TombstonesRemoved int64
	// AbortedRemoved are records of aborted transactions.
	AbortedRemoved int64
	// KeylessRemoved are records without a key (written before the topic
	// was altered to compact; a produce to a compacted topic refuses them).
	KeylessRemoved int64
	// MarkersRemoved are markers with no record of their transaction left
	// and past their delete horizon.
	MarkersRemoved int64
	// RetentionRemoved are records (markers included) of batches wholly
	// below the decision's LogStart (rule 8).
	RetentionRemoved int64
}

// Result is the outcome of a pass.
type Result struct {
	Stats
	// CleanedTo is the end of the compacted prefix the pass wrote: the
	// decision's cleanable end, or less when the offset map filled
	// (MapFull) or the log ended first. The raft log below it may go.
	CleanedTo  int64
	MapFull    bool
	MapEntries int
	// Digest is SHA-256 over the emitted batches in order: replicas that
	// compacted the same log with the same decision have the same one.
	Digest [sha256.Size]byte
	// AbortedForgotten are the aborted transactions whose marker this pass
	// removed: the engine's aborted index can drop them.
	AbortedForgotten []AbortedTxn
}

// Compact runs one pass of decision d over log: it emits, in offset order,
// the compacted batches of [log start, Result.CleanedTo), each as the
// bytes of one compacted batch (valid only during the call), and returns
// what it did. The same log and decision give the same bytes on every
// machine; compacting the output again with the same decision gives it
// back unchanged. Memory: the offset map (d.OffsetMapBytes), one batch,
// and per producer id in the log a few words. It is a Pass run in one
// step.
func Compact(log Log, d Decision, emit func(batch []byte) error) (Result, error) {
	p, err := NewPass(log, d, emit)
	if err != nil {
		return Result{}, err
	}
	for {
		done, err := p.Step(math.MaxInt64)
		if err != nil {
			return Result{}, err
		}
		if done {
			return p.Result(), nil
		}
	}
}

// Pass is Compact run in steps: each Step reads the log's batches from
// where the last one stopped, until it has read a given number of bytes,
// so its caller can pace a pass's reads and writes between steps (node's
// compaction I/O budget). The two walks (the map's, then the rewrite's)
// run one after the other across the steps; the output is Compact's
// whatever the steps' sizes.
type Pass struct {
	log  Log
	d    Decision
	emit func([]byte) error
	plan *plan
	// planning: the map's walk (tracker, prevEnd and scratch are its);
	// then w, the rewrite's.
	planning bool
	tracker  *abortedTracker
	prevEnd  int64
	scratch  []keyHash
	w        *rewriter
	// next is the offset the next step's walk resumes at (math.MinInt64:
	// the log's start).
	next     int64
	progress Progress
	done     bool
	result   Result
}

// Progress is what a pass has read and written so far, in stored bytes:
// the compacted prefix's batches it read (both walks read them) and the
// raft batches (the caller's, usually in memory), and the batches it
// emitted.
type Progress struct {
	PrefixBytesRead, RaftBytesRead, BytesWritten int64
}

// NewPass begins a pass of decision d over log; d is checked first
// (ErrInvalidDecision).
func NewPass(log Log, d Decision, emit func(batch []byte) error) (*Pass, error) {
	if err := d.Check(log.FirstDirty); err != nil {
		return nil, err
	}
	pl := &plan{cleanedTo: log.FirstDirty, offsets: newOffsetMap(d.OffsetMapBytes), lastData: make(map[int64]int64)}
	return &Pass{log: log, d: d, emit: emit, plan: pl, planning: true, tracker: newAbortedTracker(log.Aborted),
		prevEnd: -1, next: math.MinInt64}, nil
}

// Step goes on with the pass until it has read at least maxBytes of input
// (one batch at least) or the pass ended, and reports whether it ended
// (Result then holds its outcome). An error ends the pass: it is not to be
// stepped again.
func (p *Pass) Step(maxBytes int64) (bool, error) {
	start := p.progress.PrefixBytesRead + p.progress.RaftBytesRead
	for !p.done {
		walked := true // the walk reached the log's end or the pass's
		for in, err := range p.batches() {
			if err != nil {
				return false, err
			}
			if read := p.progress.PrefixBytesRead + p.progress.RaftBytesRead; read > start && read-start >= maxBytes {
				p.next, walked = in.BaseOffset, false
				break
			}
			stop, err := p.batch(in)
			if err != nil {
				return false, err
			}
			if stop {
				break
			}
		}
		if !walked {
			return false, nil
		}
		p.endWalk()
	}
	return true, nil
}

// batches is the walk from p.next on.
func (p *Pass) batches() iter.Seq2[Input, error] {
	switch {
	case p.next == math.MinInt64:
		return p.log.Batches()
	case p.log.From != nil:
		return p.log.From(p.next)
	}
	return func(yield func(Input, error) bool) {
		for in, err := range p.log.Batches() {
			if err == nil && in.BaseOffset < p.next {
				continue
			}
			if !yield(in, err) || err != nil {
				return
			}
		}
	}
}

// batch takes one batch of the current walk; stop: the walk is over.
func (p *Pass) batch(in Input) (stop bool, err error) {
	if p.planning {
		stop, err = p.planBatch(in)
	} else {
		if in.BaseOffset >= p.plan.cleanedTo {
			return true, nil
		}
		err = p.w.batch(in)
	}
	if err != nil {
		return true, err
	}
	if !stop {
		if in.BaseOffset < p.log.FirstDirty {
			p.progress.PrefixBytesRead += int64(len(in.Data))
		} else {
			p.progress.RaftBytesRead += int64(len(in.Data))
		}
	}
	if p.w != nil {
		p.progress.BytesWritten = p.w.stats.BytesOut
	}
	return stop, nil
}

// endWalk ends the current walk: the map's starts the rewrite's from the
// log's start; the rewrite's ends the pass.
func (p *Pass) endWalk() {
	p.next = math.MinInt64
	if p.planning {
		p.planning, p.scratch = false, nil
		p.w = newRewriter(p.log, p.d, p.plan, p.emit)
		return
	}
	p.done = true
	p.result = Result{Stats: p.w.stats, CleanedTo: p.plan.cleanedTo, MapFull: p.plan.mapFull,
		MapEntries: p.plan.offsets.entries, AbortedForgotten: p.w.forgotten}
	p.w.digest.Sum(p.result.Digest[:0])
}

// Progress is what p has read and written so far.
func (p *Pass) Progress() Progress { return p.progress }

// Result is the outcome of a pass Step reported ended.
func (p *Pass) Result() Result { return p.result }

// Check reports whether a pass can run d over a log whose compacted prefix
// ends at firstDirty; otherwise ErrInvalidDecision naming the field. The
// engine refuses a COMPACT entry that fails it against its last decision,
// so no replica is handed a decision its pass would refuse.
func (d *Decision) Check(firstDirty int64) error {
	switch {
	case d.CleanableEnd < firstDirty:
		return fmt.Errorf("%w: cleanable end %d below the compacted prefix's end %d", ErrInvalidDecision, d.CleanableEnd, firstDirty)
	case d.TimeMs < 0 || d.DeleteRetentionMs < 0 || d.LogStart < 0:
		return fmt.Errorf("%w: time %d ms, delete.retention.ms %d, log start %d", ErrInvalidDecision, d.TimeMs, d.DeleteRetentionMs, d.LogStart)
	case d.OffsetMapBytes < SlotBytes*2 || d.OffsetMapBytes > math.MaxInt32*SlotBytes:
		return fmt.Errorf("%w: offset map of %d bytes (at least %d, at most %d)", ErrInvalidDecision,
			d.OffsetMapBytes, SlotBytes*2, int64(math.MaxInt32)*SlotBytes)
	}
	return nil
}

// horizon is the delete horizon a pass of d stamps: its time plus
// delete.retention.ms, saturating.
func (d *Decision) horizon() int64 {
	if d.TimeMs > math.MaxInt64-d.DeleteRetentionMs {
		return math.MaxInt64
	}
	return d.TimeMs + d.DeleteRetentionMs
}

// passed reports whether a horizon stamped on a batch has passed at d. It
// is strict so a pass never removes what the same decision just stamped,
// which keeps a second pass with one decision a no-op.
func (d *Decision) passed(horizonMs int64) bool {
	return horizonMs != NoHorizon && horizonMs < d.TimeMs
}

// abortedTracker answers whether a transactional batch belongs to an
// aborted transaction, walking the log in offset order (Kafka's cleaner
// does the same with its aborted-transaction index). Lookups only.
type abortedTracker struct {
	pending []AbortedTxn // by first offset, then producer
	ongoing map[int64]AbortedTxn
}

// newAbortedTracker sorts a copy of aborted.
func newAbortedTracker(aborted []AbortedTxn) *abortedTracker {
	pending := slices.Clone(aborted)
	slices.SortFunc(pending, func(a, b AbortedTxn) int {
		if a.FirstOffset != b.FirstOffset {
			return compareInt64(a.FirstOffset, b.FirstOffset)
		}
		return compareInt64(a.ProducerID, b.ProducerID)
	})
	return &abortedTracker{pending: pending, ongoing: make(map[int64]AbortedTxn)}
}

// compareInt64 orders two int64s.
func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// aborted reports whether producer's transactional batch at offset is
// part of an aborted transaction.
func (t *abortedTracker) aborted(producer, offset int64) bool {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		t.ongoing[t.pending[0].ProducerID] = t.pending[0]
		t.pending = t.pending[1:]
	}
	a, ok := t.ongoing[producer]
	return ok && offset < a.LastOffset
}

// marker ends producer's ongoing aborted transaction at its marker's
// offset and returns it, or false if the marker is not an abort's.
func (t *abortedTracker) marker(producer, offset int64) (AbortedTxn, bool) {
	t.aborted(producer, offset)
	if a, ok := t.ongoing[producer]; ok && a.LastOffset == offset {
		delete(t.ongoing, producer)
		return a, true
	}
	return AbortedTxn{}, false
}
