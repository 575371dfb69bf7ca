package simnet

import (
	"container/heap"
	"time"
)

// eventKind says what an event does when it fires.
type eventKind uint8

// The kinds of events. Their numeric values enter the trace hash.
const (
	evTick          eventKind = iota + 1 // Core.Tick of one node
	evFrame                              // a raft frame arrives at a node
	_                                    // (retired: direct-mode client request)
	_                                    // (retired: direct-mode client reply)
	_                                    // (retired: direct-mode client timer)
	evFault                              // the fault planner acts
	evRestart                            // a crashed node restarts
	evHeal                               // a network fault ends
	evLivenessHeal                       // liveness mode: heal everything
	evLivenessCheck                      // liveness mode: the progress bound is due
	evCall                               // run the event's call (client traffic and timers)
)

// event is one scheduled happening. Only the fields its kind needs are set.
type event struct {
	at    time.Duration // virtual time it fires
	seq   uint64        // tie-break: scheduling order
	kind  eventKind
	node  int // target node index, or -1
	from  int // sending node index (frames), client index (requests)
	frame []byte
	// incarnation of the target node when scheduled: a tick or reply
	// meant for an earlier incarnation is discarded.
	incarnation uint32
	heal        *healAction
	call        func() // evCall: what to run
}

// eventQueue orders events by (at, seq): a total order, so the run does
// not depend on heap internals.
type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

// Push implements heap.Interface.
func (q *eventQueue) Push(x any) { *q = append(*q, x.(*event)) }

// Pop implements heap.Interface.
func (q *eventQueue) Pop() any {
	old := *q
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*q = old[:n-1]
	return e
}

// scheduler is the world's clock and agenda.
type scheduler struct {
	now   time.Duration
	seq   uint64
	queue eventQueue
}

// schedule queues e to fire after delay (>= 0) from now.
func (s *scheduler) schedule(delay time.Duration, e *event) {
	if delay < 0 {
		panic("simnet: negative delay")
	}
	s.seq++
	e.at = s.now + delay
	e.seq = s.seq
	heap.Push(&s.queue, e)
}

// next pops the earliest event and advances virtual time to it.
func (s *scheduler) next() *event {
	e := heap.Pop(&s.queue).(*event)
	if e.at < s.now {
		panic("simnet: time moved backwards")
	}
	s.now = e.at
	return e
}
