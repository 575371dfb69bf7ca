package clientlib

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// Offset is where a consumer starts reading a partition: an exact offset,
// the log start, the high-water mark, or the first record at or after a
// timestamp. Build one with OffsetExact, OffsetEarliest, OffsetLatest or
// OffsetAtTimestamp.
type Offset struct {
	kind offsetKind
	at   int64
}

type offsetKind uint8

const (
	offsetExact offsetKind = iota
	offsetEarliest
	offsetLatest
	offsetTimestamp
	offsetLastStable
)

// OffsetExact starts at offset n.
func OffsetExact(n int64) Offset { return Offset{kind: offsetExact, at: n} }

// OffsetEarliest starts at the log start offset.
func OffsetEarliest() Offset { return Offset{kind: offsetEarliest} }

// OffsetLatest starts at the high-water mark: only records produced later.
func OffsetLatest() Offset { return Offset{kind: offsetLatest} }

// OffsetLastStable is the latest offset a read_committed reader can reach:
// the last stable offset, below every open transaction (the high-water
// mark when none is open). A ReadCommitted consumer starting at
// OffsetLatest starts here.
func OffsetLastStable() Offset { return Offset{kind: offsetLastStable} }

// OffsetAtTimestamp starts at the first record whose timestamp is at or
// after t (the high-water mark when there is none).
func OffsetAtTimestamp(t time.Time) Offset { return Offset{kind: offsetTimestamp, at: t.UnixMilli()} }

// wireTimestamp is the ListOffsets timestamp for a non-exact Offset.
func (o Offset) wireTimestamp() int64 {
	switch o.kind {
	case offsetEarliest:
		return -2
	case offsetLatest, offsetLastStable:
		return -1
	default:
		return o.at
	}
}

// wireIsolation is the ListOffsets isolation level for o: read_committed
// for OffsetLastStable.
func (o Offset) wireIsolation() int32 {
	if o.kind == offsetLastStable {
		return int32(ReadCommitted)
	}
	return int32(ReadUncommitted)
}

// String describes the offset.
func (o Offset) String() string {
	switch o.kind {
	case offsetEarliest:
		return "earliest"
	case offsetLatest:
		return "latest"
	case offsetLastStable:
		return "last stable"
	case offsetTimestamp:
		return fmt.Sprintf("timestamp %d ms", o.at)
	default:
		return fmt.Sprintf("offset %d", o.at)
	}
}

// ResetPolicy says what Poll does when a partition's position is outside
// [log start, high-water mark] (R22).
type ResetPolicy uint8

// Reset policies. The default, ResetNone, never moves a position silently.
const (
	// ResetNone stops the partition and reports an *OffsetOutOfRangeError
	// (with the log start and high-water mark) on every Poll until Seek.
	ResetNone ResetPolicy = iota
	// ResetEarliest moves the position to the log start.
	ResetEarliest
	// ResetLatest moves the position to the high-water mark.
	ResetLatest
)

// OffsetOutOfRangeError reports a position outside the readable range:
// below the log start (data aged out) or above the high-water mark. It
// matches ErrOffsetOutOfRange with errors.Is.
type OffsetOutOfRangeError struct {
	Topic          string
	Partition      int32
	Offset         int64
	LogStartOffset int64
	HighWatermark  int64
}

// Error implements error.
func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("clientlib: %s/%d: offset %d is outside [%d, %d]; Seek to continue",
		e.Topic, e.Partition, e.Offset, e.LogStartOffset, e.HighWatermark)
}

// Is matches ErrOffsetOutOfRange.
func (e *OffsetOutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }

// Retriable is false: the caller must decide where to read.
func (e *OffsetOutOfRangeError) Retriable() bool { return false }

// ConsumerOpt configures NewConsumer.
type ConsumerOpt func(*consumerConfig)

type consumerConfig struct {
	maxWait           time.Duration
	minBytes          int32
	maxBytes          int32
	partitionMaxBytes int32
	reset             ResetPolicy
	isolation         IsolationLevel
}

// IsolationLevel is what a consumer reads of transactional writes
// (Kafka's isolation.level).
type IsolationLevel int8

// Isolation levels. The zero value is ReadUncommitted, the default.
const (
	// ReadUncommitted reads every record up to the high-water mark,
	// including those of open and aborted transactions.
	ReadUncommitted IsolationLevel = 0
	// ReadCommitted reads up to the last stable offset (below every open
	// transaction) and never returns an aborted transaction's records.
	ReadCommitted IsolationLevel = 1
)

// String is the level as Kafka's isolation.level names it.
func (l IsolationLevel) String() string {
	if l == ReadCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}

// FetchIsolation sets what the consumer reads of transactions (default
// ReadUncommitted, as Kafka's consumers).
func FetchIsolation(l IsolationLevel) ConsumerOpt { return func(c *consumerConfig) { c.isolation = l } }

// FetchMaxWait is how long a fetch waits on the server for data (the long
// poll; default 500 ms).
func FetchMaxWait(d time.Duration) ConsumerOpt { return func(c *consumerConfig) { c.maxWait = d } }

// FetchMinBytes is how much data ends a fetch before its max wait
// (default 1).
func FetchMinBytes(n int32) ConsumerOpt { return func(c *consumerConfig) { c.minBytes = n } }

// FetchMaxBytes bounds one fetch answer (default 4 MiB; at least one batch
// is always returned). A fetch asks for at most what fits the frame limit
// both ends accept (frame.FetchBytesMax: 7 MiB with 9 MiB frames), so a
// larger value reads as much as one answer can carry.
func FetchMaxBytes(n int32) ConsumerOpt { return func(c *consumerConfig) { c.maxBytes = n } }

// FetchMaxPartitionBytes bounds one partition's share (default 1 MiB; at
// most FetchMaxBytes's effective value).
func FetchMaxPartitionBytes(n int32) ConsumerOpt {
	return func(c *consumerConfig) { c.partitionMaxBytes = n }
}

// OffsetResetPolicy sets what happens to an out-of-range position
// (default ResetNone).
func OffsetResetPolicy(p ResetPolicy) ConsumerOpt { return func(c *consumerConfig) { c.reset = p } }

// Consumer reads assigned partitions from their leaders. Poll must be
// called from one goroutine at a time; Assign, Seek, Position, Pause and
// Resume may be called from any goroutine, and a Seek during a Poll makes
// that Poll drop what it fetched for the partition.
type Consumer struct {
	c   *Client
	cfg consumerConfig

	mu    sync.Mutex
	parts map[topicPartition]*consumed
	// seeks numbers every Seek, so a partition's generation is never
	// reused, not even by an Unassign and a new Assign.
	seeks uint64
	// fetching holds the node ids with a fetch in flight: at most one per
	// node, each covering partitions no other fetch covers.
	fetching map[uint64]bool
	// landed are the answers of finished fetches, applied (positions
	// moved, records handed out) by the next Poll, never before: a
	// position never passes a record the caller has not been given.
	landed []landedFetch
	// wake has a token when a fetch landed.
	wake chan struct{}
	// pollTimer bounds a live Poll's wait for a landing, reused by every
	// Poll (Polls come one at a time): no timer per Poll.
	pollTimer *time.Timer
	// simWake resumes a simulated Poll waiting for a fetch to land
	// (sim_task.go); nil otherwise.
	simWake func()
	// failedPolls counts the Polls in a row that handed out nothing and
	// failed retriably or found nothing to fetch: their waits grow with it.
	failedPolls int
}

// landedFetch is one finished fetch: the partitions it asked for and the
// node's answer or the request's error.
type landedFetch struct {
	node    uint64
	targets []pollTarget
	sent    time.Time // when the request was sent
	resp    *strandpb.Response
	err     error
}

// consumed is one assigned partition's position.
type consumed struct {
	tp         topicPartition
	start      Offset // to resolve while !resolved
	resolved   bool
	next       int64
	generation uint64 // a new value at every Seek
	// fetchingGeneration is generation while a fetch for that position
	// is in flight; a new fetch waits for it, a Seek makes it stale.
	fetchingGeneration uint64
	paused             bool
	err                error // sticky until Seek (offset out of range)
	hwm                int64
	logStart           int64
	hwmSeen            int64 // the highest high-water mark any node reported
	// topicID is the id of the topic the position belongs to, fixed when
	// the start was resolved (or at the first fetch of an exact start):
	// fetches carry it, and a topic re-created under the name stops the
	// partition with a TopicRecreatedError instead of reading the new
	// log at the old offsets. Seek clears it.
	topicID []byte
}

// NewConsumer returns a Consumer reading through c, with nothing assigned.
func NewConsumer(c *Client, opts ...ConsumerOpt) *Consumer {
	cfg := consumerConfig{maxWait: 500 * time.Millisecond, minBytes: 1, maxBytes: 4 << 20, partitionMaxBytes: 1 << 20}
	for _, o := range opts {
		o(&cfg)
	}
	return &Consumer{c: c, cfg: cfg, parts: make(map[topicPartition]*consumed),
		fetching: map[uint64]bool{}, wake: make(chan struct{}, 1)}
}

// Assign adds a partition (or moves an assigned one) starting at start.
func (k *Consumer) Assign(topic string, partition int32, start Offset) {
	k.seek(topic, partition, start)
}

// AssignTopic assigns every partition of topic, each starting at start.
func (k *Consumer) AssignTopic(ctx context.Context, topic string, start Offset) error {
	if err := k.c.RefreshMetadata(ctx); err != nil {
		return err
	}
	k.c.mu.Lock()
	info := k.c.meta.Topic(topic)
	k.c.mu.Unlock()
	if info == nil || len(info.Partitions) == 0 {
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, Message: "topic " + topic}
	}
	for p := range info.Partitions {
		k.Assign(topic, int32(p), start)
	}
	return nil
}

// Unassign stops reading a partition.
func (k *Consumer) Unassign(topic string, partition int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.parts, topicPartition{topic, partition})
}

// Seek moves a partition's position (assigning it if needed) and clears
// its out-of-range error.
func (k *Consumer) Seek(topic string, partition int32, at Offset) {
	if bugSeekSkipsTarget() && at.kind == offsetExact {
		at.at++ // planted (simbugs): the record at the target is skipped
	}
	k.seek(topic, partition, at)
}

// seek is Seek without the planted bug's hook (Assign's path too).
func (k *Consumer) seek(topic string, partition int32, at Offset) {
	k.mu.Lock()
	defer k.mu.Unlock()
	tp := topicPartition{topic, partition}
	cp := k.parts[tp]
	if cp == nil {
		cp = &consumed{tp: tp}
		k.parts[tp] = cp
	}
	k.seeks++
	cp.generation = k.seeks
	cp.err = nil
	cp.topicID = nil
	cp.start = at
	cp.resolved = at.kind == offsetExact
	cp.next = at.at
}

// Position is the next offset Poll will return for a partition; ok is
// false when it is not assigned or its start is not resolved yet.
func (k *Consumer) Position(topic string, partition int32) (offset int64, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cp := k.parts[topicPartition{topic, partition}]
	if cp == nil || !cp.resolved {
		return 0, false
	}
	return cp.next, true
}

// PositionTopicID is the id of the topic a partition's Position counts
// in: fixed when its start is resolved (or at the first fetch of an exact
// start), cleared by Seek; nil until then, or when the cluster gives
// none. A topic deleted and created again under its name has a new id,
// so an offset stored with it cannot be applied to the namesake.
func (k *Consumer) PositionTopicID(topic string, partition int32) []byte {
	id, _ := k.topicState(topic, partition)
	return bytes.Clone(id)
}

// topicState is a partition's topic id (nil until fixed) and its sticky
// error (nil when none).
func (k *Consumer) topicState(topic string, partition int32) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cp := k.parts[topicPartition{topic, partition}]
	if cp == nil {
		return nil, nil
	}
	return cp.topicID, cp.err
}

// Pause stops fetching a partition, keeping its position.
func (k *Consumer) Pause(topic string, partition int32) { k.setPaused(topic, partition, true) }

// Resume undoes Pause.
func (k *Consumer) Resume(topic string, partition int32) { k.setPaused(topic, partition, false) }

func (k *Consumer) setPaused(topic string, partition int32, paused bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cp := k.parts[topicPartition{topic, partition}]; cp != nil {
		cp.paused = paused
	}
}

// FetchPartition is one partition's part of a Poll.
type FetchPartition struct {
	Topic          string
	Partition      int32
	Records        []*Record
	HighWatermark  int64
	LogStartOffset int64
	// LastStableOffset is the offset below which every transaction is
	// decided: a ReadCommitted consumer reads up to it, not the high-water
	// mark (equal to it where no transaction is open).
	LastStableOffset int64
	Err              error
	// FetchedAt is when the fetch that read this was sent: its records,
	// high-water mark and log start are as of a moment between then and
	// the Poll's return. Poll keeps fetches in flight across calls, so
	// it may precede the Poll call (at most by one Poll). Zero for an
	// error that no fetch brought.
	FetchedAt time.Time
	// TopicID is the id of the topic the fetch read (nil: the cluster
	// gives none): a topic deleted and created again under its name has a
	// new id, so records of two incarnations are told apart by it.
	TopicID []byte
}

// Fetches is what a Poll returned, sorted by topic and partition.
type Fetches []FetchPartition

// Records lists every record, partition by partition, in offset order
// within each partition.
func (fs Fetches) Records() []*Record {
	var out []*Record
	for _, f := range fs {
		out = append(out, f.Records...)
	}
	return out
}

// hasRecords reports whether any partition brought records, without
// gathering them as Records does (a slice per call, twice a Poll).
func (fs Fetches) hasRecords() bool {
	for _, f := range fs {
		if len(f.Records) > 0 {
			return true
		}
	}
	return false
}

// FirstErr is the first partition's error, or nil.
func (fs Fetches) FirstErr() error {
	for _, f := range fs {
		if f.Err != nil {
			return f.Err
		}
	}
	return nil
}

// errNothingToFetch is returned by Poll when nothing is assigned.
var errNothingToFetch = errors.New("clientlib: no partition assigned")

// sortFetches orders fetches by topic and partition.
func sortFetches(fs Fetches) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Topic != fs[j].Topic {
			return fs[i].Topic < fs[j].Topic
		}
		return fs[i].Partition < fs[j].Partition
	})
}

// mergeFetches sorts fs and folds the entries of one partition into one, in
// the order they came: records concatenated, the last high-water mark and
// log start of an answer that brought records or no error, the first
// error, the earliest FetchedAt. A Poll that waited through empty answers
// before one brought records has several entries for a partition, and a
// caller reading "the partition's part of this Poll" must see them all.
func mergeFetches(fs Fetches) Fetches {
	sortFetches(fs)
	out := fs[:0]
	for _, f := range fs {
		n := len(out)
		if n == 0 || out[n-1].Topic != f.Topic || out[n-1].Partition != f.Partition || f.Topic == "" {
			out = append(out, f)
			continue
		}
		last := &out[n-1]
		last.Records = append(last.Records, f.Records...)
		if last.FetchedAt.IsZero() || !f.FetchedAt.IsZero() && f.FetchedAt.Before(last.FetchedAt) {
			last.FetchedAt = f.FetchedAt
		}
		if f.Err == nil || len(f.Records) > 0 { // records before a corrupt batch come with its error
			last.HighWatermark, last.LogStartOffset, last.LastStableOffset = f.HighWatermark, f.LogStartOffset, f.LastStableOffset
		}
		if f.Err != nil && last.Err == nil {
			last.Err = f.Err
		}
	}
	clear(fs[len(out):])
	return out[:len(out):len(out)]
}

// decodeBatches turns fetched batches into records at offsets
// [from, hwm): the batch's base offset plus the record's index, skipping
// records before from (a batch may start before it) and never passing the
// high-water mark. A transaction marker (include_markers) holds no record
// and moves the position past its one offset. Offsets must follow one
// another, except where gaps are allowed: a read_committed answer leaves
// out aborted transactions' batches. A batch of a compacted prefix
// (engine/compact's form, magic 2) keeps its records' own offsets with
// gaps between them and moves the position past its whole original range.
// It returns the next position.
func decodeBatches(topic string, partition int32, batches []*strandpb.FetchResponse_Batch, from, hwm int64, gaps bool) ([]*Record, int64, error) {
	var out []*Record
	next := from
	expect := func(offset int64) error {
		if offset != next && !(gaps && offset > next) {
			return fmt.Errorf("%w: record at offset %d, expected %d", recordbatch.ErrCorrupt, offset, next)
		}
		return nil
	}
	for _, b := range batches {
		base := b.GetBaseOffset()
		if b.GetMarker() != nil {
			if base >= next && base < hwm {
				if err := expect(base); err != nil {
					return out, next, err
				}
				next = base + 1
			}
			continue
		}
		if compact.IsCompacted(b.GetRecords()) {
			var err error
			if out, next, err = decodeCompacted(topic, partition, b.GetRecords(), out, next, hwm); err != nil {
				return out, next, err
			}
			continue
		}
		err := recordbatch.Decode(b.GetRecords(), func(i int, r recordbatch.Record) error {
			offset := base + int64(i)
			if offset < next || offset >= hwm {
				return nil
			}
			if err := expect(offset); err != nil {
				return err
			}
			out = append(out, newRecord(topic, partition, offset, r))
			next = offset + 1
			return nil
		})
		if err != nil {
			return out, next, err
		}
	}
	return out, next, nil
}

// decodeCompacted appends the records of one compacted batch at offsets
// [next, hwm) to out: each at its own offset (compaction removed the ones
// between), a marker's none; the position moves past the batch's last
// offset (an emptied batch still covers its range), never past hwm.
// Records below next are skipped (a fetch may start inside a batch). A
// batch that fails its checks is recordbatch.ErrCorrupt.
func decodeCompacted(topic string, partition int32, data []byte, out []*Record, next, hwm int64) ([]*Record, int64, error) {
	b, err := compact.DecodeBatch(data)
	if err != nil {
		return out, next, fmt.Errorf("%w: %w", recordbatch.ErrCorrupt, err)
	}
	for _, r := range b.Records {
		if b.Control || r.Offset < next || r.Offset >= hwm {
			continue
		}
		out = append(out, newRecord(topic, partition, r.Offset, r.Record))
		next = r.Offset + 1
	}
	if end := min(b.LastOffset()+1, hwm); end > next {
		next = end
	}
	return out, next, nil
}

// newRecord is a fetched record at offset.
func newRecord(topic string, partition int32, offset int64, r recordbatch.Record) *Record {
	rec := &Record{Topic: topic, Partition: partition, Key: r.Key, Value: r.Value,
		Timestamp: time.UnixMilli(r.TimestampMs), Offset: offset}
	for _, h := range r.Headers {
		rec.Headers = append(rec.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return rec
}
