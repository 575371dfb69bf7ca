package listener

import "github.com/strandlog/strand/proto/frame"

// FetchAnswerBytes is the room a fetch with response-wide max_bytes m
// reserves, on either protocol: m, capped at what one answer frame carries
// (m ≤ 0: the cap).
func FetchAnswerBytes(m int32) int {
	n := frame.FetchBytesMax(frame.BytesMaxDefault)
	if m > 0 && int(m) < n {
		n = int(m)
	}
	return n
}

// Take waits for a place among the connection's requests in flight
// (Config.InFlightMax) and returns the Slot that holds it until the
// answer is written. False when the connection closed first.
func (c *Conn) Take() (Slot, bool) {
	select {
	case c.slots <- struct{}{}:
		return Slot{taken: true}, true
	case <-c.done:
		return Slot{}, false
	}
}

// Reserve adds room for an answer of up to n bytes to s, first waiting
// while the connection holds more than Config.ConnAnswerBytesMax, then
// for room in the node's Answers budget (a fetch waits; requests that
// reserve nothing never do, so producers are not held up by slow
// readers). False when the connection closed first: s holds nothing more.
func (c *Conn) Reserve(s *Slot, n int) bool {
	for {
		c.mu.Lock()
		over := c.answerBytes > c.l.cfg.ConnAnswerBytesMax
		c.mu.Unlock()
		if !over {
			break
		}
		select {
		case <-c.drained:
		case <-c.done:
			return false
		}
	}
	units := 0
	if b := c.l.cfg.Answers; b != nil {
		var ok bool
		if units, ok = b.Acquire(n, c.done); !ok {
			return false
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.l.cfg.Answers.Release(units)
		return false
	}
	c.answerBytes += int64(n)
	c.answerUnits += units
	s.bytes += int64(n)
	s.units += units
	return true
}

// AnswerBytes is the answer bytes the connection holds reserved now.
func (c *Conn) AnswerBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answerBytes
}

// Send queues a for the writer, which gives back s once a is written.
// It never blocks: s's place in flight guarantees room (a caller that
// sends more answers than it took slots closes the connection).
func (c *Conn) Send(s Slot, a Answer) { c.queue(outgoing{answer: a, slot: s}) }

// SendLast is Send for the connection's last answer: the writer closes the
// connection with reason once it is written, and the reader may return.
func (c *Conn) SendLast(s Slot, a Answer, reason string) {
	c.lastSent.Store(true)
	c.queue(outgoing{answer: a, slot: s, closeAfter: reason})
}

// queue hands o to the writer.
func (c *Conn) queue(o outgoing) {
	select {
	case c.out <- o:
	default:
		c.release(o.slot)
		c.Close("answer queue full (more answers than requests)")
	}
}

// release gives back what s holds, once its answer is written (a no-op
// once the connection closed: releaseAll gave it back).
func (c *Conn) release(s Slot) {
	if s.taken {
		select {
		case <-c.slots:
		default:
		}
	}
	if s.bytes == 0 && s.units == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.answerBytes -= s.bytes
	c.answerUnits -= s.units
	c.l.cfg.Answers.Release(s.units)
	if c.answerBytes <= c.l.cfg.ConnAnswerBytesMax {
		select {
		case c.drained <- struct{}{}:
		default:
		}
	}
}

// releaseAll gives back everything the requests of a closed connection
// hold and makes later releases no-ops.
func (c *Conn) releaseAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.l.cfg.Answers.Release(c.answerUnits)
	c.answerBytes, c.answerUnits = 0, 0
}
