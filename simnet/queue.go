package simnet

import "time"

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
	// meant for an earlier incarnation is discarded. For a frame or
	// request held for a paused node (held), the incarnation it was
	// held for.
	incarnation uint32
	held        bool
	heal        *healAction
	call        func() // evCall: what to run
}

// eventQueue is a min-heap of events ordered by (at, seq): a total
// order, so the run does not depend on heap internals. It is typed rather
// than a container/heap.Interface: the queue sees every event of a run, and
// the interface calls cost more than the comparisons. Each slot holds its
// event's key beside the pointer, so a comparison reads the slice and not
// two scattered events, and the heap is 4-ary (half the levels of a binary
// one, its four children on one or two cache lines): 2.7% of the standard
// sample's CPU went to pop and its comparisons before (issue 21).
type eventQueue []queued

// queued is one slot of the queue: the event's key and the event.
type queued struct {
	at  time.Duration // e.at
	seq uint64        // e.seq
	e   *event
}

// before reports whether a fires before b.
func before(a, b *queued) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// queueArity is the heap's fan-out.
const queueArity = 4

// push adds e.
func (q *eventQueue) push(e *event) {
	*q = append(*q, queued{at: e.at, seq: e.seq, e: e})
	h := *q
	i := len(h) - 1
	x := h[i]
	for i > 0 {
		parent := (i - 1) / queueArity
		if !before(&x, &h[parent]) {
			break
		}
		h[i] = h[parent]
		i = parent
	}
	h[i] = x
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() *event {
	h := *q
	n := len(h) - 1
	e := h[0].e
	x := h[n]
	h[n] = queued{}
	h = h[:n]
	if n > 0 {
		i := 0
		for {
			first := queueArity*i + 1
			if first >= n {
				break
			}
			least := first
			for c := first + 1; c < first+queueArity && c < n; c++ {
				if before(&h[c], &h[least]) {
					least = c
				}
			}
			if !before(&h[least], &x) {
				break
			}
			h[i] = h[least]
			i = least
		}
		h[i] = x
	}
	*q = h
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
	s.queue.push(e)
}

// next pops the earliest event and advances virtual time to it.
func (s *scheduler) next() *event {
	e := s.queue.pop()
	if e.at < s.now {
		panic("simnet: time moved backwards")
	}
	s.now = e.at
	return e
}
