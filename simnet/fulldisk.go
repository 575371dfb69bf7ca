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
func (p *planner) liftFullDisks(all bool) {
	for _, n := range p.w.nodes {
		if n.fullUntil != 0 && (all || p.w.now() >= n.fullUntil) {
			n.disk.SetCapacity(0)
			n.fullUntil = 0
		}
	}
}

// FreeBytes implements raftlog.SpaceReporter, so the node sees its floor.
func (c *cutDisk) FreeBytes() (int64, error) { return c.d.FreeBytes() }
