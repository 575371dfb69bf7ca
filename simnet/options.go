package simnet

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Profile selects how faults evolve over a run.
type Profile uint8

// The profiles. Mixed picks Safety or Liveness per seed.
const (
	Safety   Profile = iota + 1 // faults throughout; safety checks only
	Liveness                    // faults, then heal: progress and unseen are required
	Mixed                       // each seed draws one of the two
)

// ParseProfile parses "safety", "liveness" or "mixed".
func ParseProfile(s string) (Profile, error) {
	switch s {
	case "safety":
		return Safety, nil
	case "liveness":
		return Liveness, nil
	case "mixed":
		return Mixed, nil
	}
	return 0, fmt.Errorf("simnet: unknown profile %q (safety, liveness, mixed)", s)
}

func (p Profile) String() string {
	switch p {
	case Safety:
		return "safety"
	case Liveness:
		return "liveness"
	case Mixed:
		return "mixed"
	}
	return fmt.Sprintf("profile(%d)", uint8(p))
}

// Faults is the fault mix of one run: which faults happen and how often.
type Faults struct {
	Interval      time.Duration // mean gap between fault actions; 0: none
	Crash         int           // relative weights of the fault kinds
	PartitionSym  int
	PartitionAsym int
	IsolateLeader int
	BitFlip       int
	FailRead      int
	FailSync      int
	PowerCut      int // a power cut armed to strike inside a checkpoint or a segment roll
	Wipe          int // a node's disk replaced by an empty one (within the damage budget)
	// WipeRejoin lets a wiped node restart on its empty disk, where it
	// must rebuild from its peers before it votes (node/rejoin.go; see
	// TestSimWipedNodeRejoinsSafely). The tests' -sim.wipe-rejoin flag
	// (default true) sets it; off, a wiped node stays down.
	WipeRejoin  bool
	ClockJump   int // a node's Realtime jumps by up to an hour, either way
	CrashLeader int // crash a group's leader, or a node while a group elects
	// Kill kills a node's process: unlike Crash (a power loss, which drops
	// unsynced data) the page cache survives and the disk keeps every
	// write. PowerCutRound cuts the power at a drawn disk write of a
	// node's next rounds (between the writes of one Ready);
	// PowerCutRecovery crashes a node and cuts the power again during its
	// recovery.
	Kill             int
	PowerCutRound    int
	PowerCutRecovery int
	// RollingRestartAfter, when > 0, starts a rolling restart once this
	// fraction of Ops was issued: each node in turn is killed inside a
	// round and restarts, as in an upgrade (every such run restarts,
	// restores checkpoints and recovers a page cache's unsynced writes,
	// not only the faulty ones).
	RollingRestartAfter float64
	// Pause stops a node's process for 3 to 8 election timeouts; its
	// input waits and arrives together when it resumes.
	Pause int
	// LeaderChain isolates a partition's leader, then each next leader,
	// right after it took proposals, three times over: followers collect
	// uncommitted tails from several leaders and must truncate them.
	LeaderChain int
	// DiskFull fills a live node's disk to just above its free-space
	// floor for a while (simnet/fulldisk.go).
	DiskFull int
	// IsolateFollower cuts one follower of a partition off for longer than
	// RetentionMs: long enough for retention to move the leader's log
	// start past it, so it must catch up by raft snapshot.
	IsolateFollower int
	// TickDriftPercent, when > 0, makes each node's ticks run up to this
	// many percent fast or slow (drawn per node for the run).
	TickDriftPercent int
	// ClientCorrupt is the chance that a client frame, either way, is
	// damaged in flight: a bit flipped inside a batch it carries, or the
	// frame cut short (corrupt.go).
	ClientCorrupt float64
	// StarveLeader starves a partition leader's host: its ticks come at a
	// third of their rate and its links to the other nodes are cut, while
	// clients still reach it (starve.go).
	StarveLeader int
	// OverloadAfter, when > 0, overloads one partition leader's host
	// (as StarveLeader) once this share of Ops was issued, while its
	// peers are healthy, and holds other faults until it ends
	// (overload.go); Overloads episodes in all, a second apart.
	OverloadAfter float64
	Overloads     int
	// Incidents are the run's scheduled fault chains (incidents.go), in
	// order, the first once IncidentAfter of Ops was issued.
	// DiskStallAfter, when > 0, stalls the fsyncs of one partition
	// leader's node once this share of Ops was issued, while its peers are
	// healthy, and checks its groups move (diskstall.go); DiskStalls
	// episodes in all, a second apart.
	DiskStallAfter float64
	DiskStalls     int
	Incidents      []Incident
	IncidentAfter  float64
	// LongOutage makes the disk replacement's lagging node a broker down
	// past the retention window (incidents.go brokerOutage).
	LongOutage      bool
	RestartMin      time.Duration // a crashed node restarts after [min, max]
	RestartMax      time.Duration
	NetFaultMin     time.Duration // a network fault lasts [min, max]
	NetFaultMax     time.Duration
	ClockSkewMax    time.Duration // each node's Realtime is off by up to this
	DamagedNodesMax int           // nodes allowed disk faults (each a minority of every group)
}

// Options is one run: the scenario, the workload and the fault mix.
type Options struct {
	Seed        uint64
	Profile     Profile // Safety or Liveness (Mixed is resolved by Choose)
	Nodes       int
	Partitions  int
	Replication int
	Ops         int // logical client operations to issue
	Producers   int
	Consumers   int // sequential readers
	Readers     int // random-offset readers
	// GroupMembers runs the consumer group (wire_libgroup.go) with this
	// many clientlib GroupConsumer members; 0: none.
	GroupMembers int
	// ClassicMembers runs, beside the group workload, this many members of
	// a second group speaking Kafka's classic protocol (wire_classic.go);
	// 0: none.
	ClassicMembers int
	// Txn runs the transactional workload (wire_txn.go).
	Txn bool
	// Compacted runs the compacted-topic workload (wire_kv.go); use
	// WithCompacted, which also sizes checkpoints and segments for it.
	Compacted bool
	// CompactCoordinators makes compaction passes run over the
	// coordinators' topics within a run (coordinatorTopicConfig: 1 s
	// segments, any dirt worth a pass). Off in the standard sample: there
	// seeds 23 and 32 (of 200) then ran out of events or did not drain,
	// not diagnosed yet; TestSimGroups, TestSimTxn and the Offsets bugs'
	// catch tests turn it on.
	CompactCoordinators bool
	// AppQuota is the produce and fetch quota (bytes per second per
	// node) the admin's bootstrap sets on the workload's principal
	// (User:app with authorization, User:ANONYMOUS without), so its
	// clientlib clients are throttled (their nodes pause their
	// connections); 0: none.
	AppQuota int64
	// Bug names a planted bug (BugNames; only in -tags simbugs builds).
	Bug string

	LatencyMin time.Duration // base one-way latency of a link, drawn per link
	LatencyMax time.Duration
	Jitter     time.Duration // extra per-message delay: reorders a link
	DropRate   float64
	DupRate    float64
	Faults     Faults

	// CheckpointEntries and SegmentBytesMax size the nodes' engine
	// checkpoints and log segments small, so restarts restore checkpoints
	// and logs roll within a run.
	CheckpointEntries uint64
	SegmentBytesMax   int64
	// WAL runs the nodes with the node-wide write-ahead log
	// (node.Config.WAL), rotated past walBytesMaxSim; the durability audit
	// then recovers logs as such a node does.
	WAL bool

	TickInterval  time.Duration // Core.Tick period of every node
	ClientTimeout time.Duration // the simulator's own clients give up an attempt after this (clientlib's: libRequestTimeout)
	OpDeadline    time.Duration // a producer gives up a logical op after this
	HealAfter     float64       // liveness: fraction of Ops issued before healing
	HealAfterMax  time.Duration // liveness: heal at this virtual time at the latest
	LivenessBound time.Duration // liveness: leaders and pending ops within this after heal
	// TimeLimit caps a run's virtual time: reaching it fails a liveness
	// run; a safety run merely stops there (progress is not its concern).
	TimeLimit time.Duration
	// EventsMax bounds the events of a run: an event storm (a message
	// loop between nodes) fails the seed instead of running forever.
	EventsMax int64
	// AuditOneIn samples the durability audit (audit.go): one in this many
	// durable states of a log has its promises checked; 1 checks every
	// promise, 0 turns the audit off.
	AuditOneIn int
	// LogTailCacheBytesMax is every node's node.Config.LogTailCacheBytesMax:
	// negative in some seeds, so raft's reads of fresh entries go to the
	// disk model instead of the tail cache.
	LogTailCacheBytesMax int64
	// CatchUpBytesPerSec is every node's node.Config.CatchUpBytesPerSec.
	CatchUpBytesPerSec int64
	// CompactionBytesPerSec is every node's
	// node.Config.CompactionBytesPerSec (features.go draws it).
	CompactionBytesPerSec int64
	// CheckStatusSeq reads every node's statuses after every Process, as
	// if node.Core.StatusSeq did not exist, and fails the run when they
	// changed while it stood still (a test of StatusSeq: status_test.go).
	CheckStatusSeq bool
	// DigestChecks compares each replica's whole engine state with the
	// reference replay (digests.go); off, replicas are compared by
	// high-water mark only.
	DigestChecks bool
	// KafkaCodec sends the produce and fetch requests of every other client
	// through the Kafka protocol (package kafkaproto, the listener's own
	// translation) instead of Strand's: same node path, Kafka's bytes.
	KafkaCodec bool
	// RetentionMs, RetentionBytes and SegmentMs are the topics' retention
	// configs (retention.ms, retention.bytes, segment.ms; 0: the topic
	// default), short enough that trims, compactions and snapshot
	// catch-ups happen in every run. RetentionCheckTicks is every node's
	// node.Config.RetentionCheckTicks.
	RetentionMs         int64
	RetentionBytes      int64
	SegmentMs           int64
	RetentionCheckTicks int
	// RecreateTopic deletes the second topic mid-run and creates it again
	// under the same name (wire_recreate.go).
	RecreateTopic bool
	// BatchRounds makes every node's loop round take the inputs that
	// arrive within a drawn moment of its first (loop.go), as production's
	// loop does; off, a round ends after every input unless the seed draws
	// batching.
	BatchRounds bool
	// AddPartitions grows the main topic mid-run in half the seeds
	// (wire_partitions.go); off in Standard.
	AddPartitions bool
	// Moves moves partitions of the main topic mid-run, with crashes
	// aimed at the moves (wire_moves.go); needs Nodes > Replication. Off
	// in Standard.
	Moves bool
	// Joins starts 3 nodes and joins the others mid-run (NodeAdmin ADD,
	// Config.Join), then in some seeds decommissions one, with crashes
	// aimed at the changes (wire_joins.go); needs Nodes > 3. Off in
	// Standard.
	Joins bool
	// Tiered creates the scenario's topics with remote.storage.enable
	// (tier.go): Choose draws it into a third of the seeds, from its own
	// stream.
	Tiered bool
	// Operator runs the operator actor (operator.go): every request type
	// sent and its outcome read back after the run, and authorization on
	// with ACLs in two seeds of three. On in Standard.
	Operator bool
	// Knobs are the nodes' timing and budgets, drawn per seed by Choose
	// (knobs.go) unless FixedKnobs, which keeps the simulator's old ones.
	Knobs      Knobs
	FixedKnobs bool
	// StopAtFailure ends the run at its first failed check, skipping the
	// rest and the final checks: for catch-rate sweeps of planted bugs
	// (TestSimCatchRate), where only "caught or not" matters.
	StopAtFailure bool
	// StopAtFailureWith, with StopAtFailure, ends the run only at a failed
	// check whose message contains it: a pin that wants a particular check
	// to catch its bug (requireCatches' marker) stops as soon as that check
	// fails and, past any other failure, goes on as a whole run would.
	StopAtFailureWith string
}

// DefaultAuditOneIn is Standard's AuditOneIn: sampled to keep the run
// within its CPU budget (see audit.go for the figures).
const DefaultAuditOneIn = 6

// Standard returns the standard scenario for seed before the fault mix is
// drawn: 3 nodes, 8 partitions, RF=3, about 2,000 client operations.
func Standard(seed uint64, profile Profile) Options {
	return Options{
		Seed: seed, Profile: profile,
		Nodes: 3, Partitions: 8, Replication: 3, Ops: 2000,
		Producers: 6, Consumers: 3, Readers: 2,
		TickInterval:  10 * time.Millisecond,
		ClientTimeout: 300 * time.Millisecond,
		OpDeadline:    8 * time.Second,
		HealAfter:     0.5,
		HealAfterMax:  10 * time.Second,
		LivenessBound: 10 * time.Second,
		TimeLimit:     60 * time.Second,
		EventsMax:     200_000,
		AuditOneIn:    DefaultAuditOneIn,
		DigestChecks:  true,
		RecreateTopic: true,
		Operator:      true,
	}
}

// Choose draws the seed's network and fault mix from the faults stream and
// resolves a Mixed profile. The scenario fields of o are kept.
func Choose(o Options) Options {
	r := newStream(o.Seed, streamFaults)
	if o.Profile == Mixed || o.Profile == 0 {
		o.Profile = Safety
		if r.IntN(2) == 1 {
			o.Profile = Liveness
		}
	}
	o.LatencyMin = time.Duration(between(r, 200, 1000)) * time.Microsecond
	o.LatencyMax = o.LatencyMin + time.Duration(between(r, 0, 4000))*time.Microsecond
	o.Jitter = time.Duration(between(r, 0, 3000)) * time.Microsecond
	o.DropRate = pick(r, 0, 0, 0.01, 0.05)
	o.DupRate = pick(r, 0, 0, 0.01, 0.05)
	f := &o.Faults
	f.Interval = time.Duration(pick(r, 0, 150, 300, 600, 1200)) * time.Millisecond
	w := func() int { return int(pick(r, 0, 1, 2, 4)) }
	f.Crash, f.PartitionSym, f.PartitionAsym, f.IsolateLeader = w(), w(), w(), w()
	f.BitFlip, f.FailRead, f.FailSync = w(), w(), w()
	f.RestartMin = time.Duration(between(r, 10, 200)) * time.Millisecond
	f.RestartMax = f.RestartMin + time.Duration(between(r, 0, 1000))*time.Millisecond
	f.NetFaultMin = time.Duration(between(r, 50, 300)) * time.Millisecond
	f.NetFaultMax = f.NetFaultMin + time.Duration(between(r, 0, 1500))*time.Millisecond
	f.ClockSkewMax = time.Duration(pick(r, 0, 0, 50, 5000)) * time.Millisecond
	f.DamagedNodesMax = (o.Replication - 1) / 2
	o.CheckpointEntries = pick[uint64](r, 16, 32, 64, 128, 256)
	o.SegmentBytesMax = pick[int64](r, 8<<10, 32<<10, 64<<10)
	f.PowerCut, f.ClockJump, f.CrashLeader = w(), w(), w()
	// A wipe spends the seed's disk-damage budget for good (the node
	// comes back empty and rebuilds from its peers: node/rejoin.go; with
	// WipeRejoin off it stays down). Drawn into half the seeds, with
	// low weights: the others keep their budget for bit flips and failed reads.
	f.Wipe = int(pick(r, 0, 0, 1, 2))
	f.Kill, f.PowerCutRound, f.PowerCutRecovery = w(), w(), w()
	if r.IntN(4) != 0 {
		f.RollingRestartAfter = float64(between(r, 30, 80)) / 100
	}
	f.Pause, f.LeaderChain = w(), w()
	f.TickDriftPercent = int(pick(r, 0, 0, 10, 50))
	if r.IntN(3) == 0 {
		o.LogTailCacheBytesMax = -1
	}
	f.DiskFull = int(pick(r, 0, 0, 1, 2))
	if r.IntN(3) == 0 {
		// The catch-up throttle in a third of the seeds, tight enough to
		// bite (node/throttle.go).
		o.CatchUpBytesPerSec = pick[int64](r, 64<<10, 256<<10, 1<<20)
	}
	// Drawn last, so the draws above stay what they were.
	// Shorter retention deletes so much unread that the indefinite
	// produces among it (credits of the log model) make the
	// linearizability check time out.
	o.RetentionMs = pick[int64](r, 8000, 12000, 16000)
	o.RetentionBytes = pick[int64](r, -1, -1, 96<<10, 192<<10)
	o.SegmentMs = pick[int64](r, 300, 700, 1500)
	o.RetentionCheckTicks = int(pick(r, 10, 20, 50))
	f.IsolateFollower = int(pick(r, 3, 6, 9))
	f.ClientCorrupt = pick(r, 0, 0.003, 0.01, 0.03)
	f.StarveLeader = w()
	if r.IntN(8) != 0 { // 7 seeds in 8 (3 in 4: LeaseReads 12/20; 7 in 8: 14/20)
		f.OverloadAfter = float64(between(r, 20, 60)) / 100
		f.Overloads = int(between(r, 1, 3))
	}
	f.Incidents = drawIncidents()
	f.IncidentAfter = float64(between(r, 2, 8)) / 100
	f.LongOutage = r.IntN(8) != 0
	if r.IntN(2) == 0 { // half the seeds: disk stalls (diskstall.go)
		f.DiskStallAfter = float64(between(r, 10, 60)) / 100
		f.DiskStalls = int(between(r, 1, 3))
	}
	o.drawKnobs()                             // from its own stream
	o.scaleFaultTiming()                      // by the knobs' election timeout (knobs.go)
	o.Tiered = o.Tiered || drawTiered(o.Seed) // tier.go, from its own stream
	return o
}

// pick returns one of the values, uniformly.
func pick[T any](r *rand.Rand, values ...T) T { return values[r.IntN(len(values))] }

// String prints the options a seed chose, on one line.
func (o Options) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d profile=%s nodes=%d partitions=%d rf=%d ops=%d", o.Seed, o.Profile,
		o.Nodes, o.Partitions, o.Replication, o.Ops)
	fmt.Fprintf(&b, " checkpoint=%d segment=%d %v", o.CheckpointEntries, o.SegmentBytesMax, o.Knobs)
	fmt.Fprintf(&b, " retention{ms=%d bytes=%d segment.ms=%d check=%d}", o.RetentionMs, o.RetentionBytes, o.SegmentMs,
		o.RetentionCheckTicks)
	if o.Tiered {
		b.WriteString(" tiered")
	}
	fmt.Fprintf(&b, " latency=%v..%v jitter=%v drop=%g dup=%g", o.LatencyMin, o.LatencyMax, o.Jitter,
		o.DropRate, o.DupRate)
	f := o.Faults
	fmt.Fprintf(&b, " faults{every=%v crash=%d sym=%d asym=%d isolate=%d flip=%d failread=%d failsync=%d",
		f.Interval, f.Crash, f.PartitionSym, f.PartitionAsym, f.IsolateLeader, f.BitFlip, f.FailRead, f.FailSync)
	fmt.Fprintf(&b, " powercut=%d wipe=%d clockjump=%d crashleader=%d", f.PowerCut, f.Wipe, f.ClockJump, f.CrashLeader)
	fmt.Fprintf(&b, " kill=%d cutround=%d cutrecovery=%d rolling=%g", f.Kill, f.PowerCutRound, f.PowerCutRecovery,
		f.RollingRestartAfter)
	fmt.Fprintf(&b, " pause=%d chain=%d drift=%d%% diskfull=%d isolatefollower=%d", f.Pause, f.LeaderChain, f.TickDriftPercent, f.DiskFull, f.IsolateFollower)
	fmt.Fprintf(&b, " corrupt=%g starve=%d overload=%gx%d", f.ClientCorrupt, f.StarveLeader, f.OverloadAfter, f.Overloads)
	if f.DiskStallAfter > 0 {
		fmt.Fprintf(&b, " diskstall=%gx%d", f.DiskStallAfter, f.DiskStalls)
	}
	if len(f.Incidents) > 0 {
		fmt.Fprintf(&b, " incidents=%v@%g", f.Incidents, f.IncidentAfter)
		if f.LongOutage {
			b.WriteString("+long")
		}
	}
	if o.CatchUpBytesPerSec > 0 {
		fmt.Fprintf(&b, " catchup=%dB/s", o.CatchUpBytesPerSec)
	}
	if o.CompactionBytesPerSec > 0 {
		fmt.Fprintf(&b, " compaction-io=%dB/s", o.CompactionBytesPerSec)
	}
	if o.LogTailCacheBytesMax < 0 {
		b.WriteString(" tailcache=off")
	}
	if !o.RecreateTopic {
		b.WriteString(" norecreate")
	}
	if f.WipeRejoin {
		b.WriteString(" wiperejoin")
	}
	if o.KafkaCodec {
		b.WriteString(" kafka")
	}
	if fs := featuresString(o); fs != "" {
		b.WriteString(" features=" + fs) // features.go
	}
	fmt.Fprintf(&b, " restart=%v..%v net=%v..%v skew=%v}", f.RestartMin, f.RestartMax, f.NetFaultMin,
		f.NetFaultMax, f.ClockSkewMax)
	if bug := o.BugName(); bug != "" {
		fmt.Fprintf(&b, " bug=%s", bug)
	}
	return b.String()
}

// BugName names the planted bug of o, or "" when none.
func (o Options) BugName() string { return o.Bug }
