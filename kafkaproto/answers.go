package kafkaproto

import (
	"sync"

	"github.com/strandlog/strand/proto/frame"
)

// AnswerBudget is implemented by a Backend that bounds the fetch answer
// bytes held across all of a node's connections: ReserveAnswer waits for
// room for an answer of up to n bytes and returns how to give it back;
// false when done closed first. The node's listener shares the budget its
// native connections reserve from, so Kafka consumers are bounded as
// native ones are.
type AnswerBudget interface {
	ReserveAnswer(done <-chan struct{}, n int) (release func(), ok bool)
}

// connAnswerBytesMax bounds the fetch answer bytes one connection holds
// reserved: past it the reader takes no new request until answers went
// out. Without it, 64 long-polling fetches of up to 7 MiB each could pin
// 448 MiB per connection (the native listener's bound is the same).
const connAnswerBytesMax = 32 << 20

// answers is a connection's account of the fetch answers it reserved room
// for and has not written yet.
type answers struct {
	mu      sync.Mutex
	bytes   int64
	open    map[uint64]func() // each reservation's release by sequence
	next    uint64
	closed  bool
	drained chan struct{} // poked (capacity 1) when bytes fall to the bound
}

// reserveAnswer takes room for a fetch answer of up to n bytes, first
// waiting while the connection holds more than connAnswerBytesMax, then
// from the backend's node-wide budget when it has one. The release it
// returns may be called more than once; closing the connection releases
// what is still held. False when the connection closed first.
func (c *conn) reserveAnswer(n int) (func(), bool) {
	a := &c.answers
	for {
		a.mu.Lock()
		if a.drained == nil {
			a.drained = make(chan struct{}, 1)
		}
		over, drained := a.bytes > connAnswerBytesMax, a.drained
		a.mu.Unlock()
		if !over {
			break
		}
		select {
		case <-drained:
		case <-c.done:
			return nil, false
		}
	}
	node := func() {}
	if b, ok := c.s.cfg.Backend.(AnswerBudget); ok {
		var reserved bool
		if node, reserved = b.ReserveAnswer(c.done, n); !reserved {
			return nil, false
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		node()
		return nil, false
	}
	if a.open == nil {
		a.open = make(map[uint64]func())
	}
	id := a.next
	a.next++
	a.bytes += int64(n)
	a.open[id] = func() {
		a.bytes -= int64(n)
		node()
	}
	return func() { a.release(id) }, true
}

// release gives back reservation id, once.
func (a *answers) release(id uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if done, ok := a.open[id]; ok {
		delete(a.open, id)
		done()
		if a.bytes <= connAnswerBytesMax {
			select {
			case a.drained <- struct{}{}:
			default:
			}
		}
	}
}

// releaseAll gives back every reservation of a closing connection and
// refuses later ones.
func (a *answers) releaseAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for id, done := range a.open { // order is irrelevant: each only gives back
		delete(a.open, id)
		done()
	}
}

// answerBytesMax is the most a fetch with max_bytes m can be answered
// with: m, capped at what one answer frame carries (m ≤ 0: the cap).
func answerBytesMax(m int32) int {
	n := frame.FetchBytesMax(frame.BytesMaxDefault)
	if m > 0 && int(m) < n {
		n = int(m)
	}
	return n
}
