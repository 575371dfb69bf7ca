package simnet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// Plain consumers on clientlib's own Consumer.
//
// Every one of the Options.Consumers slots is an application on a
// clientlib.Consumer of a Simulated Client: Assign, Seek, Poll
// (ListOffsets resolution, one long-polling fetch per leader, NOT_LEADER
// and metadata refreshes, the CRC check of every batch, the topic id of
// every fetch) run as tasks on the simulator's thread (clientlib.SimRun),
// every request over the simulated network, in virtual time. Each
// consumer draws its fetch shape (max wait, byte budgets, read_committed
// in a third) and assigns every partition of every topic at a drawn
// start: an exact offset, the earliest, the latest, the last stable or a
// timestamp; one Poll in libSeekOneIn then seeks a partition anew. Its
// reset policy is ResetNone, so a position below the log start comes back
// as an OffsetOutOfRangeError and the application seeks, explicitly. A
// topic deleted and created again under its name (wire_recreate.go) stops
// the partition with a TopicRecreatedError; the application seeks the new
// incarnation from its beginning, and FetchPartition.TopicID tells which
// incarnation (history key) every batch was read from.
//
// Checks, for every partition:
//   - every batch handed out starts at the consumer's position (the seek
//     target, the offset ListOffsets resolved a start to, or one past the
//     last record handed out) and is dense, and Position agrees after
//     every Poll: no record skipped, none handed out twice; a batch of
//     another incarnation than the session's, with no seek between, fails;
//   - every batch handed out is a history read (a poll op from its fetch's
//     send time, a fresh session after a seek): the log's records at those
//     offsets, below the high-water mark;
//   - every fetch answer the client receives is also recorded raw (a fetch
//     op of another history client): what the node served, before
//     clientlib filtered it, is checked too, and so are the leader's
//     high-water marks (never below one a fetch returned before this one
//     was sent, nor an out-of-range refusal of an offset below it);
//   - after the heal the consumer polls on until it reads the newest
//     incarnation (a deleted one's records are not owed, even when the
//     newest has none acknowledged) and its position passes every
//     acknowledged record of it, and every acknowledged record from its
//     last seek point on was handed out.
//
// What is not a Consumer: the random readers (they read from any replica,
// which a Consumer never does) and the drain (the final read of every
// incarnation), both checkers.
const (
	libConsumerMaxWaitMin  = 20 * time.Millisecond
	libSeekOneIn           = 12 // polls that seek a partition anew first
	libConsumerMetaAgesMax = 4  // a consumer's metadata max age: 1..4 times libMetadataMaxAge
	// libCatchUpMax bounds the catch-up after the heal.
	libCatchUpMax = 30 * time.Second
	// libRawClient offsets the history client id of the raw fetch answers.
	libRawClient = 1 << 16
)

// Start kinds a seek draws.
const (
	seekExact = iota
	seekEarliest
	seekLatest
	seekLastStable
	seekTimestamp
	seekKinds
)

var seekNames = [seekKinds]string{"exact", "earliest", "latest", "last-stable", "timestamp"}

// libConsumer is one application on a clientlib.Consumer.
type libConsumer struct {
	c       *wireClient // the slot: network position, rng, timers
	cl      *clientlib.Client
	k       *clientlib.Consumer
	alive   bool
	abandon func()
	sess    []*libSession // per group index (ww.tps); nil: not assigned
	// finishing: the budget is spent and the run healed; caughtUp runs
	// once the position passed targets (one past the last acknowledged
	// record of targetKeys, per group index).
	finishing  bool
	targets    []int64
	targetKeys []linearizability.TopicPartition
	caughtUp   func()
	deadline   time.Duration
	budgetOut  bool
}

// libSession is one partition's reading since its last seek.
type libSession struct {
	kind  int
	start int64 // the seek point; -1 until ListOffsets resolved it
	next  int64 // the position: start, then one past the last record handed out
	fresh bool  // nothing handed out since the seek
	inc   int   // the topic incarnation read; -1 until known
	seen  map[int64]bool
}

// newLibConsumer puts slot c on a clientlib Consumer with a drawn shape.
func newLibConsumer(c *wireClient) *libConsumer {
	lc := &libConsumer{c: c, alive: true}
	o := c.ww.w.opts
	seeds := make([]string, len(c.ww.peers))
	for i, p := range c.ww.peers {
		seeds[i] = p.Address
	}
	// Metadata kept up to libConsumerMetaAgesMax times as long as the
	// producers' (Kafka's default is minutes): a topic re-created under
	// the consumer is met by fetches naming the old id for longer.
	age := libMetadataMaxAge * time.Duration(1+c.rng.IntN(libConsumerMetaAgesMax))
	cl, err := clientlib.NewClient(append([]clientlib.Opt{clientlib.Simulated(libConsumerTransport{lc}),
		clientlib.SeedAddresses(seeds...), clientlib.RandSeed(c.rng.Uint64()),
		clientlib.RequestTimeout(o.libRequestTimeout()), clientlib.StallTimeout(o.libStallTimeout()), clientlib.MaxRetries(attemptsMax),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.MetadataMaxAge(age)},
		c.ww.sasl.libOpts(c)...)...) // SASL: sasl.go
	if err != nil {
		panic("simnet: library consumer options: " + err.Error())
	}
	wait := libConsumerMaxWaitMin + time.Duration(c.rng.Int64N(int64(libFetchMaxWait-libConsumerMaxWaitMin)))
	opts := []clientlib.ConsumerOpt{clientlib.FetchMaxWait(wait)}
	if c.rng.IntN(3) == 0 {
		opts = append(opts, clientlib.FetchMaxBytes(int32(1+c.rng.IntN(fetchBytesMax))),
			clientlib.FetchMaxPartitionBytes(int32(1+c.rng.IntN(fetchBytesMax/4))))
	}
	if c.rng.IntN(3) == 0 {
		opts = append(opts, clientlib.FetchIsolation(clientlib.ReadCommitted))
		c.ww.w.coverage.Inc("event/lib-consumer-read-committed")
	}
	lc.cl, lc.k = cl, clientlib.NewConsumer(cl, opts...)
	lc.sess = make([]*libSession, len(c.ww.tps))
	return lc
}

// begin assigns the topics' partitions and starts polling.
func (lc *libConsumer) begin() {
	lc.assignNew(false)
	lc.poll()
}

// assignNew assigns, at a drawn start, the partitions that exist and are
// not assigned yet (the main topic may grow).
func (lc *libConsumer) assignNew(seek bool) {
	for p, s := range lc.sess {
		if s == nil && lc.c.ww.groupCreated(p) {
			lc.seek(p, seek, -1)
		}
	}
}

// seek moves group p to a start of kind (drawn when negative): Assign, or
// Seek when seek.
func (lc *libConsumer) seek(p int, seek bool, kind int) {
	c := lc.c
	if kind < 0 {
		kind = c.rng.IntN(seekKinds)
	}
	s := &libSession{kind: kind, start: -1, next: -1, fresh: true, inc: -1, seen: map[int64]bool{}}
	var at clientlib.Offset
	switch kind {
	case seekExact:
		s.start = c.rng.Int64N(c.ww.w.work.maxHwm[p] + 1)
		s.next = s.start
		at = clientlib.OffsetExact(s.start)
	case seekEarliest:
		at = clientlib.OffsetEarliest()
	case seekLatest:
		at = clientlib.OffsetLatest()
	case seekLastStable:
		at = clientlib.OffsetLastStable()
	default:
		at = clientlib.OffsetAtTimestamp(time.Unix(0, 0).Add(time.Duration(c.rng.Int64N(int64(c.ww.w.now()) + 1))))
	}
	lc.sess[p] = s
	tp := c.ww.tps[p]
	if seek {
		lc.k.Seek(tp.Topic, tp.Partition, at)
	} else {
		lc.k.Assign(tp.Topic, tp.Partition, at)
	}
	c.ww.w.coverage.Inc("event/lib-consumer-seek-" + seekNames[kind])
}

// groupOf is the group index of topic's partition; -1: not a scenario
// topic's.
func (ww *wireWorkload) groupOf(topic string, partition int32) int {
	for _, t := range ww.topics {
		if t.name == topic && partition >= 0 && int(partition) < t.partitions {
			return t.first + int(partition)
		}
	}
	return -1
}

// poll runs one Poll as a task, after a re-seek now and then; the
// budget's end parks the consumer until the heal (finish).
func (lc *libConsumer) poll() {
	if !lc.alive {
		return
	}
	w := lc.c.ww.w
	if !lc.finishing && !w.work.take() {
		if !lc.budgetOut {
			lc.budgetOut = true
			lc.c.finished = true
			lc.c.ww.clientDone()
		}
		return
	}
	lc.assignNew(true)
	if !lc.finishing && lc.c.rng.IntN(libSeekOneIn) == 0 {
		if p := lc.c.rng.IntN(len(lc.sess)); lc.sess[p] != nil {
			lc.seek(p, true, -1)
		}
	}
	var fs clientlib.Fetches
	start := w.now()
	lc.abandon = lc.c.ww.w.simRun(lc.cl, func(ctx context.Context) { fs = lc.k.Poll(ctx) }, func() { lc.polled(fs, start) })
}

// polled checks what a Poll handed out, seeks where it must, and polls
// again after a think time.
func (lc *libConsumer) polled(fs clientlib.Fetches, start time.Duration) {
	w := lc.c.ww.w
	w.checker.onOpDone(start, w.now())
	for _, f := range fs {
		p := lc.c.ww.groupOf(f.Topic, f.Partition)
		if p < 0 || lc.sess[p] == nil {
			continue
		}
		var oor *clientlib.OffsetOutOfRangeError
		var re *clientlib.TopicRecreatedError
		switch {
		case errors.As(f.Err, &oor):
			w.coverage.Inc("event/lib-consumer-out-of-range")
			lc.seek(p, true, -1) // the application decides where to go on
			continue
		case errors.As(f.Err, &re):
			// Deleted (and perhaps created again) under the consumer:
			// read the new incarnation from its beginning.
			w.coverage.Inc("event/lib-consumer-recreated")
			lc.seek(p, true, seekEarliest)
			continue
		}
		if len(f.Records) > 0 {
			lc.handOut(p, f)
		}
	}
	lc.checkPositions()
	if lc.finishing && lc.offTarget() {
		lc.refreshTargets()
	}
	if lc.finishing && lc.reached() {
		lc.finished()
		return
	}
	if lc.finishing && w.now() > lc.deadline {
		lc.stuck()
		return
	}
	next := lc.c.thinkTime()
	if w.now() == start {
		next += 10 * time.Millisecond // an error at once: do not spin
	}
	lc.c.after(next, lc.poll)
}

// handOut checks one partition's records as the application gets them.
func (lc *libConsumer) handOut(p int, f clientlib.FetchPartition) {
	ww := lc.c.ww
	w := ww.w
	s := lc.sess[p]
	first := f.Records[0].Offset
	inc := ww.incarnation(f.Topic, f.TopicID)
	lc.noteIncarnation(s, ww.tps[p], inc)
	if s.next < 0 {
		w.fail("consumer(lib): client %d was handed %s/%d from offset %d before its %s start resolved",
			lc.c.index, f.Topic, f.Partition, first, seekNames[s.kind])
		s.start, s.next = first, first
	}
	recs := make([]linearizability.Record, len(f.Records))
	for i, r := range f.Records {
		if want := s.next + int64(i); r.Offset != want {
			w.fail("consumer(lib): client %d was handed %s/%d offset %d where its position was %d (%s seek to %d)",
				lc.c.index, f.Topic, f.Partition, r.Offset, want, seekNames[s.kind], s.start)
			break
		}
		recs[i] = linearizability.Record{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)}
		s.seen[r.Offset] = true
	}
	sent := ns(f.FetchedAt.Sub(time.Unix(0, 0)))
	var id linearizability.OpID
	if s.fresh {
		id = w.hist.h.CallFetch(linearizability.ClientID(lc.c.index), w.hist.key(p, inc), s.next, 0, sent)
	} else {
		id = w.hist.h.CallPoll(linearizability.ClientID(lc.c.index), w.hist.key(p, inc), s.next, 0, sent)
	}
	w.hist.h.ReturnFetch(id, recs, f.HighWatermark, f.LogStartOffset, ns(w.now()))
	s.fresh = false
	s.next = f.Records[len(f.Records)-1].Offset + 1
	w.coverage.Inc("event/lib-consumer-batch")
}

// noteIncarnation sets the incarnation session s reads: it may not change
// without a seek.
func (lc *libConsumer) noteIncarnation(s *libSession, tp node.TopicPartition, inc int) {
	if s.inc >= 0 && inc != s.inc {
		lc.c.ww.w.fail("consumer(lib): client %d read %s/%d in incarnation %d after incarnation %d, with no seek between",
			lc.c.index, tp.Topic, tp.Partition, inc, s.inc)
	}
	s.inc = inc
}

// checkPositions compares the Consumer's positions with the checker's:
// a position may move only by handing records out (or by a seek).
func (lc *libConsumer) checkPositions() {
	for p, s := range lc.sess {
		if s == nil {
			continue
		}
		tp := lc.c.ww.tps[p]
		if id := lc.k.PositionTopicID(tp.Topic, tp.Partition); len(id) > 0 {
			lc.noteIncarnation(s, tp, lc.c.ww.incarnation(tp.Topic, id))
		}
		pos, ok := lc.k.Position(tp.Topic, tp.Partition)
		if ok && s.next >= 0 && pos != s.next {
			lc.c.ww.w.fail("consumer(lib): client %d's position in %s/%d is %d, but it was handed records up to %d (%s seek to %d)",
				lc.c.index, tp.Topic, tp.Partition, pos, s.next, seekNames[s.kind], s.start)
			s.next = pos
		}
	}
}

// onListOffsets notes the offset a ListOffsets answer resolved a start
// to: the consumer resolves a partition's
// start with one such request per Poll, inside the Poll, and applies the
// first answer it accepts.
func (lc *libConsumer) onListOffsets(resp *strandpb.Response) {
	if resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
		return
	}
	ww := lc.c.ww
	for _, a := range resp.GetListOffsets().GetPartitions() {
		p := ww.groupOf(a.GetTopic(), a.GetPartition())
		if p < 0 || lc.sess[p] == nil || a.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
			continue
		}
		if s := lc.sess[p]; s.next < 0 {
			s.start, s.next = a.GetOffset(), a.GetOffset()
		}
	}
}

// finishLibConsumers, once the run healed, polls on until every
// partition's position passes its last acknowledged record; then runs then.
func (ww *wireWorkload) finishLibConsumers(then func()) {
	var pending []*libConsumer
	for _, c := range ww.clients {
		if c.libCons != nil && c.libCons.alive {
			pending = append(pending, c.libCons)
		}
	}
	left := len(pending)
	if left == 0 {
		then()
		return
	}
	for _, lc := range pending {
		lc.finishing, lc.deadline = true, ww.w.now()+libCatchUpMax
		lc.targetKeys = ww.newestKeys()
		lc.targets = ww.acknowledgedEnds(lc.targetKeys)
		lc.caughtUp = func() {
			left--
			if left == 0 {
				then()
			}
		}
		if lc.budgetOut { // parked; else its loop sees finishing
			lc.c.after(0, lc.poll)
		}
	}
}

// newestKeys is, per group index, the history key of the topic's
// current incarnation: the id the up node with the newest metadata
// names, else the last id the clients first saw. The up nodes may all be
// stale at first (nodes restarted by the heal replay their metadata), so
// a finishing consumer asks again at every poll (refreshTargets).
func (ww *wireWorkload) newestKeys() []linearizability.TopicPartition {
	var version uint64
	var topics []metadata.Topic
	for _, n := range ww.w.nodes {
		c, ok := n.core.(*node.Core)
		if !n.up || !ok {
			continue
		}
		if st, ok := c.MetadataStatus(); ok && (topics == nil || uint64(st.HighWatermark) > version) {
			version = uint64(st.HighWatermark)
			_, topics = c.MetadataNodes()
		}
	}
	keys := make([]linearizability.TopicPartition, len(ww.tps))
	for p := range keys {
		name := ww.tps[p].Topic
		inc := max(0, len(ww.topicIDs[name])-1)
		for _, t := range topics {
			if t.Name == name && ww.recreatable(p) {
				inc = ww.incarnation(name, t.UUID.Bytes())
			}
		}
		keys[p] = ww.w.hist.key(p, inc)
	}
	return keys
}

// acknowledgedEnds is, per key, one past the highest acknowledged record.
func (ww *wireWorkload) acknowledgedEnds(keys []linearizability.TopicPartition) []int64 {
	ends := make([]int64, len(keys))
	for p, k := range keys {
		ends[p] = ww.w.hist.h.AcknowledgedEnd(k)
	}
	return ends
}

// key is the history key of the incarnation session s of group p reads;
// ok is false while a re-created topic's incarnation is not known.
func (lc *libConsumer) key(p int, s *libSession) (k linearizability.TopicPartition, ok bool) {
	if s.inc < 0 && lc.c.ww.recreatable(p) {
		return k, false
	}
	return lc.c.ww.w.hist.key(p, max(0, s.inc)), true
}

// behind reports whether session s of group p has not reached its target:
// below it, or in another incarnation than the target's, even one with no
// acknowledged record. A session still reading a deleted incarnation
// has not caught up: it must meet the TopicRecreatedError and seek the
// current one. Counting it caught up when the current incarnation had
// nothing acknowledged (target 0) ended it in the deleted incarnation,
// whose acknowledged records finished then demanded (seeds 31, 138, 188).
func (lc *libConsumer) behind(p int, s *libSession) bool {
	k, ok := lc.key(p, s)
	return s.next < lc.targets[p] || !ok || k != lc.targetKeys[p]
}

// refreshTargets takes the targets again from the newest metadata of the
// nodes up now. Taken once, at the heal, they could name an incarnation
// older than the one the consumers already read: at the final heal of
// TestSimKafkaCodec's seed 12 node 3 alone was up, its metadata naming
// incarnation 2 while the consumers read incarnation 3, and they counted
// as never reaching their target. (Taking the newest incarnation the
// clients saw instead is wrong too: an id first seen late, from a stale
// node, numbers above the current one; seed 82.)
func (lc *libConsumer) refreshTargets() {
	lc.targetKeys = lc.c.ww.newestKeys()
	lc.targets = lc.c.ww.acknowledgedEnds(lc.targetKeys)
}

// offTarget reports whether some session reads another incarnation than
// its target's (or one not known yet): only then can a newer metadata
// move the targets, so only then are they taken again (each take copies
// every up node's metadata).
func (lc *libConsumer) offTarget() bool {
	for p, s := range lc.sess {
		if s == nil {
			continue
		}
		if k, ok := lc.key(p, s); !ok || k != lc.targetKeys[p] {
			return true
		}
	}
	return false
}

// reached reports whether every partition's position passed its target
// in the newest incarnation.
func (lc *libConsumer) reached() bool {
	for p, s := range lc.sess {
		switch {
		case s == nil && lc.c.ww.groupCreated(p):
			return false
		case s == nil:
		case lc.behind(p, s):
			return false
		}
	}
	return true
}

// finished checks that every acknowledged record from each partition's
// seek point on was handed out, then ends the consumer.
func (lc *libConsumer) finished() {
	w := lc.c.ww.w
	missed := 0
	for p, s := range lc.sess {
		if s == nil || s.start < 0 {
			continue
		}
		key, ok := lc.key(p, s)
		if !ok {
			continue
		}
		w.hist.h.Each(func(op *linearizability.Op) {
			if op.Kind != linearizability.KindProduce || op.Outcome != linearizability.OutcomeOK || op.TP != key {
				return
			}
			for j := range op.Sent {
				if off := op.Offset + int64(j); off >= s.start && !s.seen[off] {
					if missed == 0 {
						w.fail("consumer(lib): client %d never was handed acknowledged record %s/%d@%d, above its %s seek to %d",
							lc.c.index, key.Topic, key.Partition, off, seekNames[s.kind], s.start)
					}
					missed++
				}
			}
		})
	}
	if missed == 0 {
		w.coverage.Inc("event/lib-consumer-caught-up")
	}
	lc.end()
	lc.caughtUp()
}

// stuck fails a consumer that did not catch up after the heal.
func (lc *libConsumer) stuck() {
	for p, s := range lc.sess {
		if s != nil && lc.behind(p, s) {
			lc.c.ww.w.fail("consumer(lib): client %d's position in %s/%d is %d (incarnation %d) %v after the heal, below acknowledged %d of %s",
				lc.c.index, lc.c.ww.tps[p].Topic, lc.c.ww.tps[p].Partition, s.next, s.inc, libCatchUpMax, lc.targets[p], lc.targetKeys[p])
			break
		}
	}
	lc.end()
	lc.caughtUp()
}

// end abandons the consumer's task and silences its transport.
func (lc *libConsumer) end() {
	if !lc.alive {
		return
	}
	lc.alive = false
	if lc.abandon != nil {
		lc.abandon()
	}
}

// endLibConsumers ends the consumers' tasks when the run ends early.
func (ww *wireWorkload) endLibConsumers() {
	for _, c := range ww.clients {
		if c.libCons != nil {
			c.libCons.end()
		}
	}
}

// libConsumerTransport is the simulated network as a library consumer's
// client sees it: nothing reaches an ended consumer, and every answer
// passes the checks on its way in.
type libConsumerTransport struct{ lc *libConsumer }

func (t libConsumerTransport) Now() time.Duration { return t.lc.c.ww.w.now() }

func (t libConsumerTransport) After(d time.Duration, fn func()) {
	t.lc.c.after(d, func() {
		if t.lc.alive {
			fn()
		}
	})
}

func (t libConsumerTransport) Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	t.CallOn(0, addr, req, done)
}

// CallOn is Call on connection id (0: none; clientcore.Conns, sasl.go).
func (t libConsumerTransport) CallOn(id uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	lc := t.lc
	c := lc.c
	target, ok := c.ww.indexOf[addr]
	if !ok {
		c.after(0, func() { done(nil, &clientlib.ConnError{Addr: addr, Err: errUnknownAddr}) })
		return
	}
	raw := lc.rawCalls(req)
	var call *wireCall
	call = c.ww.callOn(c, id, target, req, func(resp *strandpb.Response, err error) {
		if !lc.alive {
			return
		}
		lc.rawAnswer(raw, target, resp, err, call.respDamaged)
		if err == nil && req.GetListOffsets() != nil {
			lc.onListOffsets(resp)
		}
		done(resp, err)
	})
}

// rawFetch is one partition of a fetch in flight, recorded raw.
type rawFetch struct {
	p, inc int
	offset int64
	floor  int64 // the highest high-water mark a fetch had returned when this one was sent
	tail   bool  // a long poll sent at the highest high-water mark seen
	op     *histOp
}

// rawCalls records the call of each partition a fetch asks for, as a
// fetch of the consumer's raw history client.
func (lc *libConsumer) rawCalls(req *strandpb.Request) []rawFetch {
	f := req.GetFetch()
	if f == nil {
		return nil
	}
	ww := lc.c.ww
	w := ww.w
	var out []rawFetch
	for _, q := range f.GetPartitions() {
		p := ww.groupOf(q.GetTopic(), q.GetPartition())
		if p < 0 {
			continue
		}
		inc := ww.incarnation(q.GetTopic(), q.GetTopicId())
		id := w.hist.h.CallFetch(linearizability.ClientID(libRawClient+lc.c.index), w.hist.key(p, inc), q.GetOffset(), 0, ns(w.now()))
		if len(f.GetPartitions()) == 1 && f.GetIsolationLevel() == 0 {
			w.hist.h.Alone(id) // an answer in range below the high-water mark carries a record
		}
		floor := w.work.floor(p, inc)
		out = append(out, rawFetch{p: p, inc: inc, offset: q.GetOffset(), floor: floor,
			tail: f.GetMaxWaitMs() > 0 && q.GetOffset() >= floor, op: &histOp{id: id}})
	}
	return out
}

// rawAnswer records what the node served each partition of a fetch, and
// checks the leader's high-water marks against what earlier fetches saw.
func (lc *libConsumer) rawAnswer(raw []rawFetch, target int, resp *strandpb.Response, err error, damaged bool) {
	ww := lc.c.ww
	w := ww.w
	if err == nil {
		err = wireErr(resp.GetError())
	}
	for _, rf := range raw {
		tp := ww.tps[rf.p]
		part := rawPartition(resp, tp.Topic, tp.Partition)
		perr := err
		if perr == nil && part == nil {
			perr = fmt.Errorf("the answer lacks the partition")
		}
		if perr == nil {
			perr = wireErr(part.GetError())
		}
		var e *clientlib.Error
		switch {
		case perr == nil:
			r := decodeWireFetch(rf.offset, part)
			if r.err != nil {
				w.hist.fetchFail(rf.op, w.now())
				if !damaged {
					w.fail("consumer(lib): fetch %d@%d from node %d: %v", rf.p, rf.offset, target+1, r.err)
				}
				continue
			}
			if r.hwm < rf.floor {
				w.fail("partition %d: fetch from node %d returned hwm %d after a fetch had returned %d", rf.p, target+1, r.hwm, rf.floor)
			}
			ww.checkProduced(rf.p, target, r)
			w.work.raise(rf.p, rf.inc, r.hwm)
			w.hist.fetchOK(rf.op, r, w.now())
			w.stats.FetchesOK++
			if rf.tail && len(r.records) > 0 {
				w.coverage.Inc("event/long-poll-tail") // it waited at the tail for new records
			}
		case asWireError(perr, &e) && e.Code == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
			w.hist.fetchOutOfRange(rf.op, &reply{hwm: e.HighWatermark, logStart: e.LogStartOffset}, w.now())
			if below := rf.offset < e.LogStartOffset; below {
				w.coverage.Inc("event/fetch-below-log-start")
			} else if rf.offset <= rf.floor {
				w.fail("fetch %d@%d out of range at node %d although a fetch returned hwm %d before it was sent",
					rf.p, rf.offset, target+1, rf.floor)
			}
		default:
			w.hist.fetchFail(rf.op, w.now())
		}
	}
}

// rawPartition is the answer's partition of topic; nil: none.
func rawPartition(resp *strandpb.Response, topic string, partition int32) *strandpb.FetchResponse_Partition {
	for _, a := range resp.GetFetch().GetPartitions() {
		if a.GetTopic() == topic && a.GetPartition() == partition {
			return a
		}
	}
	return nil
}
