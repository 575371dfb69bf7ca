package simnet

import (
	"strings"
	"time"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// faultKind is one kind of fault the planner injects.
type faultKind uint8

const (
	faultCrash faultKind = iota + 1
	faultPartitionSym
	faultPartitionAsym
	faultIsolateLeader
	faultBitFlip
	faultFailRead
	faultFailSync
	faultPowerCut
	faultWipe
	faultClockJump
	faultCrashLeader
	faultKill
	faultCutRound
	faultCutRecovery
	faultPause
	faultLeaderChain
	faultDiskFull
	faultIsolateFollower
	faultStarveLeader
	faultDiskStall // an episode (diskstall.go), not drawn by weight
)

// flipMarginBytes keeps bit flips this far before the end of a file, so
// damage always lies inside a record followed by more synced data: the log
// must report it as corruption, not mistake it for a torn tail and
// silently drop an entry it acknowledged (which raft cannot survive on a
// minority plus a crash, and which is outside this fault model).
const flipMarginBytes = 4 << 10

// faultNames are the coverage names of the fault kinds (drawn and applied
// when an eligible node exists).
var faultNames = [...]string{
	faultCrash: "fault/crash", faultPartitionSym: "fault/partition-sym", faultPartitionAsym: "fault/partition-asym",
	faultIsolateLeader: "fault/isolate-leader", faultBitFlip: "fault/bit-flip", faultFailRead: "fault/fail-read",
	faultFailSync: "fault/fail-sync", faultPowerCut: "fault/power-cut", faultWipe: "fault/wipe",
	faultClockJump: "fault/clock-jump", faultCrashLeader: "fault/crash-leader", faultKill: "fault/kill",
	faultCutRound: "fault/cut-round", faultCutRecovery: "fault/cut-recovery", faultPause: "fault/pause",
	faultLeaderChain: "fault/leader-chain", faultDiskFull: "fault/disk-full", faultIsolateFollower: "fault/isolate-follower", faultStarveLeader: "fault/starve-leader",
	faultDiskStall: "fault/disk-stall",
}

// healAction is a network fault to undo: the directed links it cut, when
// the network had been healed gen times (a later heal released them).
type healAction struct {
	links [][2]int
	gen   int
}

// planner injects the seed's fault mix: at exponentially distributed gaps
// it picks a fault kind by weight and applies it, drawing only from the
// faults stream (and the disk stream for crash damage).
type planner struct {
	w       *world
	active  bool
	weights []struct {
		kind   faultKind
		weight int
	}
	total int
	// holdUntil: no fault begins before this time (an incident runs
	// alone: overload.go).
	holdUntil time.Duration
	overloads int       // overload episodes begun (overload.go)
	inc       incidents // the scheduled incidents (incidents.go)
	// starvedBase[i]: node i's tick period before it was starved.
	starvedBase []time.Duration
	stall       diskStall   // the disk-stall episodes (diskstall.go)
	fullEp      fullEpisode // the full-disk episode (fulldisk.go)
	// followerCutUntil is when the running isolateFollower cut heals: no
	// second one begins before (0: none ran).
	followerCutUntil time.Duration
}

func newPlanner(w *world) *planner {
	f := w.opts.Faults
	p := &planner{w: w}
	add := func(k faultKind, weight int) {
		if weight > 0 {
			p.weights = append(p.weights, struct {
				kind   faultKind
				weight int
			}{k, weight})
			p.total += weight
		}
	}
	add(faultCrash, f.Crash)
	add(faultPartitionSym, f.PartitionSym)
	add(faultPartitionAsym, f.PartitionAsym)
	add(faultIsolateLeader, f.IsolateLeader)
	if f.DamagedNodesMax > 0 {
		add(faultBitFlip, f.BitFlip)
		add(faultFailRead, f.FailRead)
	}
	add(faultFailSync, f.FailSync)
	add(faultPowerCut, f.PowerCut)
	if f.DamagedNodesMax > 0 {
		add(faultWipe, f.Wipe)
	}
	add(faultClockJump, f.ClockJump)
	add(faultCrashLeader, f.CrashLeader)
	add(faultKill, f.Kill)
	add(faultCutRound, f.PowerCutRound)
	add(faultCutRecovery, f.PowerCutRecovery)
	add(faultPause, f.Pause)
	add(faultLeaderChain, f.LeaderChain)
	add(faultDiskFull, f.DiskFull)
	add(faultIsolateFollower, f.IsolateFollower)
	add(faultStarveLeader, f.StarveLeader)
	return p
}

// start schedules the first fault and the rolling restart.
func (p *planner) start() {
	p.scheduleRolling()
	p.scheduleOverload()
	p.scheduleDiskStall()
	p.scheduleFullEpisode() // fulldisk.go
	p.scheduleIncidents()
	if p.total == 0 || p.w.opts.Faults.Interval <= 0 {
		return
	}
	p.active = true
	p.scheduleNext()
}

func (p *planner) scheduleNext() {
	mean := float64(p.w.opts.Faults.Interval)
	d := time.Duration(p.w.rngFault.ExpFloat64() * mean)
	p.w.sched.schedule(d, &event{kind: evFault, node: -1})
}

// act injects one fault and schedules the next.
func (p *planner) act() {
	if !p.active {
		return
	}
	if p.w.now() < p.holdUntil {
		p.w.coverage.Inc("fault/held-by-incident")
		p.scheduleNext()
		return
	}
	r := p.w.rngFault
	x := r.IntN(p.total)
	kind := p.weights[len(p.weights)-1].kind
	for _, wk := range p.weights {
		if x < wk.weight {
			kind = wk.kind
			break
		}
		x -= wk.weight
	}
	p.liftFullDisks(false)
	p.w.traceNote(kindFault, -1, uint64(kind), 0)
	p.w.coverage.Inc(faultNames[kind])
	switch kind {
	case faultCrash:
		p.crash()
	case faultPartitionSym:
		p.partitionSym()
	case faultPartitionAsym:
		p.partitionAsym()
	case faultIsolateLeader:
		p.isolateLeader()
	case faultBitFlip:
		p.bitFlip()
	case faultFailRead:
		p.failRead()
	case faultFailSync:
		p.failSync()
	case faultPowerCut:
		p.powerCut()
	case faultWipe:
		p.wipe()
	case faultClockJump:
		p.clockJump()
	case faultCrashLeader:
		p.crashLeader()
	case faultKill:
		p.kill()
	case faultCutRound:
		p.cutRound()
	case faultCutRecovery:
		p.cutRecovery()
	case faultPause:
		p.pause()
	case faultLeaderChain:
		p.leaderChain(p.w.rngFault.IntN(p.w.opts.Partitions), 3)
	case faultDiskFull:
		p.diskFull()
	case faultIsolateFollower:
		p.isolateFollower()
	case faultStarveLeader:
		p.starveLeader()
	}
	p.scheduleNext()
}

// liveNode picks a random live node, or nil.
func (p *planner) liveNode() *simNode {
	var live []*simNode
	for _, n := range p.w.nodes {
		if n.up {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[p.w.rngFault.IntN(len(live))]
}

// downNode picks a crashed node whose restart is queued, or nil.
func (p *planner) downNode() *simNode {
	var down []*simNode
	for _, n := range p.w.nodes {
		if !n.up && !n.dead && n.restartDue {
			down = append(down, n)
		}
	}
	if len(down) == 0 {
		return nil
	}
	return down[p.w.rngFault.IntN(len(down))]
}

// crash crashes a live node and schedules its restart.
func (p *planner) crash() {
	if n := p.liveNode(); n != nil {
		p.w.stats.Crashes++
		p.w.crashNode(n, "fault")
		p.w.scheduleRestart(n)
	}
}

// cutFor cuts links for a drawn duration, then heals them.
func (p *planner) cutFor(links [][2]int) {
	f := p.w.opts.Faults
	p.cutDuring(links, time.Duration(between(p.w.rngFault, int64(f.NetFaultMin), int64(f.NetFaultMax))))
}

// isolateFollower cuts a follower of a drawn partition off from every
// other node for longer than the retention window: with the run's short retention the
// leader's log start passes the follower's log, which must then catch up
// by installing a raft snapshot.
//
// One at a time: the fault needs the rest of the group to go on
// committing (else the log start never passes the follower's log), and a
// group of three tolerates one node cut off. Overlapping, these 17-20 s
// cuts isolated three of five nodes for 30 s (seed 253 of the standard
// sample: nodes 3, 4 and 5 cut off from 12.2 s to 30 s, no partition of
// theirs with a majority, and the clients' retries spent the run's event
// budget: "event budget 200000 exhausted ... an event storm").
func (p *planner) isolateFollower() {
	w := p.w
	if w.now() < p.followerCutUntil {
		w.coverage.Inc("fault/isolate-follower-held")
		return
	}
	leader := w.leaderOf(w.rngFault.IntN(w.opts.Partitions))
	if leader < 0 {
		return
	}
	follower := (leader + 1 + w.rngFault.IntN(len(w.nodes)-1)) % len(w.nodes)
	var links [][2]int
	for b := range w.nodes {
		if b != follower {
			links = append(links, [2]int{follower, b}, [2]int{b, follower})
		}
	}
	// Past the retention window and a segment's age or two, so the leader's
	// log start passes the follower's log.
	least := time.Duration(w.opts.RetentionMs+2*w.opts.SegmentMs)*time.Millisecond + time.Second
	d := time.Duration(between(w.rngFault, int64(least), int64(least+3*time.Second)))
	p.followerCutUntil = w.now() + d
	p.cutDuring(links, d)
}

// cutDuring cuts links for d, then heals them.
func (p *planner) cutDuring(links [][2]int, d time.Duration) {
	if len(links) == 0 {
		return
	}
	p.w.stats.NetFaults++
	for _, l := range links {
		p.w.trace.u64(uint64(l[0])<<32 | uint64(l[1]))
	}
	p.w.net.addCuts(links, +1)
	p.w.sched.schedule(d, &event{kind: evHeal, node: -1, heal: &healAction{links: links, gen: p.w.net.healedAll}})
}

// heal undoes one network fault (unless everything was healed already).
func (p *planner) heal(h *healAction) {
	if p.active {
		p.w.net.releaseCuts(h.links, h.gen)
	}
}

// partitionSym splits the nodes into two non-empty sides that cannot talk.
func (p *planner) partitionSym() {
	n := len(p.w.nodes)
	side := make([]bool, n)
	for {
		ones := 0
		for i := range side {
			side[i] = p.w.rngFault.IntN(2) == 1
			if side[i] {
				ones++
			}
		}
		if ones > 0 && ones < n {
			break
		}
	}
	var links [][2]int
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if side[i] != side[j] {
				links = append(links, [2]int{i, j})
			}
		}
	}
	p.cutFor(links)
}

// partitionAsym cuts one direction only: a node's frames to some others
// are lost while theirs still arrive (or the reverse).
func (p *planner) partitionAsym() {
	r := p.w.rngFault
	n := len(p.w.nodes)
	a := r.IntN(n)
	inbound := r.IntN(2) == 1
	var links [][2]int
	for b := 0; b < n; b++ {
		if b == a || r.IntN(3) == 0 {
			continue
		}
		if inbound {
			links = append(links, [2]int{b, a})
		} else {
			links = append(links, [2]int{a, b})
		}
	}
	p.cutFor(links)
}

// statusOf is live node n's status of group g (the metadata group is
// group Partitions), false when n does not run it.
func (w *world) statusOf(n *simNode, g int) (node.GroupStatus, bool) {
	if g == w.opts.Partitions {
		return n.core.MetadataStatus()
	}
	w.statusScratch = n.core.AppendStatus(w.statusScratch[:0])
	for _, s := range w.statusScratch {
		if w.groupOf[s.TopicPartition] == g {
			return s, true
		}
	}
	return node.GroupStatus{}, false
}

// leaderOf is the live node leading group g in the highest term, or -1.
func (w *world) leaderOf(g int) int {
	leader, term := -1, uint64(0)
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		if s, ok := w.statusOf(n, g); ok && s.IsLeader && s.Term >= term {
			leader, term = n.index, s.Term
		}
	}
	return leader
}

// isolateLeader cuts every link of the node leading a random partition:
// clients still reach it, so it may serve reads after a new leader was
// elected, without knowing it was deposed.
func (p *planner) isolateLeader() {
	w := p.w
	leader := w.leaderOf(w.rngFault.IntN(w.opts.Partitions))
	if leader < 0 {
		return
	}
	var links [][2]int
	for b := range w.nodes {
		if b != leader {
			links = append(links, [2]int{leader, b}, [2]int{b, leader})
		}
	}
	p.cutFor(links)
}

// damageable picks a node that may take disk damage without any group
// having damaged replicas beyond a minority, or nil.
func (p *planner) damageable() *simNode {
	w := p.w
	var ok []*simNode
	for _, n := range w.nodes {
		if n.dead {
			continue
		}
		if n.damaged || p.damageFits(n) {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	n := ok[w.rngFault.IntN(len(ok))]
	n.damaged = true
	return n
}

// damageFits reports whether marking n damaged keeps the damaged nodes at
// or below the budget. The metadata group places replicas as it likes, so
// the budget counts nodes: any two nodes may share a group.
func (p *planner) damageFits(n *simNode) bool {
	count := 0
	for _, m := range p.w.nodes {
		if m.damaged && m != n {
			count++
		}
	}
	return count+1 <= p.w.opts.Faults.DamagedNodesMax
}

// logFiles lists the files of n's disk that hold synced log or checkpoint
// data large enough to damage inside the margin, with their sizes.
func (p *planner) logFiles(n *simNode) (names []string, sizes []int64) {
	for _, name := range n.disk.Files() {
		if !strings.HasPrefix(name, "p/") {
			continue
		}
		f, err := n.disk.Open(name)
		if err != nil {
			continue
		}
		size, err := f.Size()
		_ = f.Close()
		if err == nil && size > flipMarginBytes {
			names = append(names, name)
			sizes = append(sizes, size)
		}
	}
	return names, sizes
}

// bitFlip flips one bit inside a log or checkpoint file of a damageable node.
func (p *planner) bitFlip() {
	n := p.damageable()
	if n == nil {
		return
	}
	names, sizes := p.logFiles(n)
	if len(names) == 0 {
		return
	}
	r := p.w.rngFault
	i := r.IntN(len(names))
	off := r.Int64N(sizes[i] - flipMarginBytes)
	n.disk.FlipBit(names[i], off, uint(r.IntN(8)))
	n.flipped = true
	p.w.stats.BitFlips++
	p.w.traceNote(kindFault, n.index, uint64(faultBitFlip), hashString(names[i])^uint64(off))
}

// failRead makes reads of one of a damageable node's files fail until its
// next restart attempt.
func (p *planner) failRead() {
	n := p.damageable()
	if n == nil {
		return
	}
	names, _ := p.logFiles(n)
	if len(names) == 0 {
		return
	}
	name := names[p.w.rngFault.IntN(len(names))]
	n.disk.FailReads(name, true)
	n.failReads = append(n.failReads, name)
	p.w.stats.FailedReads++
	p.w.traceNote(kindFault, n.index, uint64(faultFailRead), hashString(name))
}

// failSync makes a live node's next fsync fail: it must fail-stop.
func (p *planner) failSync() {
	if n := p.liveNode(); n != nil {
		n.disk.FailSync(true)
		n.failSync = true
		p.w.stats.FailedSyncs++
		p.w.traceNote(kindFault, n.index, uint64(faultFailSync), 0)
	}
}

// healAll ends every fault (liveness mode): no more faults, every link up,
// no drops or duplicates, transient disk faults cleared, and every crashed
// node that can restart restarted.
func (p *planner) healAll() {
	w := p.w
	again := w.work.healed
	p.active = false
	if !again {
		w.work.healed = true
		w.work.healAt = w.now()
	}
	w.net.healAll()
	p.liftFullDisks(true)
	restarted := false
	for _, n := range w.nodes {
		n.pausedUntil = 0
		w.clearDiskFaults(n)
		if !n.up && !n.dead {
			w.startNode(n)
			restarted = true
		}
	}
	if again {
		// A second heal (the quiet liveness probe crashed a node after
		// the liveness profile's heal): the bounds count from the restart,
		// and every partition must have a leader again by then.
		if restarted {
			w.work.healAt = w.now()
			w.checker.leadersChecked = false
		}
		return // the periodic liveness check is already scheduled
	}
	w.sched.schedule(w.opts.LivenessBound/4, &event{kind: evLivenessCheck, node: -1})
}

// hashString digests s for the trace.
func hashString(s string) uint64 {
	h := newTraceHash()
	h.str(s)
	return h.sum
}

// powerCut arms a live node's disk to lose power inside its next
// checkpoint write or segment roll, a few operations in (so each step of
// the write protocol is hit): the node fail-stops mid-round and its disk
// keeps only what was synced. In a seed with the compacted topic, one
// time in two it arms a cut inside the node's next compaction pass
// instead (compaction_cuts.go).
func (p *planner) powerCut() {
	n := p.liveNode()
	if n == nil {
		return
	}
	r := p.w.rngFault
	if p.w.opts.Compacted && r.IntN(2) == 0 {
		p.armCompactionCut(n) // compaction_cuts.go
		return
	}
	kind := cutCheckpoint
	if r.IntN(2) == 1 {
		kind = cutSegmentRoll
	}
	n.cut.arm(kind, r.IntN(5))
	p.w.traceNote(kindFault, n.index, uint64(faultPowerCut), uint64(kind))
}

// wipe replaces a damageable node's disk with an empty one, once the topic
// exists, while the others (every group's majority, by the damage budget)
// hold the data.
// The node crashes; with Faults.WipeRejoin it comes back with nothing,
// else it stays down for the rest of the run (the remaining nodes must
// then lose nothing and, in liveness runs, keep serving).
func (p *planner) wipe() {
	if !p.w.wire.created {
		// Before the topic exists a node that never comes back may never
		// have registered, and a topic of RF = cluster size can then never
		// be created: correct, but not this scenario.
		return
	}
	n := p.damageable()
	if n == nil {
		return
	}
	w := p.w
	w.crashNode(n, "wipe")
	n.disk = memdisk.New()
	n.cut.d = n.disk
	n.wiped, n.flipped = true, false
	n.failReads = nil
	w.stats.Wipes++
	w.traceNote(kindFault, n.index, uint64(faultWipe), 0)
	if !w.opts.Faults.WipeRejoin {
		if !n.dead {
			n.dead = true
			w.stats.DeadNodes++
		}
		return
	}
	n.dead = false
	w.scheduleRestart(n)
}

// clockJump moves a live node's Realtime by a second, a minute or an
// hour, forwards or backwards (Monotonic, which drives ticks, is unmoved).
func (p *planner) clockJump() {
	n := p.liveNode()
	if n == nil {
		return
	}
	r := p.w.rngFault
	d := pick(r, time.Second, time.Minute, time.Hour)
	if r.IntN(2) == 0 {
		d = -d
	}
	n.clock.skew += d
	p.w.noteSkew(n)
	p.w.stats.ClockJumps++
	p.w.traceNote(kindFault, n.index, uint64(faultClockJump), uint64(d))
}

// crashLeader crashes a node in the middle of a leadership change of a
// random group (a partition or the metadata group): one that runs the
// group while it has no leader (an election is under way), else the
// group's leader (forcing one).
func (p *planner) crashLeader() {
	w := p.w
	g := w.rngFault.IntN(w.opts.Partitions + 1)
	var electing []*simNode
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		if s, ok := w.statusOf(n, g); ok && s.Leader == 0 && !s.IsLeader {
			electing = append(electing, n)
		}
	}
	if len(electing) > 0 {
		n := electing[w.rngFault.IntN(len(electing))]
		w.stats.CrashElections++
		w.crashNode(n, "crash during election")
		w.scheduleRestart(n)
		return
	}
	if i := w.leaderOf(g); i >= 0 {
		w.stats.CrashLeaders++
		w.crashNode(w.nodes[i], "crash leader")
		w.scheduleRestart(w.nodes[i])
	}
}

// kill kills a live node's process (its page cache survives: the disk
// keeps what was written but not synced), half the time the leader of a
// random group, and schedules its restart.
func (p *planner) kill() {
	w := p.w
	n := p.liveNode()
	if w.rngFault.IntN(2) == 0 {
		if i := w.leaderOf(w.rngFault.IntN(w.opts.Partitions + 1)); i >= 0 {
			n = w.nodes[i]
		}
	}
	if n == nil {
		return
	}
	w.killNode(n, "kill")
	w.scheduleRestart(n)
}

// cutRound arms a live node's disk to stop at one of its next 16 disk
// writes, wherever they fall: between the entry writes, hard states and
// syncs of one Ready, inside a checkpoint, a roll or a removal. The node
// fail-stops out of its round. Half the time the power is cut (the disk
// keeps only what was synced); else the process is killed there (the disk
// keeps every write, synced or not: unsynced entries of the interrupted
// round survive into recovery, which only a kill inside a round leaves).
func (p *planner) cutRound() {
	n := p.liveNode()
	if n == nil || n.cut.armed != 0 {
		return
	}
	after := p.w.rngFault.IntN(16)
	n.cut.armNow(cutRound, after)
	n.cut.kill = p.w.rngFault.IntN(2) == 0
	p.w.traceNote(kindFault, n.index, uint64(faultCutRound), uint64(after))
}

// cutRecovery crashes a live node by a power loss and arms its disk to lose
// power again at one of the first 24 disk writes of its recovery (the
// torn-tail truncation, a checkpoint rewrite, the first hard state), so
// recovery itself is interrupted and the next one must cope with what it
// left.
func (p *planner) cutRecovery() {
	n := p.liveNode()
	if n == nil {
		return
	}
	w := p.w
	w.crashNode(n, "power loss before a cut recovery")
	n.recoveryCut = 1 + w.rngFault.IntN(24)
	w.traceNote(kindFault, n.index, uint64(faultCutRecovery), uint64(n.recoveryCut))
	w.scheduleRestart(n)
}

// rollingRestartGap separates the kills of a rolling restart;
// rollingRestartPoll is how often the planner looks whether the workload
// reached the point where the rolling restart starts.
const (
	rollingRestartGap  = 200 * time.Millisecond
	rollingRestartPoll = 20 * time.Millisecond
)

// scheduleRolling starts watching for the seed's rolling restart, if it
// has one: once the workload issued Faults.RollingRestartAfter of its
// operations (by then partitions hold checkpoints and producer state),
// every node in turn is killed as an upgrade would kill it, one
// rollingRestartGap after the other. A rolling restart is an operation,
// not a fault: it also runs after a liveness run healed (one node at a
// time, so every group keeps a majority).
func (p *planner) scheduleRolling() {
	if p.w.opts.Faults.RollingRestartAfter <= 0 {
		return
	}
	p.w.sched.schedule(rollingRestartPoll, &event{kind: evCall, node: -1, call: p.pollRolling})
}

// pollRolling starts the rolling restart when the workload got far enough.
func (p *planner) pollRolling() {
	w := p.w
	if w.work.overtime {
		return // the run is past its time limit: it only drains (overtime.go)
	}
	if float64(w.work.issued) < w.opts.Faults.RollingRestartAfter*float64(w.opts.Ops) {
		if !w.work.spent() {
			w.sched.schedule(rollingRestartPoll, &event{kind: evCall, node: -1, call: p.pollRolling})
		}
		return
	}
	for i, n := range w.nodes {
		w.sched.schedule(time.Duration(i)*rollingRestartGap, &event{kind: evCall, node: -1,
			call: func() { p.rollingKill(n) }})
	}
}

// rollingKill arms n to be killed at one of its next 16 disk writes: a
// SIGKILL lands inside a round of a busy process, so the unsynced writes
// of that round survive in the page cache into recovery. The restart
// follows (failStop).
func (p *planner) rollingKill(n *simNode) {
	if p.stallActive() {
		// A node whose disk stalls is not ready (/readyz): an orchestrated
		// restart waits for it, as it waits for a restarted node.
		p.w.sched.schedule(rollingRestartPoll, &event{kind: evCall, node: -1, call: func() { p.rollingKill(n) }})
		return
	}
	if !n.up || n.cut.armed != 0 || p.w.work.overtime {
		return
	}
	p.w.coverage.Inc("fault/rolling-kill")
	after := p.w.rngFault.IntN(16)
	n.cut.armNow(cutRound, after)
	n.cut.kill = true
	p.w.traceNote(kindFault, n.index, uint64(faultCutRound), uint64(after))
}

// pause stops a live node's process (3 times in 4 a partition leader's)
// for 3 to 8 election timeouts (of 10 raft ticks): it neither ticks nor reads its input, then resumes with
// every frame, client request and tick queued meanwhile. A leader paused
// mid-term resumes believing it still leads, with its lease and timeout
// state as it was: the read and lease logic must not trust it.
func (p *planner) pause() {
	w := p.w
	n := p.liveNode()
	if i := w.leaderOf(w.rngFault.IntN(w.opts.Partitions)); i >= 0 && w.rngFault.IntN(4) != 0 {
		n = w.nodes[i]
	}
	if n == nil || n.pausedUntil > p.w.now() {
		return
	}
	d := time.Duration(between(p.w.rngFault, 30, 80)) * p.w.opts.Knobs.raftTick(p.w.opts)
	n.pausedUntil = p.w.now() + d
	p.w.traceNote(kindFault, n.index, uint64(faultPause), uint64(d))
}

// leaderChainGap is how long each leader of a chain keeps taking
// proposals in isolation before the next one is isolated.
const leaderChainGap = 150 * time.Millisecond

// leaderChain cuts every link of group g's leader (clients still reach it,
// so it appends proposals it cannot commit) for a few election timeouts,
// then, once another node leads, does the same to that one, rounds times:
// the followers end up with uncommitted tails from several leaders and
// terms, which raft must truncate when a leader with the committed log
// reaches them.
func (p *planner) leaderChain(g, rounds int) {
	w := p.w
	if rounds == 0 || !p.active {
		return
	}
	leader := w.leaderOf(g)
	if leader >= 0 {
		var links [][2]int
		for b := range w.nodes {
			if b != leader {
				links = append(links, [2]int{leader, b}, [2]int{b, leader})
			}
		}
		w.coverage.Inc("fault/leader-chain-isolate")
		w.net.addCuts(links, +1)
		w.sched.schedule(3*leaderChainGap, &event{kind: evHeal, node: -1, heal: &healAction{links: links, gen: p.w.net.healedAll}})
	}
	w.sched.schedule(leaderChainGap, &event{kind: evCall, node: -1, call: func() { p.leaderChain(g, rounds-1) }})
}
