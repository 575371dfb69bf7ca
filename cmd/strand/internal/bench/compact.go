package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The compact phase (issue 24's benchmark): --compact-keys keys updated
// --compact-updates times in all with --record-bytes values, written in
// --compact-rounds rounds to two one-partition RF 3 topics alike but for
// cleanup.policy: compact (passes running while it is written) and delete
// (none), the order reversed every other round, so produce throughput with
// compaction running and without comes from one run on one cluster. Then
// the compacted topic settles (no pass in flight, and no new generation
// for compactSettleQuiet), and the bench reports:
//
//   - compaction throughput: each pass the leader reports, from its
//     decision's time (the leader's clock, in the COMPACT entry) to the
//     first /metrics poll that shows it done (polled every
//     compactPollEvery, so each pass time is over by at most that), over
//     its input: the prefix it re-read (clean bytes before it) and the
//     records it took from the raft log (cleaned-to advance × the stored
//     bytes a record takes, from the delete topic's log); and the servers'
//     CPU while the topic settled, when compaction is all they do (every
//     replica runs each pass, so that is three passes' CPU);
//   - the topic's disk use after it settled, as a multiple of the live set
//     (keys × stored bytes a record): the leader's raft log plus its
//     prefix, and the prefix alone (the raft log is trimmed up to the
//     prefix, a segment behind).
//
// The producer's batches are --compact-batch-bytes (Kafka's batch.size
// default, 16 KiB). Both topics use segment.bytes --compact-segment-bytes, so the
// head rolls and can be cleaned, and min.cleanable.dirty.ratio 0.5
// (Kafka's default).

const (
	compactTopicOn     = "bench-compact"
	compactTopicOff    = "bench-nocompact"
	compactPollEvery   = 100 * time.Millisecond
	compactSettleQuiet = 5 * time.Second
)

// compactFigures are the compact phase's measurements beyond its rows.
type compactFigures struct {
	keys, updates  int
	valueBytes     int
	batchBytes     int
	segmentBytes   int64
	recordBytes    float64 // stored bytes a record takes (delete topic's log / its records)
	passes         int
	passTime       time.Duration
	passInput      float64 // bytes
	passDirty      float64 // of passInput, bytes taken from the raft log
	settle         time.Duration
	settled        bool
	logBytes       float64 // leader's raft log of the compacted topic
	prefixBytes    float64
	offLogBytes    float64 // leader's raft log of the delete topic
	generation     float64
	cleanedTo      float64
	highWatermark  float64
	passesObserved []compactPass
}

// compactPass is one pass as the bench saw it on the leader.
type compactPass struct {
	generation       float64
	decided, done    time.Time
	cleanBefore      float64
	cleanedFrom, end float64
}

// compactGauges are the compaction figures of one topic's partition 0 on
// one node's /metrics.
type compactGauges struct {
	leader, hwm, size         float64
	generation, cleanedTo     float64
	clean, dirty, decidedUnix float64
	inProgress                float64
	hasCompaction             bool
}

// compactPhases runs the compact phase, adding its rows, and keeps its
// figures for the table.
func (cb *Cluster) compactPhases(ctx context.Context, cl *benchCluster, add func(clusterRow, error) error) error {
	f := &compactFigures{keys: cb.compactKeys, updates: cb.compactUpdates, valueBytes: cb.recordBytes,
		batchBytes: cb.compactBatchBytes, segmentBytes: cb.compactSegmentBytes}
	cl.compact = f
	for _, topic := range []string{compactTopicOn, compactTopicOff} {
		b := cb.compactSettings(cl, topic, 0)
		if err := cl.ensureTopic(ctx, &b); err != nil {
			return err
		}
	}
	poll := cl.startCompactPoll(ctx)
	perRun := cb.compactUpdates / cb.compactRounds
	for round := range cb.compactRounds {
		order := []string{compactTopicOn, compactTopicOff}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, topic := range order {
			b := cb.compactSettings(cl, topic, int64(perRun))
			name := "compact on"
			if topic == compactTopicOff {
				name = "compact off"
			}
			if err := add(measured(cl, name, 1, func() (*benchResult, string, error) {
				r, err := b.runProduce(ctx)
				return &r, "", err
			})); err != nil {
				poll.stop()
				return err
			}
		}
	}
	err := add(measured(cl, "compact settle", 1, func() (*benchResult, string, error) {
		start := time.Now()
		settled := poll.waitSettled(ctx, cb.compactSettleMax)
		f.settle, f.settled = time.Since(start), settled
		if !settled {
			return nil, fmt.Sprintf("not settled within %s", cb.compactSettleMax), nil
		}
		return nil, "until no pass for " + compactSettleQuiet.String(), nil
	}))
	poll.stop()
	poll.finish(f)
	return err
}

// compactSettings is the bench settings of one compact run: keyed
// records over --compact-keys keys, count of them (0: create only).
func (cb *Cluster) compactSettings(cl *benchCluster, topic string, count int64) Settings {
	b := cb.SettingsFor(cl, topic, 1)
	b.keys, b.count, b.batchBytes = cb.compactKeys, count, cb.compactBatchBytes
	policy := "compact"
	if topic == compactTopicOff {
		policy = "delete"
	}
	b.configs = map[string]string{"cleanup.policy": policy, "segment.bytes": fmt.Sprint(cb.compactSegmentBytes),
		"min.cleanable.dirty.ratio": "0.5"}
	return b
}

// compactPoll polls every server's /metrics for the compacted topic while
// the phase runs.
type compactPoll struct {
	cl      *benchCluster
	hc      *http.Client
	scheme  string
	done    chan struct{}
	stopped chan struct{}
	// passes and lastSeen are written by the poller only and read after
	// stopped is closed; waitSettled sees the poller's state only through
	// changed.
	passes   []compactPass
	changed  chan compactState
	lastSeen [2]compactGauges // leader's gauges of the on and off topics at the last poll
}

// compactState is what waitSettled watches: the leader's generation and
// whether a pass is in flight, and when the poll saw them.
type compactState struct {
	generation float64
	inProgress bool
	at         time.Time
}

// startCompactPoll starts polling; stop ends it.
func (cl *benchCluster) startCompactPoll(ctx context.Context) *compactPoll {
	p := &compactPoll{cl: cl, hc: &http.Client{Timeout: 5 * time.Second}, scheme: "http://",
		done: make(chan struct{}), stopped: make(chan struct{}), changed: make(chan compactState, 1)}
	if cl.tls != nil {
		p.hc.Transport, p.scheme = &http.Transport{TLSClientConfig: cl.tls}, "https://"
	}
	go p.run(ctx)
	return p
}

func (p *compactPoll) run(ctx context.Context) {
	defer close(p.stopped)
	tick := time.NewTicker(compactPollEvery)
	defer tick.Stop()
	var prev compactGauges
	for {
		select {
		case <-p.done:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		on, off, okOn, okOff := p.leaderGauges(ctx)
		if !okOn {
			continue
		}
		now := time.Now()
		if okOff {
			p.lastSeen[1] = off
		}
		p.lastSeen[0] = on
		if on.generation > prev.generation && prev.hasCompaction {
			p.passes = append(p.passes, compactPass{generation: on.generation,
				decided: time.UnixMilli(int64(on.decidedUnix * 1000)), done: now,
				cleanBefore: prev.clean, cleanedFrom: prev.cleanedTo, end: on.cleanedTo})
		}
		if on.hasCompaction {
			prev = on
		}
		st := compactState{generation: on.generation, inProgress: on.inProgress > 0, at: now}
		select {
		case <-p.changed:
		default:
		}
		p.changed <- st
	}
}

// waitSettled waits until no pass is in flight and the generation has not
// moved for compactSettleQuiet, or max passed (false).
func (p *compactPoll) waitSettled(ctx context.Context, max time.Duration) bool {
	deadline := time.After(max)
	var gen float64
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		case st := <-p.changed:
			if st.inProgress || st.generation != gen || since.IsZero() {
				gen, since = st.generation, st.at
				if st.inProgress {
					since = time.Time{}
				}
				continue
			}
			if st.at.Sub(since) >= compactSettleQuiet {
				return true
			}
		}
	}
}

// stop ends the poller and waits for it.
func (p *compactPoll) stop() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	<-p.stopped
}

// finish fills f from what the poller saw.
func (p *compactPoll) finish(f *compactFigures) {
	on, off := p.lastSeen[0], p.lastSeen[1]
	if off.hwm > 0 {
		f.recordBytes = off.size / off.hwm
	}
	f.offLogBytes = off.size
	f.logBytes, f.prefixBytes, f.generation, f.cleanedTo, f.highWatermark = on.size, on.clean, on.generation, on.cleanedTo, on.hwm
	f.passesObserved = p.passes
	for _, ps := range p.passes {
		d := ps.done.Sub(ps.decided)
		if d <= 0 {
			continue
		}
		dirty := (ps.end - ps.cleanedFrom) * f.recordBytes
		f.passes++
		f.passTime += d
		f.passInput += ps.cleanBefore + dirty
		f.passDirty += dirty
	}
}

// leaderGauges reads the compacted and the delete topic's partition 0
// figures, each from the node that leads it (false when no server answers
// as its leader), with one scrape of each server.
func (p *compactPoll) leaderGauges(ctx context.Context) (on, off compactGauges, okOn, okOff bool) {
	for i, a := range p.cl.admins {
		body, err := getOnce(ctx, p.hc, p.scheme+a+"/metrics")
		if err != nil {
			continue
		}
		if g, ok := compactGaugesOf(body, compactTopicOn); ok && g.leader == float64(i+1) {
			on, okOn = g, true
		}
		if g, ok := compactGaugesOf(body, compactTopicOff); ok && g.leader == float64(i+1) {
			off, okOff = g, true
		}
	}
	return on, off, okOn, okOff
}

// compactGaugesOf reads topic's partition 0 figures out of a /metrics
// answer (false when the answer lacks the partition).
func compactGaugesOf(metrics []byte, topic string) (compactGauges, bool) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(metrics))
	if err != nil {
		return compactGauges{}, false
	}
	var g compactGauges
	get := func(name string, dst *float64) bool {
		for _, m := range families[name].GetMetric() {
			var t, part string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "topic":
					t = l.GetValue()
				case "partition":
					part = l.GetValue()
				}
			}
			if t == topic && part == "0" {
				*dst = m.GetGauge().GetValue()
				return true
			}
		}
		return false
	}
	found := get("strand_partition_leader", &g.leader)
	get("strand_partition_high_watermark", &g.hwm)
	get("strand_partition_size_bytes", &g.size)
	g.hasCompaction = get("strand_partition_compaction_generation", &g.generation)
	get("strand_partition_compaction_cleaned_to_offset", &g.cleanedTo)
	get("strand_partition_compaction_clean_bytes", &g.clean)
	get("strand_partition_compaction_dirty_bytes", &g.dirty)
	get("strand_partition_compaction_last_decision_timestamp_seconds", &g.decidedUnix)
	get("strand_partition_compaction_in_progress", &g.inProgress)
	return g, found
}

// printCompact prints the compact phase's figures under the table.
func printCompact(w io.Writer, rows []clusterRow, f *compactFigures) {
	if f == nil {
		return
	}
	var on, off struct {
		bytes, records int64
		elapsed        time.Duration
		cpu            float64
		runs           []string
	}
	var settleCPU, settleCPUSeconds float64
	for _, r := range rows {
		switch {
		case r.phase == "compact settle":
			settleCPU, settleCPUSeconds = r.serverCPU, r.serverCPU*r.span.Seconds()
		case r.result == nil:
		case r.phase == "compact on" || r.phase == "compact off":
			s := &on
			if r.phase == "compact off" {
				s = &off
			}
			s.bytes += r.result.bytes
			s.records += r.result.records
			s.elapsed += r.result.elapsed
			s.cpu += r.serverCPU * r.span.Seconds()
			s.runs = append(s.runs, fmt.Sprintf("%.1f", float64(r.result.bytes)/r.result.elapsed.Seconds()/(1<<20)))
		}
	}
	mib := func(b float64) float64 { return b / (1 << 20) }
	fmt.Fprintf(w, "\ncompact phase: %d keys, %d updates of %d-byte values (%.1f MiB of values) to each topic, segment.bytes %d, batches of %d bytes\n",
		f.keys, f.updates, f.valueBytes, mib(float64(f.updates)*float64(f.valueBytes)), f.segmentBytes, f.batchBytes)
	if on.elapsed > 0 && off.elapsed > 0 {
		fmt.Fprintf(w, "  produce: compaction running %.1f MiB/s (runs %s), without %.1f MiB/s (runs %s): %.0f%%\n",
			mib(float64(on.bytes))/on.elapsed.Seconds(), strings.Join(on.runs, ", "),
			mib(float64(off.bytes))/off.elapsed.Seconds(), strings.Join(off.runs, ", "),
			100*(float64(on.bytes)/on.elapsed.Seconds())/(float64(off.bytes)/off.elapsed.Seconds()))
	}
	if f.passes > 0 {
		fmt.Fprintf(w, "  compaction: %d passes on the leader, %.1f MiB in (%.1f MiB from the raft log, the rest prefix re-read) in %s: %.1f MiB/s a replica (pass time: from the decision to the leader's report applied, ±%s: gathering, writing, fsync, the switch and a raft round)\n",
			f.passes, mib(f.passInput), mib(f.passDirty), f.passTime.Round(time.Millisecond),
			mib(f.passInput)/f.passTime.Seconds(), compactPollEvery)
	} else {
		fmt.Fprintf(w, "  compaction: no pass seen done on the leader\n")
	}
	fmt.Fprintf(w, "  settle: %s (settled %v), servers' CPU %.2f cores (all three replicas compact)\n",
		f.settle.Round(100*time.Millisecond), f.settled, settleCPU)
	if extra := on.cpu - off.cpu + settleCPUSeconds; f.passes > 0 {
		// Both topics took the same records, so the servers' CPU beyond
		// the delete topic's, plus the settle's, is the compaction's (and
		// noise: other processes share the machine).
		fmt.Fprintf(w, "  compaction CPU ≈ %.1f s of the servers' (compacted runs %.1f s − delete runs %.1f s + settle %.1f s) for %.1f MiB in on each of 3 replicas: ≈ %.0f MiB per CPU-second\n",
			extra, on.cpu, off.cpu, settleCPUSeconds, mib(f.passInput), 3*mib(f.passInput)/max(extra, 1e-9))
	}
	live := float64(f.keys) * f.recordBytes
	if live > 0 {
		fmt.Fprintf(w, "  disk after settling (leader): raft log %.1f MiB + prefix %.1f MiB = %.1fx the live set (%.1f MiB: %d keys x %.0f B stored a record); prefix alone %.2fx; delete topic's log %.1f MiB\n",
			mib(f.logBytes), mib(f.prefixBytes), (f.logBytes+f.prefixBytes)/live, mib(live), f.keys, f.recordBytes,
			f.prefixBytes/live, mib(f.offLogBytes))
		fmt.Fprintf(w, "    (the raft log is trimmed up to the prefix, a segment behind, and holds the records not compacted yet; generation %.0f cleaned to %.0f of %.0f)\n",
			f.generation, f.cleanedTo, f.highWatermark)
	}
}
