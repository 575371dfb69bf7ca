package simnet

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/strandlog/strand/linearizability"
)

// PorcupineTimeout bounds each linearizability check; running out of time
// fails the seed (inconclusive is never a pass).
const PorcupineTimeout = 30 * time.Second

// Result is the outcome of one seed.
type Result struct {
	Options Options
	Ops     int           // operations recorded in the history
	Events  int64         // events processed
	Hash    uint64        // trace hash: equal for equal runs
	Virtual time.Duration // virtual time the run lasted
	Stats   Stats
	// Coverage counts the faults fired and rare events seen.
	Coverage *Coverage
	Failures []string
	// Inconclusive is the model check's timeout message when it was the
	// only thing that did not pass (the seed failed); empty otherwise.
	Inconclusive string
}

// Failed reports whether any check failed.
func (r Result) Failed() bool { return len(r.Failures) > 0 }

// Run simulates o (already through Choose): nodes run the metadata group,
// an admin client creates the topic through CreateTopics, and producers and
// consumers speak strandpb through Core.HandleAs, every producer and
// consumer on clientlib's own (wire_libproducer.go, wire_libconsumer.go)
// and the checkers (random readers, the drain) with its pure pieces
// (clientcore's LeaderCache, Classify, Backoff) making every retry
// decision — the path production runs. A failing linearizability check writes its
// visualization to vizDir (none when empty). A panic anywhere (a broken
// invariant in a core) fails the seed with its stack.
func Run(o Options, vizDir string) (res Result) {
	w := newWorld(o)
	defer w.endLibTasks() // wire_libgroup.go
	defer func() {
		if r := recover(); r != nil {
			res = w.result()
			res.Failures = append(res.Failures, fmt.Sprintf("t=%v: panic: %v\n%s", w.now(), r, debug.Stack()))
		}
	}()
	w.run()
	if w.stoppedAtFailure {
		return w.result()
	}
	if !w.work.drained && len(w.failures) == 0 {
		w.fail("the run ended before the final drain (%s)", w.stats)
	}
	if w.work.overtime && w.work.drained {
		w.coverage.Inc("event/time-limit-drained") // overtime.go
	}
	w.wire.txn.checkEarlyEnd() // wire_txn_check.go
	w.checkBootstrap()         // loop.go
	w.checkTier(true)          // tier.go
	w.finalChecks(vizDir)
	return w.result()
}

// result summarises the run so far.
func (w *world) result() Result {
	w.durability.report()
	return Result{
		Options:      w.opts,
		Ops:          w.hist.h.Len(),
		Events:       w.events,
		Hash:         w.trace.sum,
		Virtual:      w.now(),
		Stats:        w.stats,
		Coverage:     w.coverage,
		Failures:     append([]string(nil), w.failures...),
		Inconclusive: w.inconclusive,
	}
}

// finalChecks runs the history checks once the run ended.
func (w *world) finalChecks(vizDir string) {
	if w.failureCount > failuresKept {
		w.failures = append(w.failures, fmt.Sprintf("... and %d more step failures", w.failureCount-failuresKept))
	}
	drained := w.work.drained
	if w.opts.RecreateTopic && drained {
		// Only the incarnations the drain read: a deleted one's writes
		// are not expected to survive (wire_recreate.go).
		for _, tp := range w.wire.drained {
			w.hist.h.MarkDrained(tp)
		}
		drained = false
	}
	opts := linearizability.Options{FinalDrain: drained, Timeout: PorcupineTimeout}
	if vizDir != "" {
		opts.VizPath = filepath.Join(vizDir, fmt.Sprintf("seed-%d.html", w.opts.Seed))
	}
	rep := linearizability.Check(w.hist.h, opts)
	if err := rep.Err(); err != nil {
		if modelInconclusiveOnly(rep) {
			// Every direct log check passed; Porcupine ran out of time.
			// That is a failure too (never a pass), counted apart so a
			// sweep says how often the model could not decide.
			w.inconclusive = err.Error()
			w.coverage.Inc("check/log-model-inconclusive")
		}
		w.failures = append(w.failures, err.Error())
	}
}

// modelInconclusiveOnly reports whether rep failed only because a model
// check timed out: no anomaly, no model refusal.
func modelInconclusiveOnly(rep linearizability.Report) bool {
	var nl *linearizability.NotLinearizableError
	return len(rep.Errors()) == 0 && errors.Is(rep.Linearizable, linearizability.ErrInconclusive) &&
		!errors.As(rep.Linearizable, &nl)
}
