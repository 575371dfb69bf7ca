// Package engine holds Strand's pure state machines: they apply committed
// raft entries and return state and results, doing no I/O, reading no clock,
// starting no goroutine and drawing no randomness.
package engine

import "errors"

// Client-visible outcomes of applying an entry, carried in Result.Err. They
// are not bugs: every replica reaches the same outcome for the same entry.
var (
	// ErrInvalidEntry: the entry's bytes do not decode or break the format.
	ErrInvalidEntry = errors.New("engine: invalid entry")
	// ErrOutOfOrderSequence: an idempotent producer skipped sequence numbers.
	ErrOutOfOrderSequence = errors.New("engine: out of order sequence")
	// ErrProducerFenced: a producer epoch older than the one on record.
	ErrProducerFenced = errors.New("engine: producer fenced")
	// ErrOffsetOutOfRange: an offset before the log start or past the
	// high-water mark.
	ErrOffsetOutOfRange = errors.New("engine: offset out of range")
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
}

// BatchLocation says where the batch holding some offsets lives in the raft
// log: the fetch path reads raft entry RaftIndex and serves its batch bytes.
type BatchLocation struct {
	BaseOffset     int64
	RecordCount    int32
	RaftIndex      uint64
	AppendTimeMs   int64
	MaxTimestampMs int64
}

// Partition is the state of one partition's log, built only by applying the
// committed entries of its raft group in order.
type Partition struct {
	_ struct{}
}

// NewPartition returns the state of an empty partition before raft index 1.
func NewPartition() *Partition { panic("engine: not implemented") }

// RestorePartition rebuilds a partition from Snapshot's bytes; it refuses
// unknown versions and malformed bytes with an error.
func RestorePartition(snapshot []byte) (*Partition, error) { panic("engine: not implemented") }

// Apply applies the committed raft entry at index whose Data is data (a
// marshalled strandpb.Entry). Indexes must arrive consecutively; a gap is a
// bug and panics.
func (p *Partition) Apply(index uint64, data []byte) Result { panic("engine: not implemented") }

// ApplyEmpty applies a raft entry that carries no partition command (an
// empty entry a new leader appends, or a configuration change). It consumes
// the index and no offset.
func (p *Partition) ApplyEmpty(index uint64) { panic("engine: not implemented") }

// AppliedIndex is the raft index of the last applied entry.
func (p *Partition) AppliedIndex() uint64 { panic("engine: not implemented") }

// HighWatermark is the offset after the last committed record: consumers
// read below it (R10). Every applied entry is committed, so it is also the
// next offset to assign.
func (p *Partition) HighWatermark() int64 { panic("engine: not implemented") }

// LogStartOffset is the first offset still retained.
func (p *Partition) LogStartOffset() int64 { panic("engine: not implemented") }

// Locate returns the batches holding offset and the ones after it, at most
// maxBatches of them, found in O(log n). It fails with ErrOffsetOutOfRange for
// an offset below the log start or above the high-water mark; at the
// high-water mark it returns no batches and no error.
func (p *Partition) Locate(offset int64, maxBatches int) ([]BatchLocation, error) {
	panic("engine: not implemented")
}

// OffsetForTimestamp returns the first offset whose batch's max timestamp is
// at or after timestampMs, or the high-water mark when there is none.
func (p *Partition) OffsetForTimestamp(timestampMs int64) int64 { panic("engine: not implemented") }

// Compacted tells the partition that the raft log no longer holds entries at
// or below raftIndex: their batches leave the index and the log start offset
// moves past them. It is local to a replica (retention agreed through TRIM
// entries never depends on it).
func (p *Partition) Compacted(raftIndex uint64) { panic("engine: not implemented") }

// Snapshot encodes the whole state in the versioned PartitionSnapshot format.
func (p *Partition) Snapshot() []byte { panic("engine: not implemented") }
