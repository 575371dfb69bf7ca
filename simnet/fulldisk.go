package simnet

import "time"

// Full disks in the simulator (node/diskfull.go): the planner gives a live
// node's disk a capacity a little above its free-space floor, so the node
// turns full within a tick or ten and must refuse produce, keep serving
// reads and lose nothing; the capacity is lifted after a while (at the
// next fault past its end, or at the heal), and writes must resume. A full
// disk is not damage: a node with one must never stop.

// simMinFreeBytes is every simulated node's free-space floor; a full disk
// leaves this plus up to simFullSlackBytes free, room for the writes of
// the ticks before the node sees the floor, raft's hard states and the
// metadata group.
const (
	simMinFreeBytes   = 256 << 10
	simFullSlackBytes = 128 << 10
)

// diskFull fills a node's disk for a while: a live node's, or one in
// three times a crashed node's waiting to restart, which then comes back
// full (its disk filled while it was down: another process's files), a
// restart its peers may see only as a new incarnation (node/quiesce.go).
func (p *planner) diskFull() {
	n := p.liveNode()
	if down := p.downNode(); down != nil && p.w.rngFault.IntN(3) == 0 {
		n = down
		p.w.coverage.Inc("fault/disk-full-while-down")
	}
	if n == nil || n.fullUntil != 0 {
		return
	}
	f := p.w.opts.Faults
	p.fillDisk(n, 4*time.Duration(between(p.w.rngFault, int64(f.NetFaultMin), int64(f.NetFaultMax))), simFullSlackBytes)
}

// fillDisk fills n's disk for d, to its free-space floor plus up to slack.
// The size counts the larger of the bytes held now and the bytes a crash
// would leave: removals not yet made durable (compacted segments) come
// back after a power cut, and a disk sized below them left a node unable
// to write even its boot count on restart ('cannot open its healthy
// disk', seed 9 with -sim.kafka) — a disk smaller than files it already
// held, which no real disk is.
func (p *planner) fillDisk(n *simNode, d time.Duration, slack int64) {
	w := p.w
	held := max(n.disk.UsedBytes(), n.disk.DurableBytes())
	n.disk.SetCapacity(held + simMinFreeBytes + w.rngFault.Int64N(slack))
	n.fullUntil = w.now() + d
	w.traceNote(kindFault, n.index, uint64(faultDiskFull), uint64(n.fullUntil))
}

// liftFullDisks gives back the space of full disks whose time is over (all
// of them when all is true).
// The full-disk episode's victim keeps its fill through a heal but the
// quiet probe's, as a disk stall's victim keeps its stall (endDiskStall).
func (p *planner) liftFullDisks(all bool) {
	for _, n := range p.w.nodes {
		if all && p.fullEp.active && p.fullEp.victim == n.index && !p.w.probe.active && p.w.now() < n.fullUntil {
			continue
		}
		if n.fullUntil != 0 && (all || p.w.now() >= n.fullUntil) {
			n.disk.SetCapacity(0)
			n.fullUntil = 0
		}
	}
}

// FreeBytes implements raftlog.SpaceReporter, so the node sees its floor.
func (c *cutDisk) FreeBytes() (int64, error) { return c.d.FreeBytes() }

// The full-disk episode: the random mix draws a full disk rarely (in 60
// seeds, some 16 fills of a disk were long enough to check, on nodes that
// led anything), so a seed whose mix draws full disks (Faults.DiskFull)
// also fills, once fullEpisodeAfter of its operations were issued, the
// disk of a partition leader whose peers are healthy and can elect
// without it (stallVictim), with 16 KiB above its floor, for the
// full-disk check's bound (fullcheck.go) plus 1.5 to 3 s, the random
// faults held meanwhile; in half the episodes the victim also crashes
// then and restarts 50-300 ms later, on its full disk. As a disk stall does, a due episode waits up to
// diskStallWaitMax for the faults under way to end, then ends them; it
// begins neither during an incident nor during a stall, and a liveness
// run's heal does not end it (the liveness bounds count from its end).

// fullEpisodeAfter is the share of the operations issued before the
// episode is due.
const fullEpisodeAfter = 0.4

// fullEpisode is the run's full-disk episode.
type fullEpisode struct {
	active bool
	victim int // its node index
}

// scheduleFullEpisode arms the full-disk episode of a seed whose fault
// mix draws full disks.
func (p *planner) scheduleFullEpisode() {
	if p.w.opts.Faults.DiskFull <= 0 {
		return
	}
	p.w.sched.schedule(diskStallPoll, &event{kind: evCall, node: -1, call: func() { p.pollFullEpisode(0) }})
}

// pollFullEpisode starts the episode once it is due and a victim exists;
// waited is how long a due episode has waited for one.
func (p *planner) pollFullEpisode(waited time.Duration) {
	w := p.w
	if w.work.spent() || w.probe.ran || w.probe.active {
		return
	}
	due := float64(w.work.issued) >= fullEpisodeAfter*float64(w.opts.Ops)
	if !due || p.inc.running || p.stall.active || w.now() < p.holdUntil {
		w.sched.schedule(diskStallPoll, &event{kind: evCall, node: -1, call: func() { p.pollFullEpisode(waited) }})
		return
	}
	i := p.stallVictim()
	if i >= 0 && !p.reachesAll(i) {
		i = -1
	}
	if i < 0 {
		p.holdUntil = max(p.holdUntil, w.now()+diskStallPoll)
		if waited += diskStallPoll; waited >= diskStallWaitMax {
			waited = 0
			w.coverage.Inc("event/disk-full-heal")
			p.healForIncident()
			p.endStarvation()
		}
		w.sched.schedule(diskStallPoll, &event{kind: evCall, node: -1, call: func() { p.pollFullEpisode(waited) }})
		return
	}
	n := w.nodes[i]
	if n.fullUntil != 0 {
		return // full already
	}
	d := w.fullBound(n) + time.Duration(between(w.rngFault, 1500, 3000))*time.Millisecond
	w.coverage.Inc("fault/disk-full-episode")
	p.fillDisk(n, d, incidentFullSlackBytes)
	p.fullEp = fullEpisode{active: true, victim: i}
	p.keepFull(n)
	if w.rngFault.IntN(2) == 0 {
		// The victim's process also dies as its disk fills and is back
		// within an election timeout: its peers see a new incarnation,
		// never a silence, and it may not campaign on its full disk
		// while they can lead, so the followers of the groups it led,
		// quiesced, must wake on the restart (node/quiesce.go).
		w.coverage.Inc("fault/disk-full-restart")
		w.crashNode(n, "fault/disk-full-restart")
		back := time.Duration(between(w.rngFault, 50, 300)) * time.Millisecond
		w.sched.schedule(back, &event{kind: evCall, node: -1, call: func() { p.restartNow(n) }})
		d += back + w.fullLeaderlessSlack() // long enough for the check that some replica leads
		n.fullUntil = w.now() + d
	}
	p.holdUntil = max(p.holdUntil, w.now()+d)
	w.sched.schedule(d, &event{kind: evCall, node: -1, call: p.endFullEpisode})
}

// endFullEpisode gives the victim's space back; after a liveness run's
// heal, the liveness bounds count from now.
func (p *planner) endFullEpisode() {
	w := p.w
	p.fullEp.active = false
	p.liftFullDisks(false)
	if w.work.healed {
		w.work.healAt = w.now()
		w.checker.leadersChecked = false
	}
}

// keepFull holds the episode's victim's free space at half its floor
// while the episode lasts: what the node frees (a segment retention or a
// compaction deleted) goes to another process writing to the same disk,
// so the node stays full throughout (at the floor plus slack, the node
// wavered around its floor, full and not, and the check's wait began
// again each time). Half the floor is still room for the writes before
// the node sees its floor, so none fails for space.
func (p *planner) keepFull(n *simNode) {
	if !p.fullEp.active || p.fullEp.victim != n.index || n.fullUntil == 0 {
		return
	}
	if free, _ := n.disk.FreeBytes(); free > simMinFreeBytes/2 {
		n.disk.SetCapacity(max(n.disk.UsedBytes(), n.disk.DurableBytes()) + simMinFreeBytes/2)
	}
	p.w.sched.schedule(diskStallPoll, &event{kind: evCall, node: -1, call: func() { p.keepFull(n) }})
}

// reachesAll reports whether node i reaches every other node that can run
// again both ways, unpaused.
func (p *planner) reachesAll(i int) bool {
	w := p.w
	if w.nodes[i].pausedUntil > w.now() {
		return false
	}
	for _, b := range w.nodes {
		if b.index != i && !b.dead && (w.net.isCut(i, b.index) || w.net.isCut(b.index, i)) {
			return false
		}
	}
	return true
}
