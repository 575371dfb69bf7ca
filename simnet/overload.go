package simnet

import "time"

// overloadPoll is how often the overload episode checks whether its time
// came and its victim's peers are healthy.
const overloadPoll = 20 * time.Millisecond

// scheduleOverload arms the run's overload episodes
// (Faults.OverloadAfter, Faults.Overloads): once that share of the
// operations was issued, the host of a partition leader is overloaded
// for 1 to 3 s (starve: its timer fires 5, 10 or 20 times late, its links
// to the other nodes are lost, its clients are still served) while the
// rest of the cluster is healthy, and no other fault begins until it
// ends. It is an incident, not a fault of the random mix: one machine
// overloaded by a noisy neighbour, a runaway compaction or swapping, in an
// otherwise healthy cluster, one to three times a run (each a second
// after the previous one ended) in most seeds — also in seeds
// whose mix injects nothing, and after a liveness run healed. The random
// mix overlaps faults so densely (a follower isolated for 10-20 s, a
// crash, a pause) that a lone leader cut off from two healthy peers, the
// case a lease read gets wrong, is rare in it.
func (p *planner) scheduleOverload() {
	if p.w.opts.Faults.OverloadAfter <= 0 {
		return
	}
	p.w.sched.schedule(overloadPoll, &event{kind: evCall, node: -1, call: p.pollOverload})
}

// pollOverload starts the episode when the workload got far enough and a
// leader with healthy peers exists; it gives up once every operation was
// issued.
func (p *planner) pollOverload() {
	w := p.w
	if w.work.spent() || w.probe.ran {
		return
	}
	i := -1
	if float64(w.work.issued) >= w.opts.Faults.OverloadAfter*float64(w.opts.Ops) && !p.inc.running && !p.stallActive() {
		i = p.starvable()
	}
	if i < 0 {
		w.sched.schedule(overloadPoll, &event{kind: evCall, node: -1, call: p.pollOverload})
		return
	}
	d := p.overloadEpisode(i)
	if p.overloads < w.opts.Faults.Overloads {
		// The next episode once the cluster had a second to recover.
		w.sched.schedule(d+time.Second, &event{kind: evCall, node: -1, call: p.pollOverload})
	}
}

// overloadEpisode overloads node i's host for 1 to 3 s, holding the other
// faults meanwhile, and returns how long.
func (p *planner) overloadEpisode(i int) time.Duration {
	w := p.w
	w.coverage.Inc("fault/overload")
	p.overloads++
	r := w.rngFault
	d := time.Duration(between(r, 100, 300)) * w.opts.TickInterval
	p.starve(i, d, int(pick[int64](r, 5, 10, 20)))
	p.holdUntil = w.now() + d
	return d
}
