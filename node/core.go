// Package node is a Strand node: it hosts many partition replicas, one etcd
// raft group each (multi-raft), drives their Ready cycles and serves produce
// and fetch. The core does no I/O of its own: it reaches the world through
// Clock, raftlog.Disk and Network, and draws randomness from a source handed
// in, so the simulator runs exactly the code production runs. Only files
// named runtime*.go may own goroutines, sockets or real time.
package node

import (
	"errors"
	"math/rand/v2"

	"go.etcd.io/raft/v3"

	"github.com/strandlog/strand/raftlog"
)

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// PartitionSpec places one partition: its replicas, in preference order.
type PartitionSpec struct {
	TopicPartition
	Replicas []NodeID
}

// Bugs plants known bugs so the simulator can prove its checkers catch
// them. Production code never sets them; every field is false by default.
type Bugs struct {
	AckBeforeCommit     bool // complete acks=all produces when proposed, not applied
	SkipFsync           bool // tell raft entries are stable without syncing
	FetchBeyondHighMark bool // serve entries past the commit index
	ReapplyAfterRestart bool // re-apply committed entries after restart without dedup
}

// Config configures a Core.
type Config struct {
	ID         NodeID
	Partitions []PartitionSpec // the replicas this node hosts are the specs naming ID
	Disk       raftlog.Disk
	Network    Network
	Clock      Clock
	Rand       *rand.Rand  // the core's only randomness
	Logger     raft.Logger // nil: discard
	// ElectionTicks and HeartbeatTicks count Core.Tick calls (defaults 10, 1).
	ElectionTicks  int
	HeartbeatTicks int
	// RequestTimeoutTicks fails a produce or fetch still waiting after this
	// many ticks (default 50).
	RequestTimeoutTicks int
	SegmentBytesMax     int64
	Bugs                Bugs
}

// Acks selects when a produce completes (R12).
type Acks int8

// The acks levels, as Kafka's acks=0, acks=1 and acks=all.
const (
	AcksNone   Acks = 0  // complete when accepted by the leader, before proposing
	AcksLeader Acks = 1  // complete when the leader's own log holds it durably
	AcksAll    Acks = -1 // complete when committed and applied: offsets are known
)

// Errors of requests; a request's Err wraps one of these (errors.Is).
var (
	ErrNotLeader             = errors.New("node: not leader")
	ErrUnknownTopicPartition = errors.New("node: unknown topic or partition")
	ErrRecordTooLarge        = errors.New("node: record too large")
	ErrInvalidRequest        = errors.New("node: invalid request")
	ErrOffsetOutOfRange      = errors.New("node: offset out of range")
	ErrTimeout               = errors.New("node: request timed out")
	ErrOutOfOrderSequence    = errors.New("node: out of order sequence")
	ErrProducerFenced        = errors.New("node: producer fenced")
	ErrStopped               = errors.New("node: stopped")
)

// ProduceRequest appends one record batch (engine/recordbatch format) to
// one partition.
type ProduceRequest struct {
	TopicPartition
	Acks          Acks
	ProducerID    int64 // -1: not idempotent
	ProducerEpoch int32
	BaseSequence  int32
	Batch         []byte
}

// ProduceResult is the outcome of a produce. BaseOffset is -1 when not known
// (acks 0 and 1: offsets are assigned when the entry is applied).
type ProduceResult struct {
	Err        error
	BaseOffset int64
	Leader     NodeID // the leader this node knows, for ErrNotLeader; 0 if none
}

// FetchRequest reads committed batches from Offset.
type FetchRequest struct {
	TopicPartition
	Offset   int64
	MaxBytes int32
}

// FetchedBatch is one stored batch, its bytes served as stored.
type FetchedBatch struct {
	BaseOffset   int64
	AppendTimeMs int64
	Batch        []byte
}

// FetchResult is the outcome of a fetch: batches from the one holding
// Offset, up to MaxBytes (at least one batch when any), all below
// HighWatermark.
type FetchResult struct {
	Err            error
	Batches        []FetchedBatch
	HighWatermark  int64
	LogStartOffset int64
	Leader         NodeID
}

// GroupStatus is one hosted replica's state, for tools and the simulator's
// invariant checks.
type GroupStatus struct {
	TopicPartition
	Term           uint64
	Leader         NodeID
	IsLeader       bool
	CommitIndex    uint64
	AppliedIndex   uint64
	HighWatermark  int64
	LogStartOffset int64
}

// ApplyObserver, when set in Config, sees every entry a replica applies, in
// order, so the simulator can check that replicas applying index i applied
// the same entry. data must not be retained or modified.
type ApplyObserver func(tp TopicPartition, index, term uint64, data []byte)

// Core is one node's state. It is not safe for concurrent use: one goroutine
// (the runtime's loop or the simulator) calls every method, and callbacks
// run on that goroutine inside those calls.
//
// Methods (to be implemented):
//
//	Open(cfg Config) (*Core, error)        // open or recover every hosted replica
//	(c *Core) Tick()                        // one clock tick for every group, in a fixed order
//	(c *Core) Receive(frame []byte)         // a RaftFrame from a peer; malformed frames dropped
//	(c *Core) Process() error               // Ready cycles until quiescent (bounded rounds):
//	                                        // persist, sync, send batched per peer, apply, complete, Advance;
//	                                        // an error is fatal: the caller fail-stops the node
//	(c *Core) Produce(req, done func(ProduceResult))
//	(c *Core) Fetch(req, done func(FetchResult))  // linearizable: raft ReadIndex
//	(c *Core) Status() []GroupStatus        // sorted by topic, partition
//	(c *Core) Close() error
type Core struct {
	_ struct{}
}
