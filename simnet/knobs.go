package simnet

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/strandlog/strand/node"
)

// Configuration knobs, FoundationDB style: each seed draws its nodes'
// node.Config from the ranges production allows, production's own value
// the most common draw of each knob, so the sample runs the timing and
// budgets the server runs (raft ticked every 10th Core tick, 5 s request
// timeouts, 4 MiB fetch reads per Process, ...) as well as the small
// values that make rare paths common (tiny segments and checkpoint
// intervals, a ticking raft, tight budgets). Every node of a run gets the
// same knobs, in every incarnation. Drawn from their own stream, after
// the fault mix: a new knob never shifts a fault draw.
//
// TestKnobsCoverEveryConfigField lists node.Config's fields by reflection
// and fails when one is neither varied by the draw nor set to production's
// value, unless knobExempt names it with a reason: a field added later
// without a draw fails it.

// streamKnobs is the knobs' random stream.
const streamKnobs uint64 = 9

// Production's node configuration: what node/server fills into a Config
// whose fields cmd/strand leaves zero (server.TickDefault,
// ElectionTicksDefault, HeartbeatTicksDefault, TicksPerRaftTickDefault,
// RequestTimeoutTicksDefault; TestKnobsProductionMatchesServer checks them
// against node/server's constants).
const (
	prodTickDuration        = 10 * time.Millisecond
	prodElectionTicks       = 10
	prodHeartbeatTicks      = 1
	prodTicksPerRaftTick    = 10
	prodRequestTimeoutTicks = 500
	// prodRetentionCheckTicks is node's default of a zero
	// RetentionCheckTicks, set explicitly because the incidents time
	// their clock step by it (incidents.go).
	prodRetentionCheckTicks = 100
)

// Knobs are a run's node configuration beyond the scenario's Options (the
// fields Options already draws: CheckpointEntries, SegmentBytesMax,
// LogTailCacheBytesMax, CatchUpBytesPerSec, RetentionCheckTicks, WAL).
// Zero fields take node's defaults, as in production.
type Knobs struct {
	// Timing: ElectionTicks and HeartbeatTicks count raft ticks, one every
	// TicksPerRaftTick Core ticks; RequestTimeoutTicks counts Core ticks.
	ElectionTicks       int
	HeartbeatTicks      int
	TicksPerRaftTick    int
	RequestTimeoutTicks int
	// Budgets.
	LogTailCacheBytesTotal   int64
	FetchReadBytesPerProcess int64
	PendingRequestsMax       int
	// The disk watchdog's thresholds (0: half of, and one, election
	// timeout).
	DiskSlowAfter  time.Duration
	DiskStallAfter time.Duration
	// SegmentAgeMax caps every topic's segment.ms (0: none).
	SegmentAgeMax time.Duration
	// The write-ahead log's rotation and per-log flush sizes, in runs with
	// Options.WAL.
	WALBytesMax      int64
	WALLogFlushBytes int64
	// Authorization (ACL checks on, super users) is not drawn here: the
	// operator actor, which sets up users and ACLs, owns it.
}

// FixedKnobs are the knobs the simulator ran before it drew them: raft
// ticked on every Core tick (a 100 ms election), node's 50-tick request
// timeout, node's budgets, the small WAL sizes. Options.FixedKnobs runs a
// seed with them, to measure what the draw adds (knobs_simbugs_test.go).
func FixedKnobs() Knobs {
	return Knobs{ElectionTicks: prodElectionTicks, HeartbeatTicks: prodHeartbeatTicks, TicksPerRaftTick: 1,
		WALBytesMax: walBytesMaxSim, WALLogFlushBytes: walLogFlushBytesSim}
}

// drawKnobs draws o's knobs from the knobs stream and, in some seeds,
// puts production's values into the knobs Options drew (checkpoint
// interval, segment size, retention check). With o.FixedKnobs it sets
// FixedKnobs and leaves Options as drawn.
func (o *Options) drawKnobs() {
	if o.FixedKnobs {
		o.Knobs = FixedKnobs()
		return
	}
	r := newStream(o.Seed, streamKnobs)
	k := drawTiming(r)
	k.LogTailCacheBytesTotal = prodOr[int64](r, 0.6, 0, 1<<20, 4<<20)
	k.FetchReadBytesPerProcess = prodOr[int64](r, 0.5, 0, 16<<10, 64<<10, 256<<10)
	k.PendingRequestsMax = prodOr(r, 0.6, 0, 64, 512)
	k.DiskStallAfter = prodOr(r, 0.6, 0, 2*time.Second, 3*time.Second)
	if k.DiskStallAfter > 0 {
		k.DiskSlowAfter = prodOr(r, 0.5, 0, k.DiskStallAfter/4)
	}
	k.SegmentAgeMax = prodOr(r, 0.6, 0, 500*time.Millisecond, 2*time.Second)
	k.WALBytesMax = prodOr[int64](r, 0.4, 0, walBytesMaxSim, 64<<10)
	k.WALLogFlushBytes = prodOr[int64](r, 0.4, 0, walLogFlushBytesSim, 8<<10)
	o.Knobs = k
	o.CheckpointEntries = prodOr(r, 0.4, 0, o.CheckpointEntries)
	o.SegmentBytesMax = prodOr(r, 0.4, 0, o.SegmentBytesMax)
	o.RetentionCheckTicks = prodOr(r, 0.4, prodRetentionCheckTicks, o.RetentionCheckTicks)
}

// drawTiming draws the ticks: production's in half the seeds, the old
// simulator's (raft every tick) in a fifth, the rest from the ranges
// node.Open accepts (ElectionTicks > HeartbeatTicks).
func drawTiming(r *rand.Rand) Knobs {
	k := Knobs{ElectionTicks: prodElectionTicks, HeartbeatTicks: prodHeartbeatTicks,
		TicksPerRaftTick: prodTicksPerRaftTick, RequestTimeoutTicks: prodRequestTimeoutTicks}
	switch p := r.Float64(); {
	case p < 0.5:
	case p < 0.7:
		k.TicksPerRaftTick, k.RequestTimeoutTicks = 1, 0
	default:
		k.TicksPerRaftTick = pick(r, 2, 5, 10)
		k.ElectionTicks = pick(r, 6, 10, 15)
		k.HeartbeatTicks = pick(r, 1, 1, 2)
		k.RequestTimeoutTicks = pick(r, 0, 100, 300, 500, 1000)
	}
	return k
}

// prodOr returns prod with probability p, else one of others uniformly.
// With p above each other value's share, production's value is the most
// common draw.
func prodOr[T any](r *rand.Rand, p float64, prod T, others ...T) T {
	if r.Float64() < p {
		return prod
	}
	return pick(r, others...)
}

// configure sets the knobs in a node's config (startNode).
func (k Knobs) configure(cfg *node.Config, o Options) {
	cfg.TickDuration = o.TickInterval
	cfg.ElectionTicks, cfg.HeartbeatTicks = k.ElectionTicks, k.HeartbeatTicks
	cfg.TicksPerRaftTick, cfg.RequestTimeoutTicks = k.TicksPerRaftTick, k.RequestTimeoutTicks
	cfg.LogTailCacheBytesTotal = k.LogTailCacheBytesTotal
	cfg.FetchReadBytesPerProcess = k.FetchReadBytesPerProcess
	cfg.PendingRequestsMax = k.PendingRequestsMax
	cfg.DiskSlowAfter, cfg.DiskStallAfter = k.DiskSlowAfter, k.DiskStallAfter
	cfg.SegmentAgeMax = k.SegmentAgeMax
	cfg.WALBytesMax, cfg.WALLogFlushBytes = k.WALBytesMax, k.WALLogFlushBytes
}

// electionTimeoutBase is the election timeout the fault mix's timing is
// drawn for: the fixed knobs' (10 raft ticks of one 10 ms Core tick).
const electionTimeoutBase = prodElectionTicks * prodTickDuration

// scaleFaultTiming stretches the fault mix's timing by the knobs'
// election timeout over electionTimeoutBase (10 with production's
// ticks), so every draw sees the faults per election timeout the
// simulator was tuned for: the mean gap between faults, how long a
// crashed node stays down and how long a network fault lasts. Unscaled, a
// seed with production's 1 s elections drew a fault every 150 ms, about
// seven per election timeout, and never elected a leader (seed 183 with
// drawn knobs: no produce in 60 s). The liveness bounds (HealAfterMax,
// LivenessBound, TimeLimit) are not scaled: 10 s is still ten of
// production's election timeouts, the faults that must fit in them
// (pauses, disk stalls, the quiet probe) scale on their own, and a restart
// after the heal restarts the bounds (checks.go restartedAfterHeal).
func (o *Options) scaleFaultTiming() {
	ticks := time.Duration(o.Knobs.ElectionTicks * max(o.Knobs.TicksPerRaftTick, 1))
	base := electionTimeoutBase / o.TickInterval
	if ticks <= base || base <= 0 {
		return
	}
	f := &o.Faults
	for _, d := range []*time.Duration{&f.Interval, &f.RestartMin, &f.RestartMax, &f.NetFaultMin, &f.NetFaultMax} {
		*d = *d * ticks / base
	}
}

// raftTick is one raft tick of the knobs in virtual time.
func (k Knobs) raftTick(o Options) time.Duration {
	return time.Duration(max(k.TicksPerRaftTick, 1)) * o.TickInterval
}

// electionTimeout is the knobs' election timeout in virtual time (raft
// draws each follower's from one to two of it).
func (k Knobs) electionTimeout(o Options) time.Duration {
	return time.Duration(k.ElectionTicks) * k.raftTick(o)
}

// countKnobs counts the run's draw in the coverage table: config/ticks-*
// says which timing ran, config/production-* which knobs took
// production's value.
func (w *world) countKnobs() {
	k := w.opts.Knobs
	switch {
	case k.TicksPerRaftTick == prodTicksPerRaftTick && k.ElectionTicks == prodElectionTicks &&
		k.HeartbeatTicks == prodHeartbeatTicks && k.RequestTimeoutTicks == prodRequestTimeoutTicks:
		w.coverage.Inc("config/ticks-production")
	case k.TicksPerRaftTick == 1:
		w.coverage.Inc("config/ticks-every-raft")
	default:
		w.coverage.Inc("config/ticks-other")
	}
	prod := map[string]bool{
		"checkpoint": w.opts.CheckpointEntries == 0, "segment": w.opts.SegmentBytesMax == 0,
		"fetch-budget": k.FetchReadBytesPerProcess == 0, "pending": k.PendingRequestsMax == 0,
		"disk-stall": k.DiskStallAfter == 0,
	}
	for name, ok := range prod {
		w.coverage.Declare("config/production-" + name)
		if ok {
			w.coverage.Inc("config/production-" + name)
		}
	}
}

// String prints the knobs that differ from production's, on one line.
func (k Knobs) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ticks{election=%d heartbeat=%d per-raft=%d request=%d}", k.ElectionTicks, k.HeartbeatTicks,
		k.TicksPerRaftTick, k.RequestTimeoutTicks)
	for _, f := range []struct {
		name string
		v    int64
	}{{"tailcache-total", k.LogTailCacheBytesTotal}, {"fetch-budget", k.FetchReadBytesPerProcess},
		{"pending", int64(k.PendingRequestsMax)}, {"disk-slow", int64(k.DiskSlowAfter)},
		{"disk-stall", int64(k.DiskStallAfter)}, {"segment-age", int64(k.SegmentAgeMax)},
		{"wal-bytes", k.WALBytesMax}, {"wal-flush", k.WALLogFlushBytes}} {
		if f.v != 0 {
			fmt.Fprintf(&b, " %s=%d", f.name, f.v)
		}
	}
	return b.String()
}
