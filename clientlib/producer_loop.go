package clientlib

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// loopEvent marks a result that is not a produce request's: a metadata
// refresh or an InitProducerId outcome. Such results have no batches and
// carry the event in their node field.
type loopEvent uint8

const (
	eventMetadata loopEvent = iota + 1
	eventInitProducer
	eventAddPartitions
)

// drive does everything that can be done at now: place waiting records,
// seal batches, send attempts, hand out completions. It returns the next
// time it needs to run again (0: only on an event).
func (p *producer) drive(now time.Duration) time.Duration {
	var next time.Duration
	wakeAt := func(t time.Duration) {
		if t > now && (next == 0 || t < next) {
			next = t
		}
	}
	if t := p.c.txn; t != nil && t.isAborting() {
		p.failEverything(ErrTransactionAborted)
	}
	wakeAt(p.placeWaiting(now))
	flushing := p.flushing()
	requests := map[uint64][]sentBatch{}
	var toAdd []topicPartition // partitions to add to the transaction
	for _, s := range p.sortedSinks() {
		if s.w.Len() > 0 {
			if gone := p.goneError(s, nil); gone != nil && gone.NewID == nil {
				// The topic is gone: there is no leader to send the
				// held batches to; those in flight resolve by their
				// answers. A re-created topic's held batches are still
				// sent under their id: the node refuses them (handle
				// fails them with a *TopicGoneError) or, lagging, writes
				// them to the old topic; the client does not guess which.
				s.w.FailQueued(gone)
				p.pop(s)
			}
		}
		// Expire before sealing, so an open batch that waited for room
		// in a window of expired batches is sealed in the same pass,
		// and after it, so a batch already past its delivery timeout
		// when sealed (it counts from its first record) fails at once.
		s.w.Expire(now)
		p.pop(s)
		wakeAt(p.maybeSeal(s, now, flushing))
		s.w.Expire(now)
		p.pop(s)
		if s.w.Len() == 0 {
			continue
		}
		if s.awaitMeta && (p.refreshWanted || p.refreshing) {
			continue // a metadata answer wakes us
		}
		if t := s.w.ReadyAt(); t > now {
			wakeAt(t)
		}
		wakeAt(s.w.ExpiresAt())
		if p.c.cfg.deliveryTimeout > 0 {
			wakeAt(now + p.c.cfg.deliveryTimeout/4)
		}
		if t := p.c.txn; t != nil {
			if !p.txnReady(t, s, &toAdd) {
				continue
			}
		} else if p.c.cfg.idempotent && p.producerID < 0 {
			p.startInit(now)
			wakeAt(p.initRetryAfter)
			continue
		}
		node, _, ok := p.c.leader(s.tp.topic, s.tp.partition)
		if !ok {
			p.refreshWanted = true
			continue
		}
		if until := p.c.suspectUntil(node); until != 0 {
			// Its leader stalled: wait for metadata naming another, or
			// for the suspicion to lapse.
			p.refreshWanted = true
			wakeAt(until)
			continue
		}
		requests[node] = append(requests[node], sentBatch{s: s})
	}
	wakeAt(p.maybeAddPartitions(toAdd, now))
	p.send(requests, now)
	wakeAt(p.maybeRefresh(now))
	return next
}

// maybeSeal seals the open batch when it is full, or when it is due
// (linger passed, flush, or Linger 0) and the window can send it at once.
// It returns when the batch will be due.
func (p *producer) maybeSeal(s *sink, now time.Duration, flushing bool) time.Duration {
	if len(s.open) == 0 {
		return 0
	}
	if s.w.Len() > 0 && p.goneError(s, nil) != nil {
		// The window's topic id is gone: the batch waits for the window
		// to empty and a new one bound to the new id (only a batch filled
		// to BatchBytes meanwhile is sealed into the old window, and fails
		// there with a *TopicGoneError, unwritten).
		return 0
	}
	cfg := &p.c.cfg
	if s.builder.Len() >= cfg.batchBytes {
		p.seal(s, now)
		return 0
	}
	due := s.openSince + cfg.linger
	if (flushing || now >= due) && s.w.Len() < cfg.inFlightBatchesMax {
		p.seal(s, now)
		return 0
	}
	if now >= due {
		return 0 // waits for room in the window; a completion wakes us
	}
	return due
}

// send builds produce requests: for each node, rounds of at most one
// attempt per partition, while the node has request slots. A request
// stops short of the frame limit both ends accept (as franz-go's sink
// stops at its wire length limit): a batch that would push it over waits
// for the next round. Each round starts one partition further on, so a
// partition at the end of the list is not starved by full requests.
func (p *producer) send(requests map[uint64][]sentBatch, now time.Duration) {
	nodes := make([]uint64, 0, len(requests))
	for node := range requests {
		nodes = append(nodes, node)
	}
	slices.Sort(nodes) // the same requests in the same order every time
	for _, node := range nodes {
		sinks := requests[node]
		limit := frame.ProduceBytesMax(p.c.frameMaxNode(node))
		for p.nodeInFlight[node] < p.c.cfg.inFlightPerConn {
			start := p.rotation % len(sinks)
			p.rotation++
			batch := p.fill(sinks, start, limit, now)
			if len(batch) == 0 {
				break
			}
			p.nodeInFlight[node]++
			p.nodeBytes[node] += batchBytes(batch)
			p.io.send(node, batch)
		}
	}
}

// fill takes one attempt from each sink that has one, starting at start,
// while the request stays within limit bytes; the first always goes (a
// batch is far below any frame limit: recordbatch.BatchBytesMax).
func (p *producer) fill(sinks []sentBatch, start int, limit int, now time.Duration) []sentBatch {
	var batch []sentBatch
	size := 0
	for k := range sinks {
		s := sinks[(start+k)%len(sinks)].s
		id, ok := s.w.Peek(now)
		if !ok {
			continue
		}
		b := s.sealed[id]
		n := frame.ProducePartitionBytes(s.tp.topic, len(b.bytes))
		if len(batch) > 0 && size+n > limit {
			continue
		}
		a, _ := s.w.Next(now)
		b.writing.Add(1)
		sb := sentBatch{s: s, batch: b, attempt: a, bytes: b.bytes, producerID: p.producerID, epoch: a.Epoch,
			topicID: b.topicID}
		if t := p.c.txn; t != nil {
			sb.producerID, sb.epoch, _ = t.producer()
		}
		batch = append(batch, sb)
		size += n
	}
	return batch
}

// batchBytes is the batch bytes of a request's attempts.
func batchBytes(batches []sentBatch) int {
	n := 0
	for _, sb := range batches {
		n += len(sb.bytes)
	}
	return n
}

// handle applies a request's outcome to each partition's window.
func (p *producer) handle(res requestResult, now time.Duration) {
	if res.batches == nil {
		p.handleEvent(res, now)
		return
	}
	p.nodeInFlight[res.node]--
	p.nodeBytes[res.node] -= batchBytes(res.batches)
	answers := map[topicPartition]*strandpb.ProduceResponse_Partition{}
	for _, a := range res.resp.GetProduce().GetPartitions() {
		answers[topicPartition{a.GetTopic(), a.GetPartition()}] = a
	}
	for _, sb := range res.batches {
		base, err := int64(-1), res.err
		if err == nil {
			err = errorFromWire(res.resp.GetError())
		}
		if err == nil && p.c.cfg.acks != AcksNone {
			a := answers[sb.s.tp]
			if a == nil {
				err = &Error{Code: strandpb.ErrorCode_ERROR_CODE_TIMEOUT, Message: "answer lacks the partition"}
			} else {
				base, err = a.GetBaseOffset(), errorFromWire(a.GetError())
			}
		}
		retryAt := now + p.c.backoffDelay(sb.attempt.Number)
		if errors.Is(err, ErrUnknownTopicID) {
			// The node does not know the id the batch named: the topic
			// was deleted (and maybe re-created), or the node lags. Ask
			// about the topic by name; if the metadata already names
			// another id, the batch fails now (it is not retried into
			// another topic), else it waits for the answer.
			p.idRefused[sb.s.tp.topic], p.refreshWanted = true, true
			if gone := p.goneError(sb.s, err); gone != nil {
				err = gone
			} else {
				sb.s.awaitMeta = true
			}
		}
		if err != nil {
			if p.c.applyNotLeader(sb.s.tp.topic, sb.s.tp.partition, err) {
				retryAt = now // the hint names a new leader: go at once
			} else if ClassifyErr(err).RefreshMetadata {
				p.refreshWanted = true
			}
		}
		sb.s.w.Report(sb.attempt.ID, base, err, now, retryAt)
		p.pop(sb.s)
	}
}

// pop hands a window's resolved batches to the promise goroutine in order.
func (p *producer) pop(s *sink) {
	for {
		c, ok := s.w.Pop()
		if !ok {
			return
		}
		if p.memo.stuck {
			p.memo.sticky = nil // a window shrank: a partition may be available
		}
		b := s.sealed[c.ID]
		delete(s.sealed, c.ID)
		if b.writing.Load() == 0 {
			p.pool.put(b.bytes) // no attempt can read it any more
		}
		for i, pr := range b.records {
			if c.Err == nil && c.BaseOffset >= 0 {
				pr.r.Offset = c.BaseOffset + int64(i)
			}
			pr.r.TopicID = b.topicID
			p.complete(pr, c.Err)
		}
	}
}

// placeWaiting assigns records of topics that metadata now knows, and fails
// those of topics still unknown after the retries. It returns when to look
// again.
func (p *producer) placeWaiting(now time.Duration) time.Duration {
	var next time.Duration
	for _, topic := range p.waitingTopics() {
		prs := p.waiting[topic]
		p.c.mu.Lock()
		info := p.c.meta.Topic(topic)
		p.c.mu.Unlock()
		if info != nil && len(info.Partitions) > 0 {
			delete(p.waiting, topic)
			delete(p.waitingSince, topic)
			delete(p.unknownAnswers, topic)
			for _, pr := range prs {
				p.assign(pr, now)
			}
			continue
		}
		limit := p.c.cfg.deliveryTimeout
		if limit == 0 {
			limit = time.Duration(p.c.cfg.retriesMax+1) * p.c.cfg.backoff.Max
		}
		if now-p.waitingSince[topic] >= limit {
			delete(p.waiting, topic)
			delete(p.waitingSince, topic)
			delete(p.unknownAnswers, topic)
			for _, pr := range prs {
				p.complete(pr, &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
					Message: "topic " + topic + " not in metadata"})
			}
			continue
		}
		p.refreshWanted = true
		if t := p.waitingSince[topic] + limit; next == 0 || t < next {
			next = t
		}
	}
	return next
}

// waitingTopics lists the topics with waiting records, sorted, so they are
// placed and failed in the same order every time.
func (p *producer) waitingTopics() []string {
	topics := make([]string, 0, len(p.waiting))
	for topic := range p.waiting {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	return topics
}

// judgeWaiting fails waiting records at once when a metadata refresh
// settles their fate: the client never reached the cluster (every address
// refused, or is not a Strand node), or the cluster answered and their
// topic is still unknown after UnknownTopicRetries answers.
func (p *producer) judgeWaiting(refreshErr error) {
	p.c.mu.Lock()
	reached := p.c.metaKnown
	p.c.mu.Unlock()
	var ue *UnreachableError
	var ns *NotStrandError
	definite := errors.As(refreshErr, &ue) || errors.As(refreshErr, &ns)
	for _, topic := range p.waitingTopics() {
		prs := p.waiting[topic]
		p.c.mu.Lock()
		info := p.c.meta.Topic(topic)
		p.c.mu.Unlock()
		if info != nil && len(info.Partitions) > 0 {
			continue // placeWaiting places them
		}
		var err error
		switch {
		case definite && !reached:
			err = refreshErr
		case refreshErr == nil && p.c.cfg.unknownTopicRetries >= 0:
			p.unknownAnswers[topic]++
			if p.unknownAnswers[topic] > p.c.cfg.unknownTopicRetries {
				err = &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
					Message: fmt.Sprintf("topic %q does not exist (metadata answered %d times; UnknownTopicRetries waits longer)",
						topic, p.unknownAnswers[topic])}
			}
		}
		if err == nil {
			continue
		}
		delete(p.waiting, topic)
		delete(p.waitingSince, topic)
		delete(p.unknownAnswers, topic)
		for _, pr := range prs {
			p.complete(pr, err)
		}
	}
}

// maybeRefresh starts a metadata refresh when one is wanted (or the cache
// is older than MetadataMaxAge), at most one at a time. While answers keep
// leaving something wanted (a partition without a leader, an unknown
// topic), the wait between refreshes grows from the retry base to its cap,
// as Kafka's clients back off metadata refreshes (KIP-580): a producer of
// a leaderless partition asks about once a second, not ten times; the
// first pass that wants nothing starts the wait over. It returns when it
// may start one.
func (p *producer) maybeRefresh(now time.Duration) time.Duration {
	if len(p.sinks) > 0 && p.c.metadataStale() {
		p.refreshWanted = true
	}
	if !p.refreshWanted && !p.refreshing {
		p.refreshStreak = 0
	}
	if !p.refreshWanted || p.refreshing {
		return 0
	}
	if now < p.refreshAt {
		return p.refreshAt
	}
	p.refreshWanted, p.refreshing = false, true
	p.refreshStreak++
	p.refreshAt = now + max(p.c.backoffDelay(p.refreshStreak), time.Millisecond)
	var topics []string
	for topic := range p.idRefused {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	clear(p.idRefused)
	p.io.refresh(topics)
	return 0
}

// startInit asks for a producer id, once at a time, with backoff.
func (p *producer) startInit(now time.Duration) {
	if p.initInFlight || now < p.initRetryAfter {
		return
	}
	p.initInFlight = true
	p.initAttempts++
	p.io.initProducerID()
}

// handleEvent takes a metadata refresh or InitProducerId outcome.
func (p *producer) handleEvent(res requestResult, now time.Duration) {
	switch loopEvent(res.node) {
	case eventMetadata:
		p.refreshing = false
		for _, s := range p.sinks {
			s.awaitMeta = false
		}
		p.judgeWaiting(res.err)
	case eventAddPartitions:
		p.handleAddPartitions(*res.add, now)
	case eventInitProducer:
		p.initInFlight = false
		if res.err == nil && res.resp.GetInitProducerId() != nil {
			p.producerID = res.resp.GetInitProducerId().GetProducerId()
			return
		}
		p.initRetryAfter = now + p.c.backoffDelay(p.initAttempts)
		if p.initAttempts > p.c.cfg.retriesMax {
			p.failUnsent(&RetriesExhaustedError{Attempts: p.initAttempts, Err: res.err})
			p.initAttempts = 0
		}
	}
}

// failUnsent fails every record not yet sent (no producer id to send with).
func (p *producer) failUnsent(err error) {
	for _, s := range p.sortedSinks() {
		p.seal(s, 0)
		s.w.FailQueued(err)
		p.pop(s)
	}
}

// failEverything fails every buffered record at shutdown.
func (p *producer) failEverything(err error) {
	for _, topic := range p.waitingTopics() {
		prs := p.waiting[topic]
		for _, pr := range prs {
			p.complete(pr, err)
		}
		delete(p.waiting, topic)
	}
	for {
		select {
		case pr := <-p.intake:
			p.complete(pr, err)
			continue
		default:
		}
		break
	}
	p.failUnsent(err)
}
