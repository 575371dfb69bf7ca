package simnet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// Consume-transform-produce with clientlib's TransactSession (issue 23).
//
// On every seed with the transactional workload, 1 to 3 session members
// (txnSessionMembersMax) consume txnSessionTopics — the main topic, which
// the sample's producers write, topicTxn, the transactional producers'
// output, and topicTxnOut, the members' own output — as group
// txnSessionGroup through a clientlib.TransactSession on a Simulated
// transactional Client, each with its own transactional id, reading at
// read_committed. A transaction is one Poll (fetches of 256 B-2 KiB,
// drawn per process: a batch or a few), one transformed record per input
// record produced to a drawn partition of topicTxnOut (its value names
// the input; a record whose own input came from topicTxnOut is consumed
// without output, so the chain ends), and End: commit (the session
// sends the positions with TxnOffsetCommit) or, one in three, abort
// after sending the positions in the transaction (an application that
// failed after SendOffsetsToTransaction: the abort must drop them).
// Faults, one transaction in txnSessionFaultOneIn: the process crashes
// at a drawn time inside the transaction, or just before its
// EndTxn(commit) leaves (after its offsets were sent), or pauses (a GC
// pause, a stalled VM) while a new process starts under the same
// transactional id, fencing it; the paused one wakes a zombie and goes
// on with its transaction. Every run of a Poll, End or InitTransactions
// is a task on the simulator's thread (clientlib.SimRun), as in
// wire_libgroup.go.
//
// The transactions go into the workload's TxnHistory: reads are the
// input records consumed (those of topicTxn and topicTxnOut are other
// transactions' writes: write-read edges for CheckTxn's G1a, G1b and G1c
// checks), writes the outputs, the outcome committed when End said so,
// aborted when no EndTxn(commit) was sent, indefinite otherwise; fences
// are the InitProducerId answers. After the heal the members close, the
// output partitions are drained at read_committed with topicTxn's
// (CheckTxn: no aborted or intermediate read, no read cycle, no zombie
// output, no lost or duplicate output), and checkExactlyOnce compares
// the history and the drained output with the group's final committed
// offsets (consumed offsets and outputs visible together, both ways).
// Offsets a member's reset to the log start skipped are excused
// (retention removed them unread).
const (
	topicTxnOut          = "sim-txn-out"
	txnOutPartitions     = 2
	txnSessionGroup      = "sim-txn-session"
	txnSessionMembersMax = 3
	txnSessionTxnsMax    = 16 // transactions per member, over its processes
	// txnSessionFetchBytesMin is the smallest of the drawn fetch sizes
	// (it, twice, four and eight times it): one or a few batches.
	txnSessionFetchBytesMin = 256
	txnSessionFaultOneIn    = 3
	txnSessionLivesMax      = 12
	txnSessionStopWaits     = 80 // 100 ms waits for the members to close after the heal
	// txnSessionIdleMin paces a member whose Poll returned nothing at
	// once (no partition assigned yet, an error): no busy polling.
	txnSessionIdleMin = 50 * time.Millisecond
)

// txnSession is the session members and what their checks track.
type txnSession struct {
	s       *txnSim
	members []*sesMember
	next    int                 // output value counter
	input   map[string]sesInput // output value → the input it carries
	// excused are, per input partition, the offset ranges a member's
	// reset to the log start skipped: removed before it could read them.
	excused  map[linearizability.TopicPartition][]sesRange
	stopping bool
	parts    int32      // input partitions
	zombies  []*sesLife // paused processes, killed at the end
	checker  *sesLife   // the final offsets reader
}

// sesRange is the input offsets [from, to).
type sesRange struct{ from, to int64 }

// sesInput is an input record's position.
type sesInput struct {
	tp     linearizability.TopicPartition
	offset int64
}

// txnSessionTopics are the members' input topics: the main topic (plain
// writes), topicTxn (the transactional producers' committed output) and
// topicTxnOut itself (the members' own committed output, transformed once
// more: a record whose input came from topicTxnOut has no output), so
// transactions read each other's writes at read_committed.
var txnSessionTopics = []string{topicMain, topicTxn, topicTxnOut}

// transforms reports whether input in has an output: every input except
// a second-generation one (topicTxnOut's record of a topicTxnOut input).
func (ses *txnSession) transforms(in sesInput, value string) bool {
	if in.tp.Topic != topicTxnOut {
		return true
	}
	src, ok := ses.input[value]
	return ok && src.tp.Topic != topicTxnOut
}

// sesMember is one transactional id; lives are its processes.
type sesMember struct {
	ses     *txnSession
	c       *wireClient
	tid     string
	lives   int
	done    int // transactions ended or abandoned, over every life
	stopped bool
	life    *sesLife
}

// sesLife is one process of a session member.
type sesLife struct {
	m           *sesMember
	alive       bool
	zombie      bool
	pausedUntil time.Duration
	cl          *clientlib.Client
	ts          *clientlib.TransactSession
	abandon     func()
	txn         int  // index in the history of the open transaction; -1: none
	crashAtEnd  bool // the process dies as its EndTxn(commit) would leave
	sentCommit  bool // the open transaction sent EndTxn(commit)
}

// txnSessionClients counts the client slots of the session members.
func txnSessionClients(o Options) int {
	if !o.Txn {
		return 0
	}
	return txnSessionMembersMax
}

// newTxnSession creates the members on client indexes from first on; the
// first member's stream draws how many run.
func newTxnSession(s *txnSim, first int) *txnSession {
	ww := s.ww
	ses := &txnSession{s: s, input: map[string]sesInput{}, excused: map[linearizability.TopicPartition][]sesRange{}, parts: int32(ww.topics[0].partitions)}
	for i := range txnSessionMembersMax {
		ses.members = append(ses.members, &sesMember{ses: ses, c: newWireClient(ww, first+i, kindMember),
			tid: fmt.Sprintf("sim-txn-session-%d", i)})
	}
	n := 1 + ses.members[0].c.rng.IntN(txnSessionMembersMax)
	ses.members = ses.members[:n]
	return ses
}

// configure gives the session members the group workload's session
// timeout and heartbeat interval when that workload does not run: with
// the nodes' defaults (45 s, 5 s) a crashed member's partitions stay
// assigned to it for most of the run.
func (s *txnSim) configure(cfg *node.Config) {
	if s != nil && cfg.Groups.SessionTimeout == 0 {
		cfg.Groups.SessionTimeout, cfg.Groups.HeartbeatInterval = s.ww.w.groupSession(), groupHeartbeat
	}
}

// owns reports whether c is a member's client.
func (ses *txnSession) owns(c *wireClient) bool {
	for _, m := range ses.members {
		if m.c == c {
			return true
		}
	}
	return false
}

// start begins every member (topicTxnOut exists).
func (ses *txnSession) start() {
	for _, m := range ses.members {
		m.c.after(m.c.thinkTime(), m.spawn)
	}
}

// spawn starts a new process of the member: InitTransactions fences the
// previous one.
func (m *sesMember) spawn() {
	if m.ses.stopping || m.stopped || m.lives >= txnSessionLivesMax {
		m.stopped = true
		return
	}
	m.lives++
	l := &sesLife{m: m, alive: true, txn: -1}
	m.life = l
	ww := m.ses.s.ww
	seeds := make([]string, len(ww.peers))
	for i, p := range ww.peers {
		seeds[i] = p.Address
	}
	o := ww.w.opts
	cl, err := clientlib.NewClient(append([]clientlib.Opt{clientlib.Simulated(sesTransport{l}), clientlib.SeedAddresses(seeds...),
		clientlib.RandSeed(m.c.rng.Uint64()), clientlib.TransactionalID(m.tid),
		clientlib.TransactionTimeout(txnTimeoutMs * time.Millisecond), clientlib.ManualPartitioner(),
		clientlib.RequestTimeout(o.libRequestTimeout()), clientlib.StallTimeout(o.libStallTimeout()), clientlib.MaxRetries(attemptsMax),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.MetadataMaxAge(libMetadataMaxAge)},
		ww.sasl.libOpts(m.c)...)...) // SASL: sasl.go
	if err != nil {
		panic("simnet: session member options: " + err.Error())
	}
	l.cl = cl
	// Small fetches keep transactions small (a batch or a few): many
	// transactions, each well inside the transaction timeout.
	fetchBytes := int32(txnSessionFetchBytesMin << m.c.rng.IntN(4))
	ww.w.coverage.Inc("txn/session-start")
	l.abandon = m.ses.s.ww.w.simRun(cl, func(ctx context.Context) { err = cl.InitTransactions(ctx) }, func() {
		if err != nil {
			l.restart()
			return
		}
		ts, err := clientlib.NewTransactSession(cl, txnSessionGroup, txnSessionTopics,
			clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(libFetchMaxWait), clientlib.OffsetResetPolicy(clientlib.ResetEarliest),
				clientlib.FetchMaxBytes(fetchBytes), clientlib.FetchMaxPartitionBytes(fetchBytes)))
		if err != nil {
			panic("simnet: transact session: " + err.Error())
		}
		l.ts = ts
		l.poll()
	})
}

// poll runs one TransactSession.Poll as a task (it opens a transaction),
// or closes the session once the member is done.
func (l *sesLife) poll() {
	m := l.m
	if !l.alive {
		return
	}
	if !l.zombie && (m.ses.stopping || m.done >= txnSessionTxnsMax) {
		l.close()
		return
	}
	var fs clientlib.Fetches
	start := m.ses.s.ww.w.now()
	l.abandon = l.m.ses.s.ww.w.simRun(l.cl, func(ctx context.Context) { fs = l.ts.Poll(ctx) }, func() { l.polled(fs, start) })
}

// polled transforms what a Poll returned, or polls again.
func (l *sesLife) polled(fs clientlib.Fetches, start time.Duration) {
	m := l.m
	if err := fs.FirstErr(); err != nil && errors.Is(err, clientlib.ErrProducerFenced) {
		m.ses.s.ww.w.coverage.Inc("txn/session-fenced")
		l.restart()
		return
	}
	var in []*clientlib.Record
	for _, f := range fs {
		in = append(in, f.Records...)
	}
	if len(in) == 0 {
		if l.zombie {
			l.die() // a zombie with nothing to finish stops
			return
		}
		delay := time.Duration(0)
		if m.ses.s.ww.w.now()-start < txnSessionIdleMin {
			delay = txnSessionIdleMin // nothing assigned yet, or an error at once: do not spin
		}
		m.c.after(delay, l.poll)
		return
	}
	l.transform(in)
}

// transform produces one output per input record in the open
// transaction and ends it as drawn, with a drawn fault.
func (l *sesLife) transform(in []*clientlib.Record) {
	m := l.m
	s := m.ses.s
	now := int64(s.ww.w.now())
	t := linearizability.Txn{Client: linearizability.ClientID(m.c.index), TransactionalID: m.tid,
		Outcome: linearizability.TxnAborted, Begin: now, EndCall: now, EndReturn: now}
	var outs []*clientlib.Record
	readTxn := false // the transaction read another transaction's write
	for _, r := range in {
		tp := linearizability.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		t.Reads = append(t.Reads, linearizability.TxnRead{TP: tp, Offset: r.Offset, Value: string(r.Value)})
		readTxn = readTxn || r.Topic != topicMain
		src := sesInput{tp: tp, offset: r.Offset}
		if !m.ses.transforms(src, string(r.Value)) {
			continue
		}
		m.ses.next++
		v := fmt.Sprintf("x%d-%s/%d@%d", m.ses.next, r.Topic, r.Partition, r.Offset)
		m.ses.input[v] = src
		q := int32(m.c.rng.IntN(txnOutPartitions))
		outs = append(outs, &clientlib.Record{Topic: topicTxnOut, Partition: q, Value: []byte(v)})
		t.Writes = append(t.Writes, linearizability.TxnWrite{TP: linearizability.TopicPartition{Topic: topicTxnOut, Partition: q},
			Value: v, Offset: -1})
	}
	s.hist.Txns = append(s.hist.Txns, t)
	if readTxn {
		s.ww.w.coverage.Inc("txn/session-read-txn")
	}
	l.txn, l.sentCommit = len(s.hist.Txns)-1, false
	m.done++
	commit := m.c.rng.IntN(3) != 0
	if !l.zombie {
		l.drawFault()
	}
	var committed bool
	var err error
	idx := l.txn
	l.abandon = l.m.ses.s.ww.w.simRun(l.cl, func(ctx context.Context) {
		for i, r := range outs {
			l.ts.Produce(ctx, r, func(r *clientlib.Record, err error) {
				if err == nil && r.Offset >= 0 {
					s.hist.Txns[idx].Writes[i].Offset = r.Offset
				}
			})
		}
		if !commit {
			l.sendOffsets(ctx) // an application that sent its offsets, then failed
		}
		committed, err = l.ts.End(ctx, commit)
	}, func() { l.ended(committed, err) })
}

// sendOffsets sends the member's positions in the open transaction, as an
// application does before it meets an error and aborts: the abort must
// drop them.
func (l *sesLife) sendOffsets(ctx context.Context) {
	g := l.ts.GroupConsumer()
	offsets := map[clientlib.TopicPartition]int64{}
	for _, tp := range g.Assigned() {
		if pos, ok := g.Position(tp.Topic, tp.Partition); ok {
			offsets[tp] = pos
		}
	}
	if len(offsets) > 0 && l.cl.SendOffsetsToTransaction(ctx, offsets, g.GroupMetadata()) == nil {
		l.m.ses.s.ww.w.coverage.Inc("txn/session-offsets-aborted")
	}
}

// drawFault arms one fault for the transaction now and then: a crash at a
// drawn time, a crash as its EndTxn(commit) leaves, or a pause that
// turns the process into a zombie.
func (l *sesLife) drawFault() {
	m := l.m
	if m.c.rng.IntN(txnSessionFaultOneIn) != 0 || m.lives >= txnSessionLivesMax {
		return
	}
	at := time.Duration(m.c.rng.IntN(40)) * time.Millisecond
	switch m.c.rng.IntN(4) {
	case 0:
		m.c.after(at, l.crash)
	case 1, 2:
		l.crashAtEnd = true
	default:
		m.c.after(at, l.pause)
	}
}

// ended records End's answer and polls for the next transaction.
func (l *sesLife) ended(committed bool, err error) {
	m := l.m
	w := m.ses.s.ww.w
	t := &m.ses.s.hist.Txns[l.txn]
	t.EndReturn = int64(w.now())
	var pending *clientlib.SessionEndPendingError
	switch {
	case committed:
		t.Outcome = linearizability.TxnCommitted
		w.coverage.Inc("txn/session-committed")
	case errors.As(err, &pending) && pending.Commit:
		// The next Poll sends EndTxn(commit) again: the outcome is
		// not known, and the transaction stays the life's open one so
		// that EndTxn is seen (onRequest).
		t.Outcome = linearizability.TxnIndefinite
	case !l.sentCommit:
		t.Outcome = linearizability.TxnAborted // no EndTxn(commit) left: it cannot commit
		w.coverage.Inc("txn/session-aborted")
	}
	if pending == nil || !pending.Commit {
		l.txn = -1
	}
	switch {
	case err == nil:
	case errors.Is(err, clientlib.ErrProducerFenced):
		w.coverage.Inc("txn/session-fenced")
		l.restart()
		return
	case errors.Is(err, clientlib.ErrSessionEndPending):
		w.coverage.Inc("txn/session-end-pending")
	default:
		var ae *clientlib.TransactionAbortableError
		if !errors.As(err, &ae) {
			l.restart()
			return
		}
	}
	if l.zombie {
		l.die()
		return
	}
	m.c.after(time.Duration(1+m.c.rng.IntN(20))*time.Millisecond, l.poll)
}

// close closes the session (aborting an open transaction) and counts the
// member out.
func (l *sesLife) close() {
	l.abandon = l.m.ses.s.ww.w.simRun(l.cl, func(ctx context.Context) { _ = l.ts.Close(ctx) }, func() {
		l.alive = false
		l.m.stopped = true
	})
}

// crash kills the process; a new one starts a little later.
func (l *sesLife) crash() {
	if !l.alive || l.zombie {
		return
	}
	l.m.ses.s.ww.w.coverage.Inc("txn/session-crash")
	l.die()
	l.m.c.after(time.Duration(50+l.m.c.rng.IntN(450))*time.Millisecond, l.m.spawn)
}

// pause freezes the process for up to txnZombiePauseMaxMs while a new
// one starts under the same transactional id: it wakes a zombie.
func (l *sesLife) pause() {
	m := l.m
	if !l.alive || l.zombie || m.ses.stopping {
		return
	}
	m.ses.s.ww.w.coverage.Inc("txn/session-pause")
	l.zombie = true
	m.ses.zombies = append(m.ses.zombies, l)
	l.pausedUntil = m.ses.s.ww.w.now() + time.Duration(1+m.c.rng.IntN(txnZombiePauseMaxMs))*time.Millisecond
	m.c.after(m.c.thinkTime(), m.spawn)
}

// restart ends this process after a failure and starts a new one (a
// zombie just stops).
func (l *sesLife) restart() {
	if !l.alive {
		return
	}
	l.die()
	if !l.zombie {
		l.m.c.after(l.m.c.thinkTime(), l.m.spawn)
	}
}

// die ends the process: its task and every callback of its transport.
func (l *sesLife) die() {
	if !l.alive {
		return
	}
	l.alive = false
	if l.abandon != nil {
		l.abandon()
	}
}

// onRequest sees a request leave the process; false drops it (the
// process died just before).
func (l *sesLife) onRequest(req *strandpb.Request) bool {
	e := req.GetEndTxn()
	if e == nil || !e.GetCommit() || l.txn < 0 {
		if p := txnProduceProducer(req); p != nil && l.txn >= 0 {
			l.m.ses.s.hist.Txns[l.txn].Producer = *p
		}
		return true
	}
	if l.crashAtEnd && !l.sentCommit {
		l.crashAtEnd = false
		l.m.ses.s.ww.w.coverage.Inc("txn/session-crash-at-end")
		l.m.c.after(0, l.crash)
		return false
	}
	t := &l.m.ses.s.hist.Txns[l.txn]
	if !l.sentCommit {
		l.sentCommit = true
		t.Outcome = linearizability.TxnIndefinite
		t.EndCall = int64(l.m.ses.s.ww.w.now())
	}
	t.Producer = linearizability.TxnProducerEpoch{ID: e.GetProducer().GetProducerId(), Epoch: int16(e.GetProducer().GetEpoch())}
	return true
}

// txnProduceProducer is a transactional produce's producer id and epoch.
func txnProduceProducer(req *strandpb.Request) *linearizability.TxnProducerEpoch {
	for _, p := range req.GetProduce().GetPartitions() {
		if p.GetTransactional() {
			return &linearizability.TxnProducerEpoch{ID: p.GetProducerId(), Epoch: int16(p.GetProducerEpoch())}
		}
	}
	return nil
}

// onAnswer records fences (InitProducerId answers) and the log starts the
// members were told of.
func (l *sesLife) onAnswer(req *strandpb.Request, resp *strandpb.Response, err error) {
	ses := l.m.ses
	if err != nil || resp == nil {
		return
	}
	if r := resp.GetTxnInitProducerId(); r != nil && req.GetTxnInitProducerId() != nil && resp.GetError() == nil {
		ses.s.hist.Fences = append(ses.s.hist.Fences, linearizability.TxnFence{TransactionalID: l.m.tid,
			Producer: linearizability.TxnProducerEpoch{ID: r.GetProducerId(), Epoch: int16(r.GetProducerEpoch())},
			Return:   int64(ses.s.ww.w.now())})
	}
	for _, a := range resp.GetFetch().GetPartitions() {
		if a.GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
			for _, q := range req.GetFetch().GetPartitions() {
				if q.GetTopic() == a.GetTopic() && q.GetPartition() == a.GetPartition() {
					ses.excuse(linearizability.TopicPartition{Topic: a.GetTopic(), Partition: a.GetPartition()}, q.GetOffset(), a.GetLogStartOffset())
				}
			}
		}
	}
	for _, a := range resp.GetListOffsets().GetPartitions() {
		if a.GetError() == nil && listsEarliest(req.GetListOffsets(), a.GetTopic(), a.GetPartition()) {
			ses.excuse(linearizability.TopicPartition{Topic: a.GetTopic(), Partition: a.GetPartition()}, 0, a.GetOffset())
		}
	}
}

// listsEarliest reports whether req asks for the earliest offset of
// topic's partition p.
func listsEarliest(req *strandpb.ListOffsetsRequest, topic string, p int32) bool {
	for _, q := range req.GetPartitions() {
		if q.GetTopic() == topic && q.GetPartition() == p && q.GetTimestampMs() == -2 {
			return true
		}
	}
	return false
}

// excuse notes that the input [from, to) of tp was removed before a
// member could consume it (a reset to the log start skips it).
func (ses *txnSession) excuse(tp linearizability.TopicPartition, from, to int64) {
	if from < to {
		ses.excused[tp] = append(ses.excused[tp], sesRange{from, to})
	}
}

// isExcused reports whether offset of tp lies in a range a reset
// skipped.
func (ses *txnSession) isExcused(tp linearizability.TopicPartition, offset int64) bool {
	for _, r := range ses.excused[tp] {
		if offset >= r.from && offset < r.to {
			return true
		}
	}
	return false
}

// sesTransport is the simulated network as one process of a member sees
// it: nothing reaches a dead process, and a paused one gets its timers
// and answers when it wakes.
type sesTransport struct{ l *sesLife }

func (t sesTransport) Now() time.Duration { return t.l.m.ses.s.ww.w.now() }

func (t sesTransport) After(d time.Duration, fn func()) {
	t.l.m.c.after(d, func() { t.l.run(fn) })
}

func (t sesTransport) Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	t.CallOn(0, addr, req, done)
}

// CallOn is Call on connection id (0: none; clientcore.Conns, sasl.go):
// each process (life) of a member dials its own connections.
func (t sesTransport) CallOn(id uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	callAsProcess(t.l, t.l.m.c, id, addr, req, done)
}

func (l *sesLife) isAlive() bool { return l.alive }

// run runs fn unless the process died; a paused process runs it when it
// wakes.
func (l *sesLife) run(fn func()) {
	if !l.alive {
		return
	}
	if now := l.m.ses.s.ww.w.now(); now < l.pausedUntil {
		l.m.c.after(l.pausedUntil-now, func() { l.run(fn) })
		return
	}
	fn()
}
