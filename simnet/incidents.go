package simnet

import (
	"slices"
	"strings"
	"time"

	"github.com/strandlog/strand/raftlog/memdisk"
)

// Incident is an operator-scale fault chain the run schedules (as the
// overload incident of overload.go is scheduled): a sequence of faults
// that line up as they do in real outages and that the random mix, whose
// faults overlap densely and at random, almost never builds. Each is
// general — it would catch any bug of its kind — and none knows which bug
// (if any) is planted.
type Incident uint8

// The incidents.
const (
	// IncidentDiskReplaced is "disk replaced during an outage": node L is
	// behind (a broker down past the retention window, with
	// Faults.LongOutage; else cut off from its peers for a moment) while X
	// and the third node A commit; X loses power and its disk is replaced
	// by an empty one; then A goes down as L comes back and X restarts
	// empty. X's vote alone decides whether L, which lacks committed
	// entries, can be elected: a node that lost its state must not vote
	// before it rebuilt (node/rejoin.go), so the groups wait for A.
	IncidentDiskReplaced Incident = iota + 1
	// IncidentRepairOutage is "repair under a concurrent failure": as
	// IncidentDiskReplaced, but X's disk keeps its data with damaged
	// sectors: bits flip in the newest log data of each of its partition
	// replicas, which X finds when it restarts and repairs (node/repair.go)
	// while A is down.
	IncidentRepairOutage
	// IncidentBrokerDown is "broker down longer than retention": not an
	// incident of its own but the first step of a disk replacement
	// (Faults.LongOutage, brokerOutage): L is a broker down while
	// the cluster's clocks step past the retention window, so it comes
	// back behind the leaders' compacted logs and must catch up by raft
	// snapshot (if no vote it should not have elects it first); meanwhile
	// a surviving broker's disk fills up for a while.
	IncidentBrokerDown
)

// incidentNames are the incidents' coverage names.
var incidentNames = [...]string{
	IncidentDiskReplaced: "incident/disk-replaced", IncidentRepairOutage: "incident/repair-outage",
	IncidentBrokerDown: "incident/broker-down",
}

// String is the incident's name without the coverage prefix.
func (i Incident) String() string {
	if int(i) < len(incidentNames) && incidentNames[i] != "" {
		return strings.TrimPrefix(incidentNames[i], "incident/")
	}
	return "incident?"
}

// incidentPoll is how often a due incident looks whether its time came and
// the cluster is healthy enough for it to start.
const incidentPoll = 20 * time.Millisecond

// incidentFullSlackBytes is the free space above the floor a disk that
// fills up during an incident keeps: the next writes reach the floor.
const incidentFullSlackBytes = 16 << 10

// incidentWaitMax bounds how long a due incident holds the random faults
// back so that the faults under way end and the cluster is whole.
const incidentWaitMax = 1500 * time.Millisecond

// healQueuedMax bounds how long the liveness heal waits for incidents
// that have not started: one is due only once a share of the operations
// was issued, and the faults the heal would end may keep the clients
// from issuing them (TestSimWAL's seed 13 issued 118 of the 120 due in
// a minute of unending faults). Past it the queued incidents are
// skipped, as when every operation was issued first; a running one is
// always waited for (its own steps end it).
const healQueuedMax = 10 * time.Second

// drawIncidents returns a seed's disk-loss incidents: the repair first,
// while the logs still hold the data it damages (the disk replacement may
// end a long outage whose clock step trims them).
func drawIncidents() []Incident {
	return []Incident{IncidentRepairOutage, IncidentDiskReplaced}
}

// incidents is the planner's incident state.
type incidents struct {
	queue   []Incident // still to run, in order
	running bool       // one is under way (its own steps end it)
	// waited is how long the due incident held the random mix back so
	// far, waiting for a whole cluster (at most incidentWaitMax).
	waited time.Duration
	// healDeferred: a liveness heal waits for the incidents (deferHeal).
	healDeferred bool
	// healAskedAt: when the deferred heal was asked (healQueuedMax).
	healAskedAt time.Duration
	// overloadTries counts the polls the queued overload waited for a
	// leader with healthy peers.
	overloadTries int
}

// scheduleIncidents arms the run's incidents (Faults.Incidents), the first
// once Faults.IncidentAfter of the operations were issued.
func (p *planner) scheduleIncidents() {
	f := p.w.opts.Faults
	if len(f.Incidents) == 0 {
		return
	}
	if len(p.w.nodes) < 3 {
		return // an incident needs three roles
	}
	for _, i := range f.Incidents {
		if i != IncidentDiskReplaced || f.WipeRejoin { // a replaced disk must rejoin
			p.inc.queue = append(p.inc.queue, i)
		}
	}
	if f.OverloadAfter > 0 && len(p.inc.queue) > 1 {
		p.inc.queue = slices.Insert(p.inc.queue, 1, incidentOverload)
	}
	p.w.sched.schedule(incidentPoll, &event{kind: evCall, node: -1, call: p.pollIncident})
}

// incidentBusy reports whether an incident runs or waits for its turn
// while the workload still issues operations: the liveness heal and the
// quiet probe wait for it (an outage an operator is handling is not
// over until its node is back).
func (p *planner) incidentBusy() bool {
	return p.inc.running || (p.incidentsQueued() && p.w.work.issued < p.w.work.budget())
}

// incidentsQueued reports whether incidents wait for their turn (before
// the quiet probe, which ends them).
func (p *planner) incidentsQueued() bool {
	return len(p.inc.queue) > 0 && !p.w.probe.ran
}

// deferHeal delivers the liveness heal once no incident is busy (once,
// however many heals were asked meanwhile).
func (p *planner) deferHeal() {
	if p.inc.healDeferred {
		return
	}
	p.inc.healDeferred = true
	quiet := false
	p.inc.healAskedAt = p.w.now()
	var poll func()
	poll = func() {
		if !p.inc.running && p.w.now() >= p.inc.healAskedAt+healQueuedMax {
			p.inc.queue = nil
		}
		if p.incidentBusy() {
			quiet = p.quietSetUp(quiet)
			p.w.sched.schedule(incidentPoll, &event{kind: evCall, node: -1, call: poll})
			return
		}
		p.inc.healDeferred = false
		p.w.sched.schedule(0, &event{kind: evLivenessHeal, node: -1})
	}
	p.w.sched.schedule(incidentPoll, &event{kind: evCall, node: -1, call: poll})
}

// quietSetUp ends the faults under way and holds the random mix back
// while a deferred liveness heal waits for a workload that does not run
// yet, and reports whether it did (quiet: it did before). The heal waits
// for the incidents, which come due once the clients issued
// IncidentAfter of the operations; the clients wait for the set-up
// (authorization, the topics), which retries without a deadline. Under
// production's timing (elections of one to two seconds) a fault every
// 150 ms keeps the metadata group leaderless through it: seeds 71 and 139
// waited, set-up for heal for incidents for clients for set-up, until the
// time limit. Once the clients run, every operation is bounded, so the
// wait ends; the faults resume as the heal waits for the incidents.
func (p *planner) quietSetUp(quiet bool) bool {
	w := p.w
	if w.wire.created {
		return quiet
	}
	if !quiet {
		w.coverage.Inc("event/quiet-set-up")
		p.healForIncident()
	}
	p.holdUntil = max(p.holdUntil, w.now()+incidentPoll)
	return true
}

// pollIncident starts the next incident when the workload got far enough
// and the cluster is whole; it gives up once every operation was issued.
func (p *planner) pollIncident() {
	w := p.w
	if len(p.inc.queue) == 0 || w.work.overtime || w.work.issued >= w.work.budget() || w.probe.ran || p.nodeDead() {
		p.inc.queue = nil
		return
	}
	due := float64(w.work.issued) >= w.opts.Faults.IncidentAfter*float64(w.opts.Ops)
	if due && w.now() >= p.holdUntil && w.wire.created && !p.clusterWhole() && p.inc.waited < incidentWaitMax {
		// Hold the random mix back while the faults under way end (a
		// restart, a heal), for a while.
		p.inc.waited += incidentPoll
		p.holdUntil = w.now() + incidentPoll
		p.liftFullDisks(false)
	}
	if !due || w.now() < p.holdUntil || !w.wire.created || !p.clusterWhole() {
		w.sched.schedule(incidentPoll, &event{kind: evCall, node: -1, call: p.pollIncident})
		return
	}
	p.inc.waited = 0
	next := p.inc.queue[0]
	p.healForIncident()
	for _, n := range w.nodes {
		if !n.up {
			w.sched.schedule(incidentPoll, &event{kind: evCall, node: -1, call: p.pollIncident})
			return
		}
	}
	var started bool
	switch next {
	case incidentOverload:
		started = p.overloadIncident()
	default:
		started = p.diskLossOutage(next, w.opts.Faults.LongOutage && next == IncidentDiskReplaced)
	}
	if !started {
		w.sched.schedule(incidentPoll, &event{kind: evCall, node: -1, call: p.pollIncident})
		return
	}
	p.inc.queue = p.inc.queue[1:]
	p.inc.running = true
	if next != incidentOverload {
		w.coverage.Inc(incidentNames[next])
	}
	w.traceNote(kindIncident, -1, uint64(next), 0)
}

// incidentOverload, queued between the disk-loss incidents, is the seed's
// first overload episode (overload.go) when none ran yet: the disk-loss
// incidents take much of a short run, and an overload waits for a leader
// whose peers are healthy, which they rarely leave.
const incidentOverload Incident = 100

// overloadIncident starts the queued overload episode and reports whether
// it could (a leader with healthy peers exists, polled for at most a
// second); one already run makes it a no-op that ends at once.
func (p *planner) overloadIncident() bool {
	if p.overloads > 0 {
		p.w.sched.schedule(0, &event{kind: evCall, node: -1, call: func() { p.endIncident(0) }})
		return true
	}
	i := p.starvable()
	if i < 0 && p.inc.overloadTries < overloadTriesMax {
		p.inc.overloadTries++
		return false
	}
	if i < 0 { // no leader with healthy peers came: the episode is skipped
		p.w.sched.schedule(0, &event{kind: evCall, node: -1, call: func() { p.endIncident(0) }})
		return true
	}
	d := p.overloadEpisode(i)
	p.w.sched.schedule(d, &event{kind: evCall, node: -1, call: func() { p.endIncident(300 * time.Millisecond) }})
	return true
}

// kindIncident is an incident's start in the trace.
const kindIncident uint64 = 107

// endIncident ends the running incident; the next one may start after
// gap (the cluster recovers first).
func (p *planner) endIncident(gap time.Duration) {
	p.inc.running = false
	p.holdUntil = max(p.holdUntil, p.w.now()+gap)
	if len(p.inc.queue) > 0 {
		p.w.sched.schedule(gap, &event{kind: evCall, node: -1, call: p.pollIncident})
	}
}

// overloadTriesMax bounds the polls the queued overload episode waits for a
// leader with healthy peers (a second) before it is skipped.
const overloadTriesMax = 50

// nodeDead reports whether a node can never start again: no incident can
// then take its three roles.
func (p *planner) nodeDead() bool {
	for _, n := range p.w.nodes {
		if n.dead {
			return true
		}
	}
	return false
}

// clusterWhole reports whether the cluster can take an incident: no node
// is overloaded (an overload is an incident too) or in a power cut that
// fired; the faults under way end when the incident starts
// (healForIncident).
func (p *planner) clusterWhole() bool {
	for _, n := range p.w.nodes {
		if n.starved || n.cut.cut {
			return false
		}
	}
	return true
}

// healForIncident ends the faults under way: the network heals, pending
// power cuts are disarmed, full disks get their space back, paused
// processes resume and nodes down restart now, so the incident's chain is
// what happens next (the outages it models begin in a healthy cluster).
func (p *planner) healForIncident() {
	w := p.w
	w.net.clearCuts()
	p.liftFullDisks(true)
	for _, n := range w.nodes {
		n.cut.reset()
		n.pausedUntil = min(n.pausedUntil, w.now())
		p.restartNow(n)
	}
}

// nodeLinks are every link between node i and the others, both ways.
func (w *world) nodeLinks(i int) [][2]int {
	var links [][2]int
	for b := range w.nodes {
		if b != i {
			links = append(links, [2]int{i, b}, [2]int{b, i})
		}
	}
	return links
}

// diskLossOutage starts IncidentDiskReplaced or IncidentRepairOutage
// (their shared chain; only X's damage differs) and reports whether it
// could: it needs three nodes, one of them (X) within the disk-damage
// budget. Steps, with the random faults held (but during a broker outage):
//  1. L falls behind: it is cut off from its peers (clients still reach
//     it) for 0.3-0.6 s, while X and A commit what it misses; or, when
//     long (a disk replacement with Faults.LongOutage), L loses power and
//     stays down past the retention window (brokerOutage), so the leaders
//     compact past its logs and it must catch up by snapshot.
//  2. X loses power; its disk is replaced (or damaged); 20-60 ms later
//  3. A loses power, L comes back and X restarts;
//  4. A restarts after 0.3-0.6 s (0.6-1.2 s when long); the incident
//     ends 0.2 s later.
func (p *planner) diskLossOutage(kind Incident, long bool) bool {
	w := p.w
	x, l, a := p.incidentRoles()
	if x == nil {
		return false
	}
	r := w.rngFault
	var back func()
	var lag time.Duration
	if long {
		lag = p.brokerOutage(l, x, a)
		back = func() { p.restartNow(l) }
	} else {
		lag = time.Duration(between(r, 300, 600)) * time.Millisecond
		links := w.nodeLinks(l.index)
		w.net.addCuts(links, +1)
		gen := w.net.healedAll
		back = func() { w.net.releaseCuts(links, gen) }
	}
	gap := time.Duration(between(r, 20, 60)) * time.Millisecond
	down := time.Duration(between(r, 300, 600)) * time.Millisecond
	if long {
		down *= 2 // L and X reopen from scratch: time for an election to go wrong
	}
	x.damaged = true // X's damage budget is spent from now on
	// The random mix is held from shortly before X loses power (from the
	// start when short): a broker outage lets it run.
	hold := lag - min(lag, 300*time.Millisecond)
	if !long {
		hold = 0
	}
	w.sched.schedule(hold, &event{kind: evCall, node: -1, call: func() {
		p.holdUntil = max(p.holdUntil, w.now()+lag-hold+gap+down+200*time.Millisecond)
	}})
	w.sched.schedule(lag, &event{kind: evCall, node: -1, call: func() {
		w.crashNode(x, "incident: "+kind.String())
		x.heldDown = true
		if kind == IncidentDiskReplaced {
			p.replaceDisk(x)
		} else {
			p.damageReplicas(x)
		}
	}})
	w.sched.schedule(lag+gap, &event{kind: evCall, node: -1, call: func() {
		w.crashNode(a, "incident: "+kind.String())
		a.heldDown = true
		back()
		p.restartNow(x)
	}})
	w.sched.schedule(lag+gap+down, &event{kind: evCall, node: -1, call: func() {
		p.restartNow(a)
		p.restartNow(x) // if its restart failed (a transient disk fault)
		w.sched.schedule(200*time.Millisecond, &event{kind: evCall, node: -1, call: func() { p.endIncident(200 * time.Millisecond) }})
	}})
	return true
}

// incidentRoles draws a disk-loss incident's nodes: X within the disk
// damage budget (nil when none is), L and A two others.
func (p *planner) incidentRoles() (x, l, a *simNode) {
	w := p.w
	var fits []*simNode
	for _, n := range w.nodes {
		if n.damaged || p.damageFits(n) {
			fits = append(fits, n)
		}
	}
	if len(fits) == 0 {
		return nil, nil, nil
	}
	r := w.rngFault
	x = fits[r.IntN(len(fits))]
	var others []*simNode
	for _, n := range w.nodes {
		if n != x {
			others = append(others, n)
		}
	}
	l = others[r.IntN(len(others))]
	for _, n := range others {
		if n != l && (a == nil || r.IntN(2) == 0) {
			a = n
		}
	}
	return x, l, a
}

// brokerOutage is a long incident's first step: broker l loses power
// (inside a round) and stays down past the retention window. Once the leaders rolled their
// segments past its log (a segment's age and two retention checks), every
// host's clock steps forward by a minute or an hour (an NTP correction;
// Kafka clusters lose their retention window this way too), so retention
// trims every closed segment and the leaders compact past l's logs; three
// retention checks and 0.2-0.6 s later the chain goes on (it returns how
// long that is). Meanwhile one of the others' disks fills up for 1-3 s,
// and the random faults go on.
// Rejected: waiting out retention.ms (8-16 s) in virtual time: the
// workload is over long before in most seeds, with nothing left to trim.
func (p *planner) brokerOutage(l, x, a *simNode) time.Duration {
	w := p.w
	r := w.rngFault
	w.coverage.Inc(incidentNames[IncidentBrokerDown])
	// The power goes at one of l's next 8 disk writes, inside a round of
	// the busy broker, or after 50 ms at the latest.
	l.heldDown = true
	after := r.IntN(8)
	l.cut.armNow(cutRound, after)
	l.cut.kill = false
	w.traceNote(kindFault, l.index, uint64(faultCutRound), uint64(after))
	w.sched.schedule(50*time.Millisecond, &event{kind: evCall, node: -1, call: func() {
		w.crashNode(l, "incident: broker down")
	}})
	check := time.Duration(w.opts.RetentionCheckTicks) * w.opts.TickInterval
	stepAt := time.Duration(w.opts.SegmentMs)*time.Millisecond + 2*check + 200*time.Millisecond
	step := pick(r, time.Minute, time.Hour)
	w.sched.schedule(stepAt, &event{kind: evCall, node: -1, call: func() {
		for _, m := range w.nodes {
			m.clock.skew += step
			w.noteSkew(m)
		}
		w.coverage.Inc("fault/clock-step")
		w.traceNote(kindFault, -1, uint64(faultClockJump), uint64(step))
	}})
	full := pick(r, x, a)
	fullAt := time.Duration(between(r, 300, 1000)) * time.Millisecond
	fullFor := time.Duration(between(r, 1000, 3000)) * time.Millisecond
	w.sched.schedule(fullAt, &event{kind: evCall, node: -1, call: func() {
		if full.up && full.fullUntil == 0 {
			p.fillDisk(full, fullFor, incidentFullSlackBytes)
			w.sched.schedule(fullFor, &event{kind: evCall, node: -1, call: func() { p.liftFullDisks(false) }})
		}
	}})
	return stepAt + 3*check + time.Duration(between(r, 200, 600))*time.Millisecond
}

// restartNow starts n unless it is up or can never start again; a start
// that fails is retried after the fault mix's restart delay.
func (p *planner) restartNow(n *simNode) {
	n.heldDown = false
	if n.up || n.dead {
		return
	}
	p.w.startNode(n)
	if !n.up && !n.dead {
		p.w.scheduleRestart(n)
	}
}

// replaceDisk gives the stopped node n a new, empty disk (counted as
// damage: n must already be within the budget).
func (p *planner) replaceDisk(n *simNode) {
	w := p.w
	n.disk = memdisk.New()
	n.cut.d = n.disk
	n.wiped, n.flipped = true, false
	n.failReads = nil
	w.stats.Wipes++
	w.coverage.Inc("fault/wipe")
	w.traceNote(kindFault, n.index, uint64(faultWipe), 0)
}

// damageReplicas flips one bit in the newest log segment of each of the
// stopped node n's partition replicas (a failing disk region under recent
// writes): anywhere in a sealed segment (any damage there is corruption,
// found when it is read), or before incidentFlipMarginBytes of the last
// one (when the last segment is big enough, else the one before it).
func (p *planner) damageReplicas(n *simNode) {
	r := p.w.rngFault
	files := n.disk.Files()
	isSeg := func(k int, dir string) bool {
		return k < len(files) && strings.HasPrefix(files[k], dir+"/log/") && strings.HasSuffix(files[k], ".log")
	}
	for i, name := range files {
		dir, _, ok := strings.Cut(name, "/log/")
		if !ok || !strings.HasPrefix(name, "p/") || !isSeg(i, dir) {
			continue
		}
		last := !isSeg(i+1, dir)
		if !last && (isSeg(i+2, dir) || p.flippable(n, files[i+1], true) > 0) {
			continue // a newer segment takes the damage
		}
		size := p.flippable(n, name, last)
		if size <= 0 {
			continue
		}
		off := r.Int64N(size)
		n.disk.FlipBit(name, off, uint(r.IntN(8)))
		n.flipped = true
		p.w.stats.BitFlips++
		p.w.coverage.Inc("fault/bit-flip")
		p.w.traceNote(kindFault, n.index, uint64(faultBitFlip), hashString(name)^uint64(off))
	}
}

// flippable is how many leading bytes of n's file name may take a bit
// flip that must read as corruption: all of a sealed segment, all but the
// flip margin of the last one.
func (p *planner) flippable(n *simNode, name string, last bool) int64 {
	f, err := n.disk.Open(name)
	if err != nil {
		return 0
	}
	size, err := f.Size()
	_ = f.Close()
	if err != nil {
		return 0
	}
	if last {
		size -= incidentFlipMarginBytes
	}
	return size
}

// incidentFlipMarginBytes keeps an incident's bit flips this far before
// the end of a replica's last segment: beyond the largest entry the
// workload writes (a batch of up to four records of up to 2 KiB), so a
// complete record always follows the damage and recovery must report
// corruption. With flipMarginBytes (4 KiB) a flip inside a last entry of
// 6 KiB read as a torn tail, and recovery dropped an acknowledged entry
// (seed 48): a loss outside the fault model.
const incidentFlipMarginBytes = 12 << 10
