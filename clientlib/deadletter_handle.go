package clientlib

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// RecordHandler processes one record. A returned error (or a panic) is a
// failed attempt: the record is tried again under the RetryPolicy, then
// dead-lettered. ctx ends at the attempt's timeout or when Handle stops.
type RecordHandler func(ctx context.Context, r *Record) error

// BatchHandler processes the records one Poll returned for one partition,
// in offset order. A failed batch is retried whole under the RetryPolicy
// (tried once with a retry topic); when its attempts run out, each record
// is handled alone (a batch of one) under the policy again, so only the
// records that fail alone are dead-lettered.
type BatchHandler func(ctx context.Context, rs []*Record) error

// Handling says how Handle retries and where it dead-letters.
type Handling struct {
	Retry RetryPolicy // the zero value means DefaultRetryPolicy
	// DeadLetterTopic names a source topic's dead-letter topic; nil:
	// source + DeadLetterSuffix. It must differ from the source. A missing
	// dead-letter topic is created on first use with the source topic's
	// partition count and replication factor.
	DeadLetterTopic func(source string) string
	// OnDeadLetter, when set, runs after a dead letter is acknowledged and
	// before the source offset past it is committed (logs, counters).
	OnDeadLetter func(d DeadLetter, written *Record)
	// Done, when set, is asked before each Poll: true ends Handle with
	// nil (everything handed out so far is settled and committed then).
	Done func() bool
	// RetryTopic, when set, makes retries out of order (Uber's and
	// Confluent's retry-topic pattern): a record that fails its first
	// attempt goes to RetryTopic(source) (created like the source, and
	// subscribed to) with a due time one backoff later, and its partition
	// moves on at once; the retry topic's records are tried when due, and
	// go back to it, or to the dead-letter topic once Retry.MaxAttempts
	// attempts failed. The handler sees the source record (its topic,
	// partition and offset). Off by default: order is kept, and a
	// partition waits at most Retry.MaxDelay for one record.
	RetryTopic func(source string) string
}

// DeadLetterError is a dead letter that could not be written: nothing
// past the record was committed and the partition was sought back to it,
// so it is read again (by this member or the partition's next owner).
type DeadLetterError struct {
	Source TopicPartition
	Offset int64
	Topic  string // the dead-letter topic
	Err    error
}

// Error implements error.
func (e *DeadLetterError) Error() string {
	return fmt.Sprintf("clientlib: dead-lettering %s/%d at offset %d to %s: %v (the record was not committed: it is read again)",
		e.Source.Topic, e.Source.Partition, e.Offset, e.Topic, e.Err)
}

// Unwrap gives the produce or create error.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// DeadLetterTopicFor is the dead-letter topic of source under h.
func (h Handling) DeadLetterTopicFor(source string) string {
	if h.DeadLetterTopic != nil {
		return h.DeadLetterTopic(source)
	}
	return source + DeadLetterSuffix
}

// handling is one Handle call's state, owned by the Poll goroutine.
type handling struct {
	g       *GroupConsumer
	how     Handling
	rng     *rand.Rand
	done    map[TopicPartition]int64 // offset after the last handled record
	stopped map[TopicPartition]bool  // revoked or lost since the last Poll
	created map[string]bool          // dead-letter topics known to exist
	// deadBase is a partition's dead-letter count in its committed
	// metadata when this member first committed it (absent: not read
	// yet); deadNew counts this member's dead letters since.
	deadBase, deadNew map[TopicPartition]int64
	retrySource       map[string]string            // retry topic → its source topic
	paused            map[TopicPartition]time.Time // retry partitions waiting for their first record to be due
}

// Handle consumes with h until ctx ends (then it returns nil) or a fatal
// error: records of each partition are handled in order, a failing one is
// retried under how.Retry and then written to its dead-letter topic, and
// the source offset past a record is committed only after it was handled
// or its dead letter acknowledged (at least once: a member that dies in
// between leaves the record to the next owner, which may dead-letter it a
// second time). Handle turns auto-commit off for good (Close then commits
// nothing Handle did not settle) and commits itself; it calls
// Poll, so the GroupConsumer's one-goroutine rule holds for it. A dead
// letter that cannot be written stops Handle with a *DeadLetterError.
//
// Between attempts it heart-beats, so a record may take longer than the
// session timeout overall, but no single attempt should. Records are
// handled one at a time on the calling goroutine: while one is retried,
// the member's other partitions wait too (Handling.RetryTopic, or more
// members, avoid that).
func (g *GroupConsumer) Handle(ctx context.Context, h RecordHandler, how Handling) error {
	hs, err := g.newHandling(how)
	if err != nil {
		return err
	}
	if err := hs.subscribeRetries(ctx); err != nil {
		return err
	}
	defer hs.hook()()
	return hs.loop(ctx, func(ctx context.Context, fp FetchPartition) error { return hs.records(ctx, fp.Records, h) })
}

// HandleBatches is Handle with a handler per partition batch; see
// BatchHandler for how a failed batch is narrowed to its bad records.
func (g *GroupConsumer) HandleBatches(ctx context.Context, h BatchHandler, how Handling) error {
	hs, err := g.newHandling(how)
	if err != nil {
		return err
	}
	if err := hs.subscribeRetries(ctx); err != nil {
		return err
	}
	defer hs.hook()()
	one := func(ctx context.Context, r *Record) error { return h(ctx, []*Record{r}) }
	return hs.loop(ctx, func(ctx context.Context, fp FetchPartition) error {
		if _, retry := hs.retrySource[fp.Topic]; len(fp.Records) == 0 || retry {
			return hs.records(ctx, fp.Records, one) // retry records are tried one by one, when due
		}
		tp := TopicPartition{Topic: fp.Topic, Partition: fp.Partition}
		pol := hs.how.Retry
		if hs.how.RetryTopic != nil {
			pol.MaxAttempts = 1 // then record by record, through the retry topic: the partition does not wait
		}
		_, err := pol.retry(ctx, hs.rng, hs.wait, func(ctx context.Context) error { return h(ctx, fp.Records) })
		switch {
		case hs.stopped[tp] || ctx.Err() != nil:
			return nil
		case err == nil:
			hs.done[tp] = fp.Records[len(fp.Records)-1].Offset + 1
			hs.commit(ctx, tp)
			return nil
		}
		return hs.records(ctx, fp.Records, one)
	})
}

// newHandling checks how against the subscribed topics.
func (g *GroupConsumer) newHandling(how Handling) (*handling, error) {
	if how.Retry == (RetryPolicy{}) {
		how.Retry = DefaultRetryPolicy
	}
	if err := how.Retry.validate(); err != nil {
		return nil, err
	}
	for _, t := range g.topics {
		if dlq := how.DeadLetterTopicFor(t); dlq == "" || dlq == t {
			return nil, &OptionError{Option: "Handling.DeadLetterTopic", Value: dlq,
				Reason: "a dead-letter topic other than the source topic " + t}
		}
	}
	// Its retry jitter is drawn from a source seeded from the Client's
	// (RandSeed replays it); before, from the wall clock, whatever RandSeed
	// said.
	var seed [2]uint64
	g.c.mu.Lock()
	seed[0], seed[1] = g.c.rng.Uint64(), g.c.rng.Uint64()
	g.c.mu.Unlock()
	return &handling{g: g, how: how, rng: rand.New(rand.NewPCG(seed[0], seed[1])),
		done: map[TopicPartition]int64{}, stopped: map[TopicPartition]bool{}, created: map[string]bool{},
		deadBase: map[TopicPartition]int64{}, deadNew: map[TopicPartition]int64{}, paused: map[TopicPartition]time.Time{}}, nil
}

// hook turns auto-commit off (for good) and wraps OnRevoked and OnLost so
// a partition that moves while its records are handled stops being
// handled (committing what was done when it is revoked); it returns the
// undo.
func (hs *handling) hook() func() {
	g := hs.g
	saved := g.cfg
	g.cfg.autoCommit = 0
	g.commitMeta = func(tp TopicPartition) string { return DeadLetterMetadata(hs.deadBase[tp] + hs.deadNew[tp]) }
	g.cfg.onRevoked = func(ctx context.Context, ps []TopicPartition) {
		for _, tp := range ps {
			hs.commit(ctx, tp)
		}
		hs.forget(ps)
		if saved.onRevoked != nil {
			saved.onRevoked(ctx, ps)
		}
	}
	g.cfg.onLost = func(ps []TopicPartition) {
		hs.forget(ps)
		if saved.onLost != nil {
			saved.onLost(ps)
		}
	}
	return func() {
		// Auto-commit stays off: Poll's position may be past records
		// Handle left unsettled when it stopped, and Close must not
		// commit it.
		g.cfg.onRevoked, g.cfg.onLost = saved.onRevoked, saved.onLost
	}
}

// forget stops handling ps: another member may own them now.
func (hs *handling) forget(ps []TopicPartition) {
	for _, tp := range ps {
		hs.stopped[tp] = true
		delete(hs.done, tp)
		delete(hs.paused, tp)
		delete(hs.deadBase, tp)
		delete(hs.deadNew, tp)
	}
}

// loop polls and hands each partition's records to part until ctx ends
// or a fatal error.
func (hs *handling) loop(ctx context.Context, part func(context.Context, FetchPartition) error) error {
	for ctx.Err() == nil {
		if hs.how.Done != nil && hs.how.Done() {
			return nil
		}
		hs.resumeDue()
		fs := hs.g.Poll(ctx)
		clear(hs.stopped) // Poll's reconcile ran: what it revoked is no longer in its answer
		for _, fp := range fs {
			if fp.Err != nil {
				if fatalFetchErr(ctx, fp.Err) {
					return fp.Err
				}
				continue
			}
			if err := part(ctx, fp); err != nil {
				return err
			}
		}
	}
	return nil
}

// fatalFetchErr reports whether a Poll error ends Handle: not one the next
// Poll retries or rejoins after.
func fatalFetchErr(ctx context.Context, err error) bool {
	if ctx.Err() != nil || IsRetriable(err) {
		return false
	}
	return !errors.Is(err, ErrFencedMemberEpoch) && !errors.Is(err, ErrUnknownMemberID)
}

// records handles rs (one partition's, in order) with h, dead-lettering
// what fails, and commits the offset after the last one settled.
func (hs *handling) records(ctx context.Context, rs []*Record, h RecordHandler) error {
	if len(rs) == 0 {
		return nil
	}
	tp := TopicPartition{Topic: rs[0].Topic, Partition: rs[0].Partition}
	defer hs.commit(ctx, tp)
	for _, r := range rs {
		_ = hs.g.maintain(ctx) // heart-beat when due: a slow batch must not lose the session
		if hs.stopped[tp] || ctx.Err() != nil {
			return nil
		}
		if settled, err := hs.outOfOrder(ctx, r, h); settled || err != nil {
			if err != nil {
				hs.g.k.Seek(tp.Topic, tp.Partition, OffsetExact(r.Offset))
				return err
			}
			hs.done[tp] = r.Offset + 1
			continue
		}
		if hs.how.RetryTopic != nil {
			return nil // stopping, moved away, or a retry partition paused until its first record is due
		}
		attempts, err := hs.how.Retry.retry(ctx, hs.rng, hs.wait, func(ctx context.Context) error { return h(ctx, r) })
		if hs.stopped[tp] || (err != nil && ctx.Err() != nil) {
			return nil // moved away or stopping mid-retry: left uncommitted for whoever reads it next
		}
		if err != nil {
			if derr := hs.deadLetter(ctx, r, attempts, err, tp); derr != nil {
				hs.g.k.Seek(tp.Topic, tp.Partition, OffsetExact(r.Offset))
				return derr
			}
		}
		hs.done[tp] = r.Offset + 1
	}
	return nil
}

// outOfOrder handles r when a retry topic is set (see firstAttempt and
// retried); without one it settles nothing.
func (hs *handling) outOfOrder(ctx context.Context, r *Record, h RecordHandler) (bool, error) {
	switch {
	case hs.how.RetryTopic == nil:
		return false, nil
	case hs.retrySource[r.Topic] != "":
		return hs.retried(ctx, r, h)
	}
	return hs.firstAttempt(ctx, r, h)
}

// deadLetter writes r's dead letter and waits for its acknowledgement,
// counting it on partition counted (the one whose commit follows: r's
// own, or the retry partition r came from). With transactions (issue 23)
// this and the commit after it become one transaction; until then a
// crash between them dead-letters r again.
func (hs *handling) deadLetter(ctx context.Context, r *Record, attempts int, cause error, counted TopicPartition) error {
	topic := hs.how.DeadLetterTopicFor(r.Topic)
	fail := func(err error) error {
		return &DeadLetterError{Source: TopicPartition{Topic: r.Topic, Partition: r.Partition}, Offset: r.Offset, Topic: topic, Err: err}
	}
	wctx := context.WithoutCancel(ctx) // a dead letter under way is finished even when stopping
	if err := hs.ensureTopic(wctx, topic, r.Topic); err != nil {
		return fail(err)
	}
	d := DeadLetter{Source: r, Group: hs.g.group, Attempts: attempts, Err: cause.Error()}
	out := d.Record(topic)
	if err := hs.g.c.ProduceSync(wctx, out).FirstErr(); err != nil {
		return fail(err)
	}
	hs.deadNew[counted]++
	if hs.how.OnDeadLetter != nil {
		hs.how.OnDeadLetter(d, out)
	}
	return nil
}

// ensureTopic creates the dead-letter topic topic, like source, unless it
// exists.
func (hs *handling) ensureTopic(ctx context.Context, topic, source string) error {
	if hs.created[topic] {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, hs.g.c.cfg.requestTimeout)
	defer cancel()
	ds, err := hs.g.c.DescribeTopics(ctx, topic, source)
	if err != nil {
		return err
	}
	if len(ds) != 2 {
		return fmt.Errorf("describing %s and %s: %d answers", topic, source, len(ds))
	}
	if ds[0].Err == nil {
		hs.created[topic] = true
		return nil
	}
	if !errors.Is(ds[0].Err, ErrUnknownTopic) {
		return ds[0].Err
	}
	if ds[1].Err != nil {
		return fmt.Errorf("source topic %s: %w", source, ds[1].Err)
	}
	err = hs.g.c.CreateTopic(ctx, topic, ds[1].Partitions, ds[1].ReplicationFactor, nil)
	if err != nil && !errors.Is(err, ErrTopicExists) {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	hs.created[topic] = true
	return nil
}

// commit commits the offset after the last record settled in tp, if it
// moved; a refusal means tp moved away, and its next owner reads the rest
// again (at least once).
func (hs *handling) commit(ctx context.Context, tp TopicPartition) {
	next, ok := hs.done[tp]
	if !ok || hs.stopped[tp] {
		return
	}
	if last, done := hs.g.committed[tp]; done && last == next {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hs.g.c.cfg.requestTimeout)
	defer cancel()
	if _, ok := hs.deadBase[tp]; !ok {
		committed, err := hs.g.c.FetchOffsets(ctx, hs.g.group, tp)
		if err != nil {
			return // the next batch commits; committing now would reset the count
		}
		hs.deadBase[tp] = 0
		for _, o := range committed {
			hs.deadBase[tp], _ = DeadLetterCount(o.Metadata)
		}
	}
	_ = hs.g.CommitOffsets(ctx, map[TopicPartition]int64{tp: next})
}

// deadLetterMetaPrefix starts the committed-offset metadata Handle writes:
// "strand.dlq=N", the source records of the partition the group
// dead-lettered so far. Kafka clients keep and show metadata as it is;
// node/server reads the same prefix for /metrics.
const deadLetterMetaPrefix = "strand.dlq="

// DeadLetterMetadata is the committed-offset metadata for a partition
// whose records the group dead-lettered n of.
func DeadLetterMetadata(n int64) string { return deadLetterMetaPrefix + strconv.FormatInt(n, 10) }

// DeadLetterCount reads DeadLetterMetadata back (false: metadata of
// another kind, or none).
func DeadLetterCount(metadata string) (int64, bool) {
	v, ok := strings.CutPrefix(metadata, deadLetterMetaPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 0
}

// wait sleeps d between attempts, heart-beating when due; it returns
// ctx's error early when ctx ends.
func (hs *handling) wait(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(left, 100*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		_ = hs.g.maintain(ctx)
	}
}
