package node

import (
	"fmt"
	"github.com/strandlog/strand/objstore"
	"log/slog"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/proto/strandpb"
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
	// Target is the target of a move in progress (nil: none); the replica
	// talks to the nodes of Replicas ∪ Target.
	Target []NodeID
	// Bootstrap is the set an empty log is bootstrapped over (nil:
	// Replicas), the same on every replica ever added (moves.go).
	Bootstrap []NodeID
	// Leaving is the nodes a redirected move's earlier target added that
	// the replicas and target do not name: still talked to until the move
	// completes.
	Leaving []NodeID
}

// Peer is one node of the cluster as the Config lists it: the voters of the
// metadata group, and the addresses HandleAs hands out as leader hints until
// the metadata group has registered the node.
type Peer struct {
	ID      NodeID
	Address string // host:port clients connect to
	Rack    string // failure domain; empty: unknown
	// KafkaAddress is the host:port Kafka clients reach the node at
	// (registered with the node; empty: no Kafka listener).
	KafkaAddress string
}

// Config configures a Core. The node runs the metadata raft group over
// Nodes, registers itself there with its Nodes entry's Address and Rack,
// and starts and stops the partition replicas the metadata state places on
// it: production, tests and the simulator all run this one path.
type Config struct {
	ID NodeID
	// Nodes lists every node of the cluster, this one included, the same on
	// every node: the metadata group's voters, and addresses for leader
	// hints and Metadata answers until the nodes registered.
	Nodes []Peer
	// Join: this node joins a running cluster that registered it (strand
	// node add / serve --join): its metadata group starts empty, is never
	// bootstrapped, and waits for the metadata leader to add it (members.go).
	// Made durable on the first Open, so a restart without Join still
	// never bootstraps.
	Join bool
	// TickDuration is the real time between two Tick calls (default 10 ms);
	// the Core reads no clock, so HandleAs turns wire timeouts in ms (fetch
	// max_wait_ms, admin timeout_ms) into ticks with it.
	TickDuration time.Duration
	Disk         raftlog.Disk
	Network      Network
	Clock        Clock
	Rand         *rand.Rand // the core's only randomness
	// Logger receives the core's and etcd raft's log records (nil:
	// discard). The core hands its handler records with a zero time (it
	// reads no clock); the server's handler stamps them.
	Logger *slog.Logger
	// Authorization turns ACL checks on (HandleAs): off, every request is
	// allowed. SuperUsers may do anything whatever the ACLs say.
	Authorization bool
	SuperUsers    []Principal
	// ElectionTicks and HeartbeatTicks count raft ticks (defaults 10, 1).
	ElectionTicks  int
	HeartbeatTicks int
	// TicksPerRaftTick: Core.Tick ticks every raft group once every this
	// many calls (default 1), so request deadlines and long polls (counted
	// in Core.Tick calls) can have a finer grain than raft's timeouts
	// without ticking thousands of groups that often. The server ticks
	// every 10 ms and raft every 100 ms, as etcd's 100 ms tick.
	TicksPerRaftTick int
	// RequestTimeoutTicks fails a produce or fetch still waiting after this
	// many ticks (default 50).
	RequestTimeoutTicks int
	SegmentBytesMax     int64
	// LogTailCacheBytesMax bounds each raft log's cache of its newest
	// entries (raftlog.Options.TailCacheBytesMax): 0 takes raftlog's
	// default; negative turns the cache off, so every read of an entry
	// (apply, appends to followers, fetches) goes to the disk.
	LogTailCacheBytesMax int64
	// LogTailCacheBytesTotal bounds the tail caches of all the node's logs
	// together (default 256 MiB): each gets an equal share, at most
	// LogTailCacheBytesMax and at least 64 KiB, so a node hosting 2,000
	// replicas does not cache 8 MiB of each (16 GiB).
	LogTailCacheBytesTotal int64
	// FetchReadBytesPerProcess bounds the batch bytes fetches read in one
	// Process call (default 4 MiB; one read may pass it by its own size):
	// reads past it wait for the next call (fetchbudget.go).
	FetchReadBytesPerProcess int64
	// CheckpointEntries writes an engine checkpoint every this many applied
	// entries of a group (default 1024), so a restart replays at most that
	// many entries instead of the whole log.
	CheckpointEntries uint64
	// MinFreeBytes is the free-space floor: below it (as the Disk reports
	// through raftlog.SpaceReporter) the node refuses produce with
	// ErrNotEnoughSpace until space returns (diskfull.go). 0: refuse only
	// when the disk is full.
	MinFreeBytes int64
	// DiskSlowAfter and DiskStallAfter are the disk watchdog's thresholds
	// (stall.go): a storage job in flight longer than DiskSlowAfter is
	// logged with its file (default: half of DiskStallAfter); while one is
	// in flight longer than DiskStallAfter (default: one election timeout)
	// the node hands its leaderships on and refuses produce with
	// ErrDiskStalled. Counted in ticks of TickDuration.
	DiskSlowAfter  time.Duration
	DiskStallAfter time.Duration
	// CatchUpBytesPerSec bounds the raft entry bytes per second this node
	// sends, as a leader, to each follower node far behind (catching up
	// after an outage, a wipe or a repair), so producers are not starved
	// (throttle.go). 0: unlimited.
	CatchUpBytesPerSec int64
	// CompactionBytesPerSec bounds the bytes per second this node's
	// compaction passes read and write, all replicas together, as Kafka's
	// log.cleaner.io.max.bytes.per.second (compaction_replica.go's
	// passBudget): a pass's write runs in steps of a tenth of a second of
	// it, and a pass holds between its steps while over it, never the
	// loop. 0: unlimited.
	CompactionBytesPerSec int64
	// TierUploadBytesPerSec bounds the bytes per second this node's tier
	// uploads put, all partitions together (tier_throttle.go): an upload
	// starts only while the budget is not in debt, and each charges its
	// object's bytes when it starts. 0: unlimited.
	TierUploadBytesPerSec int64
	// PendingRequestsMax bounds the produces and fetches waiting in one
	// group (default 4096); beyond it requests fail with ErrBusy.
	PendingRequestsMax int
	// RetentionCheckTicks: every this many ticks a replica rolls an old
	// segment, starts a compaction and, as leader, applies retention
	// (default 100).
	RetentionCheckTicks int
	// SegmentAgeMax caps every topic's segment.ms (0: no cap); `strand
	// dev` sets it low so retention shows within a minute.
	SegmentAgeMax time.Duration
	// ObjectStore is the bucket tiered topics upload their sealed
	// segments to (tier.go); nil: none, and remote.storage.enable=true is
	// refused at create and alter.
	ObjectStore objstore.Store
	// TieredStorageUnfinished lets a create or alter through this node
	// set remote.storage.enable=true although tiered storage is
	// unfinished (issue 27: uploads, deletion, local retention and
	// remote reads are built, recovery and the figures are not;
	// engine/tier's "Next: node integration"), for the simulator and
	// tests of the parts built. Off,
	// such a request is refused as not enforced yet.
	TieredStorageUnfinished bool
	// PrefixChunkBytes bounds the batches of one chunk a replica sends a
	// peer installing its compacted prefix (compaction_install.go; at
	// least one batch a chunk). Default 256 KiB; the simulator sets it
	// small so its small prefixes take several chunks.
	PrefixChunkBytes int
	// Observer, when set, sees every entry a replica applies.
	Observer ApplyObserver
	// CoordinatorRestored, when set, sees the state of every fresh group
	// or transaction coordinator once its first catch-up reached next (and
	// of a throwaway one the leader restores each sweep), so the simulator
	// can compare it with a replay of the partition's whole history.
	CoordinatorRestored CoordinatorObserver
	// Groups configures the consumer-group coordinators (groups.go).
	Groups GroupsConfig
	// Txn configures the transaction coordinators (txn.go).
	Txn TxnConfig
	// WAL turns on the node-wide write-ahead log (wal.go): every round's
	// appends of every group go to their logs without an fsync and to one
	// shared log in directory "wal", and one fsync of it releases them
	// all. Unset: one sync per written log per round.
	WAL bool
	// WALBytesMax is the write-ahead log's size past which every log is
	// synced and its old segments removed; 0 takes walBytesMaxDefault.
	WALBytesMax int64
	// WALLogFlushBytes is how much a log may be written, in WAL mode,
	// before it is fsynced in the background on its own (0 takes
	// walLogFlushBytesDefault): a log's writes reach the device in
	// steady pieces instead of all at once when the write-ahead log
	// rotates, which would hold every acknowledgement behind them.
	WALLogFlushBytes int64
	// plantedBugs is empty in production builds; with -tags simbugs it
	// holds Bugs, the simulator's planted-bug switches (bugs_simbugs.go).
	//lint:ignore U1000 empty without -tags simbugs
	plantedBugs
}

// Acks selects when a produce completes (R12).
type Acks int8

// The acks levels, as Kafka's acks=0, acks=1 and acks=all.
const (
	AcksNone   Acks = 0  // complete when accepted by the leader, before proposing
	AcksLeader Acks = 1  // complete when the leader's own log holds it durably
	AcksAll    Acks = -1 // complete when committed and applied: offsets are known
)

// ErrCorruptBatch: a produce batch fails its CRC or framing (damaged on
// the way, most likely): refused before anything is written, so a resend
// of the intact bytes is safe. Such an error also matches
// ErrInvalidRequest.
var ErrCorruptBatch = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH, "node: corrupt batch")

// Errors of requests; a request's Err wraps one of these (errors.Is),
// and each carries its wire code (strandpb.CodeOf).
var (
	ErrNotLeader             = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, "node: not leader")
	ErrUnknownTopicPartition = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "node: unknown topic or partition")
	ErrRecordTooLarge        = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE, "node: record too large")
	ErrInvalidRequest        = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: invalid request")
	ErrOffsetOutOfRange      = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, "node: offset out of range")
	ErrTimeout               = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_TIMEOUT, "node: request timed out")
	ErrOutOfOrderSequence    = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE, "node: out of order sequence")
	ErrProducerFenced        = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED, "node: producer fenced")
	ErrStopped               = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, "node: stopped")
	// ErrUnknownProducer: an idempotent producer the partition has no
	// record of sent a sequence other than 0; it must start a new epoch.
	ErrUnknownProducer = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID, "node: unknown producer")
	// ErrInvalidRecord: a record the topic cannot take (a record without a
	// key sent to a compacted topic); nothing of the batch was written.
	ErrInvalidRecord = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_RECORD, "node: invalid record")

	// ErrBusy: too many requests wait in the partition; nothing was
	// proposed; retriable at the same leader.
	ErrBusy = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_BUSY, "node: too many pending requests")
	// ErrStorage: the replica could not read its own log (a failed or
	// corrupt read); retriable, possibly on another replica.
	ErrStorage = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, "node: storage read failed")
	// ErrNotController: the metadata group has no leader this node knows
	// (or the node runs without one); nothing was proposed; retriable.
	ErrNotController = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER, "node: no metadata group leader")
)

// Outcomes of a produce that was already proposed when the node stopped
// waiting for it. Both wrap ErrTimeout: the entry may still commit, so the
// client must treat the write as maybe written (retry with the same
// producer sequence), never as refused. ErrNotLeader and ErrStopped are
// kept for refusals before anything was proposed.
var (
	ErrLeadershipLost = fmt.Errorf("%w: leadership changed after the entry was proposed; it may still commit", ErrTimeout)
	ErrStoppedWaiting = fmt.Errorf("%w: node stopped after the entry was proposed; it may still commit", ErrTimeout)
	// ErrReplicaStopped: the replica stopped (its topic deleted, or the
	// partition moved off this node) while the produce waited; the entry
	// may commit on the other replicas, and a replica that has not applied
	// the delete yet serves it to readers.
	ErrReplicaStopped = fmt.Errorf("%w: the replica stopped (topic deleted or partition moved) after the entry was proposed; it may still commit", ErrTimeout)
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
	// Transactional: the batch belongs to the producer's open transaction
	// of TransactionalID (txn_produce.go).
	Transactional   bool
	TransactionalID string
}

// ProduceResult is the outcome of a produce. BaseOffset is -1 when not known
// (acks 0 and 1: offsets are assigned when the entry is applied).
type ProduceResult struct {
	Err        error
	BaseOffset int64
	Leader     NodeID // the leader this node knows, for ErrNotLeader; 0 if none
	// Duplicate: an idempotent retry of a batch already written, whose
	// original BaseOffset is given (acks=all only).
	Duplicate bool
}

// FetchRequest reads committed batches from Offset.
type FetchRequest struct {
	TopicPartition
	Offset   int64
	MaxBytes int32
	// Isolation: ReadCommitted reads below the last stable offset only.
	Isolation engine.Isolation
	// Markers: serve transaction markers too, as batches with Marker set
	// (the Kafka listener's control batches); otherwise they are skipped.
	Markers bool
}

// FetchedBatch is one stored batch, its bytes served as stored.
type FetchedBatch struct {
	BaseOffset   int64
	AppendTimeMs int64
	Batch        []byte
	// Producer is the producer id, epoch and base sequence the entry
	// carries (ID -1: not idempotent), for protocols that serve them.
	Producer engine.Producer
	// Transactional: the batch was written in its producer's transaction
	// (the Kafka listener serves it with the transactional bit).
	Transactional bool
	// Marker is set, and Batch empty, when the offset holds a transaction
	// marker (FetchRequest.Markers only); Producer is the marker's.
	Marker *engine.Marker
}

// nextOffset is the offset after b: a marker takes one offset.
func (b FetchedBatch) nextOffset() int64 {
	if b.Marker != nil {
		return b.BaseOffset + 1
	}
	if compact.IsCompacted(b.Batch) {
		return compactedNextOffset(b.BaseOffset, b.Batch) // a batch of the compacted prefix
	}
	return b.BaseOffset + int64(batchRecordCount(b.Batch))
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
	// LastStableOffset is the partition's at the read: every transaction
	// below it is decided (txn_fetch.go).
	LastStableOffset int64
	// forgotten are the marker offsets of aborted transactions a read of
	// the compacted prefix covered whose marker a pass removed: the answer
	// does not list them (compaction_fetch.go).
	forgotten []int64
	// through is the offset after the last entry the read accounted
	// for, past the transaction markers (and, in the compacted prefix,
	// control batches) it skipped after its last batch; 0 when it read
	// nothing. An answer that hands out all of Batches tells the reader
	// to go on from here (next_offset), or a reader at a marker at the
	// end of the log never moves past it.
	through int64
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
	// Digest hashes the replica's whole engine state as of AppliedIndex
	// (engine.Partition.Digest, metadata.State.Digest): replicas at the
	// same applied index must report the same digest, so the simulator
	// compares them at every index.
	Digest uint64
	// TailDigest hashes the state but the log start and the offset index
	// (engine.Partition.TailDigest): a replica that installed a raft
	// snapshot holds fewer batches below the agreed log start until it
	// applies the TRIM the snapshot anticipates, and is compared by it
	// meanwhile.
	TailDigest uint64
	// TopicID is the metadata topic id of the replica's topic incarnation
	// (0 for the metadata group and static replicas): a topic deleted and
	// re-created under the same name is another group, whose indexes,
	// terms and states have nothing to do with the old one's.
	TopicID uint64
	// Rejoining: the replica lost its state (a wiped disk, a repair) and
	// neither votes nor campaigns until it has caught up (rejoin.go), so it
	// does not count toward a majority that could elect a leader.
	Rejoining bool
}

// ApplyObserver, when set in Config, sees every entry a replica applies, in
// order, so the simulator can check that replicas applying index i applied
// the same entry. topicID tells incarnations of one topic name apart (as
// GroupStatus.TopicID). data must not be retained or modified.
type ApplyObserver func(tp TopicPartition, topicID, index, term uint64, data []byte)

// CoordinatorObserver, when set in Config, sees a group coordinator's
// (snap a *strandpb.GroupsSnapshot) or a transaction coordinator's (a
// *strandpb.TxnSnapshot) state as of next (the offset after the last record applied) when its
// first catch-up in its term completes: the restore of a snapshot and the
// replay after it. snap must not be retained past the call or modified.
type CoordinatorObserver func(tp TopicPartition, topicID uint64, next int64, snap proto.Message)

// Core is one node's state. It is not safe for concurrent use: one goroutine
// (the runtime's loop or the simulator) calls every method, and callbacks
// run on that goroutine inside those calls.
//
// Methods:
//
//	Open(cfg Config) (*Core, error)        // open or recover every hosted replica
//	(c *Core) Tick()                        // one clock tick for every group, in a fixed order
//	(c *Core) Receive(frame []byte)         // a RaftFrame from a peer; malformed frames dropped
//	(c *Core) Process() error               // Ready cycles until quiescent (bounded rounds):
//	                                        // send batched per peer, apply, complete, write, start syncs;
//	                                        // an error is fatal: the caller fail-stops the node
//	(c *Core) TakeSyncJobs(dst) []SyncJob   // the storage jobs (fsyncs, checkpoint writes) the host must run
//	(c *Core) SyncDone(token, err)          // a job's result: releases what it made durable
//	(c *Core) HandleAs(caller, req *strandpb.Request, respond) // the wire protocol's requests (handle.go)
//	(c *Core) Close() error                 // fails waiting requests with ErrStopped; no sync
//
// The runtime (node/server) also reads AdminView, Stats, ClusterID,
// MetadataStatus, MetadataNodes, MetadataVersion, SecurityState and
// LaggingReplicas. Status, AppendStatus, PartitionConfig and MetadataRole
// are the simulator's seam (simnet checks replicas with them); tests in
// this package drive produce and fetch directly (typed_api_test.go).
//
// Callbacks are queued and run at the end of the call that completed them,
// once the Core's state is consistent, so a callback may call into the Core.
// After Process returns an error the Core must only be closed.
type Core struct {
	cfg Config
	// groups: the metadata group first when there is one, then the
	// partition replicas sorted by (topic, partition): every loop runs in
	// this order.
	groups []*group
	byTP   map[TopicPartition]*group // partition replicas only
	// heldOut are the PrefixHeld reports the retention tick queued
	// (compaction_held.go), sent at its end.
	heldOut []heldOut
	rand    *rand.Rand // metadata proposal ids: seeded from Config.Rand and the boot count
	// incarnation is drawn from rand at each Open; liveness frames carry
	// it so peers see a restart however quick (quiesce.go).
	incarnation uint64

	services []tickService // what Tick runs, in order (services.go)

	// The metadata group, the
	// proposals waiting for their entry, and the metadata version whose
	// placement the hosted replicas reflect.
	meta        *metaGroup
	metaWaits   map[uint64]*metaWait // by proposal id; lookup only
	metaQueue   []*metaWait          // in proposal order, for timeouts
	metaVersion uint64
	// joinedCluster: this node joins or joined a running cluster (Config.Join
	// or the meta/joined marker), so an empty metadata log of its own never
	// means a new cluster (prepareRejoin).
	joinedCluster bool
	// sweepAt: the metadata group's last log index at Open; once it
	// applied that far, sweepUnplaced runs (sweep.go). 0: done, or
	// nothing to do.
	sweepAt       uint64
	registerWait  *metaWait // this node's RegisterNode in flight, if any
	registerAfter uint64    // tick before which no RegisterNode is retried
	// membershipAfter: tick before which the metadata leader proposes no
	// further membership change (members.go).
	membershipAfter uint64
	// removalSeen: the tick at which this node, leading the metadata
	// group, first held back the removal of a removed node that had not
	// caught up (members.go, removalDue). Looked up by id only.
	removalSeen map[NodeID]uint64
	// removedLogged: this node saw itself removed and said so once.
	removedLogged bool
	// leaderReports are the partition groups that became leader and may
	// need to tell the metadata group; reportWait is the ReportLeaders
	// proposal in flight, if any (see maybeReportLeaders).
	leaderReports []*group
	reportWait    *metaWait

	// sessions are the parked long-poll fetches of HandleAs, in parking
	// order; finished ones are dropped at the next Tick.
	// rejoining are the replicas still recovering from a lost disk
	// (rejoin.go), in the order they were opened.
	rejoining []*group
	// repairs are the replicas found corrupt, rebuilt at the next Tick
	// (repair.go).
	repairs []*group
	// freshLeads are new partitions' preferred replicas waiting to
	// campaign early (elect.go), in the order they were opened.
	freshLeads []*group
	space      spaceState // free disk space (diskfull.go)
	stall      stallState // storage jobs that do not return (stall.go)
	// throttle bounds catch-up bytes per follower node (throttle.go).
	throttle throttle
	// passBudget is the compaction passes' I/O budget (compaction_replica.go).
	passBudget passBudget
	// uploadFreeAt is when the tier uploads' budget is out of debt, on the
	// monotonic clock (tier_throttle.go).
	uploadFreeAt time.Duration

	sessions       []*fetchSession
	sessionsParked int         // parked and not finished: at most PendingRequestsMax
	fetchBudget    fetchBudget // fetch bytes read per Process call (fetchbudget.go)

	coord coordHost // consumer-group coordinators (groups.go)
	txn   txnHost   // transaction coordinators (txn.go)

	log coreLog // records carry node=ID

	ticks uint64 // Tick calls so far: the clock of request timeouts
	// nextWaitExpiry is at most the earliest deadline of a produce or read
	// wait still pending (0: none), so a Tick before it skips the scan of
	// every group's waits (noteWait).
	nextWaitExpiry uint64
	nextProposalID uint64
	nextReadID     uint64
	closed         bool
	// fatal is a storage failure found outside a write (a committed entry
	// that cannot be read back); Process returns it: fail-stop.
	fatal error
	stats Stats

	ready    readyMarks   // the groups the next round asks for a Ready (ready.go)
	liveness peerLiveness // when each peer was last heard from (quiesce.go)
	// statusSeq moves whenever a status may have changed (StatusSeq);
	// statusAllSeq is its value at the last change that may have moved
	// any replica's (statusChanged), and group.statusSeq one replica's
	// (groupStatusChanged): RefreshStatus reads again only those.
	statusSeq, statusAllSeq uint64
	// tailCacheBytes is the tail cache bound every log has now
	// (shareTailCaches).
	tailCacheBytes int64
	readies        []groupReady     // reused by processRound
	outbox         []outFrame       // one frame per destination node per round
	received       []rawRaftMessage // reused by Receive

	// The storage pipeline (pipeline.go): jobs started and not yet taken by
	// the host, jobs in flight by token (looked up only), the last token.
	syncQueue     []SyncJob
	syncsInFlight map[uint64]syncJob
	// coldReads are the fetches whose log read runs as a job, in start
	// order; coldWaiting those queued for a slot (fetch_cold.go).
	coldReads   []*coldRead
	coldWaiting []*coldRead
	// tierIndexes caches remote objects' indexes, least recently used
	// first (tier_read.go).
	tierIndexes   []tierIndex
	nextSyncToken uint64
	walState      // wal.go
	// replicaGuards cancel the checkpoint and snapshot jobs of a replica
	// directory before its files go (checkpoint_job.go).
	replicaGuards map[string]*jobGuard

	// completions queued by the current call, run at its end so callbacks
	// (which may call back into the Core) see consistent state.
	completions []func()
	flushing    bool
	// authParked are the requests the applied ACLs would refuse, waiting
	// for the next Process to start their metadata ReadIndex (auth.go).
	authParked []authWait
}
