package simnet

import (
	"fmt"
	"time"
)

// Trace record kinds for happenings that are not queue events.
const (
	kindNodeOpen  uint64 = 100
	kindNodeCrash uint64 = 101
	kindNodeError uint64 = 102
	kindNodePanic uint64 = 103
	kindFault     uint64 = 104
	kindNodeKill  uint64 = 105
)

// traceEvent folds one processed event into the trace hash: its time,
// kind, target and a digest of its payload.
func (w *world) traceEvent(e *event) {
	h := &w.trace
	h.u64(uint64(e.at))
	h.u64(uint64(e.kind))
	h.u64(uint64(int64(e.node)))
	h.u64(uint64(int64(e.from)))
	if e.frame != nil {
		h.u64(hashBytes(e.frame))
	}
}

// traceNote folds a non-event happening (open, crash, fault) into the hash.
func (w *world) traceNote(kind uint64, nodeIndex int, a, b uint64) {
	h := &w.trace
	h.u64(uint64(w.sched.now))
	h.u64(kind)
	h.u64(uint64(int64(nodeIndex)))
	h.u64(a)
	h.u64(b)
}

// run processes events until the workload is done, the queue empties or the
// time limit passes.
func (w *world) run() {
	for _, n := range w.nodes {
		if n.spare {
			continue // opened when it joins (wire_joins.go)
		}
		w.startNode(n)
	}
	w.wire.start()
	w.planner.start()
	w.watchElections()
	w.startQuotaProbe() // loop.go
	if w.opts.Profile == Liveness {
		w.sched.schedule(w.opts.HealAfterMax, &event{kind: evLivenessHeal, node: -1})
	}
	for !w.stopped && len(w.sched.queue) > 0 {
		e := w.sched.next()
		if e.at > w.opts.TimeLimit && !w.work.overtime {
			w.stats.TimeLimited = true
			if w.opts.Profile == Liveness {
				w.fail("time limit %v reached with work pending: %s (%s)", w.opts.TimeLimit, w.wire.pendingWork(), w.stats)
				break
			}
			if w.stats.ProducesOK == 0 {
				// Faults throughout excuse slow progress, not none: a
				// cluster that never acknowledged a write in the whole
				// run never came up (elections that never end).
				w.fail("time limit %v reached and no produce ever succeeded", w.opts.TimeLimit)
				break
			}
			w.beginOvertime() // overtime.go: heal, then drain within the grace
		}
		if w.work.overtime && e.at > w.opts.TimeLimit+DrainGrace {
			w.fail("liveness: time limit %v reached, faults healed, and the run did not drain within %v more: %s (%s)",
				w.opts.TimeLimit, DrainGrace, w.wire.pendingWork(), w.stats)
			break
		}
		w.events++
		if budget := w.eventsMax(); w.events-w.roundEnds > budget {
			w.fail("event budget %d exhausted at virtual time %v: an event storm (%s)", budget, w.now(), w.stats)
			break
		}
		w.traceEvent(e)
		w.dispatch(e)
		w.tierTick()           // tier.go
		w.checkTierDeletions() // tier_replicated.go
	}
}

// dispatch performs one event.
func (w *world) dispatch(e *event) {
	if w.heldInputLost(e) || w.deferPaused(e) {
		return
	}
	switch e.kind {
	case evTick:
		n := w.nodes[e.node]
		if !n.up || n.incarnation != e.incarnation {
			return
		}
		w.guardCall(n, n.round.Tick)
		w.endInput(n)
		if n.up && n.incarnation == e.incarnation {
			w.lookAtFullNode(n) // fullcheck.go
		}
		if n.up && n.incarnation == e.incarnation {
			w.sched.schedule(n.tickInterval, &event{kind: evTick, node: e.node, incarnation: e.incarnation})
		}
	case evFrame:
		n := w.nodes[e.node]
		if !n.up || w.net.isCut(e.from, e.node) {
			return
		}
		w.guardCall(n, func() { n.round.Receive(e.frame) })
		w.endInput(n)
	case evFault:
		w.planner.act()
	case evRestart:
		n := w.nodes[e.node]
		n.restartDue = false
		if !n.up && !n.dead && !w.probe.active && !n.heldDown { // the probe keeps a down node down (healAll restarts it)
			w.startNode(n)
			w.restartedAfterHeal(n) // checks.go
			if !n.up && !n.dead {
				w.scheduleRestart(n)
			}
		}
	case evHeal:
		w.planner.heal(e.heal)
	case evLivenessHeal:
		if w.planner.incidentBusy() { // the heal waits for the incident's end
			w.planner.deferHeal()
			return
		}
		if !w.probe.active { // the probe's end heals all
			w.planner.healAll()
		}
	case evLivenessCheck:
		w.checker.livenessCheck()
	case evCall:
		e.call()
	default:
		panic(fmt.Sprintf("simnet: unknown event kind %d", e.kind))
	}
}

// guardCall runs a core method under guard; a panic under disk faults
// fail-stops the node.
func (w *world) guardCall(n *simNode, fn func()) {
	if w.guard(n, fn) {
		w.stats.FailStops++
		w.crashNode(n, "panic under disk fault")
		w.scheduleRestart(n)
	}
}

// stop ends the run after the current event.
func (w *world) stop() { w.stopped = true }

// now is the current virtual time.
func (w *world) now() time.Duration { return w.sched.now }

// deferPaused holds back an event for a paused node (its ticks, frames
// and client requests) until the node resumes. The node then finds its
// input queued up, as a stopped process would, and reads it in no
// particular order: each event lands within a tick of the resume (the
// network's jitter reorders a link anyway), so a client request may come
// before the frame that tells a paused leader it was deposed.
func (w *world) deferPaused(e *event) bool {
	if e.node < 0 || (e.kind != evTick && e.kind != evFrame && e.kind != evCall) {
		return false
	}
	n := w.nodes[e.node]
	if !n.up || n.pausedUntil <= w.now() {
		return false
	}
	spread := time.Duration(w.rngFault.Int64N(int64(w.opts.TickInterval)))
	if e.kind != evTick { // a tick carries its incarnation already
		e.held, e.incarnation = true, n.incarnation
	}
	w.sched.schedule(n.pausedUntil-w.now()+spread, e)
	return true
}

// heldInputLost reports whether e is a frame or client request that
// deferPaused held for a process that has since crashed: it sat in that
// process's socket buffers, which die with it, so the next incarnation
// never reads it (over TCP the sender's connection was reset). Delivered
// to a later incarnation, a request the client had long given up on took
// effect after the client's next attempt succeeded (seed 126: three
// DeleteTopics held through a 4.8 s pause and two restarts deleted the
// topic the admin had re-created since).
func (w *world) heldInputLost(e *event) bool {
	if !e.held {
		return false
	}
	n := w.nodes[e.node]
	return !n.up || n.incarnation != e.incarnation
}
