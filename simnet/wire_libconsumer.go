package simnet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/proto/strandpb"
)

// Plain consumers on clientlib's own Consumer.
//
// The last Options.LibConsumers of the Consumers slots (never the first,
// which stays private: it follows the second topic through its
// re-creations) are applications on a clientlib.Consumer of a Simulated
// Client: Assign, Seek, Poll (ListOffsets resolution, one long-polling
// fetch per leader, NOT_LEADER and metadata refreshes, the CRC check of
// every batch) run as tasks on the simulator's thread (clientlib.SimRun),
// every request over the simulated network, in virtual time. Each
// consumer draws its fetch shape (max wait, byte budgets, read_committed
// in a third) and assigns every partition of the main topic at a drawn
// start: an exact offset, the earliest, the latest, the last stable or a
// timestamp; one Poll in libSeekOneIn then seeks a partition anew. Its
// reset policy is ResetNone, so a position below the log start comes back
// as an OffsetOutOfRangeError and the application seeks, explicitly.
//
// Checks, for every partition:
//   - every batch handed out starts at the consumer's position (the seek
//     target, the offset ListOffsets resolved a start to, or one past the
//     last record handed out) and is dense, and Position agrees after
//     every Poll: no record skipped, none handed out twice;
//   - every batch handed out is a history read (a poll op from its fetch's
//     send time, a fresh session after a seek): the log's records at those
//     offsets, below the high-water mark;
//   - every fetch answer the client receives is also recorded raw, as the
//     private consumers' were (a fetch op of another history client): what
//     the node served, before clientlib filtered it, is checked too;
//   - after the heal the consumer polls on until its position passes every
//     acknowledged record, and every acknowledged record from its last
//     seek point on was handed out.
//
// What stays private: the first consumer (the re-created topic), the
// random readers (they read from any replica, which a Consumer never
// does) and the drain (the final read of every incarnation, a checker).
const (
	libConsumerMaxWaitMin = 20 * time.Millisecond
	libSeekOneIn          = 12 // polls that seek a partition anew first
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
	sess    []*libSession // per main-topic partition; nil: not assigned
	// finishing: the budget is spent and the run healed; caughtUp runs
	// once the position passed targets.
	finishing bool
	targets   []int64
	caughtUp  func()
	deadline  time.Duration
	budgetOut bool
}

// libSession is one partition's reading since its last seek.
type libSession struct {
	kind  int
	start int64 // the seek point; -1 until ListOffsets resolved it
	next  int64 // the position: start, then one past the last record handed out
	fresh bool  // nothing handed out since the seek
	seen  map[int64]bool
}

// libConsumerSlot reports whether consumer slot i (0-based among the
// Consumers) runs clientlib's Consumer.
func libConsumerSlot(o Options, i int) bool {
	n := min(o.LibConsumers, o.Consumers-1)
	return i >= o.Consumers-n
}

// newLibConsumer puts slot c on a clientlib Consumer with a drawn shape.
func newLibConsumer(c *wireClient) *libConsumer {
	lc := &libConsumer{c: c, alive: true}
	o := c.ww.w.opts
	seeds := make([]string, len(c.ww.peers))
	for i, p := range c.ww.peers {
		seeds[i] = p.Address
	}
	cl, err := clientlib.NewClient(clientlib.Simulated(libConsumerTransport{lc}),
		clientlib.SeedAddresses(seeds...), clientlib.RandSeed(c.rng.Uint64()),
		clientlib.RequestTimeout(o.ClientTimeout), clientlib.MaxRetries(attemptsMax),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.MetadataMaxAge(libMetadataMaxAge))
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
	lc.sess = make([]*libSession, c.ww.topics[0].partitions)
	return lc
}

// begin assigns the main topic's partitions and starts polling.
func (lc *libConsumer) begin() {
	lc.assignNew(false)
	lc.poll()
}

// assignNew assigns, at a drawn start, the main topic's partitions that
// exist and are not assigned yet (the topic may grow).
func (lc *libConsumer) assignNew(seek bool) {
	for p, s := range lc.sess {
		if s == nil && lc.c.ww.groupCreated(p) {
			lc.seek(p, seek)
		}
	}
}

// seek moves partition p to a drawn start: Assign, or Seek when seek.
func (lc *libConsumer) seek(p int, seek bool) {
	c := lc.c
	kind := c.rng.IntN(seekKinds)
	s := &libSession{kind: kind, start: -1, next: -1, fresh: true, seen: map[int64]bool{}}
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
	if seek {
		lc.k.Seek(topicMain, int32(p), at)
	} else {
		lc.k.Assign(topicMain, int32(p), at)
	}
	c.ww.w.coverage.Inc("event/lib-consumer-seek-" + seekNames[kind])
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
			lc.seek(p, true)
		}
	}
	var fs clientlib.Fetches
	start := w.now()
	lc.abandon = lc.cl.SimRun(func(ctx context.Context) { fs = lc.k.Poll(ctx) }, func() { lc.polled(fs, start) })
}

// polled checks what a Poll handed out, seeks where it must, and polls
// again after a think time.
func (lc *libConsumer) polled(fs clientlib.Fetches, start time.Duration) {
	w := lc.c.ww.w
	w.checker.onOpDone(start, w.now())
	for _, f := range fs {
		p := int(f.Partition)
		if f.Topic != topicMain || p >= len(lc.sess) || lc.sess[p] == nil {
			continue
		}
		var oor *clientlib.OffsetOutOfRangeError
		if errors.As(f.Err, &oor) {
			w.coverage.Inc("event/lib-consumer-out-of-range")
			lc.seek(p, true) // the application decides where to go on
			continue
		}
		if len(f.Records) > 0 {
			lc.handOut(p, f)
		}

	}
	lc.checkPositions()
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
	w := lc.c.ww.w
	s := lc.sess[p]
	first := f.Records[0].Offset
	if s.next < 0 {
		w.fail("consumer(lib): client %d was handed %s/%d from offset %d before its %s start resolved",
			lc.c.index, topicMain, p, first, seekNames[s.kind])
		s.start, s.next = first, first
	}
	recs := make([]linearizability.Record, len(f.Records))
	for i, r := range f.Records {
		if want := s.next + int64(i); r.Offset != want {
			w.fail("consumer(lib): client %d was handed %s/%d offset %d where its position was %d (%s seek to %d)",
				lc.c.index, topicMain, p, r.Offset, want, seekNames[s.kind], s.start)
			break
		}
		recs[i] = linearizability.Record{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)}
		s.seen[r.Offset] = true
	}
	sent := ns(f.FetchedAt.Sub(time.Unix(0, 0)))
	var id linearizability.OpID
	if s.fresh {
		id = w.hist.h.CallFetch(linearizability.ClientID(lc.c.index), w.hist.key(p, 0), s.next, 0, sent)
	} else {
		id = w.hist.h.CallPoll(linearizability.ClientID(lc.c.index), w.hist.key(p, 0), s.next, 0, sent)
	}
	w.hist.h.ReturnFetch(id, recs, f.HighWatermark, f.LogStartOffset, ns(w.now()))
	s.fresh = false
	s.next = f.Records[len(f.Records)-1].Offset + 1
	w.coverage.Inc("event/lib-consumer-batch")
}

// checkPositions compares the Consumer's positions with the checker's:
// a position may move only by handing records out (or by a seek).
func (lc *libConsumer) checkPositions() {
	for p, s := range lc.sess {
		if s == nil {
			continue
		}
		pos, ok := lc.k.Position(topicMain, int32(p))
		if ok && s.next >= 0 && pos != s.next {
			lc.c.ww.w.fail("consumer(lib): client %d's position in %s/%d is %d, but it was handed records up to %d (%s seek to %d)",
				lc.c.index, topicMain, p, pos, s.next, seekNames[s.kind], s.start)
			s.next = pos
		}
	}
}

// onListOffsets notes the offset a ListOffsets answer resolved a start
// to: the consumer resolves a partition's start with one such request
// per Poll, inside the Poll, and applies the first answer it accepts.
func (lc *libConsumer) onListOffsets(resp *strandpb.Response) {
	if resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
		return
	}
	for _, a := range resp.GetListOffsets().GetPartitions() {
		p := int(a.GetPartition())
		if a.GetTopic() != topicMain || p >= len(lc.sess) || lc.sess[p] == nil ||
			a.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
			continue
		}
		if s := lc.sess[p]; s.next < 0 {
			s.start, s.next = a.GetOffset(), a.GetOffset()
		}
	}
}

// finish, once the run healed, polls on until every partition's position
// passes its last acknowledged record; then runs then.
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
		lc.targets = lc.c.ww.acknowledgedEnds(len(lc.sess))
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

// acknowledgedEnds is, per main-topic partition below n, one past the
// highest acknowledged record.
func (ww *wireWorkload) acknowledgedEnds(n int) []int64 {
	ends := make([]int64, n)
	ops := ww.w.hist.h.Ops()
	for i := range ops {
		op := &ops[i]
		if op.Kind != linearizability.KindProduce || op.Outcome != linearizability.OutcomeOK || op.TP.Topic != topicMain {
			continue
		}
		if p := int(op.TP.Partition); p < n {
			ends[p] = max(ends[p], op.Offset+int64(len(op.Sent)))
		}
	}
	return ends
}

// reached reports whether every partition's position passed its target.
func (lc *libConsumer) reached() bool {
	for p, s := range lc.sess {
		if s == nil && lc.c.ww.groupCreated(p) || s != nil && s.next < lc.targets[p] {
			return false
		}
	}
	return true
}

// finished checks that every acknowledged record from each partition's
// seek point on was handed out, then ends the consumer.
func (lc *libConsumer) finished() {
	w := lc.c.ww.w
	ops := w.hist.h.Ops()
	missed := 0
	for i := range ops {
		op := &ops[i]
		if op.Kind != linearizability.KindProduce || op.Outcome != linearizability.OutcomeOK || op.TP.Topic != topicMain ||
			int(op.TP.Partition) >= len(lc.sess) {
			continue
		}
		s := lc.sess[op.TP.Partition]
		if s == nil {
			continue
		}
		for j := range op.Sent {
			if off := op.Offset + int64(j); off >= s.start && !s.seen[off] {
				if missed == 0 {
					w.fail("consumer(lib): client %d never was handed acknowledged record %s/%d@%d, above its %s seek to %d",
						lc.c.index, topicMain, op.TP.Partition, off, seekNames[s.kind], s.start)
				}
				missed++
			}
		}
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
		if s != nil && s.next < lc.targets[p] {
			lc.c.ww.w.fail("consumer(lib): client %d's position in %s/%d is %d %v after the heal, below acknowledged %d",
				lc.c.index, topicMain, p, s.next, libCatchUpMax, lc.targets[p])
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
	lc := t.lc
	c := lc.c
	target, ok := c.ww.indexOf[addr]
	if !ok {
		c.after(0, func() { done(nil, &clientlib.ConnError{Addr: addr, Err: errUnknownAddr}) })
		return
	}
	raw := lc.rawCalls(req)
	var call *wireCall
	call = c.ww.call(c, target, req, func(resp *strandpb.Response, err error) {
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
	p      int
	offset int64
	op     *histOp
}

// rawCalls records the call of each main-topic partition a fetch asks
// for, as a fetch of the consumer's raw history client.
func (lc *libConsumer) rawCalls(req *strandpb.Request) []rawFetch {
	f := req.GetFetch()
	if f == nil {
		return nil
	}
	w := lc.c.ww.w
	var out []rawFetch
	for _, q := range f.GetPartitions() {
		p := int(q.GetPartition())
		if q.GetTopic() != topicMain || p >= len(lc.sess) {
			continue
		}
		id := w.hist.h.CallFetch(linearizability.ClientID(libRawClient+lc.c.index), w.hist.key(p, 0), q.GetOffset(), 0, ns(w.now()))
		if len(f.GetPartitions()) == 1 && f.GetIsolationLevel() == 0 {
			w.hist.h.Alone(id) // an answer in range below the high-water mark carries a record
		}
		out = append(out, rawFetch{p: p, offset: q.GetOffset(), op: &histOp{id: id}})
	}
	return out
}

// rawAnswer records what the node served each partition of a fetch, as
// the private consumers record their fetches (wire_fetch.go onFetch).
func (lc *libConsumer) rawAnswer(raw []rawFetch, target int, resp *strandpb.Response, err error, damaged bool) {
	w := lc.c.ww.w
	if err == nil {
		err = wireErr(resp.GetError())
	}
	for _, rf := range raw {
		part := rawPartition(resp, rf.p)
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
			c := lc.c
			c.ww.checkProduced(rf.p, target, r)
			w.work.raise(rf.p, 0, r.hwm)
			w.hist.fetchOK(rf.op, r, w.now())
		case asWireError(perr, &e) && e.Code == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
			w.hist.fetchOutOfRange(rf.op, &reply{hwm: e.HighWatermark, logStart: e.LogStartOffset}, w.now())
		default:
			w.hist.fetchFail(rf.op, w.now())
		}
	}
}

// rawPartition is the answer's main-topic partition p; nil: none.
func rawPartition(resp *strandpb.Response, p int) *strandpb.FetchResponse_Partition {
	for _, a := range resp.GetFetch().GetPartitions() {
		if a.GetTopic() == topicMain && int(a.GetPartition()) == p {
			return a
		}
	}
	return nil
}
