package simnet

import (
	"fmt"
	"slices"
	"time"
)

// Disk stalls in the simulator (node/stall.go; issue 21 item 6). Once
// Faults.DiskStallAfter of the operations were issued, while the cluster
// is healthy, the disk of a partition leader's node stalls for the
// watchdog's threshold (Knobs.DiskStallAfter, else an election timeout)
// plus two election timeouts, each counted in ticks (stallHandover), plus
// 1.5 to 3 s: every fsync it starts (a node.SyncJob: the
// storage pipeline of storage.go) hangs, parked, until the stall ends or a
// heal clears the node's disk faults; writes still reach its page cache.
// Faults.DiskStalls such episodes run, each a second after the previous
// one ended. Meanwhile no random fault, overload or fsync crash point
// begins.
//
// The check: counting from the victim's first fsync that hangs, within the
// watchdog's threshold in the victim's ticks plus two election timeouts in
// the slowest node's ticks plus a second of virtual time (stallBound),
// every group the node led
// then (partitions and the metadata group) is led by another node —
// provided the node is still stalled then, its peers stayed up,
// unrestarted, connected, with space and ticking at their rate, and enough
// of them run the group to elect without it (else the check is skipped,
// and counted). The victim still leading is always a failure. A group
// led by nobody while node frames were lost meanwhile gets one more look
// an election round (two election timeouts) later, if the stall lasts:
// the handover's election can fail on one lost vote, the next comes up to
// two election timeouts later, and the victim's own vote waits for its
// disk (seed 197 on d39c29d: the candidate's vote requests lost in two
// rounds at a 5% drop rate, no leader 4 s after the stall began).
//
// A leader whose fsync hangs keeps sending heartbeats and its followers
// keep acknowledging, so nothing but the watchdog moves its partitions:
// the planted bug StalledLeaderKeepsLeading (the watchdog never fires) is
// caught here and nowhere else.

// diskStallPoll is how often a due episode checks whether its time came;
// diskStallWaitMax bounds how long it holds the random faults back
// waiting for a healthy cluster.
const (
	diskStallPoll    = 20 * time.Millisecond
	diskStallWaitMax = 3 * time.Second
)

// diskStall is the run's stall episodes.
type diskStall struct {
	episodes int  // begun so far
	active   bool // an episode is under way
	victim   int  // the node index of the last episode
	// waited is how long the due episode held the random faults back.
	waited time.Duration
	// parkedAt is when the victim's first fsync of the episode hung (0:
	// none yet); led the groups it led then, topicIDs their topics'
	// incarnations; peers every node's incarnation then.
	parkedAt time.Duration
	led      []int
	topicIDs []uint64
	peers    []uint32
	// nodeDrops is the network's count of lost node frames then.
	nodeDrops int64
	// endsAt is when the episode ends: a second look at its groups moves
	// it past the look.
	endsAt time.Duration
}

// scheduleDiskStall arms the run's disk-stall episodes.
func (p *planner) scheduleDiskStall() {
	if p.w.opts.Faults.DiskStallAfter <= 0 || p.w.opts.Faults.DiskStalls <= 0 {
		return
	}
	p.w.sched.schedule(diskStallPoll, &event{kind: evCall, node: -1, call: p.pollDiskStall})
}

// pollDiskStall starts an episode once the workload got far enough and a
// leader with healthy peers exists; once due, it holds the random faults
// back for up to diskStallWaitMax while the faults under way end. It
// gives up once every operation was issued (no fsync would hang any
// more) or the liveness probe ran; a liveness run's heal does not end it
// (the healthy cluster after the heal suits it best).
func (p *planner) pollDiskStall() {
	w := p.w
	if w.work.issued >= w.opts.Ops || w.probe.ran {
		return
	}
	due := float64(w.work.issued) >= w.opts.Faults.DiskStallAfter*float64(w.opts.Ops)
	i := -1
	if due && !p.inc.running {
		if i = p.starvable(); i >= 0 && !p.peersCanWrite(i) {
			i = -1
		}
		if i < 0 && p.stall.waited < diskStallWaitMax {
			p.stall.waited += diskStallPoll
			p.holdUntil = max(p.holdUntil, w.now()+diskStallPoll)
		}
	}
	if i < 0 {
		w.sched.schedule(diskStallPoll, &event{kind: evCall, node: -1, call: p.pollDiskStall})
		return
	}
	p.stallDisk(i)
}

// electionTimeout is the nodes' election timeout in virtual time.
func (w *world) electionTimeout() time.Duration {
	return w.opts.Knobs.electionTimeout(w.opts)
}

// stallAfter is the nodes' disk watchdog threshold in virtual time
// (node.Config.DiskStallAfter; by default one election timeout).
func (w *world) stallAfter() time.Duration {
	if d := w.opts.Knobs.DiskStallAfter; d > 0 {
		return d
	}
	return w.electionTimeout()
}

// stallBound is how long after the first hung fsync node i's groups must
// be led elsewhere: the handover's span (stallHandover) and a second.
func (w *world) stallBound(i int) time.Duration {
	return w.stallHandover(i) + time.Second
}

// stallHandover is how long node i's disk may stall before its groups
// are led elsewhere: the watchdog's threshold, counted in node i's ticks,
// then up to two election timeouts (a transfer that times out, an
// election), counted in the slowest node's ticks. The watchdog and raft
// count ticks, not time (node/stall.go): a node whose timer drifts slow
// (Faults.TickDriftPercent, up to 50%) sees the threshold that much later
// in virtual time, 4.5 s for a 3 s threshold, past the bound's second of
// slack; a node that ticks fast sees it early, within the nominal bound.
func (w *world) stallHandover(i int) time.Duration {
	return w.inTicksOf(w.stallAfter(), w.nodes[i].tickInterval) + 2*w.inTicksOf(w.electionTimeout(), w.slowestTick())
}

// slowestTick is the longest tick interval of any node (never below
// Options.TickInterval).
func (w *world) slowestTick() time.Duration {
	slowest := w.opts.TickInterval
	for _, m := range w.nodes {
		slowest = max(slowest, m.tickInterval)
	}
	return slowest
}

// inTicksOf is d, a span counted in ticks of Options.TickInterval, on a
// node whose ticks come tick apart: stretched if it ticks slower, never
// shortened.
func (w *world) inTicksOf(d, tick time.Duration) time.Duration {
	if tick <= w.opts.TickInterval {
		return d
	}
	return d * tick / w.opts.TickInterval
}

// stallDisk stalls node i's fsyncs for the handover's span plus 1.5 to
// 3 s, past the check's bound, holding other faults meanwhile.
func (p *planner) stallDisk(i int) {
	w := p.w
	n := w.nodes[i]
	d := w.stallHandover(i) + time.Duration(between(w.rngFault, 1500, 3000))*time.Millisecond
	w.coverage.Inc("fault/disk-stall")
	w.traceNote(kindFault, n.index, uint64(faultDiskStall), uint64(d))
	p.stall = diskStall{episodes: p.stall.episodes + 1, active: true, victim: i}
	n.diskStalled = true
	p.holdUntil = max(p.holdUntil, w.now()+d)
	p.stall.endsAt = w.now() + d
	w.sched.schedule(d, &event{kind: evCall, node: -1, call: func() { p.endStallWhenDue(n) }})
}

// endStallWhenDue ends the episode on n unless a second look at its
// groups moved its end later (lookAtStalledGroups).
func (p *planner) endStallWhenDue(n *simNode) {
	if now := p.w.now(); now < p.stall.endsAt {
		p.w.sched.schedule(p.stall.endsAt-now, &event{kind: evCall, node: -1, call: func() { p.endStallWhenDue(n) }})
		return
	}
	p.endStallEpisode(n)
}

// endStallEpisode ends the episode on n and schedules the next, if any,
// a second later.
func (p *planner) endStallEpisode(n *simNode) {
	w := p.w
	w.endDiskStall(n)
	p.stall.active = false
	if w.work.healed {
		// The liveness bounds count from the end of a stall that ran
		// after the heal: with production's ticks a stall lasts up to
		// 8 s (DiskStallAfter 3 s, two 1 s election timeouts, 3 s), 1.5
		// times that on a node whose ticks drift 50% slow.
		w.work.healAt = w.now()
		w.checker.leadersChecked = false
	}
	if p.stall.episodes < w.opts.Faults.DiskStalls {
		w.sched.schedule(time.Second, &event{kind: evCall, node: -1, call: p.pollDiskStall})
	}
}

// stallActive reports whether a disk-stall episode is under way: the
// overloads and the fsync crash points wait for its end.
func (p *planner) stallActive() bool { return p.stall.active }

// parkSync holds a fsync of the stalled node n until its stall ends.
func (w *world) parkSync(n *simNode, run func()) {
	n.parkedSyncs = append(n.parkedSyncs, run)
	p := w.planner
	if !p.stall.active || p.stall.victim != n.index || p.stall.parkedAt != 0 {
		return
	}
	p.stall.parkedAt = w.now()
	p.stall.nodeDrops = w.net.nodeDrops
	for g := 0; g <= w.opts.Partitions; g++ { // the metadata group is Partitions
		if w.leaderOf(g) == n.index {
			st, _ := w.statusOf(n, g)
			p.stall.led = append(p.stall.led, g)
			p.stall.topicIDs = append(p.stall.topicIDs, st.TopicID)
		}
	}
	for _, m := range w.nodes {
		p.stall.peers = append(p.stall.peers, m.incarnation)
	}
	episode := p.stall.episodes
	w.sched.schedule(w.stallBound(n.index), &event{kind: evCall, node: -1, call: func() { p.checkDiskStall(episode) }})
}

// endDiskStall ends n's stall: its parked fsyncs run now, in the order
// they hung.
func (w *world) endDiskStall(n *simNode) {
	if !n.diskStalled {
		return
	}
	n.diskStalled = false
	parked := n.parkedSyncs
	n.parkedSyncs = nil
	for _, run := range parked {
		w.sched.schedule(0, &event{kind: evCall, node: n.index, call: run})
	}
}

// checkDiskStall checks, stallBound after the
// victim's first fsync of the episode hung, that every group it led then
// has another leader. A group with no leader yet while node frames were
// lost since the episode began (or since the first look, on a second one)
// gets one more look, an election round later (the stall lasts past it).
func (p *planner) checkDiskStall(episode int) {
	p.lookAtStalledGroups(episode, nil, p.stall.nodeDrops)
}

// lookAtStalledGroups checks the groups of the episode's led at indexes
// only (every one when only is nil): each must be led by a node other
// than the victim. Groups with no leader while frames were lost since
// drops are looked at once more, an election round (two election
// timeouts in the slowest node's ticks) later; on that second look
// (only != nil) lost frames excuse them.
func (p *planner) lookAtStalledGroups(episode int, only []int, drops int64) {
	w := p.w
	s := &p.stall
	n := w.nodes[s.victim]
	if s.episodes != episode || !s.active || !n.diskStalled || !p.stallCheckFair(s) {
		w.coverage.Inc("check/disk-stall-skipped")
		return
	}
	var again []int
	for i, g := range s.led {
		if only != nil && !slices.Contains(only, i) {
			continue
		}
		if g < w.opts.Partitions && !w.wire.groupCreated(g) || !p.canElectWithout(g, s.victim, s.topicIDs[i]) {
			w.coverage.Inc("check/disk-stall-skipped")
			continue
		}
		lead := w.leaderOf(g)
		if lead < 0 && w.net.nodeDrops != drops {
			again = append(again, i)
			continue
		}
		if lead < 0 || lead == s.victim {
			w.fail("disk stall: node %d's fsyncs hang since %v, and group %d (%d = metadata) is led by %s %v later",
				n.id, s.parkedAt, g, w.opts.Partitions, leaderName(w, lead), w.now()-s.parkedAt)
		}
	}
	w.coverage.Inc("check/disk-stall")
	if len(again) == 0 {
		return
	}
	if only != nil {
		w.coverage.Add("check/disk-stall-skipped", int64(len(again)))
		return
	}
	round := 2 * w.inTicksOf(w.electionTimeout(), w.slowestTick())
	s.endsAt = max(s.endsAt, w.now()+round+time.Second)
	p.holdUntil = max(p.holdUntil, s.endsAt)
	now := w.net.nodeDrops
	w.sched.schedule(round, &event{kind: evCall, node: -1, call: func() { p.lookAtStalledGroups(episode, again, now) }})
}

// stallCheckFair reports whether the victim's peers stayed healthy since
// its first fsync hung: same incarnations, up, connected, not paused,
// starved or full; and the victim itself up and ticking at its rate.
func (p *planner) stallCheckFair(s *diskStall) bool {
	w := p.w
	for i, m := range w.nodes {
		if m.incarnation != s.peers[i] || m.starved || (i != s.victim && m.fullUntil != 0) {
			return false
		}
	}
	return w.nodes[s.victim].up && p.peersHealthy(s.victim)
}

// canElectWithout reports whether the nodes but victim that run group g's
// incarnation topicID (and are not rebuilding it) are a majority of the
// replication factor: fewer cannot elect a leader while the victim's vote
// cannot be made durable (a topic deleted and created again meanwhile
// has a new group, which may still be electing its first leader).
func (p *planner) canElectWithout(g, victim int, topicID uint64) bool {
	w := p.w
	count := 0
	for _, m := range w.nodes {
		if m.index == victim || !m.up {
			continue
		}
		if st, ok := w.statusOf(m, g); ok && !st.Rejoining && st.TopicID == topicID {
			count++
		}
	}
	return count >= w.opts.Replication/2+1
}

// peersCanWrite reports whether every node but i has space.
func (p *planner) peersCanWrite(i int) bool {
	for _, m := range p.w.nodes {
		if m.index != i && m.fullUntil != 0 {
			return false
		}
	}
	return true
}

// leaderName says who leads: a node id, or "nobody".
func leaderName(w *world, lead int) string {
	if lead < 0 {
		return "nobody"
	}
	return fmt.Sprintf("node %d", w.nodes[lead].id)
}
