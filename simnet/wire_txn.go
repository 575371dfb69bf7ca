package simnet

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// The transactional workload (issue 23), drawn per seed (Options.Txn).
//
// Three transactional producers, each with its own transactional
// id, run transactions over the partitions of topicTxn with the native
// protocol: FindCoordinator, InitProducerId, AddPartitionsToTxn,
// transactional produces of unique values (one batch per partition,
// resent with its sequence on retriable errors), then EndTxn commit or
// abort (drawn), resending retriable failures as Kafka's clients do. A
// producer process crashes between steps now and then: a new process
// re-initializes the same transactional id (fencing the old epoch), and
// the old one sometimes keeps going to its EndTxn: a zombie. After the
// heal a reader reads every partition of topicTxn at read_committed from
// offset 0 up to the last stable offset. The whole run is a
// linearizability.TxnHistory, checked by CheckTxn at the end of the seed
// ("txn:" failures): no aborted or intermediate read, all-or-nothing
// visibility, no lost committed write, no duplicate, no zombie write.
//
// A transaction's outcome is committed when its EndTxn(commit) was
// answered ok, aborted when it never sent EndTxn(commit) (it cannot
// commit), indefinite otherwise.
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

// txnLife is one process of a transactional producer.
type txnLife struct {
	p        *txnProducer
	zombie   bool // abandoned: finishes its transaction and stops
	dead     bool // stops at its next step
	coord    int
	pid      int64
	epoch    int16
	seq      map[int32]int32
	txn      int // index in hist.Txns; -1: none open
	attempts int
}

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

// spawn starts a new process of the producer: InitProducerId fences the
// previous one.
func (p *txnProducer) spawn() {
	if p.stopped {
		return
	}
	if p.lives >= txnLivesMax {
		p.stop()
		return
	}
	p.lives++
	l := &txnLife{p: p, txn: -1, seq: map[int32]int32{}}
	l.findCoordinator()
}

// findCoordinator asks a random node for the id's coordinator, then
// initializes the producer.
func (l *txnLife) findCoordinator() {
	c := l.p.c
	req := &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{
		TransactionalId: l.p.tid}}}
	l.send(c.randomNode(), req, func(resp *strandpb.Response) {
		l.coord = c.nodeIndexOf(resp.GetFindCoordinator().GetNodeId())
		l.attempts = 0
		l.init()
	}, l.restart)
}

// stop counts the producer out of the workload, once.
func (p *txnProducer) stop() {
	if !p.stopped {
		p.stopped = true
		p.s.producerDone()
	}
}

// send sends req to target; retriable failures retry (to the coordinator
// found anew for coordinator requests, to the hinted leader for produce)
// up to txnAttemptsMax, then giveUp runs. ok runs with an answer without
// error.
func (l *txnLife) send(target int, req *strandpb.Request, ok func(*strandpb.Response), giveUp func()) {
	c := l.p.c
	l.attempts++
	l.p.s.ww.call(c, target, req, func(resp *strandpb.Response, err error) {
		if err == nil {
			err = txnAnswerErr(resp)
		}
		if err == nil {
			ok(resp)
			return
		}
		code := errCode(err)
		if code == strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED {
			l.p.s.ww.w.coverage.Inc("txn/fenced")
			if req.GetEndTxn() != nil && l.attempts == 1 {
				l.fencedAtEnd()
			}
			l.fenced()
			return
		}
		retriable := clientlib.ClassifyErr(err).Retriable || code == strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS ||
			code == strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR
		if !retriable || l.attempts >= txnAttemptsMax {
			l.p.s.ww.w.coverage.Inc("txn/gave-up")
			giveUp()
			return
		}
		if l.dead && !l.zombie {
			return // a crashed process sends nothing more
		}
		if coordinatorLost(req, err) {
			failed := target
			c.after(wireBackoff.Delay(l.attempts, c.rng), func() { l.relocate(failed, req, ok, giveUp) })
			return
		}
		next := l.retryTarget(req, err)
		c.after(wireBackoff.Delay(l.attempts, c.rng), func() { l.send(next, req, ok, giveUp) })
	})
}

// coordinatorLost reports whether err, the failure of coordinator request
// req, says the coordinator the process knows is gone: it did not answer,
// or answered that it is not (or not yet) the coordinator. Kafka's
// producer then looks the coordinator up again before it retries
// (TransactionManager: lookupCoordinator); retrying the known one kept a
// process sending to a node dead for good for 26 s after the heal, past
// the drain's grace (seed 22 of the standard sample, an intermediate
// branch: FindCoordinator named that node once, from a lagging view).
func coordinatorLost(req *strandpb.Request, err error) bool {
	if req.GetProduce() != nil || req.GetFindCoordinator() != nil {
		return false
	}
	if _, unreachable := errors.AsType[*clientlib.ConnError](err); unreachable {
		return true
	}
	var e *clientlib.Error
	if asWireError(err, &e) && e.LeaderID != 0 {
		return false // the answer names the coordinator: retryTarget goes there
	}
	switch errCode(err) {
	case strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE:
		return true
	}
	return false
}

// relocate looks the coordinator up again, asking a node other than
// failed (the one req just failed at), then sends req to the coordinator
// it names.
func (l *txnLife) relocate(failed int, req *strandpb.Request, ok func(*strandpb.Response), giveUp func()) {
	c := l.p.c
	ask := c.randomNode()
	if ask == failed {
		ask = (ask + 1) % len(c.ww.w.nodes)
	}
	find := &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{
		TransactionalId: l.p.tid}}}
	l.send(ask, find, func(resp *strandpb.Response) {
		l.coord = c.nodeIndexOf(resp.GetFindCoordinator().GetNodeId())
		l.send(l.coord, req, ok, giveUp)
	}, giveUp)
}

// retryTarget is where a retry goes: the hinted leader of a produce, a
// random node otherwise (the coordinator may have moved; the node
// answers NOT_COORDINATOR until the retry finds it).
func (l *txnLife) retryTarget(req *strandpb.Request, err error) int {
	c := l.p.c
	var e *clientlib.Error
	if asWireError(err, &e) && e.LeaderID != 0 {
		return c.nodeIndexOf(e.LeaderID)
	}
	if req.GetProduce() == nil && c.rng.IntN(2) == 0 {
		return l.coord
	}
	return c.randomNode()
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

// txnAnswerErr is the first error an answer carries, top level or per
// partition.
func txnAnswerErr(resp *strandpb.Response) error {
	if err := wireErr(resp.GetError()); err != nil {
		return err
	}
	for _, r := range resp.GetAddPartitionsToTxn().GetResults() {
		if err := wireErr(r.GetError()); err != nil {
			return err
		}
	}
	for _, p := range resp.GetProduce().GetPartitions() {
		if err := wireErr(p.GetError()); err != nil {
			return err
		}
	}
	return nil
}

// init sends InitProducerId; its answer is a fence of older epochs.
func (l *txnLife) init() {
	s := l.p.s
	req := &strandpb.Request{Body: &strandpb.Request_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdRequest{
		TransactionalId: l.p.tid, TransactionTimeoutMs: txnTimeoutMs}}}
	l.send(l.coord, req, func(resp *strandpb.Response) {
		r := resp.GetTxnInitProducerId()
		l.pid, l.epoch = r.GetProducerId(), int16(r.GetProducerEpoch())
		s.hist.Fences = append(s.hist.Fences, linearizability.TxnFence{TransactionalID: l.p.tid,
			Producer: linearizability.TxnProducerEpoch{ID: l.pid, Epoch: l.epoch}, Return: int64(s.ww.w.now())})
		s.ww.w.coverage.Inc("txn/init")
		l.step(l.begin)
	}, l.restart)
}

// step runs next after a think time, unless the process crashes first:
// then a new process starts, and the old one may go on as a zombie.
func (l *txnLife) step(next func()) {
	c := l.p.c
	if l.dead {
		return
	}
	if !l.zombie && c.rng.IntN(txnCrashOneIn) == 0 {
		l.p.s.ww.w.coverage.Inc("txn/crash")
		if l.txn >= 0 && c.rng.IntN(3) != 0 {
			l.zombie = true // finishes its open transaction, fenced or not
			l.p.s.ww.w.coverage.Inc("txn/zombie")
			c.after(c.thinkTime(), l.p.spawn)
			// A zombie is a paused process (a GC pause, a stalled VM): it
			// wakes while its successor may be inside a transaction, in
			// half the cases straight into its commit (the partitions
			// fence its writes; only the coordinator fences its EndTxn).
			if c.rng.IntN(2) == 0 {
				next = l.end
			}
			c.after(time.Duration(1+c.rng.IntN(txnZombiePauseMaxMs))*time.Millisecond, next)
			return
		} else {
			l.dead = true
			c.after(c.thinkTime(), l.p.spawn)
			return
		}
	}
	c.after(time.Duration(1+c.rng.IntN(txnStepMaxMs))*time.Millisecond, next)
}

// restart abandons this process after a request gave up and starts a new
// one (a zombie just stops).
func (l *txnLife) restart() {
	if l.dead {
		return
	}
	l.dead = true
	if !l.zombie {
		l.p.c.after(l.p.c.thinkTime(), l.p.spawn)
	}
}

// fenced: a newer epoch exists; the process stops (its successor, if it
// crashed, already runs; otherwise it re-initializes).
func (l *txnLife) fenced() { l.restart() }

// fencedAtEnd records the open transaction as aborted: the first attempt
// of its EndTxn was refused as fenced, so no EndTxn(commit) of its epoch
// was ever decided (client requests are never duplicated in flight), and
// a fence aborts the transaction it ends. A marker that committed it
// anyway (in some partition) is an aborted read.
func (l *txnLife) fencedAtEnd() {
	s := l.p.s
	if l.txn < 0 {
		return
	}
	t := &s.hist.Txns[l.txn]
	t.Outcome, t.EndReturn = linearizability.TxnAborted, int64(s.ww.w.now())
	delete(s.sentCommit, l.txn)
	s.ww.w.coverage.Inc("txn/fenced-at-end")
}

// begin starts the producer's next transaction, or ends the producer.
func (l *txnLife) begin() {
	p, s := l.p, l.p.s
	if l.zombie || p.done >= txnPerProducer {
		l.dead = true
		if !l.zombie {
			p.stop()
		}
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
		Producer: linearizability.TxnProducerEpoch{ID: l.pid, Epoch: l.epoch}, Outcome: linearizability.TxnAborted,
		Begin: now, EndCall: now, EndReturn: now})
	l.txn = len(s.hist.Txns) - 1
	l.attempts = 0
	req := &strandpb.Request{Body: &strandpb.Request_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnRequest{
		TransactionalId: p.tid, Producer: l.producer(), Topics: []*strandpb.TxnPartitions{{Topic: topicTxn, Partitions: parts}}}}}
	l.send(l.coord, req, func(*strandpb.Response) { l.step(func() { l.produce(parts) }) }, l.restart)
}

// producer is the process's producer id and epoch on the wire.
func (l *txnLife) producer() *strandpb.TxnProducer {
	return &strandpb.TxnProducer{ProducerId: l.pid, Epoch: int32(l.epoch)}
}

// produce writes one batch of unique values to parts[0], then the rest.
func (l *txnLife) produce(parts []int32) {
	if len(parts) == 0 {
		l.step(l.end)
		return
	}
	p, s := l.p, l.p.s
	c := p.c
	q := parts[0]
	n := 1 + c.rng.IntN(3)
	recs := make([]recordbatch.Record, n)
	values := make([]string, n)
	for i := range recs {
		s.nextValue++
		values[i] = fmt.Sprintf("t%d", s.nextValue)
		recs[i] = recordbatch.Record{TimestampMs: int64(s.ww.w.now() / time.Millisecond), Value: []byte(values[i])}
	}
	batch, err := recordbatch.Encode(nil, recs)
	if err != nil {
		panic("simnet: encode transactional batch: " + err.Error())
	}
	t := &s.hist.Txns[l.txn]
	first := len(t.Writes)
	for _, v := range values {
		t.Writes = append(t.Writes, linearizability.TxnWrite{TP: linearizability.TopicPartition{Topic: topicTxn, Partition: q},
			Value: v, Offset: -1})
	}
	req := &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1,
		TimeoutMs: int32(s.ww.w.opts.ClientTimeout / time.Millisecond), TransactionalId: p.tid,
		Partitions: []*strandpb.ProduceRequest_Partition{{Topic: topicTxn, Partition: q, ProducerId: l.pid,
			ProducerEpoch: int32(l.epoch), BaseSequence: l.seq[q], Batch: batch, Transactional: true}}}}}
	l.attempts = 0
	l.send(c.randomNode(), req, func(resp *strandpb.Response) {
		l.seq[q] += int32(n)
		if ps := resp.GetProduce().GetPartitions(); len(ps) == 1 && ps[0].GetBaseOffset() >= 0 {
			w := s.hist.Txns[l.txn].Writes
			for i := range n {
				w[first+i].Offset = ps[0].GetBaseOffset() + int64(i)
			}
		}
		s.ww.w.coverage.Inc("txn/produce")
		l.step(func() { l.produce(parts[1:]) })
	}, l.restart)
}

// end sends EndTxn, commit or abort as drawn.
func (l *txnLife) end() {
	p, s := l.p, l.p.s
	commit := l.zombie || p.c.rng.IntN(4) != 0
	i := l.txn
	now := int64(s.ww.w.now())
	t := &s.hist.Txns[i]
	t.EndCall, t.EndReturn = now, now
	if commit {
		s.sentCommit[i] = true
		t.Outcome = linearizability.TxnIndefinite
	}
	req := &strandpb.Request{Body: &strandpb.Request_EndTxn{EndTxn: &strandpb.EndTxnRequest{TransactionalId: p.tid,
		Producer: l.producer(), Commit: commit}}}
	l.attempts = 0
	l.send(l.coord, req, func(resp *strandpb.Response) {
		t := &s.hist.Txns[i]
		t.EndReturn = int64(s.ww.w.now())
		if commit {
			t.Outcome = linearizability.TxnCommitted
			s.ww.w.coverage.Inc("txn/committed")
		} else {
			s.ww.w.coverage.Inc("txn/aborted")
		}
		if r := resp.GetEndTxn(); r.GetProducerId() != 0 {
			if r.GetProducerId() != l.pid || int16(r.GetProducerEpoch()) != l.epoch {
				l.seq = map[int32]int32{}
			}
			l.pid, l.epoch = r.GetProducerId(), int16(r.GetProducerEpoch())
		}
		l.txn = -1
		l.step(l.begin)
	}, l.restart)
}
