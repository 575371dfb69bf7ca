package node

import (
	"fmt"
	"slices"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// fetchSession is one Fetch request of HandleAs: a long poll over several
// partitions. Each partition is read through Fetch (linearizable); when
// the results hold fewer than min_bytes the session parks on the groups
// it reads, and a group's apply that moves the high-water mark past what a
// partition last saw fetches that partition again. It answers when min_bytes
// are in, a partition fails, or max_wait_ms (in ticks) passed.
type fetchSession struct {
	parts    []fetchPart
	minBytes int64
	maxBytes int64 // response-wide; <= 0: no bound beyond the partitions'
	deadline uint64
	pending  int // partition reads in flight
	parked   bool
	finished bool
	answer   func(*strandpb.Response)
}

// fetchPart is one partition of a fetch session and its latest result.
type fetchPart struct {
	tp       TopicPartition
	offset   int64
	maxBytes int32
	topicID  []byte // the topic id the client started on; empty: unchecked
	iso      engine.Isolation
	markers  bool // serve transaction markers (FetchRequest.include_markers)
	res      FetchResult
	have     bool // res holds a result
	inflight bool
	// readTerm: the term this node led g in when it started the part's
	// last read through ReadIndex (0: not leading), so a wake-up knows a
	// leadership confirmation after the session began (see rereadParked).
	readTerm uint64
}

// handleFetch starts a long-poll fetch session.
func (c *Core) handleFetch(req *strandpb.FetchRequest, answer func(*strandpb.Response)) {
	parts := req.GetPartitions()
	if len(parts) > handlePartitionsMax || !validIsolation(req.GetIsolationLevel()) {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: too many partitions in one fetch, or an isolation level not 0 or 1"))
		return
	}
	// The answer must fit a frame the client reads: max_bytes above the
	// budget, or none, is the budget (issue 7, finding 3).
	maxBytes := int64(req.GetMaxBytes())
	if budget := int64(frame.FetchBytesMax(frame.BytesMaxDefault)); maxBytes <= 0 || maxBytes > budget {
		maxBytes = budget
	}
	s := &fetchSession{
		minBytes: int64(req.GetMinBytes()), maxBytes: maxBytes,
		deadline: c.ticks + c.msToTicks(req.GetMaxWaitMs(), 0), answer: answer,
	}
	for _, p := range parts {
		maxBytes := p.GetMaxBytes()
		if maxBytes <= 0 || (req.GetMaxBytes() > 0 && req.GetMaxBytes() < maxBytes) {
			maxBytes = max(req.GetMaxBytes(), 0)
		}
		maxBytes = int32(min(int64(maxBytes), s.maxBytes))
		s.parts = append(s.parts, fetchPart{
			tp: TopicPartition{Topic: c.nameTopic(p.GetTopic(), p.GetTopicId()), Partition: p.GetPartition()}, offset: p.GetOffset(), maxBytes: maxBytes,
			topicID: p.GetTopicId(), iso: engine.Isolation(req.GetIsolationLevel()), markers: req.GetIncludeMarkers(),
		})
	}
	if len(s.parts) == 0 {
		c.finishSession(s)
		return
	}
	for i := range s.parts {
		c.fetchPart(s, i)
	}
}

// fetchPart (re)reads one partition of s.
func (c *Core) fetchPart(s *fetchSession, i int) {
	p := &s.parts[i]
	p.inflight = true
	s.pending++
	p.readTerm = 0
	if g := c.byTP[p.tp]; g != nil {
		if _, term, leading := g.leadership(); leading {
			p.readTerm = term
		}
	}
	if err := c.checkTopicID(p.tp, p.topicID); err != nil {
		c.completeFetch(func(res FetchResult) { c.partFetched(s, i, res) }, FetchResult{Err: err, HighWatermark: -1, LogStartOffset: -1})
		return
	}
	c.fetch(FetchRequest{TopicPartition: p.tp, Offset: p.offset, MaxBytes: p.maxBytes, Isolation: p.iso, Markers: p.markers}, func(res FetchResult) {
		c.partFetched(s, i, res)
	})
}

// partFetched takes one partition's result and decides whether s answers
// now, parks, or waits for the reads still in flight.
func (c *Core) partFetched(s *fetchSession, i int, res FetchResult) {
	p := &s.parts[i]
	p.inflight = false
	s.pending--
	if s.finished {
		return
	}
	p.res, p.have = res, true
	if !s.complete() {
		return
	}
	if s.failed() || s.minBytes <= 0 || s.bytes() >= s.minBytes || c.ticks >= s.deadline {
		c.finishSession(s)
		return
	}
	if !s.parked {
		c.parkSession(s)
	}
}

// complete tells whether every partition of s has a result (a re-read may
// still be in flight: the earlier result stands until it lands).
func (s *fetchSession) complete() bool {
	for _, p := range s.parts {
		if !p.have {
			return false
		}
	}
	return true
}

// failed tells whether a partition's latest result is an error: the
// session answers at once, as Kafka does.
func (s *fetchSession) failed() bool {
	for _, p := range s.parts {
		if p.have && p.res.Err != nil {
			return true
		}
	}
	return false
}

// bytes counts the batch bytes s holds, a served marker as
// markerAnswerBytes: a long poll with min_bytes answers a marker at once,
// as Kafka counts a control batch, rather than at its max wait.
func (s *fetchSession) bytes() int64 {
	n := int64(0)
	for _, p := range s.parts {
		end := p.offset
		for _, b := range p.res.Batches {
			n += int64(len(b.Batch))
			if b.Marker != nil {
				n += markerAnswerBytes
			}
			end = max(end, b.nextOffset())
		}
		if p.res.through > end {
			n += markerAnswerBytes // markers skipped past the batches: next_offset moves the reader on
		}
	}
	return n
}

// parkSession registers s with the groups it reads, to be woken by their
// applies, and with the Core, to expire. Past PendingRequestsMax parked
// sessions it answers at once.
func (c *Core) parkSession(s *fetchSession) {
	if c.sessionsParked >= c.cfg.PendingRequestsMax {
		c.finishSession(s)
		return
	}
	s.parked = true
	c.sessionsParked++
	c.sessions = append(c.sessions, s)
	for _, p := range s.parts {
		if g := c.byTP[p.tp]; g != nil && !containsSession(g.parked, s) {
			g.parked = append(g.parked, s)
		}
	}
}

// containsSession tells whether s is in list.
func containsSession(list []*fetchSession, s *fetchSession) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// wakeParked re-reads the partitions of g's parked sessions whose
// high-water mark moved past what they saw, and forgets finished sessions.
func (c *Core) wakeParked(g *group) {
	hwm := g.part.HighWatermark()
	kept := g.parked[:0]
	for _, s := range g.parked {
		if s.finished {
			continue
		}
		kept = append(kept, s)
		for i := range s.parts {
			p := &s.parts[i]
			if p.tp == g.tp && !p.inflight && p.have && hwm > p.res.HighWatermark {
				if c.fetchBudgetSpent(g) {
					continue // woken again first thing in the next Process call
				}
				c.rereadParked(g, s, i)
			}
		}
	}
	clear(g.parked[len(kept):])
	g.parked = kept
}

// rereadParked re-reads part i of a parked session woken by g's apply.
// When this node has led g in one term since the part's last read, which
// raft confirmed through ReadIndex after the session began, the part is
// served from the applied state now, without another ReadIndex round: a
// read may return any committed state at or past an index confirmed after
// its invocation (every write acknowledged before the invocation is at or
// below that index, and a newer leader, elected after the confirmation, can
// only acknowledge writes placed after everything applied here). This saves
// a heartbeat round trip per wake-up. Otherwise the part reads through
// ReadIndex again.
func (c *Core) rereadParked(g *group, s *fetchSession, i int) {
	p := &s.parts[i]
	_, term, leading := g.leadership()
	if !leading || p.readTerm == 0 || term != p.readTerm || p.res.Err != nil || p.res.Leader != c.cfg.ID {
		c.fetchPart(s, i)
		return
	}
	p.inflight = true
	s.pending++
	c.readMore(g, p, func(res FetchResult) {
		c.completeFetch(func(res FetchResult) { c.partFetched(s, i, res) }, res)
	})
}

// readMore re-reads a woken part from the applied state: only what follows
// the batches it holds, appended to them, within what is left of its
// max_bytes. A part parked short of min_bytes is woken by every apply that
// moves the high-water mark, and re-reading from its start offset each
// time read and copied the same batches again at every append (quadratic
// in the appends a long poll waits for). A part holding nothing, whose
// extra read fails, or whose offset retention dropped meanwhile reads from
// its offset as before. done gets the result, at once or after a cold
// read's job (fetch_cold.go); the part is in flight meanwhile, so its
// result stays as it was.
func (c *Core) readMore(g *group, p *fetchPart, done func(FetchResult)) {
	whole := FetchRequest{TopicPartition: p.tp, Offset: p.offset, MaxBytes: p.maxBytes, Isolation: p.iso, Markers: p.markers}
	held := p.res.Batches
	if len(held) == 0 {
		c.readAsync(g, whole, done)
		return
	}
	last := held[len(held)-1]
	next := last.nextOffset()
	budget := int64(p.maxBytes)
	for _, b := range held {
		budget -= int64(len(b.Batch))
	}
	if budget <= 0 || len(held) >= fetchBatchesMax {
		res := p.res // full: nothing more fits
		res.HighWatermark = g.part.HighWatermark()
		done(res)
		return
	}
	prev, offset := p.res, p.offset
	c.readAsync(g, FetchRequest{TopicPartition: p.tp, Offset: next, MaxBytes: int32(budget), Isolation: p.iso, Markers: p.markers}, func(more FetchResult) {
		if more.Err != nil || more.LogStartOffset > offset {
			c.readAsync(g, whole, done)
			return
		}
		res := more
		res.forgotten = append(slices.Clip(prev.forgotten), more.forgotten...)
		res.Batches = make([]FetchedBatch, 0, len(held)+len(more.Batches))
		res.Batches = append(res.Batches, held...)
		left := budget
		for _, b := range more.Batches {
			if int64(len(b.Batch)) > left || len(res.Batches) >= fetchBatchesMax {
				// The first batch goes out whole only at the part's start;
				// more's batches left out, next_offset is after the last held.
				res.through = 0
				break
			}
			res.Batches = append(res.Batches, b)
			left -= int64(len(b.Batch))
		}
		done(res)
	})
}

// sessionGroupGone answers s when a group it reads is deleted.
func (c *Core) sessionGroupGone(s *fetchSession, g *group) {
	if s.finished {
		return
	}
	for i := range s.parts {
		if p := &s.parts[i]; p.tp == g.tp && !p.inflight {
			err := ErrUnknownTopicPartition
			if len(p.topicID) > 0 {
				// The client's topic is gone for good, whatever comes next
				// under its name.
				err = fmt.Errorf("%w: topic %q (id %x) was deleted", ErrUnknownTopicID, g.tp.Topic, p.topicID)
			}
			p.res, p.have = FetchResult{Err: err, HighWatermark: -1, LogStartOffset: -1}, true
		}
	}
	if s.complete() {
		c.finishSession(s)
	}
}

// expireSessions answers the sessions whose max wait passed (those still
// missing a partition's first result answer when it lands, bounded by the
// read's own timeout), and forgets finished ones.
func (c *Core) expireSessions() {
	kept := c.sessions[:0]
	for _, s := range c.sessions {
		if !s.finished && s.complete() && c.ticks >= s.deadline {
			c.finishSession(s)
		}
		if !s.finished {
			kept = append(kept, s)
		}
	}
	clear(c.sessions[len(kept):])
	c.sessions = kept
}

// finishSession answers s with each partition's latest result, holding at
// most maxBytes of batches over the response (the first batch always goes
// out whole, so a large batch never blocks a consumer).
func (c *Core) finishSession(s *fetchSession) {
	s.finished = true
	if s.parked {
		c.sessionsParked--
	}
	budget := s.maxBytes
	served := false
	out := make([]*strandpb.FetchResponse_Partition, 0, len(s.parts))
	for i := range s.parts {
		p := &s.parts[i]
		res := p.res
		if !p.have {
			res = FetchResult{Err: ErrTimeout, HighWatermark: -1, LogStartOffset: -1}
		}
		tp := p.tp
		wp := &strandpb.FetchResponse_Partition{
			Topic: tp.Topic, Partition: tp.Partition, Error: c.wireError(res.Err, res.Leader, &tp),
			HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset,
		}
		if wp.Error != nil && wp.Error.Code == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
			wp.Error.HighWatermark, wp.Error.LogStartOffset = res.HighWatermark, res.LogStartOffset
		}
		aborted := c.txnFetchState(wp, tp, res)
		whole := true // every batch of res accounted for
		for _, b := range res.Batches {
			if p.iso == engine.ReadCommitted && inAborted(aborted, b) {
				// A native read_committed reader never sees an aborted
				// batch; next_offset moves it past one all the same, or
				// an answer of aborted batches only would hold it there.
				wp.NextOffset = b.nextOffset()
				continue
			}
			if served && s.maxBytes > 0 && int64(len(b.Batch)) > budget {
				whole = false
				break
			}
			wp.Batches = append(wp.Batches, wireBatch(b))
			wp.NextOffset = b.nextOffset()
			budget -= int64(len(b.Batch))
			served = true
		}
		if whole && wp.Error == nil && res.through > wp.NextOffset {
			// Past the markers the read skipped after its last batch, as
			// a Kafka consumer moves past a control batch: a reader at a
			// marker ending the log otherwise stayed on it for good.
			wp.NextOffset = res.through
		}
		out = append(out, wp)
	}
	s.answer(&strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{Partitions: out}}})
}
