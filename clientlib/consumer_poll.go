package clientlib

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// pollTarget is a partition's state as Poll snapshots it.
type pollTarget struct {
	tp         topicPartition
	next       int64
	generation uint64
	topicID    []byte
}

// Poll returns records of the assigned, unpaused partitions, in offset
// order per partition, never past the high-water mark. It keeps one fetch
// in flight to each leader (a long poll: the node waits up to FetchMaxWait
// for data) and returns as soon as one of them brings records or an error,
// leaving the others in flight for the next Poll, so a record at one
// leader never waits for the others' long polls; before returning it
// starts the next fetch to every leader that has none, so the fetching
// overlaps the caller's processing (franz-go's buffered fetches, one per
// node). An answer moves positions only when Poll hands it out. With
// nothing to read it returns after about FetchMaxWait. Partitions whose
// start is Earliest, Latest or a timestamp are resolved first with
// ListOffsets. Errors are per partition in the result; retriable ones (a
// leader change, a lost connection) are retried by the next Poll after
// refreshing metadata. Poll returns early when ctx ends; fetches in flight
// then land for the next Poll.
func (k *Consumer) Poll(ctx context.Context) Fetches {
	if k.c.isClosed() {
		return Fetches{{Err: ErrClientClosed}}
	}
	if k.assignedCount() == 0 {
		return Fetches{{Err: errNothingToFetch}}
	}
	if err := k.c.ensureMetadata(ctx); err != nil {
		k.retryWait(ctx)
		return Fetches{{Err: err}}
	}
	out := k.resolveStarts(ctx)
	out = append(out, k.snapshotErrors()...)
	deadline := k.c.now().Add(k.cfg.maxWait + k.c.cfg.backoff.Base)
	idle := false // nothing to fetch: every partition leaderless or stopped
	for range pollRoundsMax {
		out = append(out, k.takeLanded(ctx)...)
		if out.hasRecords() || out.FirstErr() != nil {
			break
		}
		if !k.startFetches(ctx) {
			idle = true
			break
		}
		if k.awaitLanded(ctx, deadline) {
			continue
		}
		out = append(out, k.takeLanded(ctx)...)
		break
	}
	if !out.hasRecords() && (idle || IsRetriable(out.FirstErr())) {
		k.retryWait(ctx) // do not spin
	} else {
		k.mu.Lock()
		k.failedPolls = 0
		k.mu.Unlock()
	}
	k.startFetches(ctx)
	return mergeFetches(out)
}

// awaitLanded waits until a fetch lands (true), ctx ends or deadline
// passes.
func (k *Consumer) awaitLanded(ctx context.Context, deadline time.Time) bool {
	if k.c.cfg.simulated != nil {
		return k.simAwait(deadline)
	}
	// Stop and Reset leave no stale tick in the channel (Go 1.23 timers).
	if k.pollTimer == nil {
		k.pollTimer = time.NewTimer(time.Until(deadline))
	} else {
		k.pollTimer.Reset(time.Until(deadline))
	}
	defer k.pollTimer.Stop()
	select {
	case <-k.wake:
		return true
	case <-ctx.Done():
	case <-k.pollTimer.C:
	}
	return false
}

// pollRoundsMax bounds the fetches one Poll waits for when they land
// empty (each a long poll, so the timer ends the Poll first).
const pollRoundsMax = 1024

// startFetches sends a fetch to every leader of fetchable partitions that
// has none in flight, and reports whether any fetch is in flight.
func (k *Consumer) startFetches(ctx context.Context) bool {
	byLeader, leaderless := k.fetchTargets()
	if leaderless {
		k.c.RefreshMetadata(ctx)
	}
	nodes := make([]uint64, 0, len(byLeader))
	for node := range byLeader {
		nodes = append(nodes, node)
	}
	slices.Sort(nodes) // requests leave in node order, never map order
	k.mu.Lock()
	for _, node := range nodes {
		ts := byLeader[node]
		k.fetching[node] = true
		for _, t := range ts {
			k.parts[t.tp].fetchingGeneration = t.generation
		}
		if k.c.cfg.simulated != nil {
			k.simFetch(node, ts)
		}
	}
	inFlight := len(k.fetching) > 0
	k.mu.Unlock()
	if k.c.cfg.simulated == nil {
		// Outside k.mu: a fetch's answer may land (land takes k.mu)
		// before startFetch returns.
		for _, node := range nodes {
			k.startFetch(node, byLeader[node])
		}
	}
	return inFlight
}

// startFetch sends one fetch to a node; its answer lands for Poll. On a
// live connection with a free slot it is written from the caller's
// goroutine and lands from the connection's reader; otherwise (a dial, a
// full, throttled or dead connection) a goroutine of its own waits
// (fetchNode).
func (k *Consumer) startFetch(node uint64, ts []pollTarget) {
	c := k.c
	if bc := c.liveConn(node); bc != nil {
		req := k.fetchRequest(node, ts)
		sent := time.Now()
		err := bc.tryBegin(req, c.cfg.requestTimeout+k.cfg.maxWait, k.cfg.maxWait, func(resp *strandpb.Response, err error) {
			if err == nil {
				c.reached.Store(true)
			}
			k.land(landedFetch{node: node, targets: ts, sent: sent, resp: resp, err: err})
		})
		if err == nil {
			return
		}
		// Busy, or the connection died meanwhile: fetchNode waits, or
		// dials again.
	}
	go k.fetchNode(node, ts)
}

// fetchNode sends one fetch to a node and queues the answer for Poll. It
// runs on its own goroutine, bounded by the request's timeout (and ended
// by the client's Close, which closes the connection).
func (k *Consumer) fetchNode(node uint64, ts []pollTarget) {
	req := k.fetchRequest(node, ts)
	sent := time.Now()
	resp, err := k.c.requestNode(context.Background(), node, req, k.cfg.maxWait)
	k.land(landedFetch{node: node, targets: ts, sent: sent, resp: resp, err: err})
}

// land queues a finished fetch for the next Poll and wakes a waiting one.
func (k *Consumer) land(l landedFetch) {
	k.mu.Lock()
	k.landed = append(k.landed, l)
	wake := k.simWake
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
	if wake != nil {
		wake()
	}
}

// fetchRequest is the fetch of targets ts from node.
func (k *Consumer) fetchRequest(node uint64, ts []pollTarget) *strandpb.Request {
	// Sized to fit: the answer must fit the frame limit both ends accept.
	maxBytes := min(k.cfg.maxBytes, int32(frame.FetchBytesMax(k.c.frameMaxNode(node))))
	req := &strandpb.FetchRequest{
		MaxWaitMs: int32(k.cfg.maxWait / time.Millisecond),
		MinBytes:  min(k.cfg.minBytes, maxBytes),
		MaxBytes:  maxBytes,

		IsolationLevel: int32(k.cfg.isolation),
		// Markers come as empty batches at their offsets, so the position
		// moves past a partition's last marker (decodeBatches).
		IncludeMarkers: true,
	}
	for _, t := range ts {
		req.Partitions = append(req.Partitions, &strandpb.FetchRequest_Partition{
			Topic: t.tp.topic, Partition: t.tp.partition, Offset: t.next, MaxBytes: min(k.cfg.partitionMaxBytes, maxBytes), TopicId: t.topicID})
	}
	return &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: req}}
}

// takeLanded applies the fetches that landed since the last call, in the
// order they landed, and returns what they brought.
func (k *Consumer) takeLanded(ctx context.Context) Fetches {
	k.mu.Lock()
	landed := k.landed
	k.landed = nil
	for _, l := range landed {
		delete(k.fetching, l.node)
		for _, t := range l.targets {
			if cp := k.parts[t.tp]; cp != nil && cp.fetchingGeneration == t.generation {
				cp.fetchingGeneration = 0
			}
		}
	}
	k.mu.Unlock()
	var out Fetches
	for _, l := range landed {
		out = append(out, k.applyNode(ctx, l)...)
	}
	return out
}

// applyNode turns one landed fetch into per-partition results.
func (k *Consumer) applyNode(ctx context.Context, l landedFetch) Fetches {
	err := l.err
	if err == nil {
		err = errorFromWire(l.resp.GetError())
	}
	out := make(Fetches, 0, len(l.targets))
	if err != nil {
		if ClassifyErr(err).RefreshMetadata {
			k.c.RefreshMetadata(ctx)
		}
		for _, t := range l.targets {
			if k.current(t) {
				out = append(out, FetchPartition{Topic: t.tp.topic, Partition: t.tp.partition, Err: err, FetchedAt: l.sent})
			}
		}
		return out
	}
	answers := map[topicPartition]*strandpb.FetchResponse_Partition{}
	for _, a := range l.resp.GetFetch().GetPartitions() {
		answers[topicPartition{a.GetTopic(), a.GetPartition()}] = a
	}
	refresh := false
	for _, t := range l.targets {
		if !k.current(t) {
			continue // sought, unassigned or paused since it was sent
		}
		f, r := k.applyFetch(t, answers[t.tp])
		f.FetchedAt, f.TopicID = l.sent, t.topicID
		refresh = refresh || r
		if errors.Is(f.Err, ErrUnknownTopicID) || len(t.topicID) > 0 && errors.Is(f.Err, ErrUnknownTopic) {
			// A fetch that names the topic's id and finds no topic: the
			// leader no longer hosts it, deleted or not yet applied there.
			f.Err = k.topicGone(ctx, t)
		}
		out = append(out, f)
	}
	if refresh {
		k.c.RefreshMetadata(ctx)
	}
	return out
}

// current says whether a fetch's target still describes its partition:
// assigned, not paused, and not sought since the fetch was sent.
func (k *Consumer) current(t pollTarget) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	cp := k.parts[t.tp]
	return cp != nil && cp.generation == t.generation && !cp.paused
}

// retryWait waits retryDelay or until ctx ends (in virtual time on a
// simulated Client).
func (k *Consumer) retryWait(ctx context.Context) { k.c.sleep(ctx, k.retryDelay()) }

// retryDelay is the wait after a Poll that handed out nothing and found
// nothing to fetch or failed retriably: the client's jittered Backoff for
// the count of such Polls in a row (KIP-580: Kafka's retry.backoff.ms
// doubling to retry.backoff.max.ms), so consumers that failed together
// poll again spread out, and a partition without a leader through an
// outage is not asked about every few milliseconds. A Poll that hands out
// records or ends without an error starts the count again.
func (k *Consumer) retryDelay() time.Duration {
	k.mu.Lock()
	k.failedPolls++
	n := k.failedPolls
	k.mu.Unlock()
	return k.c.backoffDelay(n)
}

func (k *Consumer) assignedCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.parts)
}

// snapshotErrors reports the sticky errors of stopped partitions.
func (k *Consumer) snapshotErrors() Fetches {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out Fetches
	for _, cp := range k.parts {
		if cp.err != nil {
			out = append(out, FetchPartition{Topic: cp.tp.topic, Partition: cp.tp.partition,
				HighWatermark: cp.hwm, LogStartOffset: cp.logStart, Err: cp.err})
		}
	}
	return out
}

// fetchTargets groups fetchable partitions by leader, leaving out those
// with a fetch in flight and the leaders that have one.
func (k *Consumer) fetchTargets() (map[uint64][]pollTarget, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	byLeader := map[uint64][]pollTarget{}
	leaderless := false
	for _, cp := range k.parts {
		if !cp.resolved || cp.paused || cp.err != nil {
			continue
		}
		if !k.checkTopicIDLocked(cp) {
			continue
		}
		if cp.fetchingGeneration == cp.generation {
			continue // its fetch is still in flight
		}
		t := pollTarget{tp: cp.tp, next: cp.next, generation: cp.generation, topicID: cp.topicID}
		node, _, ok := k.c.leader(cp.tp.topic, cp.tp.partition)
		if !ok {
			leaderless = true
			continue
		}
		if k.fetching[node] {
			continue // one fetch per node: this one goes with the next
		}
		byLeader[node] = append(byLeader[node], t)
	}
	for _, ts := range byLeader {
		slices.SortFunc(ts, func(a, b pollTarget) int { return a.tp.compare(b.tp) })
	}
	return byLeader, leaderless
}

// applyFetch turns one partition's answer into records and a new
// position; it reports whether metadata should be refreshed.
func (k *Consumer) applyFetch(t pollTarget, a *strandpb.FetchResponse_Partition) (FetchPartition, bool) {
	f := FetchPartition{Topic: t.tp.topic, Partition: t.tp.partition}
	if a == nil {
		f.Err = &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "answer lacks the partition"}
		return f, false
	}
	f.HighWatermark, f.LogStartOffset, f.LastStableOffset = a.GetHighWatermark(), a.GetLogStartOffset(), a.GetLastStableOffset()
	if err := errorFromWire(a.GetError()); err != nil {
		f.Err = err
		if k.c.applyNotLeader(t.tp.topic, t.tp.partition, err) {
			return f, false
		}
		if se := err.(*Error); se.Code == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
			f.Err = k.outOfRange(t, se)
			return f, false
		}
		return f, ClassifyErr(err).RefreshMetadata
	}
	records, next, err := decodeBatches(t.tp.topic, t.tp.partition, a.GetBatches(), t.next, a.GetHighWatermark(), k.cfg.isolation == ReadCommitted)
	if n := a.GetNextOffset(); err == nil && k.cfg.isolation == ReadCommitted && n > next && n <= a.GetHighWatermark() {
		next = n // past aborted batches the node left out of the answer
	}
	if err != nil {
		err = &Error{Code: strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH, Message: err.Error()}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	cp := k.parts[t.tp]
	if cp == nil || cp.generation != t.generation {
		return FetchPartition{Topic: t.tp.topic, Partition: t.tp.partition}, false // moved meanwhile
	}
	cp.next, cp.hwm, cp.logStart = next, a.GetHighWatermark(), a.GetLogStartOffset()
	cp.hwmSeen = max(cp.hwmSeen, cp.hwm)
	f.Records, f.Err = records, err
	return f, false
}

// outOfRange applies the reset policy to an OFFSET_OUT_OF_RANGE answer.
func (k *Consumer) outOfRange(t pollTarget, se *Error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	cp := k.parts[t.tp]
	if cp == nil || cp.generation != t.generation {
		return nil
	}
	if t.next > se.HighWatermark && t.next <= cp.hwmSeen {
		// The position was legitimately reached, so the high-water mark
		// went back: a new leader that has not yet committed in its term.
		// Transient: retry, never reset (Kafka's OFFSET_NOT_AVAILABLE).
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE,
			Message: fmt.Sprintf("high-water mark %d behind position %d; leader catching up", se.HighWatermark, t.next)}
	}
	cp.hwm, cp.logStart = se.HighWatermark, se.LogStartOffset
	switch k.cfg.reset {
	case ResetEarliest:
		cp.next = se.LogStartOffset
		return nil
	case ResetLatest:
		cp.next = se.HighWatermark
		return nil
	}
	cp.err = &OffsetOutOfRangeError{Topic: t.tp.topic, Partition: t.tp.partition, Offset: t.next,
		LogStartOffset: se.LogStartOffset, HighWatermark: se.HighWatermark}
	return cp.err
}

// resolveStarts turns Earliest, Latest and timestamp starts into offsets
// with ListOffsets; failures are reported and retried at the next Poll.
func (k *Consumer) resolveStarts(ctx context.Context) Fetches {
	k.mu.Lock()
	type pending struct {
		tp         topicPartition
		start      Offset
		generation uint64
	}
	var todo []pending
	for _, cp := range k.parts {
		if !cp.resolved {
			todo = append(todo, pending{cp.tp, cp.start, cp.generation})
		}
	}
	k.mu.Unlock()
	slices.SortFunc(todo, func(a, b pending) int { return a.tp.compare(b.tp) })
	var out Fetches
	for _, p := range todo {
		id := k.c.topicID(p.tp.topic)
		start := p.start
		if start.kind == offsetLatest && k.cfg.isolation == ReadCommitted {
			start = OffsetLastStable()
		}
		lo, err := k.c.listOffsetID(ctx, p.tp.topic, p.tp.partition, start, id)
		if errors.Is(err, ErrUnknownTopicID) {
			// Re-created before reading began: nothing was read from the
			// old topic, so start on the new one once metadata names it.
			k.c.RefreshMetadata(ctx)
			err = &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, Message: "topic re-created before reading began; retrying with its new id"}
		}
		if err != nil {
			out = append(out, FetchPartition{Topic: p.tp.topic, Partition: p.tp.partition, Err: err})
			continue
		}
		k.mu.Lock()
		if cp := k.parts[p.tp]; cp != nil && cp.generation == p.generation {
			cp.resolved, cp.next, cp.hwm, cp.logStart = true, lo.Offset, lo.HighWatermark, lo.LogStartOffset
			cp.topicID = id
			cp.hwmSeen = max(cp.hwmSeen, cp.hwm)
		}
		k.mu.Unlock()
	}
	return out
}

// checkTopicIDLocked compares a partition's topic id with the cached one
// before fetching: it fixes the id of an exact start at its first fetch,
// and stops the partition with a TopicRecreatedError when metadata names
// another topic under the name. It reports whether to fetch. k.mu held.
func (k *Consumer) checkTopicIDLocked(cp *consumed) bool {
	info := k.c.cachedTopic(cp.tp.topic)
	var cached []byte
	if info != nil {
		cached = info.ID
	}
	switch {
	case cp.topicID == nil:
		cp.topicID = cached
	case cached != nil && !bytes.Equal(cached, cp.topicID):
		cp.err = &TopicRecreatedError{Topic: cp.tp.topic, Partition: cp.tp.partition, OldID: cp.topicID, NewID: cached}
		return false
	case info != nil && info.Err == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION:
		// Metadata asked about the topic by name says none exists: it
		// was deleted under the partition (topicGone's check).
		cp.err = &TopicRecreatedError{Topic: cp.tp.topic, Partition: cp.tp.partition, OldID: cp.topicID}
		return false
	}
	return true
}

// topicGone turns a node's UNKNOWN_TOPIC_ID answer (or an unknown-topic
// answer to a fetch naming the id) into the partition's sticky error:
// after a metadata refresh of the topic by name, a ClusterChangedError when the
// cluster behind the address was replaced, else a TopicRecreatedError
// naming the topic's new id (none: deleted). When fresh metadata still
// names the partition's id, the answering node lagged (it has not applied
// the re-create yet): a retriable error, nothing sticky.
func (k *Consumer) topicGone(ctx context.Context, t pollTarget) error {
	if err := k.c.refreshTopic(ctx, t.tp.topic); errors.Is(err, ErrClusterIDMismatch) {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	cp := k.parts[t.tp]
	if cp == nil || cp.generation != t.generation {
		return nil // moved meanwhile
	}
	var now []byte
	if info := k.c.cachedTopic(t.tp.topic); info != nil && info.Err == strandpb.ErrorCode_ERROR_CODE_NONE {
		now = info.ID
	}
	if bytes.Equal(now, t.topicID) {
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, Message: "a node with older metadata refused the topic id; retrying"}
	}
	cp.err = &TopicRecreatedError{Topic: t.tp.topic, Partition: t.tp.partition, OldID: t.topicID, NewID: now}
	return cp.err
}

// refreshTopic asks any node about topic alone. A full metadata listing
// that leaves a topic out keeps the cached one (and its leaders), so a
// deleted topic would look alive forever; an answer about the topic by
// name caches it as unknown when no topic of the name exists. An answer
// older than metadata the client already applied is refused (a node
// restarting or rebuilding its metadata does not know topics created
// since, and must not make a live topic look deleted).
func (c *Client) refreshTopic(ctx context.Context, topic string) error {
	rctx, cancel := c.requestCtx(ctx)
	defer cancel()
	req := &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: []string{topic}}}}
	resp, addr, err := c.anyRequestAt(rctx, req)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyNamedMetadataLocked(resp, addr, nil)
}
