package simnet

import "time"

// starveTickFactor: a starved node's ticks come this many times apart.
const starveTickFactor = 5

// starveLeader starves the host of a partition's leader for 5 to 12
// election timeouts, as an overloaded machine is: its process gets so
// little CPU that its timer fires at a fifth of its rate, and its links to
// the other nodes are cut (a saturated NIC), while clients still reach it.
// The leader counts its lease and its check-quorum timeout in its own
// slow ticks, so it goes on believing it leads well after the others
// elected a new leader; a client whose reads it keeps answering never
// looks for the new one. Only a read path that asks a quorum (ReadIndex)
// stays linearizable there.
//
// The victim is a leader whose peers can elect without it (starving a
// node whose peers are themselves down or cut apart only stalls the group:
// the overload of one machine in a healthy cluster is the fault).
func (p *planner) starveLeader() {
	if i := p.starvable(); i >= 0 {
		d := time.Duration(between(p.w.rngFault, 50, 120)) * p.w.opts.TickInterval
		p.starve(i, d, starveTickFactor)
	}
}

// starve starves node i for d, its ticks factor times apart.
func (p *planner) starve(i int, d time.Duration, factor int) {
	w := p.w
	n := w.nodes[i]
	var links [][2]int
	for b := range w.nodes {
		if b != i {
			links = append(links, [2]int{i, b}, [2]int{b, i})
		}
	}
	n.starved = true
	base := n.tickInterval
	n.tickInterval = base * time.Duration(factor)
	w.traceNote(kindFault, n.index, uint64(faultStarveLeader), uint64(d))
	w.net.addCuts(links, +1)
	gen := w.net.healedAll
	w.sched.schedule(d, &event{kind: evCall, node: -1, call: func() {
		w.net.releaseCuts(links, gen)
		if n.starved {
			n.tickInterval, n.starved = base, false
		}
	}})
	if p.starvedBase == nil {
		p.starvedBase = make([]time.Duration, len(w.nodes))
	}
	p.starvedBase[i] = base
}

// endStarvation gives every starved node its tick rate back at once (a
// heal of everything: the liveness probe).
func (p *planner) endStarvation() {
	for _, n := range p.w.nodes {
		if n.starved {
			n.tickInterval, n.starved = p.starvedBase[n.index], false
		}
	}
}

// starvable picks the leader of a partition (from a random one on) whose
// other nodes are up, running and connected to one another, or -1.
func (p *planner) starvable() int {
	w := p.w
	g0 := w.rngFault.IntN(w.opts.Partitions)
	for k := 0; k < w.opts.Partitions; k++ {
		i := w.leaderOf((g0 + k) % w.opts.Partitions)
		if i >= 0 && !w.nodes[i].starved && p.peersHealthy(i) {
			return i
		}
	}
	return -1
}

// peersHealthy reports whether every node but i is up, not paused, not
// rebuilding a lost disk, and reaches every other such node both ways.
func (p *planner) peersHealthy(i int) bool {
	w := p.w
	for _, a := range w.nodes {
		if a.index == i {
			continue
		}
		if !a.up || a.pausedUntil > w.now() || w.rebuilding(a) {
			return false
		}
		for _, b := range w.nodes {
			if b.index != i && b != a && w.net.isCut(a.index, b.index) {
				return false
			}
		}
	}
	return true
}

// rebuilding reports whether a replica of node n still recovers from a
// lost disk (node.GroupStatus.Rejoining): it neither votes nor campaigns
// until it caught up, which takes a leader elected by the others, so its
// node cannot stand in for a starved or stalled one. Starving node 1 and
// then stalling its disk while node 3 rebuilt a wiped disk left the
// metadata group and every partition without a majority for 11 s after a
// liveness run's heal (TestSimGroups seed 5 with authorization, at
// ec4d389): an outage of two nodes of three, not the overload of one
// machine in a healthy cluster these faults stand for.
func (w *world) rebuilding(n *simNode) bool {
	if st, ok := n.core.MetadataStatus(); ok && st.Rejoining {
		return true
	}
	for _, s := range n.core.Status() {
		if s.Rejoining {
			return true
		}
	}
	return false
}
