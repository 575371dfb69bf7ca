package simnet

import (
	"errors"
	"fmt"
	"github.com/strandlog/strand/clientlib"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/loop"
	"github.com/strandlog/strand/objstore/memstore"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// core is what the world drives of a node: node.Core's methods, the
// wire protocol's HandleAs included.
type core interface {
	Tick()
	Receive(frame []byte)
	Process() error
	HandleAs(caller node.Caller, req *strandpb.Request, respond func(*strandpb.Response))
	ConfirmMetadata(done func(error))
	Status() []node.GroupStatus
	AppendStatus(dst []node.GroupStatus) []node.GroupStatus
	RefreshStatus(statuses []node.GroupStatus, since uint64) []node.GroupStatus
	MetadataStatus() (node.GroupStatus, bool)
	MetadataLeader() (leader node.NodeID, version uint64, ok bool)
	StatusSeq() uint64
	Close() error
	TakeSyncJobs(dst []node.SyncJob) []node.SyncJob
	SyncDone(token uint64, err error)
	Stats() node.Stats
	MetadataVersion() uint64
	// SecurityState gives the applied credentials the node's SASL
	// sessions look up (sasl.go).
	SecurityState() (version uint64, creds []metadata.Credential, quotas []metadata.Quota)
	// ClusterID is the cluster id a connection's Hello names (wire.go).
	ClusterID() metadata.UUID
	// TierManifest, VerifyTier and VerifyTierLocal: the tiered-storage
	// checks (tier.go).
	TierManifest(tp node.TopicPartition) (tier.Manifest, uint64, uint64, bool)
	VerifyTier(tp node.TopicPartition, object func(key string) ([]byte, bool)) (int, error)
	VerifyTierLocal(tp node.TopicPartition) error
	// TierPrefix, TierLocal and Compactions: the replication checks
	// of tiered storage (tier_replicated.go).
	TierPrefix(tp node.TopicPartition) (string, bool)
	TierLocal(tp node.TopicPartition) (first, logStart int64, decided, done uint64, ok bool)
	Compactions() (decided, finished uint64)
	// RaftLogHolding: the compacted-records check (prefixheld.go).
	RaftLogHolding(tp node.TopicPartition) (node.RaftLogHolding, bool)
}

var _ core = (*node.Core)(nil)

// simNode is one simulated machine: a disk that outlives crashes, a clock,
// a network endpoint and, while up, a core.
type simNode struct {
	index    int
	id       node.NodeID
	disk     *memdisk.Disk
	cut      *cutDisk // the node's view of disk: disk behind a power switch
	clock    *nodeClock
	endpoint *Endpoint
	core     core
	// round is the core's loop round (loop.go), new at every start;
	// roundDue: the end of the current round is scheduled.
	round       *loop.Round
	roundDue    bool
	up          bool
	dead        bool   // its disk refuses to open: never restarts
	spare       bool   // outside Config.Nodes: down until it joins (wire_joins.go)
	incarnation uint32 // bumped at every crash and restart
	tickPhase   time.Duration
	// tickInterval is the node's tick period: Options.TickInterval, off by
	// the node's drift (its timer runs fast or slow).
	tickInterval time.Duration
	// pausedUntil: the node's process is stopped (a GC pause, a stalled
	// VM) until then; events for it wait and arrive together at resume.
	pausedUntil time.Duration
	starved     bool // its ticks run slow for a while (starve.go)
	damaged     bool // counted against the disk-fault budget
	flipped     bool // bits were flipped on its disk
	failReads   []string
	failSync    bool
	wiped       bool // its disk was replaced by an empty one (counts as damage)
	rejoins     rejoinSeen
	fullUntil   time.Duration // virtual time its full disk gets space back; 0: not full
	full        fullWatch     // the full-disk leadership check's state (fullcheck.go)
	restartDue  bool          // a restart event is queued
	// heldDown: an incident keeps the node down until it restarts it
	// (incidents.go); restarts the fault mix queued earlier wait.
	heldDown bool
	// diskStalled: its fsyncs hang (diskstall.go), parked in parkedSyncs
	// until the stall ends.
	diskStalled bool
	parkedSyncs []func()
	// syncQueue are the storage jobs waiting for one of the node's
	// storageWorkers, syncBusy the workers running one (storage.go).
	syncQueue []node.SyncJob
	syncBusy  int
	// recoveryCut, when > 0, cuts the power at the recoveryCut-th disk
	// write of the node's next recovery (Open).
	recoveryCut int
	// lastStatus is the status last checked, per group, so the checks
	// look only at what changed.
	lastStatus []node.GroupStatus
	statusBuf  []node.GroupStatus // process's reused buffer for the statuses
	// statusOf and statusSeq: the core and its StatusSeq when statusBuf
	// was read; process reads the statuses again only when either moved.
	// statusParts is how many of them are the replicas' (the metadata
	// group's follows).
	statusOf    core
	statusSeq   uint64
	statusParts int
	// lastStats are the core's counters at the last look (zero at start).
	lastStats node.Stats
}

// nodeClock is a node's view of virtual time: Monotonic is virtual time,
// Realtime a fixed epoch plus virtual time plus the node's skew.
type nodeClock struct {
	w    *world
	skew time.Duration
}

// simEpoch is Realtime's origin: fixed so runs replay.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// epochMillis is virtual time t as a record timestamp: milliseconds since
// the Unix epoch on the nodes' unskewed clock, so retention.ms ages records
// as it would in production.
func epochMillis(t time.Duration) int64 { return simEpoch.Add(t).UnixMilli() }

// Monotonic implements node.Clock.
func (c *nodeClock) Monotonic() time.Duration { return c.w.sched.now }

// Realtime implements node.Clock.
func (c *nodeClock) Realtime() time.Time { return simEpoch.Add(c.w.sched.now + c.skew) }

var _ node.Clock = (*nodeClock)(nil)

// world is one simulated cluster with its clients, run by one goroutine.
type world struct {
	// bucket is the run's object store, shared by every node and kept
	// across restarts (tier.go).
	bucket *memstore.Store
	// tierNewest is, per scenario partition and topic id, the newest raft
	// index any replica applied; tierCheckAt the virtual time of the next
	// check (tier.go).
	tierNewest  map[tierIncarnation]uint64
	tierCheckAt time.Duration
	// tierCommitted, tierPrefixes and tierCompactions are the replication
	// checks' state (tier_replicated.go): per incarnation its newest
	// applied manifest, its key prefix, and per node the compactions
	// already looked at.
	tierCommitted   map[tierIncarnation]tierCommittedState
	tierPrefixes    map[string]tierIncarnation
	tierCompactions []tierNodeCompactions
	opts            Options
	// skews is every node's clock skew history, in time order
	// (noteSkew): how far apart two Realtime readings of one virtual
	// interval can be (skewSpread; wire_kv.go's delete.retention.ms check).
	skews    []skewChange
	sched    scheduler
	net      *network
	nodes    []*simNode
	groupOf  map[node.TopicPartition]int // the topic's partitions, then the metadata group
	rngDisk  *rand.Rand
	rngFault *rand.Rand
	trace    traceHash
	events   int64
	// roundEnds are the batching rounds' end events (loop.go): one per
	// round, after inputs that counted, so not counted against EventsMax.
	roundEnds int64
	loop      loopOptions // the rounds' draws (loop.go)
	// deltasDeclared: the core counters' coverage names are declared
	// (addDelta).
	deltasDeclared bool
	checker        *checker
	hist           *history
	work           *workload
	planner        *planner
	stopped        bool
	// stoppedAtFailure: Options.StopAtFailure ended the run (Run skips
	// the final checks).
	stoppedAtFailure bool
	// libClients are the clientlib clients that ran a task (libtasks.go),
	// in order; libClientSeen is their set.
	libClients    []*clientlib.Client
	libClientSeen map[*clientlib.Client]bool
	failures      []string
	// inconclusive is the model check's timeout when it alone did not pass.
	inconclusive string
	// failureCount counts step failures, kept or not.
	failureCount int
	stats        Stats
	wire         *wireWorkload  // the clients and their transport (wire.go)
	durability   *durability    // the durability audit (audit.go)
	digests      *digests       // whole-state comparison of replicas (digests.go)
	held         *heldCheck     // every compacted record on a majority (prefixheld.go)
	offsets      *offsetsReplay // group coordinators' restores against the history (offsets_replay.go)
	coverage     *Coverage      // faults fired and rare events seen (coverage.go)
	// requestBody and requestRows: strandpb.Request's body oneof and
	// coverRequest's row per field index of the message.
	requestBody  protoreflect.OneofDescriptor
	requestRows  []string
	storage      *storage      // the nodes' fsyncs in flight (storage.go)
	incarnations *incarnations // per-incarnation slots of the checks (incarnations.go)
	corrupter    *corrupter    // damage to client frames in flight (corrupt.go)
	probe        livenessProbe // the quiet liveness probe (probe.go)
	elections    electionWatch // the election bound under faults (elections.go)

	// statusScratch is statusOf's reused buffer (it returns a copy of one
	// status): the fault planner, the probes and the stall checks ask often.
	statusScratch []node.GroupStatus
}

// Stats counts what happened in a run, for the verbose report.
type Stats struct {
	Crashes      int // planned crashes
	FailStops    int // a core reported a fatal error (or panicked on a faulty disk)
	Restarts     int // successful opens after the first
	OpenFailures int
	DeadNodes    int // disks that will never open again
	NetFaults    int
	BitFlips     int
	FailedReads  int
	FailedSyncs  int
	// The faults of a run's leadership changes, recovery and read path.
	CutsCheckpoint  int // power cut while writing a checkpoint (fired)
	CutsSegmentRoll int // power cut while rolling to a new log segment (fired)
	Wipes           int // a node's disk replaced by an empty one
	ClockJumps      int // a node's Realtime jumped
	CrashLeaders    int // a group's leader crashed (a leadership change follows)
	CrashElections  int // a node crashed while one of its groups had no leader
	StaleReads      int // fetches delivered to a believed leader cut off from a majority
	ReadsAnyReplica int // random-reader fetches sent to any node, not the cached leader
	ProducesOK      int
	ProducesLost    int // abandoned: indefinite or failed
	FetchesOK       int
	TimeLimited     bool // the run hit Options.TimeLimit
}

// add sums o into s (TimeLimited: any run hit the limit).
func (s *Stats) add(o Stats) {
	s.Crashes += o.Crashes
	s.FailStops += o.FailStops
	s.Restarts += o.Restarts
	s.OpenFailures += o.OpenFailures
	s.DeadNodes += o.DeadNodes
	s.NetFaults += o.NetFaults
	s.BitFlips += o.BitFlips
	s.FailedReads += o.FailedReads
	s.FailedSyncs += o.FailedSyncs
	s.CutsCheckpoint += o.CutsCheckpoint
	s.CutsSegmentRoll += o.CutsSegmentRoll
	s.Wipes += o.Wipes
	s.ClockJumps += o.ClockJumps
	s.CrashLeaders += o.CrashLeaders
	s.CrashElections += o.CrashElections
	s.StaleReads += o.StaleReads
	s.ReadsAnyReplica += o.ReadsAnyReplica
	s.ProducesOK += o.ProducesOK
	s.ProducesLost += o.ProducesLost
	s.FetchesOK += o.FetchesOK
	s.TimeLimited = s.TimeLimited || o.TimeLimited
}

func (s Stats) String() string {
	return fmt.Sprintf("crash=%d failstop=%d restart=%d openfail=%d dead=%d net=%d flip=%d failread=%d failsync=%d "+
		"cutckpt=%d cutroll=%d wipe=%d clockjump=%d crashleader=%d crashelection=%d staleread=%d anyreplica=%d "+
		"produced=%d abandoned=%d fetched=%d timelimited=%v",
		s.Crashes, s.FailStops, s.Restarts, s.OpenFailures, s.DeadNodes, s.NetFaults, s.BitFlips, s.FailedReads,
		s.FailedSyncs, s.CutsCheckpoint, s.CutsSegmentRoll, s.Wipes, s.ClockJumps, s.CrashLeaders, s.CrashElections,
		s.StaleReads, s.ReadsAnyReplica, s.ProducesOK, s.ProducesLost, s.FetchesOK, s.TimeLimited)
}

// newWorld builds the cluster of o (already through Choose), nodes down.
func newWorld(o Options) *world {
	w := &world{opts: o, trace: newTraceHash(), loop: drawLoop(o)}
	w.rngDisk = newStream(o.Seed, streamDisk)
	w.rngFault = newStream(o.Seed, streamFaults)
	w.groupOf = make(map[node.TopicPartition]int, o.Partitions+1)
	for g, tp := range groupTopics(o.Partitions) {
		w.groupOf[tp] = g
	}
	w.groupOf[metaTopicPartition] = o.Partitions
	for p := range groupOffsetsPartitions(o) {
		w.groupOf[node.TopicPartition{Topic: node.OffsetsTopic, Partition: int32(p)}] = o.Partitions + 1 + p
	}
	for p := range txnPartitions(o) {
		w.groupOf[node.TopicPartition{Topic: node.TransactionsTopic, Partition: int32(p)}] = o.Partitions + 1 + groupOffsetsPartitions(o) + p
	}
	for p := range txnWorkloadPartitions(o) { // wire_txn.go
		w.groupOf[txnWorkloadTP(p)] = o.Partitions + 1 + groupOffsetsPartitions(o) + txnPartitions(o) + p
	}
	if kvPartitions(o) > 0 { // wire_kv.go
		w.groupOf[kvTP] = o.Partitions + 1 + groupOffsetsPartitions(o) + txnPartitions(o) + txnWorkloadPartitions(o)
	}
	w.checker = newChecker(w)
	w.bucket = newBucket(o, w.checkTierPut) // tier.go, tier_replicated.go
	w.hist = newHistory(o.Partitions)
	clientCount := o.Producers + o.Consumers + o.Readers + 1 + o.GroupMembers + o.ClassicMembers + txnClients(o) + kvClients(o) // +1: the drain reader
	w.net = newNetwork(newStream(o.Seed, streamNetwork), o.Nodes, clientCount, &o)
	// Skews and tick phases are fixed for the whole run.
	skewRand := newStream(o.Seed, streamClock)
	driftRand := newStream(o.Seed, streamDrift)
	for i := 0; i < o.Nodes; i++ {
		n := &simNode{index: i, id: node.NodeID(i + 1), disk: memdisk.New()}
		n.cut = &cutDisk{d: n.disk}
		n.cut.durable = func(dir string) { w.digests.prefixStep(n, dir) } // prefixes.go
		n.clock = &nodeClock{w: w}
		if o.Faults.ClockSkewMax > 0 {
			m := int64(o.Faults.ClockSkewMax)
			n.clock.skew = time.Duration(between(skewRand, -m, m))
		}
		n.tickPhase = time.Duration(skewRand.Int64N(int64(o.TickInterval)))
		n.tickInterval = o.TickInterval
		if o.Faults.TickDriftPercent > 0 {
			// Drawn after the phase, from its own stream: seeds without
			// drift keep their skews and phases.
			d := int64(o.Faults.TickDriftPercent)
			n.tickInterval = o.TickInterval * time.Duration(100+between(driftRand, -d, d)) / 100
		}
		n.endpoint = &Endpoint{w: w, index: i}
		w.nodes = append(w.nodes, n)
		w.noteSkew(n)
	}
	w.coverage = newRunCoverage()
	countFeatures(w.coverage, o) // features.go
	w.storage = newStorage(o.Seed)
	if o.Faults.TickDriftPercent > 0 {
		w.coverage.Inc("run/tick-drift")
	}
	if o.LogTailCacheBytesMax < 0 {
		w.coverage.Inc("run/tail-cache-off")
	}
	w.countKnobs()
	w.countLoop()
	w.incarnations = newIncarnations(w)
	w.corrupter = newCorrupter(w)
	w.durability = newDurability(w)
	w.digests = newDigests(w)
	w.held = newHeldCheck(w)
	w.offsets = newOffsetsReplay(w)
	w.work = newWorkload(w)
	w.wire = newWireWorkload(w)
	w.planner = newPlanner(w)
	return w
}

// fail records a violated invariant; the run goes on so the trace stays
// whole, but the seed fails.
func (w *world) fail(format string, args ...any) {
	w.failureCount++
	msg := fmt.Sprintf("t=%v: ", w.sched.now) + fmt.Sprintf(format, args...)
	if w.failureCount <= failuresKept {
		w.failures = append(w.failures, msg)
	}
	if w.opts.StopAtFailure && strings.Contains(msg, w.opts.StopAtFailureWith) {
		w.stoppedAtFailure = true
		w.stop()
	}
}

// failuresKept bounds the step failures a run keeps (the first ones matter).
const failuresKept = 10

// skewChange is node's clock skew from at on.
type skewChange struct {
	at   time.Duration
	node int
	skew time.Duration
}

// noteSkew records n's clock skew as of now: its initial skew, a jump or
// a step.
func (w *world) noteSkew(n *simNode) {
	w.skews = append(w.skews, skewChange{at: w.now(), node: n.index, skew: n.clock.skew})
}

// skewSpread bounds how much more one Realtime interval read on the
// nodes' clocks can be than the virtual interval [from, to] it spans:
// the largest skew any node had in it less the smallest any had (the
// skew in effect at from counts, and every change after it up to to).
func (w *world) skewSpread(from, to time.Duration) time.Duration {
	atFrom := make([]time.Duration, len(w.nodes)) // each node's skew at from
	lo, hi := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	for _, c := range w.skews {
		switch {
		case c.at <= from:
			atFrom[c.node] = c.skew
		case c.at <= to:
			lo, hi = min(lo, c.skew), max(hi, c.skew)
		}
	}
	for _, d := range atFrom {
		lo, hi = min(lo, d), max(hi, d)
	}
	return hi - lo
}

// nodeConfig is node n's config in incarnation inc: the run's knobs and
// the simulator's disk, network, clock and hooks.
func (w *world) nodeConfig(n *simNode, inc uint32) node.Config {
	cfg := node.Config{
		ID:                    n.id,
		Disk:                  n.cut,
		Network:               n.endpoint,
		Clock:                 n.clock,
		Rand:                  newStream(w.opts.Seed, streamNode+uint64(n.id)<<16+uint64(inc)),
		SegmentBytesMax:       w.opts.SegmentBytesMax,
		CheckpointEntries:     w.opts.CheckpointEntries,
		LogTailCacheBytesMax:  w.opts.LogTailCacheBytesMax,
		WAL:                   w.opts.WAL,
		MinFreeBytes:          simMinFreeBytes,
		CatchUpBytesPerSec:    w.opts.CatchUpBytesPerSec,
		RetentionCheckTicks:   w.opts.RetentionCheckTicks,
		CompactionBytesPerSec: w.opts.CompactionBytesPerSec,
		// Passes over the compacted __strand_transactions within a run
		// when Options.CompactCoordinators, as the group workload's.
		Txn: node.TxnConfig{Partitions: int32(max(1, txnPartitions(w.opts))), Markers: node.PartitionMarkers{},
			SnapshotEvery: coordinatorSnapshotEvery(w.opts, 0), TopicConfig: coordinatorTopicConfig(w.opts)},
		Observer: func(tp node.TopicPartition, topicID, index, term uint64, data []byte) {
			w.checker.onApply(n, tp, topicID, index, term, data)
		},
		CoordinatorRestored: func(tp node.TopicPartition, topicID uint64, next int64, snap proto.Message) {
			w.checker.onCoordinatorRestored(n, tp, topicID, next, snap)
		},
	}
	cfg.ObjectStore, cfg.TieredStorageUnfinished = w.bucket, true // tier.go
	w.opts.Knobs.configure(&cfg, w.opts)
	w.wire.configure(&cfg)
	w.configureLoop(&cfg)
	plantBug(&cfg, w.opts.Bug)
	return cfg
}

// startNode opens n's core on its disk. An open failure (a corrupt or
// unreadable disk) leaves the node down; corruption is permanent.
func (w *world) startNode(n *simNode) {
	n.incarnation++
	inc := n.incarnation
	n.cut.resetAtRestart()
	n.pausedUntil = 0
	if n.recoveryCut > 0 {
		n.cut.armNow(cutRecovery, n.recoveryCut-1)
		n.recoveryCut = 0
	}
	cfg := w.nodeConfig(n, inc)
	truncates := n.disk.Truncates("log")
	c, err := w.callOpen(n, cfg)
	w.coverage.Add("event/recovery-truncate", int64(n.disk.Truncates("log")-truncates))
	if n.cut.armed == cutRecovery {
		if n.cut.cut {
			w.recoveryCutFired(n, c)
			return
		}
		n.cut.reset() // recovery wrote less than the cut waited for
	}
	if err != nil {
		w.traceNote(kindNodeOpen, n.index, uint64(inc), hashString(err.Error()))
		w.stats.OpenFailures++
		switch {
		case n.flipped: // damaged media: this replica is gone for good
			n.dead = true
			w.stats.DeadNodes++
		case n.hasFaults(): // failed reads or syncs: transient, retry later
		default:
			w.fail("node %d cannot open its healthy disk: %v", n.id, err)
			n.dead = true
		}
		w.clearDiskFaults(n)
		return
	}
	w.traceNote(kindNodeOpen, n.index, uint64(inc), 0)
	if inc > 1 {
		w.stats.Restarts++
		w.coverage.Add("event/checkpoint-restore", int64(checkpointedGroups(n)))
	}
	n.core = c
	n.round = w.newRound(n, c, inc)
	n.roundDue = false
	clear(n.syncQueue)
	n.syncQueue, n.syncBusy = n.syncQueue[:0], 0
	n.rejoins = rejoinSeen{}
	w.countRejoins(n)
	n.lastStats = node.Stats{}
	n.up = true
	w.durability.afterOpen(n)
	w.sched.schedule(n.tickPhase, &event{kind: evTick, node: n.index, incarnation: inc})
}

// crashNode stops n at once by a power loss: its core is dropped without a
// word, its disk loses what was not synced (and may tear the last write).
func (w *world) crashNode(n *simNode, why string) {
	w.stopNode(n, why, true)
}

// killNode stops n at once by killing its process: the core is dropped
// without a word, but the machine's page cache survives, so the disk keeps
// everything written, synced or not (a later power loss may still drop
// what was never synced).
func (w *world) killNode(n *simNode, why string) {
	w.stopNode(n, why, false)
}

// stopNode drops n's core; powerLoss crashes its disk too.
func (w *world) stopNode(n *simNode, why string, powerLoss bool) {
	if !n.up {
		return
	}
	n.up = false
	n.incarnation++ // pending ticks and replies of the old core are void
	c := n.core
	n.core, n.round = nil, nil
	w.guard(n, func() { _ = c.Close() })
	kind := kindNodeKill
	if powerLoss {
		kind = kindNodeCrash
		n.disk.Crash(w.rngDisk)
	}
	w.traceNote(kind, n.index, uint64(n.incarnation), hashString(why))
}

// recoveryCutFired ends a recovery the power cut struck: whatever Open
// returned, the machine is off, and its disk keeps only what was synced.
// The restart that follows recovers from what the cut recovery left.
func (w *world) recoveryCutFired(n *simNode, c core) {
	if c != nil {
		w.guard(n, func() { _ = c.Close() })
	}
	w.coverage.Inc("fault/power-cut-recovery")
	n.disk.Crash(w.rngDisk)
	n.cut.reset()
	w.traceNote(kindNodeCrash, n.index, uint64(n.incarnation), hashString("power cut during recovery"))
}

// scheduleRestart queues n's restart after the fault mix's delay.
func (w *world) scheduleRestart(n *simNode) {
	if n.dead || n.restartDue {
		return
	}
	n.restartDue = true
	f := w.opts.Faults
	d := time.Duration(between(w.rngFault, int64(f.RestartMin), int64(f.RestartMax)))
	w.sched.schedule(d, &event{kind: evRestart, node: n.index})
}

// failStop crashes n after its core reported a fatal error (a failed fsync,
// a corrupt read) and schedules its restart.
func (w *world) failStop(n *simNode, err error) {
	if !n.hasFaults() {
		// A node with a healthy disk must not die: this is a finding.
		w.fail("node %d fail-stopped with no disk fault injected: %v", n.id, err)
	}
	w.stats.FailStops++
	if n.cut.fired != 0 && n.cut.firedInCompacted() {
		w.coverage.Inc("fault/cut-in-compaction") // any kind: inside a pass's write or its switch
	}
	switch n.cut.fired {
	case cutCheckpoint:
		w.stats.CutsCheckpoint++
	case cutSegmentRoll:
		w.stats.CutsSegmentRoll++
	case cutCompaction:
		if w.cutKills(n, "compaction", "killed in a compaction pass: "+err.Error()) {
			return
		}
	case cutRound:
		if w.cutKills(n, "round", "killed in a round: "+err.Error()) {
			return
		}
	}
	w.crashNode(n, "failstop: "+err.Error())
	w.scheduleRestart(n)
}

// cutKills ends a cut that fired inside where (a round, a compaction
// pass): a kill (the page cache survives) kills n and schedules its
// restart and reports true; a power cut is only counted, and failStop
// crashes n.
func (w *world) cutKills(n *simNode, where, why string) bool {
	if !n.cut.kill {
		w.coverage.Inc("fault/power-cut-" + where)
		return false
	}
	w.coverage.Inc("fault/kill-" + where)
	w.killNode(n, why)
	w.scheduleRestart(n)
	return true
}

// hasFaults reports whether a disk fault was injected into n's disk.
func (n *simNode) hasFaults() bool {
	return n.damaged || n.failSync || len(n.failReads) > 0 || n.cut.cut
}

// clearDiskFaults ends n's transient disk faults (failed reads and syncs);
// flipped bits stay.
func (w *world) clearDiskFaults(n *simNode) {
	for _, name := range n.failReads {
		n.disk.FailReads(name, false)
	}
	n.failReads = nil
	n.disk.FailSync(false)
	n.failSync = false
	if !n.cut.cut {
		// A cut that fired stays until the restart (resetAtRestart): the
		// power is already off for this incarnation, whose core may report
		// the cut's error only at its next round (TestSimJoins seed 7: the
		// end-of-faults heal cleared a round's cut between the failed sync
		// and the fail-stop, which then read as a healthy disk's death, and
		// the disk kept its unsynced writes).
		n.cut.reset()
	}
	n.recoveryCut = 0
	w.endDiskStall(n)
}

// guard runs fn, a call into n's core. A panic with a disk fault injected
// into n is the core refusing damaged data: the node fail-stops. Any other
// panic is a bug and propagates.
func (w *world) guard(n *simNode, fn func()) (panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			if !n.hasFaults() {
				panic(r) // deferred: the traceback still shows where
			}
			panicked = true
			w.traceNote(kindNodePanic, n.index, uint64(n.incarnation), hashString(fmt.Sprint(r)))
		}
	}()
	fn()
	return false
}

// callOpen opens a core, turning a panic under disk faults into an error.
func (w *world) callOpen(n *simNode, cfg node.Config) (c core, err error) {
	panicked := w.guard(n, func() { c, err = node.Open(cfg) })
	if panicked {
		return nil, errors.New("simnet: open panicked on a faulty disk")
	}
	return c, err
}

// process ends n's round (loop.go: Process and the post-round steps),
// fail-stops it on error, checks its status and starts the storage jobs
// the round returned.
func (w *world) process(n *simNode) {
	if !n.up {
		return
	}
	var err error
	var out loop.Outcome
	sent := n.round.Stats().BootstrapRequests
	// The log truncations this call makes (a fail-stop's and the syncs'
	// included) are counted at its end; the first look declares the row.
	truncates, declared := n.disk.Truncates("log"), w.deltasDeclared
	defer w.countTruncates(n, truncates, declared)
	if w.guard(n, func() { out = n.round.Run(); err = out.Err }) {
		err = errors.New("panic under disk fault")
	}
	if err != nil {
		w.traceNote(kindNodeError, n.index, uint64(n.incarnation), hashString(err.Error()))
		w.failStop(n, err)
		return
	}
	w.digests.afterProcess(n)
	w.countRejoins(n)
	w.countRetention(n)
	w.deltasDeclared = true
	statuses, read := w.statuses(n)
	if read {
		w.checker.onStatus(n, statuses) // otherwise it would find each as checked last
	}
	w.durability.afterProcess(n, statuses)
	w.held.afterProcess(n, statuses)
	w.afterRound(n, sent)
	w.startSyncs(n, out.Jobs)
}

// statuses returns n's replicas' statuses and its metadata group's, read
// again only when the core's StatusSeq moved (or the core is a new one):
// otherwise they are the ones the checks saw last, and reading them after
// every Process (nine in ten changed nothing) was 5% of a run's CPU. When
// it moved, the core's RefreshStatus reads again only the replicas whose
// status may have changed. Options.CheckStatusSeq reads them all anyway
// and fails the run when they moved without StatusSeq, or when
// RefreshStatus kept one that a full read finds changed. read tells
// whether they were read again.
func (w *world) statuses(n *simNode) (statuses []node.GroupStatus, read bool) {
	seq := n.core.StatusSeq()
	same := n.statusOf == n.core
	if same && n.statusSeq == seq && !w.opts.CheckStatusSeq {
		return n.statusBuf, false
	}
	fresh := same && n.statusSeq == seq
	var kept []node.GroupStatus
	if fresh {
		kept = append(kept, n.statusBuf...)
	}
	if same {
		statuses = n.core.RefreshStatus(n.statusBuf[:n.statusParts], n.statusSeq)
	} else {
		statuses = n.core.AppendStatus(n.statusBuf[:0])
	}
	if w.opts.CheckStatusSeq && same {
		if full := n.core.AppendStatus(nil); !slices.Equal(full, statuses) {
			w.fail("node %d: RefreshStatus since StatusSeq %d kept a status a full read finds changed (now %d)",
				n.id, n.statusSeq, seq)
		}
	}
	n.statusParts = len(statuses)
	if st, ok := n.core.MetadataStatus(); ok {
		statuses = append(statuses, st)
	}
	if fresh && !slices.Equal(kept, statuses) {
		w.fail("node %d: statuses changed without node.Core.StatusSeq moving (%d)", n.id, seq)
	}
	n.statusBuf, n.statusOf, n.statusSeq = statuses, n.core, seq
	return statuses, true
}

// countTruncates adds n's log truncations since before (the count then)
// to the coverage: a map lookup only when there were some, or at the run's
// first look (declared false), which declares the row. A lookup per
// Process was 1% of a run's CPU.
func (w *world) countTruncates(n *simNode, before uint64, declared bool) {
	if d := n.disk.Truncates("log") - before; d > 0 || !declared {
		w.coverage.Add("event/log-truncate", int64(d))
	}
}

// sendFrame is Endpoint.Send: it schedules the frame's delivery, perhaps
// twice, unless the link drops it.
func (w *world) sendFrame(from int, to node.NodeID, frame []byte) {
	w.durability.onSend(from, frame)
	ti := int(to) - 1
	if ti < 0 || ti >= len(w.nodes) || ti == from {
		return
	}
	if w.net.isCut(from, ti) {
		return
	}
	if w.net.lost() {
		w.net.nodeDrops++
		return
	}
	w.sched.schedule(w.net.nodeDelay(from, ti), &event{kind: evFrame, node: ti, from: from, frame: frame})
	if w.net.duplicated() {
		dup := append([]byte(nil), frame...)
		w.sched.schedule(w.net.nodeDelay(from, ti), &event{kind: evFrame, node: ti, from: from, frame: dup})
	}
}

// addDelta counts d happenings of name. A zero delta only declares name,
// in the run's first look: the counters are looked at after every Process,
// and a map lookup per name each time was 2% of a run's CPU.
func (w *world) addDelta(name string, d uint64) {
	if d > 0 || !w.deltasDeclared {
		w.coverage.Add(name, int64(d))
	}
}

// countRetention adds what n's core did for retention since the last look
// to the coverage: segments rolled by age, trims proposed, compactions,
// raft snapshots sent and installed, compacted prefixes installed from a
// peer.
func (w *world) countRetention(n *simNode) {
	now, last := n.core.Stats(), n.lastStats
	w.addDelta("event/segment-roll-age", now.SegmentRolls-last.SegmentRolls)
	w.addDelta("event/trim-proposed", now.TrimsProposed-last.TrimsProposed)
	w.addDelta("event/compaction", now.Compactions-last.Compactions)
	w.addDelta("event/snapshot-sent", now.SnapshotsSent-last.SnapshotsSent)
	w.addDelta("event/snapshot-installed", now.SnapshotsInstalled-last.SnapshotsInstalled)
	w.addDelta("event/prefix-installed", now.PrefixInstalls-last.PrefixInstalls)
	w.addDelta("tier/remote-reads", uint64(now.TierReads-last.TierReads)) // tier.go
	w.addDelta("tier/remote-read-errors", uint64(now.TierReadErrors-last.TierReadErrors))
	w.addDelta("event/compaction-budget-held", now.CompactionBudgetHolds-last.CompactionBudgetHolds)
	if now.RemovalsForced > last.RemovalsForced && w.wire != nil && w.wire.joins != nil {
		w.wire.joins.forced = true
		w.coverage.Inc("event/removal-forced")
	}
	n.lastStats = now
}
