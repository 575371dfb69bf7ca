package clientlib

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// Produce sends r asynchronously and calls promise exactly once with r and
// nil (r.Offset and r.Partition set) or the error that failed it.
//
// Ordering: promises of one partition run in offset order, one at a time,
// on the client's promise goroutine; a promise must not block for long (it
// holds up every later promise) and must not call Flush or ProduceSync.
//
// Blocking: Produce returns once r is buffered. It blocks only while
// MaxBufferedRecords records are buffered, until one completes or ctx ends
// (then promise gets ctx's error). ctx is not used after r is buffered. A
// record over 1 MiB (key, value and headers) fails at once, before Produce
// returns, with an *Error matching ErrRecordTooLarge; it is never sent. A
// closed client fails r with ErrClientClosed.
func (c *Client) Produce(ctx context.Context, r *Record, promise func(*Record, error)) {
	if promise == nil {
		promise = func(*Record, error) {}
	}
	if n := r.payloadBytes(); n > recordbatch.RecordBytesMax {
		promise(r, &Error{Code: strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE,
			Message: fmt.Sprintf("record of %d bytes, over the %d-byte limit", n, recordbatch.RecordBytesMax)})
		return
	}
	if c.txn != nil {
		if err := c.txn.checkProduce(); err != nil {
			promise(r, err)
			return
		}
	}
	p := c.getProducer()
	if p == nil {
		promise(r, ErrClientClosed)
		return
	}
	if io, ok := p.io.(*simIO); ok {
		p.simProduce(io, pendingRecord{r: r, promise: promise})
		return
	}
	if err := p.acquire(ctx); err != nil {
		promise(r, err)
		return
	}
	if r.Timestamp.IsZero() {
		r.Timestamp = time.Now()
	}
	r.Offset = -1
	p.intake <- pendingRecord{r: r, promise: promise}
}

// ProduceSync produces rs and waits for all of their outcomes. ctx bounds
// only the wait for buffer space (see Produce).
func (c *Client) ProduceSync(ctx context.Context, rs ...*Record) ProduceResults {
	out := make(ProduceResults, len(rs))
	var wg sync.WaitGroup
	wg.Add(len(rs))
	for i, r := range rs {
		c.Produce(ctx, r, func(r *Record, err error) {
			out[i] = ProduceResult{Record: r, Err: err}
			wg.Done()
		})
	}
	wg.Wait()
	return out
}

// Flush seals every open batch at once (ignoring Linger) and waits until
// every record buffered so far, and any produced meanwhile, has had its
// promise called, or ctx ends.
func (c *Client) Flush(ctx context.Context) error {
	p := c.existingProducer()
	if p == nil {
		return nil
	}
	return p.flush(ctx)
}

// getProducer starts the producer on first use; nil once the client is
// closed.
func (c *Client) getProducer() *producer {
	if c.isClosed() {
		return nil
	}
	c.producerOnce.Do(func() {
		p := newProducer(c)
		c.mu.Lock()
		c.producer = p
		c.mu.Unlock()
		if t := c.cfg.simulated; t != nil {
			p.io = newSimIO(p, t) // no goroutines: the simulator steps it
			return
		}
		go p.run()
		go p.runPromises()
	})
	return c.existingProducer()
}

func (c *Client) existingProducer() *producer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.producer
}

type topicPartition struct {
	topic     string
	partition int32
}

// compare orders partitions by topic, then partition.
func (tp topicPartition) compare(o topicPartition) int {
	if c := strings.Compare(tp.topic, o.topic); c != 0 {
		return c
	}
	return cmp.Compare(tp.partition, o.partition)
}

// pendingRecord is a buffered record with its promise.
type pendingRecord struct {
	r       *Record
	promise func(*Record, error)
	err     error // set when completing
}

// sealedBatch is a batch in a Window: its records and encoded bytes.
type sealedBatch struct {
	records []pendingRecord
	bytes   []byte
	topicID []byte // the id the batch is produced under
	// writing counts the attempts handed to the IO whose bytes it may
	// still read: fill adds one, liveIO's sender takes it off once the
	// request is written (or failed unwritten). A resolved batch's buffer
	// goes back to the pool only at zero; simIO never takes one off (the
	// simulated transport and the in-process nodes may keep the bytes),
	// so the simulator reuses only never-sent batches' buffers.
	writing atomic.Int32
}

// sink is one partition's producer state, owned by the producer loop.
type sink struct {
	tp        topicPartition
	w         *clientcore.Window
	open      []pendingRecord
	builder   recordbatch.Builder
	openSince time.Duration
	// lastBatchBytes is the size of the partition's last sealed batch:
	// the next one's buffer starts there (appendOpen).
	lastBatchBytes int
	sealed         map[clientcore.BatchID]*sealedBatch
	// txnProducer and txnEpoch: a transactional producer's id and epoch
	// the window numbers under; a new transaction (a new epoch) starts a
	// new window at sequence 0.
	txnProducer int64
	txnEpoch    int32
	// topicID is the topic id the window numbers under (nil: the
	// cluster names none): sequence numbers mean nothing to another
	// incarnation of the topic, so a topic deleted and re-created
	// under its name starts a new window at sequence 0 (renewWindow).
	topicID []byte
	// awaitMeta: a node refused the window's topic id while the client's
	// metadata still named it; the partition sends nothing until the
	// refresh this started has answered.
	awaitMeta bool
}

// sentBatch is one partition's attempt inside a request. bytes and
// producerID are copied from loop-owned state when the attempt is made, so
// sender goroutines never read the loop's maps.
type sentBatch struct {
	s          *sink
	batch      *sealedBatch // only its writing count is the sender's to touch
	attempt    clientcore.Attempt
	bytes      []byte
	producerID int64
	epoch      int32
	topicID    []byte
}

// requestResult is a produce request's outcome, back to the loop.
type requestResult struct {
	node    uint64
	batches []sentBatch
	resp    *strandpb.Response
	err     error
	add     *addPartitionsResult // eventAddPartitions
}

// producer is the Client's producer: one loop goroutine owns every sink,
// so the batching and retry state needs no locks; the senders, the
// connections' readers (reporting answers) and the promise goroutine talk
// to it by channels.
type producer struct {
	c        *Client
	io       producerIO
	budget   chan struct{}
	intake   chan pendingRecord
	results  chan requestResult
	wake     chan struct{}
	promises chan pendingRecord

	mu       sync.Mutex
	buffered int           // records buffered, plus an AddPartitionsToTxn in flight (holdFlush)
	idle     chan struct{} // closed while buffered == 0
	flushers int
	closing  bool
	loopDone chan struct{}
	stop     chan struct{}
	stopOnce sync.Once

	// Owned by the loop goroutine.
	pool  batchPool
	sinks map[topicPartition]*sink
	// sinkOrder is sinks in topic-partition order (sortedSinks). A new
	// sink replaces the slice rather than inserting into it, so a caller
	// still ranging over an older one sees it unchanged.
	sinkOrder      []*sink
	waiting        map[string][]pendingRecord
	waitingSince   map[string]time.Duration
	unknownAnswers map[string]int // metadata answers that lacked a waiting topic
	rotation       int            // which partition a request starts with
	sticky         clientcore.Sticky
	memo           assignMemo
	nodeInFlight   map[uint64]int
	// nodeBytes is the batch bytes of a node's requests in flight
	// (beginInline's bound).
	nodeBytes     map[uint64]int
	senders       map[uint64]*nodeSender
	producerID    int64
	initInFlight  bool
	refreshing    bool
	refreshAt     time.Duration
	refreshWanted bool
	// refreshStreak counts the refreshes started since the producer last
	// wanted none: the wait before the next grows with it (KIP-580).
	refreshStreak  int
	initAttempts   int
	initRetryAfter time.Duration
	// AddPartitionsToTxn of a transactional producer, one at a time.
	addInFlight   bool
	addAttempts   int
	addRetryAfter time.Duration
	// retiredIDs are, per topic, the ids a window moved away from: a
	// stale metadata answer naming one again does not move a window back.
	retiredIDs map[string][][]byte
	// newestIDs are, per topic, the id a window last moved to and the
	// metadata version it was seen at.
	newestIDs map[string]seenID
	// idRefused are the topics a node answered UNKNOWN_TOPIC_ID for since
	// the last refresh: the next one asks about them by name.
	idRefused map[string]bool
}

func newProducer(c *Client) *producer {
	n := c.cfg.bufferedRecordsMax
	idle := make(chan struct{})
	close(idle)
	p := &producer{
		c:              c,
		budget:         make(chan struct{}, n),
		intake:         make(chan pendingRecord, n),
		results:        make(chan requestResult, 64),
		wake:           make(chan struct{}, 1),
		promises:       make(chan pendingRecord, n),
		idle:           idle,
		loopDone:       make(chan struct{}),
		stop:           make(chan struct{}),
		sinks:          make(map[topicPartition]*sink),
		waiting:        make(map[string][]pendingRecord),
		waitingSince:   make(map[string]time.Duration),
		unknownAnswers: make(map[string]int),
		nodeInFlight:   make(map[uint64]int),
		nodeBytes:      make(map[uint64]int),
		senders:        make(map[uint64]*nodeSender),
		producerID:     -1,
		retiredIDs:     make(map[string][][]byte),
		newestIDs:      make(map[string]seenID),
		idRefused:      make(map[string]bool),
	}
	p.io = liveIO{p}
	return p
}

// acquire takes a buffer slot, blocking while none is free.
func (p *producer) acquire(ctx context.Context) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return ErrClientClosed
	}
	p.mu.Unlock()
	select {
	case p.budget <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.stop:
		return ErrClientClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		<-p.budget
		return ErrClientClosed
	}
	p.holdLocked()
	return nil
}

// release frees a record's slot after its promise ran.
func (p *producer) release() {
	p.releaseFlush()
	<-p.budget
}

// holdFlush makes Flush wait for one more thing besides buffered records:
// an AddPartitionsToTxn in flight. A Commit or Abort must not send its
// EndTxn before that answer: the coordinator could take the EndTxn first
// (refusing an abort of a transaction it has not opened yet), then open
// a transaction nobody ends.
func (p *producer) holdFlush() {
	p.mu.Lock()
	p.holdLocked()
	p.mu.Unlock()
}

func (p *producer) holdLocked() {
	if p.buffered == 0 {
		p.idle = make(chan struct{})
	}
	p.buffered++
}

// releaseFlush undoes one holdFlush (or a record's count).
func (p *producer) releaseFlush() {
	p.mu.Lock()
	p.buffered--
	if p.buffered == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
}

func (p *producer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *producer) flushing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flushers > 0 || p.closing
}

func (p *producer) flush(ctx context.Context) error {
	if io, ok := p.io.(*simIO); ok {
		return io.flush(ctx) // nothing may block the simulator's thread
	}
	p.mu.Lock()
	p.flushers++
	idle := p.idle
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.flushers--
		p.mu.Unlock()
	}()
	p.poke()
	for {
		select {
		case <-idle:
			p.mu.Lock()
			if p.buffered == 0 {
				p.mu.Unlock()
				return nil
			}
			idle = p.idle
			p.mu.Unlock()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close stops intake, flushes and stops the loops. A simulated producer
// fails what it holds at once: nothing may wait on the simulator's thread.
func (p *producer) close() {
	if io, ok := p.io.(*simIO); ok {
		p.mu.Lock()
		p.closing = true
		p.mu.Unlock()
		p.failEverything(ErrClientClosed)
		io.settle()
		return
	}
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.flush(context.Background())
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.loopDone
}

// runPromises calls promises in the order the loop completed records.
func (p *producer) runPromises() {
	for pr := range p.promises {
		pr.promise(pr.r, pr.err)
		p.release()
	}
}

// complete hands a record to its promise (by the producer's IO).
func (p *producer) complete(pr pendingRecord, err error) {
	if t := p.c.txn; t != nil && err != nil {
		err = t.note(err)
	}
	pr.err = err
	p.io.complete(pr)
}

// run is the producer loop.
func (p *producer) run() {
	defer close(p.loopDone)
	defer close(p.promises)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := p.c.monotonic()
		next := p.drive(now)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if next > 0 {
			timer.Reset(max(next-now, time.Millisecond/4))
		}
		select {
		case pr := <-p.intake:
			p.add(pr, p.c.monotonic())
			for i := 0; i < 256; i++ { // take what is queued, bounded
				select {
				case pr := <-p.intake:
					p.add(pr, p.c.monotonic())
					continue
				default:
				}
				break
			}
		case res := <-p.results:
			p.handle(res, p.c.monotonic())
		case <-p.wake:
		case <-timer.C:
		case <-p.stop:
			p.failEverything(ErrClientClosed)
			return
		}
	}
}

// add places a record in its partition's open batch, or in the waiting
// list of its topic until metadata knows the topic.
func (p *producer) add(pr pendingRecord, now time.Duration) {
	if (len(p.waiting) > 0 && len(p.waiting[pr.r.Topic]) > 0) || !p.assign(pr, now) {
		if _, ok := p.waitingSince[pr.r.Topic]; !ok {
			p.waitingSince[pr.r.Topic] = now
		}
		p.waiting[pr.r.Topic] = append(p.waiting[pr.r.Topic], pr)
		p.refreshWanted = true
	}
}

// assignMemo is what assign read for the last record it placed, kept while
// reading it again would give the same: the topic's partition count and id
// (the metadata cache has not changed since), and the keyless records'
// sticky partition. PartitionAdaptive keeps the current partition without
// drawing when it is available, or when no partition is; the memo holds it
// in either case while that stays so:
//   - available: no batch was sealed since (its window has not grown and
//     the sticky choice has not moved on) and no node was marked suspect;
//     a suspicion that lapses or a window that shrinks only makes more
//     partitions available.
//   - none available (every window full, at full speed): no batch was
//     sealed or resolved since (no window shrank), the metadata has not
//     changed, and no suspicion has lapsed (stuckUntil).
//
// A full-speed producer spent about a sixth of its CPU on these lookups
// (every partition's load, map lookups and the client's lock per record).
type assignMemo struct {
	topic      string
	partitions int32
	id         []byte
	meta       uint64 // p.c.meta.Changes() when read
	suspects   uint64 // p.c.suspects.Marks() when sticky was chosen
	sticky     *sink  // nil: not chosen yet
	// stuck: sticky was kept because no partition was available; the
	// memo lapses at stuckUntil (0: no suspicion to lapse).
	stuck      bool
	stuckUntil time.Duration
}

// assign partitions a record and appends it to the sink's open batch; false
// when the topic's partition count is not known yet.
func (p *producer) assign(pr pendingRecord, now time.Duration) bool {
	m := &p.memo
	p.c.mu.Lock()
	if m.topic != pr.r.Topic || m.partitions == 0 || m.meta != p.c.meta.Changes() {
		*m = assignMemo{topic: pr.r.Topic, meta: p.c.meta.Changes()}
		if info := p.c.meta.Topic(pr.r.Topic); info != nil {
			m.partitions, m.id = int32(len(info.Partitions)), info.ID
		}
	}
	if m.sticky != nil && (m.stuck && m.stuckUntil != 0 && now >= m.stuckUntil ||
		!m.stuck && m.suspects != p.c.suspects.Marks()) {
		m.sticky = nil
	}
	p.c.mu.Unlock()
	partitions, id := m.partitions, m.id
	if partitions == 0 {
		return false
	}
	r := pr.r
	var s *sink
	switch {
	case p.c.cfg.manualPartitioner:
		if r.Partition < 0 || r.Partition >= partitions {
			p.complete(pr, &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
				Message: fmt.Sprintf("partition %d of %s, which has %d", r.Partition, r.Topic, partitions)})
			return true
		}
	case r.Key != nil:
		r.Partition = KeyPartition(r.Key, partitions)
	case m.sticky != nil:
		s = m.sticky
		r.Partition = s.tp.partition
	default:
		s = p.stickySink(r.Topic, partitions, now)
		r.Partition = s.tp.partition
	}
	if s == nil {
		s = p.sink(topicPartition{r.Topic, r.Partition})
	}
	if s.topicID == nil && s.w.Len() == 0 && id != nil && !p.retired(r.Topic, id) {
		// A new partition: its window numbers under the id the record
		// was partitioned under, so its first batch names an id even if
		// the topic is deleted before it is sealed.
		p.bind(s, id)
	}
	p.appendOpen(s, pr, now)
	return true
}

// stickySink is the sink of topic's sticky partition for a keyless record
// (PartitionAdaptive), remembered in p.memo when assignMemo's rules allow.
func (p *producer) stickySink(topic string, partitions int32, now time.Duration) *sink {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	cur, had := p.sticky.Current(topic)
	anyAvailable := false
	var lapse time.Duration // the first suspicion to lapse, 0: none
	q := p.sticky.PartitionAdaptive(topic, partitions, p.c.rng, func(q int32) clientcore.PartitionLoad {
		l := p.load(topicPartition{topic, q}, now)
		anyAvailable = anyAvailable || l.Available
		if id, _, ok := p.c.meta.Leader(topic, q); ok {
			if u := p.c.suspects.Until(id, now); u != 0 && (lapse == 0 || u < lapse) {
				lapse = u
			}
		}
		return l
	})
	s := p.sink(topicPartition{topic, q})
	m := &p.memo
	switch {
	case p.load(s.tp, now).Available:
		m.sticky, m.stuck, m.suspects = s, false, p.c.suspects.Marks()
	case !anyAvailable && had && q == cur:
		m.sticky, m.stuck, m.stuckUntil = s, true, lapse
	}
	return s
}

// load describes a partition to the adaptive partitioner: available when
// its leader is known and not suspect and its window has room to seal the
// open batch. The caller holds p.c.mu.
func (p *producer) load(tp topicPartition, now time.Duration) clientcore.PartitionLoad {
	var l clientcore.PartitionLoad
	if s := p.sinks[tp]; s != nil {
		l.Queued = s.w.Len()
	}
	id, _, ok := p.c.meta.Leader(tp.topic, tp.partition)
	l.Available = ok && p.c.suspects.Until(id, now) == 0 && l.Queued < p.c.cfg.inFlightBatchesMax
	return l
}

func (p *producer) sink(tp topicPartition) *sink {
	s := p.sinks[tp]
	if s == nil {
		s = &sink{tp: tp, sealed: make(map[clientcore.BatchID]*sealedBatch), w: p.newWindow(), txnProducer: -1}
		p.sinks[tp] = s
		i, _ := slices.BinarySearchFunc(p.sinkOrder, tp, func(s *sink, tp topicPartition) int { return compareTP(s.tp, tp) })
		order := make([]*sink, 0, len(p.sinkOrder)+1)
		order = append(append(append(order, p.sinkOrder[:i]...), s), p.sinkOrder[i:]...)
		p.sinkOrder = order
	}
	return s
}

// newWindow is a partition's empty window.
func (p *producer) newWindow() *clientcore.Window {
	cfg := p.c.cfg
	attempts := cfg.retriesMax + 1
	if cfg.acks == AcksNone {
		attempts = 1
	}
	errs := windowErrors()
	if p.c.txn != nil {
		errs = txnWindowErrors()
	}
	return clientcore.NewWindow(clientcore.WindowConfig{
		Idempotent:      cfg.idempotent,
		InFlightMax:     cfg.inFlightBatchesMax,
		AttemptsMax:     attempts,
		DeliveryTimeout: cfg.deliveryTimeout,
		Errors:          errs,
	})
}

// renewWindow gives an empty sink a new window, numbering from sequence
// 0, when the metadata names a newer id of its topic than the window's
// (the topic was deleted and re-created: its partitions have no state of
// this producer), or when a transactional producer's id or epoch changed
// since its last batch (every transaction ends with an epoch bump,
// KIP-890). A window that still holds batches keeps its id and numbering
// until they resolve (goneError fails those not in flight).
func (p *producer) renewWindow(s *sink) {
	if s.w.Len() > 0 {
		return
	}
	renew := false
	if id := p.bindID(s.tp.topic); id != nil && !bytes.Equal(id, s.topicID) {
		p.bind(s, id)
		renew = true
	}
	if t := p.c.txn; t != nil {
		id, epoch, _ := t.producer()
		if id != s.txnProducer || epoch != s.txnEpoch {
			s.txnProducer, s.txnEpoch, renew = id, epoch, true
		}
	}
	if renew {
		s.w = p.newWindow()
	}
}

// seenID is a topic id and the metadata version it was seen at.
type seenID struct {
	id      []byte
	version uint64
}

// bindID is the topic id a window of topic binds to now: the cache's,
// unless it is stale (a lagging node's answer: an id a window moved away
// from, or one seen at an older metadata version than the id a window last
// moved to) or the cache says the topic is deleted; then the id a window
// last moved to (nil when none: the cluster names no ids).
func (p *producer) bindID(topic string) []byte {
	newest := p.newestIDs[topic]
	if cur, deleted := p.topicNow(topic); !deleted && cur.id != nil && !p.retired(topic, cur.id) &&
		(newest.id == nil || cur.version == 0 || cur.version >= newest.version) {
		return cur.id
	}
	return newest.id
}

// bind moves sink s to topic id id, retiring the id it had.
func (p *producer) bind(s *sink, id []byte) {
	topic := s.tp.topic
	if s.topicID != nil && !p.retired(topic, s.topicID) {
		p.retiredIDs[topic] = append(p.retiredIDs[topic], s.topicID)
	}
	s.topicID = bytes.Clone(id)
	if newest := p.newestIDs[topic]; !bytes.Equal(newest.id, id) {
		cur, _ := p.topicNow(topic)
		v := newest.version
		if bytes.Equal(cur.id, id) {
			v = max(v, cur.version)
		}
		p.newestIDs[topic] = seenID{id: s.topicID, version: v}
	}
}

// topicNow is what the metadata cache says of topic: its id (nil when
// the cluster names none or the topic is not cached) with the version it
// was seen at, and whether an answer about it by name said no such topic
// exists.
func (p *producer) topicNow(topic string) (cur seenID, deleted bool) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	info := p.c.meta.Topic(topic)
	if info == nil {
		return seenID{}, false
	}
	return seenID{id: info.ID, version: info.Version}, info.Err == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
}

// retired reports whether a window of topic moved away from id.
func (p *producer) retired(topic string, id []byte) bool {
	return slices.ContainsFunc(p.retiredIDs[topic], func(r []byte) bool { return bytes.Equal(r, id) })
}

// goneError is the error that fails s's batches when the topic id its
// window numbers under is gone: the metadata, asked by name, says no topic
// of the name exists, or the name has a newer id (bindID: the cache's,
// or, when the cache names one a window moved away from, the id a window
// last moved to). nil otherwise, and for a window bound to no id. last is
// the attempt's error, if any.
func (p *producer) goneError(s *sink, last error) *TopicGoneError {
	if s.topicID == nil {
		return nil
	}
	var now []byte
	if _, deleted := p.topicNow(s.tp.topic); !deleted {
		now = p.bindID(s.tp.topic)
		if now == nil || bytes.Equal(now, s.topicID) {
			return nil
		}
	}
	return &TopicGoneError{Topic: s.tp.topic, Partition: s.tp.partition, OldID: s.topicID, NewID: bytes.Clone(now), Err: last}
}

// batchBufferFirst is the room an open batch's buffer starts with.
const batchBufferFirst = 1 << 10

// appendOpen adds a record to the open batch, sealing first when the
// record would push the batch over BatchBytes.
func (p *producer) appendOpen(s *sink, pr pendingRecord, now time.Duration) {
	estimate := pr.r.payloadBytes() + 16 + 8*len(pr.r.Headers)
	if len(s.open) > 0 && s.builder.Len()+estimate > p.c.cfg.batchBytes {
		p.seal(s, now)
	}
	if len(s.open) == 0 {
		// Room for a small batch; a batch that grows past it grows by
		// doubling. A full BatchBytes buffer per batch (16 KiB by default)
		// made most of a light producer's garbage: its batches hold a
		// record or two and live until acknowledged.
		// A partition whose last batch was larger starts at twice its
		// size (a batch a record longer than the last must not move to a
		// new buffer at its end): a full producer's batches then take one
		// allocation, not a doubling series of zeroed ones.
		first := max(batchBufferFirst, 2*s.lastBatchBytes)
		s.builder.Reset(p.pool.get(max(min(p.c.cfg.batchBytes, first), estimate) + recordbatch.HeaderBytes))
	}
	// Doubling, up to the batch's size: append's own growth of a large
	// buffer copied a full batch about five times over.
	s.builder.Grow(estimate+recordbatch.HeaderBytes, p.c.cfg.batchBytes+recordbatch.HeaderBytes)
	err := s.builder.Append(pr.r.batchRecord())
	if err != nil && len(s.open) > 0 {
		p.seal(s, now)
		err = s.builder.Append(pr.r.batchRecord())
	}
	if err != nil {
		p.complete(pr, &Error{Code: strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE, Message: err.Error()})
		return
	}
	if len(s.open) == 0 {
		s.openSince = now
	}
	s.open = append(s.open, pr)
}

// seal closes the open batch and pushes it into the window.
func (p *producer) seal(s *sink, now time.Duration) {
	if len(s.open) == 0 {
		return
	}
	bytes, err := s.builder.Finish()
	if err != nil {
		panic(fmt.Sprintf("clientlib: sealing a batch of %d records: %v", len(s.open), err))
	}
	p.renewWindow(s)
	// The batch's delivery timeout counts from its first record, not from
	// now: records wait unsealed while the window is full, and Kafka's
	// delivery.timeout.ms bounds a record from its send.
	id := s.w.Push(int32(len(s.open)), s.openSince)
	s.sealed[id] = &sealedBatch{records: s.open, bytes: bytes, topicID: s.topicID}
	s.lastBatchBytes = len(bytes)
	s.open = nil
	s.builder = recordbatch.Builder{}
	p.memo.sticky = nil // its window grew; the sticky choice moves on
	p.c.mu.Lock()
	p.sticky.BatchSealed(s.tp.topic, s.tp.partition)
	p.c.mu.Unlock()
}

// sortedSinks lists sinks in topic-partition order, so requests are built
// the same way every time. The caller must not modify the slice. It is
// kept as sinks are made (sinks are never removed): sorting every sink at
// every step of the producer loop was a sixth of the loop's CPU in the
// simulator.
func (p *producer) sortedSinks() []*sink { return p.sinkOrder }

// compareTP orders topic-partitions by topic, then partition.
func compareTP(a, b topicPartition) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}
