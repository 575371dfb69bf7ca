package simnet

import "time"

// starveTickFactor: a starved node's ticks come this many times apart.
const starveTickFactor = 5

// starveLeader starves the host of a random partition's leader for 5 to 12
// election timeouts, as an overloaded machine is: its process gets so
// little CPU that its timer fires at a fifth of its rate, and its links to
// the other nodes are cut (a saturated NIC), while clients still reach it.
// The leader counts its lease and its check-quorum timeout in its own
// slow ticks, so it goes on believing it leads well after the others
// elected a new leader; a client whose reads it keeps answering never
// looks for the new one. Only a read path that asks a quorum (ReadIndex)
// stays linearizable there.
func (p *planner) starveLeader() {
	w := p.w
	i := w.leaderOf(w.rngFault.IntN(w.opts.Partitions))
	if i < 0 || w.nodes[i].starved {
		return
	}
	n := w.nodes[i]
	var links [][2]int
	for b := range w.nodes {
		if b != i {
			links = append(links, [2]int{i, b}, [2]int{b, i})
		}
	}
	d := time.Duration(between(w.rngFault, 50, 120)) * w.opts.TickInterval
	n.starved = true
	base := n.tickInterval
	n.tickInterval = base * starveTickFactor
	w.traceNote(kindFault, n.index, uint64(faultStarveLeader), uint64(d))
	w.net.addCuts(links, +1)
	w.sched.schedule(d, &event{kind: evHeal, node: -1, heal: &healAction{links: links}})
	w.sched.schedule(d, &event{kind: evCall, node: -1, call: func() { n.tickInterval, n.starved = base, false }})
}
