package engine

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/proto/strandpb"
)

// Client-visible outcomes of applying an entry, carried in Result.Err. They
// are not bugs: every replica reaches the same outcome for the same entry.
var (
	// ErrInvalidEntry: the entry's bytes do not decode or break the format.
	ErrInvalidEntry = errors.New("engine: invalid entry")
	// ErrOutOfOrderSequence: an idempotent producer skipped sequence numbers.
	ErrOutOfOrderSequence = errors.New("engine: out of order sequence")
	// ErrProducerFenced: a producer epoch older than the one on record.
	ErrProducerFenced = errors.New("engine: producer fenced")
	// ErrUnknownProducer: a batch with a sequence other than 0 from a
	// producer the partition has no record of (never seen, or its batches
	// were all trimmed away); the producer must start a new epoch at 0.
	ErrUnknownProducer = errors.New("engine: unknown producer")
	// ErrOffsetOutOfRange: an offset before the log start or past the
	// high-water mark.
	ErrOffsetOutOfRange = errors.New("engine: offset out of range")
	// ErrOffsetRemote: an offset at or past the log start of a tiered
	// partition that this replica no longer holds locally (LocalStart):
	// its records are read from the bucket (the node's remote reads).
	ErrOffsetRemote = errors.New("engine: offset held remotely")
	// ErrInvalidSnapshot: RestorePartition was given bytes that do not
	// decode, an unknown version, or a state that breaks an invariant.
	ErrInvalidSnapshot = errors.New("engine: invalid snapshot")
)

// Result is the outcome of applying one raft entry.
type Result struct {
	// Err is nil when the entry took effect; otherwise one of the errors
	// above, possibly wrapping a recordbatch error (errors.Is works).
	Err error
	// BaseOffset and RecordCount locate the batch of a produce entry. For a
	// duplicate of an earlier batch they are the earlier batch's, and
	// Duplicate is true: the producer is told the original outcome.
	BaseOffset  int64
	RecordCount int32
	Duplicate   bool
	// Tier is what a TIER_ADD did (tier.Added, Duplicate or Stale).
	Tier tier.Outcome
	// TierDropped lists the remote segments a TRIM took out of the
	// manifest: the leader deletes their objects from the bucket.
	TierDropped []tier.Segment
	// TierRestored: a TIER_RESTORE took effect (the partition now starts
	// and ends where the remote log found in the bucket does).
	TierRestored bool
}

// BatchLocation says where the batch holding some offsets lives in the raft
// log: the fetch path reads raft entry RaftIndex and serves its batch bytes.
type BatchLocation struct {
	BaseOffset   int64
	RecordCount  int32
	RaftIndex    uint64
	AppendTimeMs int64
	// MaxTimestampMs is the largest record timestamp of this batch and of
	// the index entry before it (when one was still indexed at append): a
	// running maximum, non-decreasing along the index like Kafka's time
	// index, so OffsetForTimestamp can binary search it.
	MaxTimestampMs int64
}

// endOffset is the offset after the batch's last record.
func (b *BatchLocation) endOffset() int64 { return b.BaseOffset + int64(b.RecordCount) }

// indexCompactMin is the smallest dropped prefix worth compacting away;
// below it the dead entries cost less than the copy.
const indexCompactMin = 64

// Partition is the state of one partition's log, built only by applying the
// committed entries of its raft group in order.
//
// Invariants (check verifies them): the indexed batches are batches[head:],
// dense (each starts where the one before ends) and in raft index order;
// the first contains logStartOffset and the last ends at nextOffset; with
// none indexed, logStartOffset == nextOffset.
type Partition struct {
	appliedIndex   uint64
	nextOffset     int64
	logStartOffset int64
	// batches[head:] is the offset index; the dropped prefix is compacted
	// away once it is at least half the slice (amortized O(1) per drop).
	batches []BatchLocation
	head    int
	// indexBase is the ordinal of batches[0]: the n-th batch ever appended
	// has ordinal n, for an append-only checkpoint of the index.
	indexBase int64
	producers map[int64]*producerState
	// timestampSeed (when hasTimestampSeed) stands in for the running
	// maximum timestamp of the batches Compacted dropped, while the index
	// is empty: the next batch takes it into its MaxTimestampMs exactly as
	// on a replica that still indexes them until a TRIM to the high-water
	// mark drops them there too (which clears the seed).
	timestampSeed    int64
	hasTimestampSeed bool
	// indexSum and producerSum are the sums of the element hashes of the
	// offset index and the producer table (digest.go), kept up to date by
	// every change.
	indexSum, producerSum uint64
	// coveredSum and covered are the sum and count of the indexed batches
	// wholly below coverEnd: the compaction record's CleanedTo
	// (compaction.go) or the end of the remote log (tiering.go). A replica
	// may drop them from its raft log, and so from its index, at its own
	// pace (RaftTrimBound), so the digest leaves them out.
	coveredSum uint64
	covered    int
	// Transactions (transactions.go): each producer's transactional
	// record, the open transactions that wrote here in first-offset order
	// (derived from txns), and the aborted-transaction index
	// aborted[abortedHead:] in marker order. txnSum sums the digests of
	// the records and the index entries. abortedSpanMax bounds every
	// retained entry's LastOffset-FirstOffset (a scan bound, not state).
	txns           map[int64]*txnProducer
	openTxns       []OpenTxn
	aborted        []AbortedTxn
	abortedHead    int
	abortedSpanMax int64
	txnSum         uint64
	// compaction is the compaction record (compaction.go): the last
	// decision and the last reported pass.
	compaction CompactionState
	// tier is the manifest of remote segments (tiering.go).
	tier tier.Manifest
	// digests caches Digests' answer by its inputs (digest.go); not state.
	digests digestMemo
}

// NewPartition returns the state of an empty partition before raft index 1.
func NewPartition() *Partition {
	return &Partition{producers: make(map[int64]*producerState), txns: make(map[int64]*txnProducer)}
}

// AppliedIndex is the raft index of the last applied entry.
func (p *Partition) AppliedIndex() uint64 { return p.appliedIndex }

// HighWatermark is the offset after the last committed record: consumers
// read below it (R10). Every applied entry is committed, so it is also the
// next offset to assign.
func (p *Partition) HighWatermark() int64 { return p.nextOffset }

// LogStartOffset is the first offset still retained.
func (p *Partition) LogStartOffset() int64 { return p.logStartOffset }

// advance consumes raft index index; a gap or a repeat is a bug.
func (p *Partition) advance(index uint64) {
	if index != p.appliedIndex+1 {
		panic(fmt.Sprintf("engine: apply index %d after %d", index, p.appliedIndex))
	}
	p.appliedIndex = index
}

// Apply applies the committed raft entry at index whose Data is data (a
// marshalled strandpb.Entry). Indexes must arrive consecutively; a gap is a
// bug and panics.
func (p *Partition) Apply(index uint64, data []byte) Result {
	result := p.apply(index, data)
	p.assertInvariants()
	return result
}

// apply is Apply without the invariants-build check.
func (p *Partition) apply(index uint64, data []byte) Result {
	p.advance(index)
	e, err := DecodeEntry(data)
	if err != nil {
		return Result{Err: err}
	}
	switch e.Kind {
	case strandpb.EntryKind_ENTRY_KIND_PRODUCE:
		return p.applyProduce(index, &e)
	case strandpb.EntryKind_ENTRY_KIND_TRIM:
		p.trim(e.TrimOffset, e.AppendTimeMs)
		dropped := p.tier.Trim(min(e.TrimOffset, p.nextOffset))
		p.extendCovered()
		return Result{TierDropped: dropped}
	case strandpb.EntryKind_ENTRY_KIND_TXN_BEGIN:
		return p.applyTxnBegin(&e)
	case strandpb.EntryKind_ENTRY_KIND_TXN_MARKER:
		return p.applyTxnMarker(index, &e)
	case strandpb.EntryKind_ENTRY_KIND_COMPACT:
		return p.applyCompact(&e)
	case strandpb.EntryKind_ENTRY_KIND_COMPACT_DONE:
		return p.applyCompactDone(&e)
	case strandpb.EntryKind_ENTRY_KIND_TIER_ADD:
		return p.applyTierAdd(&e)
	case strandpb.EntryKind_ENTRY_KIND_TIER_RESTORE:
		return p.applyTierRestore(&e)
	default:
		return Result{Err: fmt.Errorf("%w: unknown entry kind %d", ErrInvalidEntry, int32(e.Kind))}
	}
}

// ApplyEmpty applies a raft entry that carries no partition command (an
// empty entry a new leader appends, or a configuration change). It consumes
// the index and no offset.
func (p *Partition) ApplyEmpty(index uint64) { p.advance(index) }

// applyProduce validates a batch, screens it through its producer's
// idempotence record and appends it.
func (p *Partition) applyProduce(index uint64, e *EntryFields) Result {
	info, err := recordbatch.Validate(e.Batch)
	if err != nil {
		return Result{Err: fmt.Errorf("%w: %w", ErrInvalidEntry, err)}
	}
	if e.Transactional && e.ProducerID < 0 {
		return Result{Err: fmt.Errorf("%w: a transactional batch without a producer id", ErrInvalidEntry)}
	}
	var st *producerState
	if e.ProducerID >= 0 {
		if err := p.screenTxnWrite(e); err != nil {
			return Result{Err: err}
		}
		var dup *producerBatch
		st, dup, err = p.screenProducer(e, info.RecordCount)
		if err != nil {
			return Result{Err: err}
		}
		if dup != nil {
			return Result{BaseOffset: dup.baseOffset, RecordCount: dup.recordCount, Duplicate: true}
		}
	}
	loc := p.appendLocation(index, info.RecordCount, e.AppendTimeMs, info.MaxTimestampMs)
	if st != nil {
		if old, ok := p.producers[e.ProducerID]; ok {
			p.producerSum -= producerDigest(e.ProducerID, old)
		}
		st.lastAppendMs = e.AppendTimeMs
		st.accept(e.ProducerEpoch, producerBatch{
			baseSequence: e.BaseSequence,
			recordCount:  info.RecordCount,
			baseOffset:   loc.BaseOffset,
		})
		p.producers[e.ProducerID] = st
		p.producerSum += producerDigest(e.ProducerID, st)
	}
	if e.Transactional {
		p.noteTxnWrite(e.ProducerID, loc.BaseOffset, e.AppendTimeMs)
	}
	return Result{BaseOffset: loc.BaseOffset, RecordCount: loc.RecordCount}
}

// appendLocation gives the entry at raft index index the next count
// offsets and indexes it, with maxTimestampMs folded into the running
// maximum: a produce entry's batch or a marker's control record.
func (p *Partition) appendLocation(index uint64, count int32, appendTimeMs, maxTimestampMs int64) BatchLocation {
	if p.nextOffset > math.MaxInt64-int64(count) {
		panic(fmt.Sprintf("engine: offset overflow at %d", p.nextOffset))
	}
	loc := BatchLocation{
		BaseOffset:     p.nextOffset,
		RecordCount:    count,
		RaftIndex:      index,
		AppendTimeMs:   appendTimeMs,
		MaxTimestampMs: maxTimestampMs,
	}
	if n := len(p.batches); n > p.head {
		loc.MaxTimestampMs = max(loc.MaxTimestampMs, p.batches[n-1].MaxTimestampMs)
	} else if p.hasTimestampSeed {
		loc.MaxTimestampMs = max(loc.MaxTimestampMs, p.timestampSeed)
	}
	p.hasTimestampSeed = false
	p.batches = append(p.batches, loc)
	p.indexSum += batchDigest(&loc)
	p.nextOffset += int64(count)
	return loc
}

// trim applies a trim entry stamped nowMs: the log start offset moves
// forward to offset, clamped to the high-water mark, dropping the batches
// wholly below it, and the producers whose batches all lie below offset
// and whose last batch is ProducerExpirationMs older than the trim are
// forgotten (never one with a transaction open here).
func (p *Partition) trim(offset, nowMs int64) {
	offset = min(offset, p.nextOffset)
	if offset == p.nextOffset {
		// The other replicas' index is empty now too; below that they
		// still hold the batch the seed stands for.
		p.hasTimestampSeed = false
	}
	p.evictProducers(offset, nowMs)
	p.trimTxns(offset, nowMs)
	if offset <= p.logStartOffset {
		return
	}
	p.logStartOffset = offset
	live := p.batches[p.head:]
	n := sort.Search(len(live), func(i int) bool { return live[i].endOffset() > offset })
	if p.compaction.Decision.Generation != 0 {
		// A compacted topic (compact,delete; delete-records): the batches
		// stay indexed below the log start until this replica's own
		// raft-log trim (Compacted, bounded by its own prefix) drops them,
		// so a replica whose pass lags the record still finds its next
		// pass's input (which drops them: engine/compact's rule 8). The
		// digest leaves covered batches out and every replica keeps the
		// others alike. Nothing below the log start is served (Locate
		// refuses it).
		n = 0
	}
	p.drop(n)
}

// evictProducers forgets the producers whose newest batch lies wholly below
// offset, as Kafka does when retention moves the log start: the table stays
// bounded by the retained log. It depends only on the trim entry and
// replicated state, never on the replica-local log start that Compacted
// moves, so every replica evicts the same producers. Deleting in map order
// is fine: only the resulting set matters.
func (p *Partition) evictProducers(offset, nowMs int64) {
	for id, st := range p.producers {
		if st.newest().endOffset() <= offset && st.lastAppendMs <= nowMs-ProducerExpirationMs && !p.txnOpen(id) {
			p.producerSum -= producerDigest(id, st)
			delete(p.producers, id)
		}
	}
}

// drop removes the first n indexed batches, compacting the slice when the
// dropped prefix is at least half of it.
func (p *Partition) drop(n int) {
	end := p.coverEnd()
	for i := p.head; i < p.head+n; i++ {
		h := batchDigest(&p.batches[i])
		p.indexSum -= h
		if p.batches[i].endOffset() <= end {
			p.coveredSum -= h
			p.covered--
		}
	}
	clear(p.batches[p.head : p.head+n])
	p.head += n
	if p.head < indexCompactMin || p.head*2 < len(p.batches) {
		return
	}
	live := len(p.batches) - p.head
	if cap(p.batches) > 4*indexCompactMin && live < cap(p.batches)/4 {
		// Shrink the backing array too: a log that was long once must
		// not pin its memory forever.
		p.batches = append(make([]BatchLocation, 0, 2*live), p.batches[p.head:]...)
	} else {
		copy(p.batches, p.batches[p.head:])
		clear(p.batches[live:])
		p.batches = p.batches[:live]
	}
	p.indexBase += int64(p.head)
	p.head = 0
}

// Compacted tells the partition that the raft log no longer holds entries at
// or below raftIndex: their batches leave the index and the log start offset
// moves past them. On a partition with a compaction decision or remote
// segments only the covered batches go (coverEnd: the compacted prefixes
// or the bucket hold them) and the log start stays, so the index starts
// above it. It is local to a replica (retention agreed through TRIM
// entries never depends on it). raftIndex must not exceed the applied index.
func (p *Partition) Compacted(raftIndex uint64) {
	p.compacted(raftIndex, p.compaction.Decision.Generation != 0 || p.tier.Active())
}

// CompactedTopicTrim is Compacted for a partition of a compacted or a
// tiered topic whatever its state holds (a raft snapshot's state at an
// index before the first COMPACT or TIER_ADD): only the covered batches go
// (none while nothing covers any) and the log start stays.
func (p *Partition) CompactedTopicTrim(raftIndex uint64) { p.compacted(raftIndex, true) }

// compacted is Compacted; compacting says the topic compacts or tiers.
func (p *Partition) compacted(raftIndex uint64, compacting bool) {
	if raftIndex > p.appliedIndex {
		panic(fmt.Sprintf("engine: compacted to %d beyond applied index %d", raftIndex, p.appliedIndex))
	}
	live := p.batches[p.head:]
	n := sort.Search(len(live), func(i int) bool { return live[i].RaftIndex > raftIndex })
	if compacting {
		// Only the batches the record covers go: a raft snapshot's state
		// at raftIndex keeps the index entries of the others (its record
		// is older than the one the trim was bounded by), so a replica
		// restored from it has the others' index.
		n = min(n, p.covered)
	}
	if n == 0 {
		return
	}
	if n == len(live) {
		p.timestampSeed, p.hasTimestampSeed = live[n-1].MaxTimestampMs, true
	}
	p.drop(n)
	if compacting {
		// A compacted or tiered topic: the raft log was trimmed below
		// coverEnd only (RaftTrimBound), whose records the compacted
		// prefixes or the bucket hold; the log start stays.
		return
	}
	start := p.nextOffset
	if p.head < len(p.batches) {
		start = p.batches[p.head].BaseOffset
	}
	p.logStartOffset = max(p.logStartOffset, start)
}

// CompactableIndex is the highest raft index the raft log can drop without
// losing a retained batch: the index before the first indexed batch's entry,
// or the applied index when no batch is indexed.
func (p *Partition) CompactableIndex() uint64 {
	if p.head == len(p.batches) {
		return p.appliedIndex
	}
	return p.batches[p.head].RaftIndex - 1
}

// Locate returns the batches holding offset and the ones after it, at most
// maxBatches of them (at least one), found in O(log n). It fails with
// ErrOffsetOutOfRange for an offset below the log start or above the
// high-water mark, and with ErrOffsetRemote for one of a tiered partition
// below its local start; at the high-water mark it returns no batches and
// no error.
func (p *Partition) Locate(offset int64, maxBatches int) ([]BatchLocation, error) {
	return p.AppendLocations(nil, offset, maxBatches)
}

// AppendLocations is Locate appending to dst, for a fetch path that reuses
// its buffer.
func (p *Partition) AppendLocations(dst []BatchLocation, offset int64, maxBatches int) ([]BatchLocation, error) {
	if offset < p.logStartOffset || offset > p.nextOffset {
		return dst, fmt.Errorf("%w: offset %d, log start %d, high-water mark %d",
			ErrOffsetOutOfRange, offset, p.logStartOffset, p.nextOffset)
	}
	if offset == p.nextOffset {
		return dst, nil
	}
	if p.tier.Active() && offset < p.LocalStart() {
		return dst, fmt.Errorf("%w: offset %d, local start %d", ErrOffsetRemote, offset, p.LocalStart())
	}
	live := p.batches[p.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].endOffset() > offset })
	n := min(max(maxBatches, 1), len(live)-i)
	return append(dst, live[i:i+n]...), nil
}

// AppendPassLocations is AppendLocations for a compaction pass's input:
// from offset whatever the log start, as a compacted topic keeps the
// batches no pass covers indexed below it (trim); an offset past the
// high-water mark, or below the first indexed batch, finds none there.
func (p *Partition) AppendPassLocations(dst []BatchLocation, offset int64, maxBatches int) []BatchLocation {
	live := p.batches[p.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].endOffset() > offset })
	n := min(max(maxBatches, 1), len(live)-i)
	return append(dst, live[i:i+n]...)
}

// OffsetForTimestamp returns the first offset of the first indexed batch
// whose MaxTimestampMs (a running maximum) is at or after timestampMs, but
// never below the log start; the high-water mark when there is none. With
// non-decreasing producer timestamps that is the first batch holding a
// record at or after timestampMs, as Kafka's ListOffsets answers. Below a
// tiered partition's local start the remote segments answer, at segment
// granularity (the first segment whose newest record is at or after
// timestampMs: its base, at or before the exact answer).
func (p *Partition) OffsetForTimestamp(timestampMs int64) int64 {
	if local := p.LocalStart(); p.tier.Active() && local > p.logStartOffset {
		if off, ok := p.tier.OffsetForTimestamp(timestampMs, local); ok {
			return max(off, p.logStartOffset)
		}
	}
	live := p.batches[p.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].MaxTimestampMs >= timestampMs })
	if i == len(live) {
		return p.nextOffset
	}
	return max(live[i].BaseOffset, p.logStartOffset)
}

// IndexOrdinals returns the ordinals [start, end) of the indexed batches.
// The n-th batch ever appended has ordinal n and keeps it, so a checkpoint
// can persist the index append-only: the batches of ordinals it has not
// written yet, and the new start once a trim or compaction dropped some.
func (p *Partition) IndexOrdinals() (start, end int64) {
	return p.indexBase + int64(p.head), p.indexBase + int64(len(p.batches))
}

// IndexSince returns the indexed batches of ordinals [from, end). from must
// lie in [start, end]. The slice aliases the partition's state: use it
// before the next Apply, Compacted or restore.
func (p *Partition) IndexSince(from int64) []BatchLocation {
	start, end := p.IndexOrdinals()
	if from < start || from > end {
		panic(fmt.Sprintf("engine: index since ordinal %d outside [%d, %d]", from, start, end))
	}
	return p.batches[from-p.indexBase:]
}

// FirstBatchFrom returns the first indexed batch whose raft entry is at or
// after raftIndex, found in O(log n); false when there is none. Retention
// turns a segment boundary of the raft log into a log start offset with it.
func (p *Partition) FirstBatchFrom(raftIndex uint64) (BatchLocation, bool) {
	live := p.batches[p.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].RaftIndex >= raftIndex })
	if i == len(live) {
		return BatchLocation{}, false
	}
	return live[i], true
}

// LastBatchThrough returns the last indexed batch whose raft entry is at or
// before raftIndex; false when there is none. Its MaxTimestampMs is the
// newest record timestamp of every retained batch up to raftIndex (a
// running maximum), which retention.ms ages.
func (p *Partition) LastBatchThrough(raftIndex uint64) (BatchLocation, bool) {
	live := p.batches[p.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].RaftIndex > raftIndex })
	if i == 0 {
		return BatchLocation{}, false
	}
	return live[i-1], true
}

// OldestTimestampMs is the largest record timestamp of the first retained
// batch, -1 when none is indexed: the age retention.ms judges.
func (p *Partition) OldestTimestampMs() int64 {
	if p.head == len(p.batches) {
		return -1
	}
	return p.batches[p.head].MaxTimestampMs
}
