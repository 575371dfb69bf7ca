package simnet

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/strandlog/strand/node"
)

// The storage pipeline in virtual time. Nodes run with
// the one storage path: Process hands its log writes and their fsync back
// as a node.SyncJob. The world runs each job as events on the node: a log
// sync's writes (the log's pending writes, SyncJob.RunWrite) within
// storageHandoffMax of the hand-off, as a storage goroutine picks the job
// up and its writes reach the page cache; the fsync itself
// (SyncJob.RunSync) after a drawn device delay from the hand-off (the
// memdisk makes the written bytes durable then); and the completion
// (Core.SyncDone) a short hand-off later, as a storage goroutine would
// report back to the loop. Crashes (the planner's, and the two below) can
// land between a job's writes and its fsync, and between the fsync and
// the acknowledgement it allows:
//
//   - fault/crash-before-fsync: a power loss (its written, unsynced tail
//     is lost) or, for a job that wrote, fault/kill-before-fsync a process
//     kill (its written, unsynced tail stays in the page cache, which
//     recovery must sync before it reports the log stable: raftlog's rule
//     8) strikes a node instead of a fsync in flight;
//   - fault/crash-after-fsync: a power loss or a kill strikes after the
//     fsync, before the node heard of it (durable but never acknowledged).
//
// Every storage job goes this way: log syncs, checkpoint writes and
// trims, unlinks, a fetch's cold log read (its delay drawn as a fsync's);
// only a log sync has a write event apart from its fsync (the others run
// whole at the fsync's time).
// fault/crash-before-checkpoint-write and
// fault/crash-before-checkpoint-done count the crashes that struck a
// checkpoint's write job before it ran and after it ran but before its
// completion made the checkpoint count; fault/crash-before-read-done one
// that struck between a cold read and the completion that answers its
// fetch.
//
// A disk stall (diskstall.go) parks every fsync of its node until it ends
// (the writes before it reach the page cache).
//
// Each node has storageWorkers (node/server's syncWorkersMax, 8) workers:
// a round's jobs queue in the order handed over and start, oldest first,
// as a worker frees (pumpSyncs); a worker is busy from its job's start
// until its fsync returned, so eight hung fsyncs hold every worker and
// nothing else of the node reaches its disk, as in production's pool.
//
// All draws come from one stream of their own, so a seed replays bit for
// bit. Rejected: running the fsync at once and delaying only the
// completion (a power loss inside the window would then keep the data,
// hiding every acknowledgement given before the fsync); running a log
// sync's writes and its fsync as one event (no crash could land between
// them, so no kill would leave unsynced bytes in the page cache, and a
// recovery that trusts them, the planted RecoverTrustsPageCache, went
// uncaught once the appends' writes moved into the sync job).

// streamStorage draws fsync delays and the pipeline's crash points.
const streamStorage uint64 = 8

// Fsync delays: most complete in [storageSyncMin, storageSyncMax]; one in
// storageSlowOneIn takes up to storageSlowMax (a device hiccup), so syncs
// of different logs complete out of order. The completion reaches the
// loop storageHandoffMax after the fsync at most.
const (
	storageSyncMin    = 100 * time.Microsecond
	storageSyncMax    = 1500 * time.Microsecond
	storageSlowMax    = 20 * time.Millisecond
	storageSlowOneIn  = 50
	storageHandoffMax = 100 * time.Microsecond
	// storageCrashOneIn: a fsync in flight on a node with crash faults
	// ends in one of the two crash points once in this many.
	storageCrashOneIn = 1500
)

// storage is the world's model of the nodes' storage goroutines.
type storage struct {
	rng *rand.Rand
}

func newStorage(seed uint64) *storage {
	return &storage{rng: newStream(seed, streamStorage)}
}

// syncDelay draws how long one fsync takes.
func (s *storage) syncDelay() time.Duration {
	if s.rng.IntN(storageSlowOneIn) == 0 {
		return time.Duration(between(s.rng, int64(storageSyncMax), int64(storageSlowMax)))
	}
	return time.Duration(between(s.rng, int64(storageSyncMin), int64(storageSyncMax)))
}

// storageWorkers is node/server's storage pool size (syncWorkersMax):
// at most this many jobs of a node run at once, started in the order the
// rounds handed them over.
const storageWorkers = 8

// startSyncs queues the jobs n's round started (loop.Outcome.Jobs) for
// n's storage workers, as node/server's pool does, and starts what the
// free workers can take.
func (w *world) startSyncs(n *simNode, jobs []node.SyncJob) {
	n.syncQueue = append(n.syncQueue, jobs...)
	w.pumpSyncs(n)
}

// pumpSyncs starts n's queued jobs, oldest first, while a worker is free:
// a log sync's writes first (runWrite), each job's fsync after its drawn
// delay (runSync). A worker is busy until its job's fsync returned (a
// hung one, parked by a disk stall, holds it), as production's are.
func (w *world) pumpSyncs(n *simNode) {
	s := w.storage
	inc := n.incarnation
	for n.syncBusy < storageWorkers && len(n.syncQueue) > 0 {
		job := n.syncQueue[0]
		n.syncQueue[0] = node.SyncJob{}
		n.syncQueue = n.syncQueue[1:]
		n.syncBusy++
		if n.syncBusy == storageWorkers {
			w.coverage.Inc("storage/workers-all-busy")
		}
		if job.Read() {
			w.coverage.Inc("storage/cold-read")
		}
		d := s.syncDelay()
		if job.Writes() {
			dw := time.Duration(between(s.rng, 0, int64(min(d, storageHandoffMax))))
			w.sched.schedule(dw, &event{kind: evCall, node: n.index, call: func() { w.runWrite(n, inc, job, d-dw) }})
			continue
		}
		w.sched.schedule(d, &event{kind: evCall, node: n.index, call: func() { w.runSync(n, inc, job) }})
	}
}

// runWrite issues the writes of a log sync job of n's incarnation inc,
// then schedules its fsync d later (its completion at once when a write
// failed: the job stops there).
func (w *world) runWrite(n *simNode, inc uint32, job node.SyncJob, d time.Duration) {
	if !n.up || n.incarnation != inc {
		return
	}
	var err error
	if w.guard(n, func() { err = job.RunWrite() }) {
		err = errors.New("simnet: write panicked on a faulty disk")
	}
	if err != nil {
		w.workerDone(n)
		w.scheduleSyncDone(n, inc, job, err)
		return
	}
	w.sched.schedule(d, &event{kind: evCall, node: n.index, call: func() { w.runSync(n, inc, job) }})
}

// workerDone frees the worker of a job of n's current incarnation whose
// run returned, and starts the next queued job.
func (w *world) workerDone(n *simNode) {
	n.syncBusy--
	w.pumpSyncs(n)
}

// crashPoint draws whether a pipeline crash strikes n now: only in runs
// with crash faults, while the planner is active and no disk stall is
// under way (diskstall.go), on a healthy node.
func (w *world) crashPoint(n *simNode) bool {
	if w.opts.Faults.Crash == 0 || !w.planner.active || n.hasFaults() || w.planner.stallActive() {
		return false
	}
	return w.storage.rng.IntN(storageCrashOneIn) == 0
}

// runSync performs one fsync of n's incarnation inc (a job's second
// phase: its writes ran in runWrite), then schedules its completion.
func (w *world) runSync(n *simNode, inc uint32, job node.SyncJob) {
	if !n.up || n.incarnation != inc {
		return
	}
	if n.diskStalled { // its device hangs (diskstall.go)
		w.parkSync(n, func() { w.runSync(n, inc, job) })
		return
	}
	if w.crashPoint(n) {
		w.coverage.Inc("fault/crash-before-fsync")
		if job.Checkpoint() {
			w.coverage.Inc("fault/crash-before-checkpoint-write")
		}
		w.stats.Crashes++
		if job.Writes() && w.storage.rng.IntN(2) == 0 {
			w.coverage.Inc("fault/kill-before-fsync")
			w.killNode(n, "killed with a fsync in flight, after its writes")
		} else {
			w.crashNode(n, "power loss with a fsync in flight")
		}
		w.scheduleRestart(n)
		return
	}
	var err error
	if w.guard(n, func() { err = job.RunSync() }) {
		err = errors.New("simnet: fsync panicked on a faulty disk")
	}
	if n.up && n.incarnation == inc {
		w.workerDone(n)
	}
	w.scheduleSyncDone(n, inc, job, err)
}

// scheduleSyncDone schedules the completion of n's job with err, a
// hand-off after now.
func (w *world) scheduleSyncDone(n *simNode, inc uint32, job node.SyncJob, err error) {
	d := time.Duration(between(w.storage.rng, 0, int64(storageHandoffMax)))
	w.sched.schedule(d, &event{kind: evCall, node: n.index, call: func() { w.syncDone(n, inc, job, err) }})
}

// syncDone reports a fsync's result to n's core and runs its Ready cycles.
func (w *world) syncDone(n *simNode, inc uint32, job node.SyncJob, err error) {
	if !n.up || n.incarnation != inc {
		return
	}
	if w.crashPoint(n) {
		w.coverage.Inc("fault/crash-after-fsync")
		if job.Checkpoint() {
			w.coverage.Inc("fault/crash-before-checkpoint-done")
		}
		if job.Read() {
			w.coverage.Inc("fault/crash-before-read-done")
		}
		w.stats.Crashes++
		if w.storage.rng.IntN(2) == 0 {
			w.killNode(n, "killed after a fsync, before its completion")
		} else {
			w.crashNode(n, "power loss after a fsync, before its completion")
		}
		w.scheduleRestart(n)
		return
	}
	w.guardCall(n, func() { n.round.SyncDone(job.Token, err) })
	w.endInput(n)
}
