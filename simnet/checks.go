package simnet

import (
	"time"

	"github.com/strandlog/strand/node"
)

// applyKey names one raft index of one group.
type applyKey struct {
	group int
	index uint64
}

// termKey names one term of one group.
type termKey struct {
	group int
	term  uint64
}

// checker holds the invariants checked at every step of a run.
type checker struct {
	w *world
	// applied holds, per (group, index), a digest of the entry the first
	// replica applied there (term and data): every other replica, and every
	// re-application after a restart, must match it.
	applied map[applyKey]uint64
	// leaders holds the one leader of each (group, term) seen so far, from
	// leaders' own status and from followers' view of their leader.
	leaders map[termKey]node.NodeID
	// hwms holds, per (group, applied raft index), the high-water mark of
	// the first replica seen there: the engine state is a function of the
	// applied prefix, so every replica and incarnation must agree.
	hwms map[applyKey]int64
	// leadersChecked: liveness mode checked for leaders after the heal.
	leadersChecked bool
	// txnOrder checks markers against the coordinators' decisions
	// (wire_txn_decisions.go); nil without a transactions topic.
	txnOrder *txnDecisions
}

func newChecker(w *world) *checker {
	c := &checker{w: w, applied: make(map[applyKey]uint64), leaders: make(map[termKey]node.NodeID),
		hwms: make(map[applyKey]int64)}
	if txnPartitions(w.opts) > 0 {
		c.txnOrder = newTxnDecisions(w)
	}
	return c
}

// entryDigest digests an applied entry's term and bytes (hashBytes: every
// replica's every applied entry passes here, FNV's byte loop was 1.5% of a
// run's CPU).
func entryDigest(term uint64, data []byte) uint64 {
	h := newTraceHash()
	h.u64(term)
	h.u64(hashBytes(data))
	return h.sum
}

// onApply is every node's ApplyObserver: replicas that applied index i of
// a group's incarnation applied the same entry.
func (c *checker) onApply(n *simNode, tp node.TopicPartition, topicID, index, term uint64, data []byte) {
	g, ok := c.w.groupOf[tp]
	if !ok {
		c.w.fail("node %d applied an entry of unknown partition %v", n.id, tp)
		return
	}
	g = c.w.incarnations.slot(g, topicID)
	c.w.tierApplied(n, tp, topicID, index) // tier.go
	d := entryDigest(term, data)
	c.w.trace.u64(d)
	k := applyKey{group: g, index: index}
	if prev, seen := c.applied[k]; !seen {
		c.applied[k] = d
		if res, ok := c.w.digests.onApply(g, index, data); ok && isCoordinatorTopic(tp.Topic) {
			c.w.offsets.onApply(g, data, res)
		}
		c.txnOrder.onFirstApply(tp, index, data)
	} else if prev != d {
		c.w.fail("partition %s index %d: node %d applied entry of term %d digest %016x, an earlier application was %016x",
			c.w.incarnations.label(g), index, n.id, term, d, prev)
	}
}

// onStatus checks the status of a node that just processed an event: at
// most one leader per term per group, one high-water mark per applied
// index, and one engine state digest per applied index.
func (c *checker) onStatus(n *simNode, statuses []node.GroupStatus) {
	if len(n.lastStatus) != len(statuses) {
		n.lastStatus = make([]node.GroupStatus, len(statuses))
	}
	for i, s := range statuses {
		if s == n.lastStatus[i] {
			continue // checked already: only changes need checking
		}
		n.lastStatus[i] = s
		g, ok := c.w.groupOf[s.TopicPartition]
		if !ok {
			c.w.fail("node %d reports unknown partition %v", n.id, s.TopicPartition)
			continue
		}
		g = c.w.incarnations.slot(g, s.TopicID)
		c.checkHighWatermark(n, g, s)
		c.w.digests.checkStatus(n, g, s)
		leader := s.Leader
		if s.IsLeader {
			if leader != 0 && leader != n.id {
				c.w.fail("partition %s term %d: node %d is leader but names %d", c.w.incarnations.label(g), s.Term, n.id, leader)
			}
			leader = n.id
		}
		if leader == 0 {
			continue
		}
		k := termKey{group: g, term: s.Term}
		if prev, seen := c.leaders[k]; !seen {
			c.leaders[k] = leader
			c.w.coverage.Inc("event/leader-elected")
		} else if prev != leader {
			c.w.fail("partition %s term %d has two leaders: %d and %d (seen by node %d)", c.w.incarnations.label(g), s.Term, prev, leader, n.id)
		}
	}
}

// onOpDone checks the liveness bound for an operation that just finished.
// An operation that finishes while an outage after the heal is under way
// (a disk stall, a node down awaiting its restart) is not judged, as
// livenessCheck waits such outages out; its end restarts the bounds
// (endStallEpisode, restartedAfterHeal), so one that finishes after is
// judged from there.
func (c *checker) onOpDone(start, end time.Duration) {
	wl := c.w.work
	if c.w.opts.Profile != Liveness || !wl.healed {
		return
	}
	if c.w.planner.stallActive() || c.w.restartPending() {
		return
	}
	// A clientlib call whose answer was lost at the heal ends only at the
	// client's own deadline (libBackstop), as in production: the bound
	// starts after it.
	if due := max(start, wl.healAt) + c.w.opts.LivenessBound + c.w.opts.libRequestTimeout() + time.Second; end > due {
		c.w.fail("liveness: an operation started at %v finished at %v, after the bound %v", start, end, due)
	}
}

// livenessCheck runs every quarter bound after the heal: at heal+bound every
// partition must have a leader, and no operation may be pending longer
// than the bound. A violation ends the run.
func (c *checker) livenessCheck() {
	w := c.w
	bound := w.opts.LivenessBound
	if w.planner.stallActive() {
		// A disk stall after the heal is a fault the bounds wait out
		// (endStallEpisode restarts them).
		w.sched.schedule(bound/4, &event{kind: evLivenessCheck, node: -1})
		return
	}
	if w.restartPending() {
		// A node killed after the heal (a rolling restart runs after it
		// too) is an outage the bounds wait out; its restart starts them
		// again (restartedAfterHeal).
		w.sched.schedule(bound/4, &event{kind: evLivenessCheck, node: -1})
		return
	}
	// The quiet probe crashes a leader on purpose and bounds the
	// elections itself; the final heal after it counts anew.
	if w.now() >= w.work.healAt+bound && !c.leadersChecked && !w.probe.active {
		c.leadersChecked = true
		for g := range w.opts.Partitions {
			if !c.hasLeader(g) && w.wire.groupCreated(g) {
				w.fail("liveness: partition %d has no leader %v after the heal", g, bound)
				w.stop()
			}
		}
	}
	for _, cl := range append(w.wire.clients, w.wire.drain) {
		if start, ok := cl.pendingSince(); ok && w.now() > max(start, w.work.healAt)+bound {
			w.fail("liveness: client %d's operation pending since %v (heal at %v)", cl.index, start, w.work.healAt)
			w.stop()
		}
	}
	w.sched.schedule(bound/4, &event{kind: evLivenessCheck, node: -1})
}

// restartPending reports whether a node is down with its restart
// scheduled.
func (w *world) restartPending() bool {
	for _, n := range w.nodes {
		if !n.up && !n.dead && n.restartDue {
			return true
		}
	}
	return false
}

// restartedAfterHeal restarts the liveness bounds when a node comes back
// after the heal: the bounds count from the end of the last outage, as
// after a disk stall or the quiet probe's crash. With production's ticks a
// rolling restart after the heal keeps a node down up to RestartMax
// (scaled to 5-12 s), one node after another (seeds 89, 139, 151 had a
// group without a majority 10 s after the heal).
func (w *world) restartedAfterHeal(n *simNode) {
	if n.up && w.work.healed && w.opts.Profile == Liveness {
		w.work.healAt = w.now()
		w.checker.leadersChecked = false
	}
}

// hasLeader reports whether a live node leads group g.
func (c *checker) hasLeader(g int) bool {
	for _, n := range c.w.nodes {
		if !n.up {
			continue
		}
		for _, s := range n.core.Status() {
			if c.w.groupOf[s.TopicPartition] == g && s.IsLeader {
				return true
			}
		}
	}
	return false
}

// checkHighWatermark: replicas that applied the same prefix of a group
// report the same high-water mark.
func (c *checker) checkHighWatermark(n *simNode, g int, s node.GroupStatus) {
	k := applyKey{group: g, index: s.AppliedIndex}
	if prev, seen := c.hwms[k]; !seen {
		c.hwms[k] = s.HighWatermark
	} else if prev != s.HighWatermark {
		c.w.fail("partition %s applied index %d: node %d reports high-water mark %d, another replica reported %d",
			c.w.incarnations.label(g), s.AppliedIndex, n.id, s.HighWatermark, prev)
	}
}
