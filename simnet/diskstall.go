package simnet

import (
	"fmt"
	"slices"
	"time"

	"github.com/strandlog/strand/node"
)

// Disk stalls in the simulator (node/stall.go; issue 21 item 6). Once
// Faults.DiskStallAfter of the operations were issued, the disk of a
// partition leader's node whose peers are healthy and can elect without it
// stalls for the watchdog's threshold (Knobs.DiskStallAfter, else an
// election timeout) plus two election timeouts, each counted in ticks
// (stallHandover), plus 1.5 to 3 s: every fsync it starts (a node.SyncJob:
// the storage pipeline of storage.go) hangs, parked, until the stall ends
// or the quiet probe's heal clears the node's disk faults (the liveness
// profile's heal leaves it to its end); writes still reach its page cache.
// A due episode waits up to diskStallWaitMax for the faults under way to
// end, then ends them as an incident does, so it begins in every seed that
// draws it whatever else the seed runs. Faults.DiskStalls such episodes
// run, each a second after the previous one ended. Meanwhile no random
// fault, overload, fsync crash point, rolling-restart kill or move's
// targeted crash begins.
//
// The check: once the victim's fsyncs hang and the cluster has been fair
// (stallFair: the victim up in that incarnation, unpaused, ticking at its
// rate; every other node that can run again up, unrestarted, connected,
// unpaused, unstarved, with space) for the watchdog's threshold in the
// victim's ticks plus two election timeouts in the slowest node's ticks
// plus a second of virtual time (stallBound), counted from the first hung
// fsync at the earliest, every group the node led then or leads now
// (partitions and the metadata group) is led by another node, unless too
// few other voters of the group's incarnation, not rebuilding it, are up
// to elect without it (canElectWithout; that group is skipped, and
// counted). A restart or a cut meanwhile restarts the
// wait, and the episode lasts up to a bound longer for it; an episode
// that ends unchecked is counted as skipped. The victim still leading is
// always a failure. A group led by nobody while node frames were lost
// since the first hung fsync gets one more look an election round (two
// election timeouts) later, the stall extended past it: the handover's
// election can fail on one lost vote, the next comes up to two election
// timeouts later, and the victim's own vote waits for its disk (seed 197
// on d39c29d: the candidate's vote requests lost in two rounds at a 5%
// drop rate, no leader 4 s after the stall began). On that second look
// only frames lost since the first excuse it (counted as skipped).
//
// A leader whose fsync hangs keeps sending heartbeats and its followers
// keep acknowledging, so nothing but the watchdog moves its partitions:
// the planted bug StalledLeaderKeepsLeading (the watchdog never fires) is
// caught here and nowhere else.

// diskStallPoll is how often a due episode checks whether its time came,
// and an episode under way whether its check is due; diskStallWaitMax
// bounds how long a due episode holds the random faults back waiting for
// the faults under way to end before it ends them itself.
const (
	diskStallPoll    = 20 * time.Millisecond
	diskStallWaitMax = time.Second
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
	// incarnations; victimInc the victim's incarnation then.
	parkedAt  time.Duration
	led       []int
	topicIDs  []uint64
	victimInc uint32
	// fairSince is when the cluster last turned fair for the check
	// (stallFair; 0: not fair now), incs every node's incarnation then;
	// checked: the episode's check ran.
	fairSince time.Duration
	incs      []uint32
	checked   bool
	// nodeDrops is the network's count of lost node frames at the first
	// hung fsync; looking: a second look at groups led by nobody is due
	// (lookAtStalledGroups).
	nodeDrops int64
	looking   bool
	// endBy is when the episode ends at the latest: its drawn length plus
	// a bound more while its check waits for a fair cluster.
	endBy time.Duration
}

// scheduleDiskStall arms the run's disk-stall episodes.
func (p *planner) scheduleDiskStall() {
	if p.w.opts.Faults.DiskStallAfter <= 0 || p.w.opts.Faults.DiskStalls <= 0 {
		return
	}
	p.w.sched.schedule(diskStallPoll, &event{kind: evCall, node: -1, call: p.pollDiskStall})
}

// pollDiskStall starts an episode once the workload got far enough and a
// partition leader whose peers are healthy exists. Once due, it holds the
// random faults back while the faults under way end, for up to
// diskStallWaitMax; then it ends them (healForIncident: the network
// heals, nodes down restart, pauses, starvation and full disks end), as an
// incident does, so that an episode begins in every seed that draws one,
// whatever faults the seed's timing keeps under way (with production's
// ticks they last ten times longer). It gives up once every operation was
// issued (no fsync would hang any more) or the liveness probe ran; a
// liveness run's heal does not end it (the healthy cluster after the heal
// suits it best).
func (p *planner) pollDiskStall() {
	w := p.w
	if w.work.spent() || w.probe.ran {
		return
	}
	due := float64(w.work.issued) >= w.opts.Faults.DiskStallAfter*float64(w.opts.Ops)
	i := -1
	if due && !p.inc.running && !p.fullEp.active {
		if i = p.stallVictim(); i < 0 {
			p.holdUntil = max(p.holdUntil, w.now()+diskStallPoll)
			if p.stall.waited += diskStallPoll; p.stall.waited >= diskStallWaitMax {
				p.stall.waited = 0
				w.coverage.Inc("event/disk-stall-heal")
				p.healForIncident()
				p.endStarvation()
			}
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
	p.stall = diskStall{episodes: p.stall.episodes + 1, active: true, victim: i, endBy: w.now() + d + w.stallBound(i)}
	n.diskStalled = true
	p.holdUntil = max(p.holdUntil, w.now()+d)
	w.sched.schedule(d, &event{kind: evCall, node: -1, call: func() { p.endStallEpisode(n) }})
}

// endStallEpisode ends the episode on n and schedules the next, if any,
// a second later. An episode whose check is still waiting for a fair
// cluster (a peer restarted meanwhile), or for its second look, goes on,
// holding the random faults, until its check ran or endBy.
func (p *planner) endStallEpisode(n *simNode) {
	w := p.w
	s := &p.stall
	if s.parkedAt != 0 && (!s.checked || s.looking) && n.diskStalled && w.now() < s.endBy {
		p.holdUntil = max(p.holdUntil, w.now()+diskStallPoll)
		w.sched.schedule(diskStallPoll, &event{kind: evCall, node: -1, call: func() { p.endStallEpisode(n) }})
		return
	}
	w.releaseSyncs(n)
	if p.stall.parkedAt != 0 && !p.stall.checked {
		w.coverage.Inc("check/disk-stall-skipped") // never fair for long enough
	}
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

// stallActive reports whether a disk-stall episode, or a full-disk
// episode (fulldisk.go), is under way: the overloads, the fsync crash
// points, the rolling restart's kills and the moves' targeted crashes
// wait for its end, and the liveness bounds wait it out.
func (p *planner) stallActive() bool { return p.stall.active || p.fullEp.active }

// parkSync holds a fsync of the stalled node n until its stall ends. The
// first one of an episode starts its check: the groups n leads then, and
// a watch every diskStallPoll (watchDiskStall).
func (w *world) parkSync(n *simNode, run func()) {
	n.parkedSyncs = append(n.parkedSyncs, run)
	p := w.planner
	if !p.stall.active || p.stall.victim != n.index || p.stall.parkedAt != 0 {
		return
	}
	p.stall.parkedAt, p.stall.victimInc = w.now(), n.incarnation
	p.stall.nodeDrops = w.net.nodeDrops
	for g := 0; g <= w.opts.Partitions; g++ { // the metadata group is Partitions
		if w.leaderOf(g) == n.index {
			st, _ := w.statusOf(n, g)
			p.stall.led = append(p.stall.led, g)
			p.stall.topicIDs = append(p.stall.topicIDs, st.TopicID)
		}
	}
	episode := p.stall.episodes
	w.sched.schedule(0, &event{kind: evCall, node: -1, call: func() { p.watchDiskStall(episode) }})
}

// endDiskStall ends n's stall at a heal (clearDiskFaults), unless n is
// the victim of an episode under way and the heal is the liveness
// profile's, not the quiet probe's: the episode is a bounded fault, the
// liveness bounds wait for its end and count from it (endStallEpisode),
// and a quiet cluster after the heal is where its check applies best.
func (w *world) endDiskStall(n *simNode) {
	if p := w.planner; p.stall.active && p.stall.victim == n.index && !w.probe.active {
		return
	}
	w.releaseSyncs(n)
}

// releaseSyncs ends n's stall: its parked fsyncs run now, in the order
// they hung.
func (w *world) releaseSyncs(n *simNode) {
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

// watchDiskStall follows an episode whose victim's fsyncs hang: it
// tracks since when the cluster is fair for the check (stallFair: every
// other node that can run again up, unrestarted, connected, unpaused,
// unstarved, with space; the victim up in the incarnation whose fsync
// hung, ticking at its rate) and runs the check once it has been fair for
// stallBound, counted from the first hung fsync at the earliest. A peer
// that restarts or a link cut meanwhile (a rolling restart, a move's
// targeted crash, a join) only restarts the wait: the check applies to
// every episode long enough, whatever else the seed runs. An episode that
// ends first is counted as skipped.
func (p *planner) watchDiskStall(episode int) {
	w := p.w
	s := &p.stall
	if s.episodes != episode || !s.active || s.checked || !w.nodes[s.victim].diskStalled {
		return // over, or a heal cleared the victim's disk faults
	}
	switch {
	case !p.stallFair(s):
		s.fairSince = 0
	case s.fairSince == 0 || !slices.Equal(s.incs, p.incarnations()):
		s.fairSince, s.incs = w.now(), p.incarnations()
	}
	if s.fairSince != 0 && w.now() >= max(s.parkedAt, s.fairSince)+w.stallBound(s.victim) {
		s.checked = true
		p.checkDiskStall(episode)
		return
	}
	w.sched.schedule(diskStallPoll, &event{kind: evCall, node: -1, call: func() { p.watchDiskStall(episode) }})
}

// incarnations lists every node's incarnation.
func (p *planner) incarnations() []uint32 {
	incs := make([]uint32, len(p.w.nodes))
	for i, m := range p.w.nodes {
		incs[i] = m.incarnation
	}
	return incs
}

// checkDiskStall checks that every group the victim led at its first hung
// fsync, and every group it leads now, has another leader, unless too few
// other nodes run the group to elect without it.
func (p *planner) checkDiskStall(episode int) {
	w := p.w
	s := &p.stall
	n := w.nodes[s.victim]
	led, topicIDs := slices.Clone(s.led), slices.Clone(s.topicIDs)
	for g := 0; g <= w.opts.Partitions; g++ {
		if !slices.Contains(led, g) && w.leaderOf(g) == s.victim {
			st, _ := w.statusOf(n, g)
			led, topicIDs = append(led, g), append(topicIDs, st.TopicID)
		}
	}
	p.lookAtStalledGroups(episode, led, topicIDs, false, s.nodeDrops)
}

// lookAtStalledGroups checks that each group of led (its topics'
// incarnations topicIDs) is led by a node other than the victim. Groups
// with no leader while node frames were lost since drops are looked at
// once more, an election round (two election timeouts in the slowest
// node's ticks) later, the episode extended past it; on that second look
// (second) lost frames excuse them, and the look is skipped unless the
// cluster is still fair in the same incarnations.
func (p *planner) lookAtStalledGroups(episode int, led []int, topicIDs []uint64, second bool, drops int64) {
	w := p.w
	s := &p.stall
	n := w.nodes[s.victim]
	if second {
		s.looking = false
		if s.episodes != episode || !s.active || !n.diskStalled || !p.stallFair(s) || !slices.Equal(s.incs, p.incarnations()) {
			w.coverage.Add("check/disk-stall-skipped", int64(len(led)))
			return
		}
	}
	var again []int
	var againIDs []uint64
	for i, g := range led {
		if g < w.opts.Partitions && !w.wire.groupCreated(g) || !p.canElectWithout(g, s.victim, topicIDs[i]) {
			w.coverage.Inc("check/disk-stall-skipped")
			continue
		}
		lead := w.leaderOf(g)
		if lead < 0 && w.net.nodeDrops != drops {
			again, againIDs = append(again, g), append(againIDs, topicIDs[i])
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
	if second {
		w.coverage.Add("check/disk-stall-skipped", int64(len(again)))
		return
	}
	round := 2 * w.inTicksOf(w.electionTimeout(), w.slowestTick())
	s.looking = true
	s.endBy = max(s.endBy, w.now()+round+time.Second)
	p.holdUntil = max(p.holdUntil, w.now()+round+time.Second)
	now := w.net.nodeDrops
	w.sched.schedule(round, &event{kind: evCall, node: -1, call: func() { p.lookAtStalledGroups(episode, again, againIDs, true, now) }})
}

// stallFair reports whether the cluster is fair for the check of episode
// s now: the victim is up in the incarnation whose fsync hung, unpaused
// and ticking at its rate, and its peers are healthy.
func (p *planner) stallFair(s *diskStall) bool {
	v := p.w.nodes[s.victim]
	return v.up && v.incarnation == s.victimInc && v.pausedUntil <= p.w.now() && !v.starved &&
		p.stallPeersHealthy(s.victim)
}

// stallVictim picks the leader of a partition (from a random one on)
// whose peers are healthy (stallPeersHealthy) and can elect a leader of
// the partition without it, or -1.
func (p *planner) stallVictim() int {
	w := p.w
	g0 := w.rngFault.IntN(w.opts.Partitions)
	for k := 0; k < w.opts.Partitions; k++ {
		g := (g0 + k) % w.opts.Partitions
		i := w.leaderOf(g)
		if i < 0 || w.nodes[i].starved || !p.stallPeersHealthy(i) {
			continue
		}
		if st, _ := w.statusOf(w.nodes[i], g); w.wire.groupCreated(g) && p.canElectWithout(g, i, st.TopicID) {
			return i
		}
	}
	return -1
}

// stallPeersHealthy reports whether every node but i that can run again
// (a node gone for good, a spare not joined yet, is no peer) is up,
// unpaused, unstarved, has space, and reaches every other such node both
// ways.
func (p *planner) stallPeersHealthy(i int) bool {
	w := p.w
	for _, a := range w.nodes {
		if a.index == i || a.dead {
			continue
		}
		if !a.up || a.pausedUntil > w.now() || a.starved || a.fullUntil != 0 {
			return false
		}
		for _, b := range w.nodes {
			if b.index != i && b != a && !b.dead && w.net.isCut(a.index, b.index) {
				return false
			}
		}
	}
	return true
}

// canElectWithout reports whether the nodes but victim that run group g's
// incarnation topicID and are not rebuilding it (the able) can elect a
// leader while the victim's vote cannot be made durable: some able node
// that votes in its applied configuration (votesIn) must find a majority
// of the able among that configuration's voters and, in a joint
// configuration (a move in progress), among its outgoing voters too, as
// raft counts a candidate's votes. Fewer cannot elect (a topic deleted
// and created again meanwhile has a new group, which may still be
// electing its first leader). A replica that runs the group outside its
// voters (a move's learner, or a replica a move removed and has not
// deleted yet) never counts: seed 5 of the moves run on 2eb1879 counted
// node 4's replica of partition 3 (its configuration: voters 1 2 3) while
// node 2's replica rebuilt its wiped state (no vote before it catches up,
// which needs a leader) and node 1's vote waited for its stalled disk, and
// failed "led by nobody 6.98s later". The metadata group, whose voters
// the simulator reads otherwise (metaVoter), counts its voting able
// against a majority of the replication factor. A victim of -1 leaves
// out nobody (the quiet probe's question: can the live replicas elect).
func (p *planner) canElectWithout(g, victim int, topicID uint64) bool {
	w := p.w
	var able []*simNode
	for _, m := range w.nodes {
		if m.index == victim || !m.up {
			continue
		}
		if st, ok := w.statusOf(m, g); ok && !st.Rejoining && st.TopicID == topicID {
			able = append(able, m)
		}
	}
	voting := 0
	for _, cand := range able {
		if !w.votesIn(cand, g) {
			continue
		}
		voting++
		cfg, ok := w.replicaConfig(cand, g)
		if ok && majorityAmong(cfg.Voters, able) && (len(cfg.VotersOutgoing) == 0 || majorityAmong(cfg.VotersOutgoing, able)) {
			return true
		}
		if !ok && voting >= w.opts.Replication/2+1 {
			return true // no configuration to read: the metadata group
		}
	}
	return false
}

// majorityAmong reports whether more than half of voters are among nodes.
func majorityAmong(voters []node.NodeID, nodes []*simNode) bool {
	n := 0
	for _, m := range nodes {
		if slices.Contains(voters, m.id) {
			n++
		}
	}
	return n >= len(voters)/2+1
}

// leaderName says who leads: a node id, or "nobody".
func leaderName(w *world, lead int) string {
	if lead < 0 {
		return "nobody"
	}
	return fmt.Sprintf("node %d", w.nodes[lead].id)
}
