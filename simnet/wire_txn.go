package simnet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// The transactional workload (issue 23), drawn per seed (Options.Txn).
//
// Three transactional producers, each with its own transactional id, run
// transactions over the partitions of topicTxn on clientlib's
// transactional Client, the one applications run (issue 21): every
// process of a producer is a Simulated clientlib.Client built with the
// id's TransactionalID, driven through its public API in tasks
// (clientlib.SimRun, virtual time, the simulated network): InitTransactions,
// then per transaction BeginTransaction, Produce of 1-3 unique values to
// each drawn partition (think times between partitions), then
// CommitTransaction or AbortTransaction (drawn; half the commits follow
// the last Produce at once, records still buffered). FindCoordinator,
// InitProducerId, AddPartitionsToTxn, produce sequences, retries and
// coordinator lookups are clientlib's. A process crashes between steps
// now and then (its task abandoned, its callbacks dropped): a new process
// re-initializes the id, fencing the old epoch; inside a transaction the
// old one is sometimes paused instead (a GC pause) and wakes a zombie that
// goes on, half the time straight into its commit. A commit now and then
// kills its process as the EndTxn(commit) would leave, or just after it
// left (the coordinator then writes the markers of a dead client).
//
// A transaction's outcome is what clientlib reported: committed when
// CommitTransaction returned nil; aborted when no EndTxn(commit) left
// (AbortTransaction, a commit refused before it sent one) or its first and
// only EndTxn(commit) was answered PRODUCER_FENCED; indefinite otherwise.
// A CommitTransaction whose outcome stayed unknown is called again (only
// the same decision may follow), up to txnCommitTriesMax times.
//
// The checkers stay the simulator's own: a reader (wire_txn_check.go)
// follows topicTxn at read_committed while the producers run and after the
// heal reads every partition of topicTxn from offset 0 up to the last
// stable offset; the whole run is a linearizability.TxnHistory, checked by
// CheckTxn at the end of the seed ("txn:" failures): no aborted or
// intermediate read, all-or-nothing visibility, no lost committed write,
// no duplicate, no zombie write; wire_txn_decisions.go holds every marker
// to the coordinator's committed decision.
const (
	topicTxn           = "sim-txn"
	txnTopicPartitions = 3
	txnProducersMax    = 3
	txnPerProducer     = 8  // transactions per producer
	txnCrashOneIn      = 8  // steps after which the process crashes
	txnAttemptsMax     = 40 // attempts of one request before giving up
	txnTimeoutMs       = 5_000
	txnReadsMax        = 400 // fetches of the final read
	txnLivesMax        = 30  // processes per producer
	txnStepMaxMs       = 120 // think time between steps: transactions overlap
	// txnZombiePauseMaxMs bounds a zombie's pause before its next step:
	// about a transaction's length, so it wakes before, inside or after
	// its successor's transactions.
	txnZombiePauseMaxMs = 1_500
)

// txnCheckpointEntriesMax caps the checkpoint interval of a seed with the
// workload: its partitions apply some 50 entries each, so with a larger
// interval (or production's 1,024) they never checkpoint, no replica ever
// restores their transactional state (LSO, aborted index, open
// transactions) from a checkpoint or a raft snapshot, and the digest
// comparison of restored replicas (digests.go) never sees it.
const txnCheckpointEntriesMax = 32

// WithTxn is o with the transactional workload on: its checkpoint
// interval capped so its partitions checkpoint mid-run (16 or 32 entries,
// by the seed, when drawn larger).
func WithTxn(o Options) Options {
	o.Txn = true
	return capCheckpointEntries(o, txnCheckpointEntriesMax)
}

// capCheckpointEntries caps o's checkpoint interval at most entries, or at
// half of it in odd seeds, when it is drawn larger (or production's 0): a
// workload's partitions must checkpoint mid-run.
func capCheckpointEntries(o Options, most uint64) Options {
	if o.CheckpointEntries == 0 || o.CheckpointEntries > most {
		o.CheckpointEntries = most >> (o.Seed % 2)
	}
	return o
}

// txnClients counts the client slots the workload uses: the producers and
// the reader (which also creates the topic).
func txnClients(o Options) int {
	if !o.Txn {
		return 0
	}
	return txnProducersMax + 1 + txnSessionClients(o)
}

// txnWorkloadPartitions counts topicTxn's and topicTxnOut's partitions,
// checked as groups after the coordinators' (world.groupOf).
func txnWorkloadPartitions(o Options) int {
	if !o.Txn {
		return 0
	}
	return txnTopicPartitions + txnOutPartitions
}

// txnWorkloadTP is the workload's p-th partition: topicTxn's, then
// topicTxnOut's.
func txnWorkloadTP(p int) node.TopicPartition {
	if p < txnTopicPartitions {
		return node.TopicPartition{Topic: topicTxn, Partition: int32(p)}
	}
	return node.TopicPartition{Topic: topicTxnOut, Partition: int32(p - txnTopicPartitions)}
}

// txnSim is the workload and its history.
type txnSim struct {
	ww         *wireWorkload
	reader     *wireClient
	producers  []*txnProducer
	lives      []*txnLife // every producer process, for endTasks
	hist       linearizability.TxnHistory
	sentCommit map[int]bool // transactions that sent EndTxn(commit)
	nextValue  int
	active     int
	finished   bool
	checked    bool // CheckTxn ran
	readLeader int  // the node that last answered the reader; -1: none
	// tailPos is the tailing reader's position per partition while the
	// producers run (wire_txn_check.go).
	tailPos [txnTopicPartitions]int64
	// trimmed: the partition's log start passed a reader (retention or
	// a delete-records): it is not drained whole.
	trimmed map[linearizability.TopicPartition]bool
	// ses are the consume-transform-produce members (wire_txn_session.go).
	ses *txnSession
	// drainTPs are the partitions the final reads drain: topicTxn's and
	// topicTxnOut's.
	drainTPs []linearizability.TopicPartition
}

// txnProducer is one transactional id; lives are its processes.
type txnProducer struct {
	s       *txnSim
	c       *wireClient
	tid     string
	lives   int
	done    int  // transactions begun, over every life
	stopped bool // counted out of the workload
}

// txnLife is one process of a transactional producer: a simulated
// clientlib.Client with the producer's transactional id, driven through
// its public transaction API in tasks (clientlib.SimRun).
type txnLife struct {
	p      *txnProducer
	alive  bool
	zombie bool // paused while a successor took the id: finishes its transaction and stops
	// pausedUntil holds back every timer and answer of a paused process.
	pausedUntil time.Duration
	cl          *clientlib.Client
	abandon     func() // ends the running task, if any
	txn         int    // index in hist.Txns of the open transaction; -1: none
	// crashAt is where the open transaction's process dies at its
	// EndTxn(commit): 0 nowhere, crashBeforeEnd as the request would
	// leave, crashAfterEnd just after it left (before its answer, while
	// the coordinator writes the markers).
	crashAt     int
	commitSends int  // EndTxn(commit) requests the open transaction sent
	fencedAtEnd bool // the first EndTxn(commit), the only one sent, was answered PRODUCER_FENCED
	commitTries int  // CommitTransaction calls of the open transaction
}

// Where a process dies at its EndTxn(commit) (txnLife.crashAt).
const (
	crashBeforeEnd = 1
	crashAfterEnd  = 2
	// txnCrashAtEndOneIn: one commit in this many draws a crash at it.
	txnCrashAtEndOneIn = 6
	// txnCommitTriesMax bounds the CommitTransaction calls of one
	// transaction whose outcome stayed unknown (the application retries
	// the commit, as clientlib asks, then gives the process up).
	txnCommitTriesMax = 3
)

// newTxnSim creates the workload's clients from index first on; nil
// without Options.Txn.
func newTxnSim(ww *wireWorkload, first int) *txnSim {
	if !ww.w.opts.Txn {
		return nil
	}
	s := &txnSim{ww: ww, sentCommit: map[int]bool{}, readLeader: -1, trimmed: map[linearizability.TopicPartition]bool{}}
	s.reader = newWireClient(ww, first+txnProducersMax, kindMember)
	for i := range txnProducersMax {
		s.producers = append(s.producers, &txnProducer{s: s, c: newWireClient(ww, first+i, kindMember),
			tid: "sim-txn-" + strconv.Itoa(i)})
	}
	s.ses = newTxnSession(s, first+txnProducersMax+1)
	for q := range int32(txnTopicPartitions) {
		s.drainTPs = append(s.drainTPs, linearizability.TopicPartition{Topic: topicTxn, Partition: q})
	}
	for q := range int32(txnOutPartitions) {
		s.drainTPs = append(s.drainTPs, linearizability.TopicPartition{Topic: topicTxnOut, Partition: q})
	}
	return s
}

// owns reports whether c is one of the workload's clients.
func (s *txnSim) owns(c *wireClient) bool {
	if s == nil {
		return false
	}
	if c == s.reader {
		return true
	}
	for _, p := range s.producers {
		if p.c == c {
			return true
		}
	}
	return s.ses.owns(c)
}

// start creates topicTxn, then starts the producers; the workload counts
// as active until every producer is done.
func (s *txnSim) start() {
	s.ww.active++
	s.reader.after(0, func() { s.create(0) })
}

// create sends CreateTopics for topicTxn until it exists.
func (s *txnSim) create(attempt int) {
	c := s.reader
	req := &strandpb.Request{Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: topicTxn, Partitions: txnTopicPartitions,
			ReplicationFactor: int32(s.ww.w.opts.Replication)}, {Name: topicTxnOut, Partitions: txnOutPartitions,
			ReplicationFactor: int32(s.ww.w.opts.Replication)}},
		TimeoutMs: int32(s.ww.w.opts.ClientTimeout / time.Millisecond)}}}
	s.ww.call(c, c.randomNode(), req, func(resp *strandpb.Response, err error) {
		if err == nil {
			err = wireErr(resp.GetError())
		}
		for _, t := range resp.GetCreateTopics().GetTopics() {
			if e := wireErr(t.GetError()); err == nil && errCode(e) != strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS {
				err = e
			}
		}
		if err == nil || errCode(err) == strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS {
			s.startProducers()
			return
		}
		if attempt >= attemptsMax {
			s.ww.w.fail("txn: create topic %s kept failing: %v", topicTxn, err)
			s.ww.clientDone()
			return
		}
		c.after(wireBackoff.Delay(attempt+1, c.rng), func() { s.create(attempt + 1) })
	})
}

// startProducers starts every producer's first process.
func (s *txnSim) startProducers() {
	s.active = len(s.producers)
	for _, p := range s.producers {
		p.c.after(p.c.thinkTime(), p.spawn)
	}
	s.reader.after(s.reader.thinkTime(), func() { s.tail(0) })
	s.ses.start()
}

// producerDone counts a producer out; the last one ends the workload's
// active part.
func (s *txnSim) producerDone() {
	s.active--
	if s.active == 0 {
		s.ww.clientDone()
	}
}

// spawn starts a new process of the producer: its InitTransactions fences
// the previous one.
func (p *txnProducer) spawn() {
	if p.stopped {
		return
	}
	if p.lives >= txnLivesMax {
		p.stop()
		return
	}
	p.lives++
	l := &txnLife{p: p, alive: true, txn: -1}
	p.s.lives = append(p.s.lives, l)
	ww := p.s.ww
	seeds := make([]string, len(ww.peers))
	for i, peer := range ww.peers {
		seeds[i] = peer.Address
	}
	o := ww.w.opts
	cl, err := clientlib.NewClient(append([]clientlib.Opt{clientlib.Simulated(txnTransport{l}), clientlib.SeedAddresses(seeds...),
		clientlib.RandSeed(p.c.rng.Uint64()), clientlib.TransactionalID(p.tid),
		clientlib.TransactionTimeout(txnTimeoutMs * time.Millisecond), clientlib.ManualPartitioner(),
		clientlib.RequestTimeout(o.libRequestTimeout()), clientlib.StallTimeout(o.libStallTimeout()), clientlib.DeliveryTimeout(o.OpDeadline), clientlib.MaxRetries(txnAttemptsMax),
		clientlib.RetryBackoff(wireBackoff.Base, wireBackoff.Max), clientlib.MetadataMaxAge(libMetadataMaxAge)},
		ww.sasl.libOpts(p.c)...)...) // SASL: sasl.go
	if err != nil {
		panic("simnet: transactional producer options: " + err.Error())
	}
	l.cl = cl
	l.task(func(ctx context.Context) { err = cl.InitTransactions(ctx) }, func() {
		if err != nil {
			l.failed(err)
			return
		}
		ww.w.coverage.Inc("txn/init")
		l.step(l.begin)
	})
}

// stop counts the producer out of the workload, once.
func (p *txnProducer) stop() {
	if !p.stopped {
		p.stopped = true
		p.s.producerDone()
	}
}

// nodeIndexOf is node id's index, a random node when unknown.
func (c *wireClient) nodeIndexOf(id uint64) int {
	for i, p := range c.ww.peers {
		if uint64(p.ID) == id && id != 0 {
			return i
		}
	}
	return c.randomNode()
}

// task runs fn (calls of the process's Client) as a task on the
// simulator's thread; done runs when it returned, unless the process died.
func (l *txnLife) task(fn func(ctx context.Context), done func()) {
	if !l.alive {
		return
	}
	l.abandon = l.p.c.ww.w.simRun(l.cl, fn, done)
}

// after runs fn after d, unless the process died first; a paused process
// runs it when it wakes.
func (l *txnLife) after(d time.Duration, fn func()) {
	l.p.c.after(d, func() { l.run(fn) })
}

// run runs fn unless the process died; a paused process runs it when it
// wakes.
func (l *txnLife) run(fn func()) {
	if !l.alive {
		return
	}
	if now := l.p.s.ww.w.now(); now < l.pausedUntil {
		l.p.c.after(l.pausedUntil-now, func() { l.run(fn) })
		return
	}
	fn()
}

// step runs next after a think time, unless the process crashes first: a
// new process then starts, and the old one, inside a transaction, may be
// paused instead (a GC pause, a stalled VM) and go on as a zombie. In
// overtime, with every fault healed, processes crash no more: each crash
// costs its successor up to a transaction timeout of CONCURRENT_TRANSACTIONS
// (seed 23 spent its 30 s of grace spawning producer processes).
func (l *txnLife) step(next func()) {
	c := l.p.c
	if !l.alive {
		return
	}
	if !l.zombie && !l.p.s.ww.w.work.overtime && c.rng.IntN(txnCrashOneIn) == 0 {
		l.p.s.ww.w.coverage.Inc("txn/crash")
		if l.txn >= 0 && c.rng.IntN(3) != 0 {
			l.pause(next)
			return
		}
		l.die()
		c.after(c.thinkTime(), l.p.spawn)
		return
	}
	l.after(time.Duration(1+c.rng.IntN(txnStepMaxMs))*time.Millisecond, next)
}

// pause turns the process into a zombie: it sleeps up to
// txnZombiePauseMaxMs while a successor takes the transactional id, and
// wakes while the successor may be inside a transaction, in half the
// cases straight into its commit (the partitions fence its writes; only
// the coordinator fences its EndTxn).
func (l *txnLife) pause(next func()) {
	c, s := l.p.c, l.p.s
	l.zombie = true
	s.ww.w.coverage.Inc("txn/zombie")
	l.pausedUntil = s.ww.w.now() + time.Duration(1+c.rng.IntN(txnZombiePauseMaxMs))*time.Millisecond
	c.after(c.thinkTime(), l.p.spawn)
	if c.rng.IntN(2) == 0 {
		next = l.end
	}
	l.after(0, next)
}

// die ends the process: its task and every callback of its transport.
func (l *txnLife) die() {
	if !l.alive {
		return
	}
	l.alive = false
	if l.abandon != nil {
		l.abandon()
	}
}

// failed ends the process after its Client failed with err (fenced, or a
// call that gave up) and starts a new one; a zombie just stops.
func (l *txnLife) failed(err error) {
	if errors.Is(err, clientlib.ErrProducerFenced) {
		l.p.s.ww.w.coverage.Inc("txn/fenced")
	} else {
		l.p.s.ww.w.coverage.Inc("txn/gave-up")
	}
	if !l.alive {
		return
	}
	l.die()
	if !l.zombie {
		l.p.c.after(l.p.c.thinkTime(), l.p.spawn)
	}
}

// begin opens the producer's next transaction (BeginTransaction, which
// re-initializes the producer first when an abort asked it to), or ends
// the producer.
func (l *txnLife) begin() {
	p, s := l.p, l.p.s
	if l.zombie || p.done >= txnPerProducer {
		l.die()
		if !l.zombie {
			p.stop()
		}
		return
	}
	var err error
	l.task(func(context.Context) { err = l.cl.BeginTransaction() }, func() {
		if err != nil {
			l.failed(err)
			return
		}
		p.done++
		c := p.c
		parts := []int32{}
		for q := range int32(txnTopicPartitions) {
			if c.rng.IntN(2) == 0 {
				parts = append(parts, q)
			}
		}
		if len(parts) == 0 {
			parts = append(parts, int32(c.rng.IntN(txnTopicPartitions)))
		}
		now := int64(s.ww.w.now())
		s.hist.Txns = append(s.hist.Txns, linearizability.Txn{Client: linearizability.ClientID(c.index), TransactionalID: p.tid,
			Outcome: linearizability.TxnAborted, Begin: now, EndCall: now, EndReturn: now})
		l.txn, l.crashAt, l.commitSends, l.fencedAtEnd, l.commitTries = len(s.hist.Txns)-1, 0, 0, false, 0
		l.step(func() { l.produce(parts) })
	})
}

// produce produces 1-3 records of unique values to parts[0] in the open
// transaction and waits for them, then the rest after think times; after
// the last, half the time it commits at once without waiting, as an
// application that produces and commits in one go (the records may not
// have left yet: CommitTransaction must send them first).
func (l *txnLife) produce(parts []int32) {
	if len(parts) == 0 {
		l.step(l.end)
		return
	}
	p, s := l.p, l.p.s
	c := p.c
	q := parts[0]
	n := 1 + c.rng.IntN(3)
	idx := l.txn
	first := len(s.hist.Txns[idx].Writes)
	recs := make([]*clientlib.Record, n)
	for i := range recs {
		s.nextValue++
		v := fmt.Sprintf("t%d", s.nextValue)
		recs[i] = &clientlib.Record{Topic: topicTxn, Partition: q, Value: []byte(v)}
		s.hist.Txns[idx].Writes = append(s.hist.Txns[idx].Writes, linearizability.TxnWrite{
			TP: linearizability.TopicPartition{Topic: topicTxn, Partition: q}, Value: v, Offset: -1})
	}
	atOnce := len(parts) == 1 && c.rng.IntN(2) == 0
	l.task(func(ctx context.Context) {
		for i, r := range recs {
			l.cl.Produce(ctx, r, func(r *clientlib.Record, err error) {
				if err == nil && r.Offset >= 0 {
					s.hist.Txns[idx].Writes[first+i].Offset = r.Offset
					s.ww.w.coverage.Inc("txn/produce")
				}
			})
		}
		if !atOnce {
			// The application waits for the records (ProduceSync's
			// wait, a task's Flush here): the transaction stays open
			// on the partition across the think time, and a process
			// paused after this step wakes with its records written.
			_ = l.cl.Flush(ctx)
		}
	}, func() {
		if atOnce {
			s.ww.w.coverage.Inc("txn/commit-at-once")
			l.end()
			return
		}
		l.step(func() { l.produce(parts[1:]) })
	})
}

// end ends the open transaction, CommitTransaction or AbortTransaction as
// drawn (a zombie always commits), now and then with the process dying
// at its EndTxn(commit).
func (l *txnLife) end() {
	p, s := l.p, l.p.s
	if l.txn < 0 {
		l.step(l.begin)
		return
	}
	commit := l.zombie || p.c.rng.IntN(4) != 0
	if commit && !l.zombie && l.commitTries == 0 && p.c.rng.IntN(txnCrashAtEndOneIn) == 0 {
		l.crashAt = crashBeforeEnd + p.c.rng.IntN(2)
	}
	now := int64(s.ww.w.now())
	t := &s.hist.Txns[l.txn]
	if l.commitTries == 0 {
		t.EndCall, t.EndReturn = now, now
	}
	var err error
	l.task(func(ctx context.Context) {
		if commit {
			l.commitTries++
			err = l.cl.CommitTransaction(ctx)
		} else {
			err = l.cl.AbortTransaction(ctx)
		}
	}, func() { l.ended(commit, err) })
}

// ended records what CommitTransaction or AbortTransaction reported and
// goes on: committed when Commit returned nil; aborted when no
// EndTxn(commit) left (Abort, or a Commit refused before it sent one) or
// its first and only EndTxn(commit) was answered fenced; indefinite
// otherwise (onRequest marks it when the EndTxn(commit) leaves).
func (l *txnLife) ended(commit bool, err error) {
	s := l.p.s
	w := s.ww.w
	t := &s.hist.Txns[l.txn]
	t.EndReturn = int64(w.now())
	if err == nil {
		if commit {
			t.Outcome = linearizability.TxnCommitted
			w.coverage.Inc("txn/committed")
		} else {
			w.coverage.Inc("txn/aborted")
		}
		l.txn = -1
		l.step(l.begin)
		return
	}
	var ae *clientlib.TransactionAbortableError
	switch {
	case errors.Is(err, clientlib.ErrProducerFenced):
		if l.fencedAtEnd {
			// No EndTxn(commit) of its epoch was ever decided (one was
			// sent and refused), and a fence aborts the transaction it
			// ends: a marker that committed it anyway is an aborted read.
			t.Outcome = linearizability.TxnAborted
			delete(s.sentCommit, l.txn)
			w.coverage.Inc("txn/fenced-at-end")
		}
		l.txn = -1
		l.failed(err)
	case commit && errors.As(err, &ae):
		// A record failed: the transaction cannot commit; abort it, as
		// the error asks.
		w.coverage.Inc("txn/commit-abortable")
		l.task(func(ctx context.Context) { err = l.cl.AbortTransaction(ctx) }, func() { l.ended(false, err) })
	case commit && l.commitTries < txnCommitTriesMax && !l.zombie:
		// The outcome is not known (the coordinator did not answer in
		// time): only the same decision may follow, so commit again.
		w.coverage.Inc("txn/commit-retried")
		l.step(l.end)
	default:
		l.failed(err) // the outcome stays indefinite once an EndTxn(commit) left
	}
}

// endTasks kills every process of the producers still running (zombies
// included): their coroutines must not outlive the run.
func (s *txnSim) endTasks() {
	for _, l := range s.lives {
		l.die()
	}
}

// txnTransport is the simulated network as one process of a producer
// sees it: nothing reaches a dead process, a paused one gets its timers
// and answers when it wakes, and the requests that leave it are recorded
// (onRequest, onAnswer).
type txnTransport struct{ l *txnLife }

func (t txnTransport) Now() time.Duration { return t.l.p.s.ww.w.now() }

func (t txnTransport) After(d time.Duration, fn func()) { t.l.after(d, fn) }

func (t txnTransport) Call(addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	t.CallOn(0, addr, req, done)
}

// CallOn is Call on connection id (0: none; clientcore.Conns, sasl.go):
// each process (life) of a producer dials its own connections.
func (t txnTransport) CallOn(id uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	callAsProcess(t.l, t.l.p.c, id, addr, req, done)
}

// processLife is one process of a simulated client whose transport
// records what leaves and reaches it (txnLife, sesLife).
type processLife interface {
	// onRequest sees req leave; false: the process dies as it would
	// leave, and the request is dropped.
	onRequest(req *strandpb.Request) bool
	// onAnswer sees req's outcome reach the living process.
	onAnswer(req *strandpb.Request, resp *strandpb.Response, err error)
	// run runs fn unless the process died, when it wakes if paused.
	run(fn func())
	isAlive() bool
}

// callAsProcess is CallOn of process l on client c's transport, on
// connection id: the request recorded as it leaves, its answer as it
// arrives, and handed to done once the process runs (never, if it died:
// its task is abandoned).
func callAsProcess(l processLife, c *wireClient, id uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	if !l.onRequest(req) {
		return // the process died before sending: the task is abandoned
	}
	libTransport{c}.CallOn(id, addr, req, func(resp *strandpb.Response, err error) {
		if l.isAlive() {
			l.onAnswer(req, resp, err)
		}
		l.run(func() { done(resp, err) })
	})
}

func (l *txnLife) isAlive() bool { return l.alive }

// onRequest sees a request leave the process: a transactional produce or
// EndTxn names the transaction's producer id and epoch, and an
// EndTxn(commit) makes its outcome indefinite. False drops the request:
// the process dies as it would leave (crashBeforeEnd).
func (l *txnLife) onRequest(req *strandpb.Request) bool {
	if l.txn < 0 {
		return true
	}
	s := l.p.s
	t := &s.hist.Txns[l.txn]
	if p := txnProduceProducer(req); p != nil {
		t.Producer = *p
	}
	e := req.GetEndTxn()
	if e == nil {
		return true
	}
	t.Producer = linearizability.TxnProducerEpoch{ID: e.GetProducer().GetProducerId(), Epoch: int16(e.GetProducer().GetEpoch())}
	if !e.GetCommit() {
		return true
	}
	switch l.crashAt {
	case crashBeforeEnd:
		l.crashAt = 0
		s.ww.w.coverage.Inc("txn/crash-before-end")
		l.p.c.after(0, l.crashNow) // not from inside the task that sends
		return false
	case crashAfterEnd:
		l.crashAt = 0
		s.ww.w.coverage.Inc("txn/crash-after-end")
		l.p.c.after(0, l.crashNow)
	}
	if l.commitSends == 0 {
		t.EndCall = int64(s.ww.w.now())
	}
	l.commitSends++
	s.sentCommit[l.txn] = true
	t.Outcome = linearizability.TxnIndefinite
	return true
}

// crashNow kills the process at its EndTxn(commit); a new one starts a
// little later.
func (l *txnLife) crashNow() {
	if !l.alive {
		return
	}
	l.die()
	l.p.c.after(l.p.c.thinkTime(), l.p.spawn)
}

// onAnswer records fences (InitProducerId answers) and a first
// EndTxn(commit) refused as fenced.
func (l *txnLife) onAnswer(req *strandpb.Request, resp *strandpb.Response, err error) {
	s := l.p.s
	if err != nil || resp == nil {
		return
	}
	if r := resp.GetTxnInitProducerId(); r != nil && req.GetTxnInitProducerId() != nil && resp.GetError() == nil {
		s.hist.Fences = append(s.hist.Fences, linearizability.TxnFence{TransactionalID: l.p.tid,
			Producer: linearizability.TxnProducerEpoch{ID: r.GetProducerId(), Epoch: int16(r.GetProducerEpoch())},
			Return:   int64(s.ww.w.now())})
	}
	if e := req.GetEndTxn(); e != nil && e.GetCommit() && l.txn >= 0 && l.commitSends == 1 &&
		resp.GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED {
		l.fencedAtEnd = true
	}
}
