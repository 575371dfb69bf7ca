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

// eventQueue is a binary min-heap of events ordered by (at, seq): a total
// order, so the run does not depend on heap internals. It is typed rather
// than a container/heap.Interface: the queue sees every event of a run, and
// the interface calls cost more than the comparisons.
type eventQueue []*event

// before reports whether a fires before b.
func before(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// push adds e.
func (q *eventQueue) push(e *event) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !before(h[i], h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() *event {
	h := *q
	n := len(h) - 1
	e := h[0]
	h[0] = h[n]
	h[n] = nil
	h = h[:n]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && before(h[l], h[least]) {
			least = l
		}
		if r < n && before(h[r], h[least]) {
			least = r
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
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
