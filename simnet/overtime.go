package simnet

import (
	"fmt"
	"time"
)

// Overtime: a safety run that reaches Options.TimeLimit with work pending
// (faults throughout under production's one-second elections make 12 of
// the standard sample's 200 seeds that slow) used to stop there, so
// every check that needs whole partitions drained did not run: lost
// acknowledged writes and the other log checks with FinalDrain, the
// transaction sessions' exactly-once, the library group's at-least-once,
// the operator's read-back. TxnOffsetsOnAbort escaped 6 of its 7 misses in
// seeds 1-100 that way; with the overtime it is caught in 68 of the 69
// seeds that run it, against 62 (the figures are in doc.go).
//
// Now the run goes on past the limit: the clients issue no new operation
// (workload.take, workload.spent: producers, consumers and readers finish
// the one they have; the admin makes no further re-creation and the mover
// no further move; a grow or join still due is made, as when the budget
// runs out), the random faults, incidents, disk stalls, overloads and
// rolling restarts stop, and once a running incident's chain has ended
// every fault heals (the network, pauses, full disks, disk faults,
// starvation, armed power cuts; every node down restarts). That heal is
// the liveness heal: from it every partition must have a leader and every
// pending operation must end within Options.LivenessBound (checks.go).
// The clients then end as in any run, the quiet probe is skipped (its
// crash and bounds would spend the grace) and the final heal, the
// settling of the groups and transactions and the final drain follow,
// with every final check. A run not drained DrainGrace after the limit
// fails as a liveness failure; nothing is excused.
//
// DrainGrace is three times the liveness bound, room for an incident's
// chain to end (a few seconds), the clients' last operations (each bound
// by OpDeadline, 8 s), the final heal's restarts and the drain.
// DrainGraceEvents extends the event budget by as much as the standard
// run spends in about 30 s of virtual time at its busiest.
//
// Rejected: an event budget per virtual second instead of the fixed
// EventsMax. An event storm is a loop that moves virtual time little, so
// a rate would catch it sooner, but honest seeds differ too much: in the
// standard sample (seeds 1-200) short busy runs reach 8,600 events per
// virtual second (seed 185: 65,466 in 7.6 s), while the fixed budget is
// 3,333 a second over 60 s and the busiest seed used 140,027 of it. A rate
// that passes the short runs allows 540,000 events in a long one, looser
// than now; one that keeps the long runs where they are fails the short
// ones. The fixed budget plus a stated grace keeps every run bounded.
const (
	DrainGrace       = 30 * time.Second
	DrainGraceEvents = 100_000
)

// kindOvertime is the overtime's start in the trace.
const kindOvertime uint64 = 108

// beginOvertime starts a safety run's overtime at the time limit: no new
// work, no new faults, and every fault healed once no incident runs.
func (w *world) beginOvertime() {
	w.work.overtime = true
	w.coverage.Inc("event/time-limit-grace")
	w.traceNote(kindOvertime, -1, 0, 0)
	p := w.planner
	p.active = false
	p.inc.queue = nil
	w.overtimeHeal()
}

// overtimeHeal heals every fault once the running incident (if any) ended
// its chain: an incident heals and restarts what it took down itself, and
// a heal in its middle would be undone by its next step. Once the quiet
// probe ran, the faults stopped already and its end heals all (finalHeal).
func (w *world) overtimeHeal() {
	p := w.planner
	if w.probe.ran || w.stopped {
		return
	}
	if p.inc.running {
		w.sched.schedule(incidentPoll, &event{kind: evCall, node: -1, call: w.overtimeHeal})
		return
	}
	p.endStarvation()
	p.healForIncident() // disarms power cuts, restarts what is down
	p.healAll()         // the network, full disks, pauses, disk faults; the liveness bounds start
}

// pendingWork says what a run in overtime still waits for, for the
// failure at the end of the grace: the clients still working, or the
// final drain's progress.
func (ww *wireWorkload) pendingWork() string {
	if ww.finalHealAt == 0 {
		var busy []int
		for _, c := range append([]*wireClient{ww.admin}, ww.clients...) {
			if !c.finished {
				busy = append(busy, c.index)
			}
		}
		return fmt.Sprintf("%d actors still working, clients %v not finished", ww.active, busy)
	}
	s := fmt.Sprintf("final heal at %v, drain at partition %d of %d", ww.finalHealAt, ww.drain.nextPartition, len(ww.drain.positions))
	if ww.drain.nextPartition < len(ww.drain.positions) {
		return s
	}
	// Past the last partition the drain waits for what drainNext awaits.
	if mp := ww.moves; mp != nil && !mp.settled && mp.settleStart != 0 {
		s += "; moves: " + ww.unfinishedMove()
	}
	if jp := ww.joins; jp != nil && !jp.settled && jp.settleStart != 0 {
		s += "; membership: " + ww.unsettledMembership()
	}
	if op := ww.ops; op != nil && !op.verified {
		s += fmt.Sprintf("; operator: action %d of %d", op.next, len(op.plan))
		if op.busy && op.next > 0 {
			s += fmt.Sprintf(" (%s) in flight", op.plan[op.next-1].kind)
		}
		if op.verify != nil {
			s += ", verifying"
		}
	}
	return s
}

// eventsMax is the run's event budget: Options.EventsMax, and
// DrainGraceEvents more in overtime.
func (w *world) eventsMax() int64 {
	if w.work.overtime {
		return w.opts.EventsMax + DrainGraceEvents
	}
	return w.opts.EventsMax
}
