package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/node"
)

// syncPool runs the Core's storage jobs (node.Core.TakeSyncJobs) off the loop:
// a fixed set of workers take jobs in order, so the fsyncs of different
// logs overlap on the device while the loop goes on taking proposals and
// raft messages; each result is queued for the loop, which is woken
// through ready and hands it to Core.SyncDone. Neither side ever blocks on
// the other: the queues are slices under mu (the Core has at most one sync
// in flight per log and 64 cold fetch reads per node, which bounds them).
//
// Rejected: channels for jobs and results (a bounded channel can fill both
// ways at once and deadlock the loop with its workers; an unbounded one is
// a slice anyway); one goroutine per job (thousands of partitions would
// mean thousands of goroutines in a burst).
type syncPool struct {
	mu      sync.Mutex
	work    *sync.Cond
	queue   []node.SyncJob
	results []syncResult
	closed  bool
	ready   chan struct{} // capacity 1: results are waiting
	wg      sync.WaitGroup
	// runs and runTime count the jobs run and their time, for the loop's
	// stats line.
	runs    atomic.Uint64
	runTime atomic.Int64 // nanoseconds
	// observe, when set, sees each job's time but a fetch's read (the
	// fsync histogram).
	observe func(seconds float64)
	// faultHook, when set, runs before each job: a fault-injection hook
	// (fault_on.go's disk stall; a no-op in default builds).
	faultHook func()
}

// syncResult is one finished job.
type syncResult struct {
	token uint64
	err   error
}

// newSyncPool starts workers goroutines; observe (may be nil) sees each
// job's time, faultHook (may be nil) runs before each job.
func newSyncPool(workers int, observe func(seconds float64), faultHook func()) *syncPool {
	p := &syncPool{ready: make(chan struct{}, 1), observe: observe, faultHook: faultHook}
	p.work = sync.NewCond(&p.mu)
	for range workers {
		p.wg.Go(p.worker)
	}
	return p
}

// submit queues jobs; it never blocks on a fsync.
func (p *syncPool) submit(jobs []node.SyncJob) {
	if len(jobs) == 0 {
		return
	}
	p.mu.Lock()
	p.queue = append(p.queue, jobs...)
	p.mu.Unlock()
	if len(jobs) == 1 {
		p.work.Signal()
	} else {
		p.work.Broadcast()
	}
}

// worker runs jobs until the pool closes.
func (p *syncPool) worker() {
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.closed {
			p.work.Wait()
		}
		if p.closed {
			p.mu.Unlock()
			return
		}
		job := p.queue[0]
		p.queue[0] = node.SyncJob{}
		p.queue = p.queue[1:]
		p.mu.Unlock()
		start := time.Now()
		if p.faultHook != nil {
			p.faultHook()
		}
		err := job.Run()
		took := time.Since(start)
		if p.observe != nil && !job.Read() {
			p.observe(took.Seconds())
		}
		p.runTime.Add(int64(took))
		p.runs.Add(1)
		p.mu.Lock()
		p.results = append(p.results, syncResult{token: job.Token, err: err})
		p.mu.Unlock()
		select {
		case p.ready <- struct{}{}:
		default:
		}
	}
}

// take moves the finished jobs' results into dst.
func (p *syncPool) take(dst []syncResult) []syncResult {
	p.mu.Lock()
	dst = append(dst, p.results...)
	clear(p.results)
	p.results = p.results[:0]
	p.mu.Unlock()
	return dst
}

// close stops the workers once their current fsyncs returned; jobs not
// started are dropped (the Core closes next, failing what waited on them).
func (p *syncPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.work.Broadcast()
	p.wg.Wait()
}
