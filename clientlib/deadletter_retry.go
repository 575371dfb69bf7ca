package clientlib

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// HeaderRetryDue is when a record in a retry topic may be tried again,
// Unix ms (decimal text). A retry record otherwise looks like a dead
// letter: the source record with the HeaderDLQ* headers, its attempts so
// far and last error.
const HeaderRetryDue = "strand.retry.due"

// subscribeRetries, with Handling.RetryTopic set, creates each source
// topic's retry topic (like the source) and subscribes to it.
func (hs *handling) subscribeRetries(ctx context.Context) error {
	if hs.how.RetryTopic == nil {
		return nil
	}
	hs.retrySource = map[string]string{}
	subscribed := slices.Clone(hs.g.topics)
	isRetry := map[string]bool{}
	for _, t := range subscribed {
		isRetry[hs.how.RetryTopic(t)] = true
	}
	for _, src := range subscribed {
		if isRetry[src] {
			continue // subscribed by an earlier Handle as a retry topic
		}
		rt := hs.how.RetryTopic(src)
		if rt == "" || rt == src || rt == hs.how.DeadLetterTopicFor(src) {
			return &OptionError{Option: "Handling.RetryTopic", Value: rt,
				Reason: "a retry topic other than the source " + src + " and its dead-letter topic"}
		}
		if err := hs.ensureTopic(ctx, rt, src); err != nil {
			return fmt.Errorf("clientlib: retry topic %s: %w", rt, err)
		}
		hs.retrySource[rt] = src
		if !slices.Contains(hs.g.topics, rt) {
			hs.g.topics = append(hs.g.topics, rt)
		}
	}
	return nil
}

// firstAttempt, with a retry topic, tries r once in its source partition
// and sends it to the retry topic when that fails, so the partition moves
// on at once. It reports whether r was settled (false: stopping, or the
// partition moved).
func (hs *handling) firstAttempt(ctx context.Context, r *Record, h RecordHandler) (bool, error) {
	tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
	once := RetryPolicy{MaxAttempts: 1, AttemptTimeout: hs.how.Retry.AttemptTimeout}
	_, err := once.retry(ctx, hs.rng, hs.wait, func(ctx context.Context) error { return h(ctx, r) })
	switch {
	case hs.stopped[tp] || (err != nil && ctx.Err() != nil):
		return false, nil
	case err == nil:
		return true, nil
	case hs.how.Retry.MaxAttempts == 1:
		return true, hs.deadLetter(ctx, r, 1, err, tp)
	}
	return true, hs.toRetry(ctx, r, 1, err)
}

// retried handles r, a record of a retry topic: not due yet, it pauses
// the retry partition at r until it is; due, it tries the source record
// once more, then sends it back to the retry topic or, its attempts spent,
// to the dead-letter topic. It reports whether r was settled.
func (hs *handling) retried(ctx context.Context, r *Record, h RecordHandler) (bool, error) {
	tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
	info, err := ParseDeadLetter(r)
	due, derr := retryDue(r)
	if err != nil || derr != nil {
		return true, nil // not a retry record (written by someone else): skipped, as a consumer of the topic would
	}
	if wait := time.Until(due); wait > 0 {
		hs.g.k.Seek(tp.Topic, tp.Partition, OffsetExact(r.Offset))
		hs.g.k.Pause(tp.Topic, tp.Partition)
		hs.paused[tp] = due
		return false, nil
	}
	src := &Record{Topic: info.Source.Topic, Partition: info.Source.Partition, Offset: info.Offset, Key: r.Key, Value: r.Value,
		Headers: info.Headers, Timestamp: info.Timestamp}
	once := RetryPolicy{MaxAttempts: 1, AttemptTimeout: hs.how.Retry.AttemptTimeout}
	actx := context.WithValue(ctx, attemptBaseKey{}, info.Attempts)
	_, err = once.retry(actx, hs.rng, hs.wait, func(ctx context.Context) error { return h(ctx, src) })
	switch {
	case hs.stopped[tp] || (err != nil && ctx.Err() != nil):
		return false, nil
	case err == nil:
		return true, nil
	case info.Attempts+1 >= hs.how.Retry.MaxAttempts:
		return true, hs.deadLetter(ctx, src, info.Attempts+1, err, tp)
	}
	return true, hs.toRetry(ctx, src, info.Attempts+1, err)
}

// toRetry writes src, which failed attempts times, to its retry topic,
// due after the policy's backoff, and waits for the acknowledgement.
func (hs *handling) toRetry(ctx context.Context, src *Record, attempts int, cause error) error {
	topic := hs.how.RetryTopic(src.Topic)
	wctx := context.WithoutCancel(ctx)
	rec := DeadLetter{Source: src, Group: hs.g.group, Attempts: attempts, Err: cause.Error()}.Record(topic)
	due := time.Now().Add(hs.how.Retry.Backoff.Delay(attempts, hs.rng))
	rec.Headers = append(rec.Headers, Header{Key: HeaderRetryDue, Value: []byte(strconv.FormatInt(due.UnixMilli(), 10))})
	if err := hs.g.c.ProduceSync(wctx, rec).FirstErr(); err != nil {
		return &DeadLetterError{Source: TopicPartition{Topic: src.Topic, Partition: src.Partition}, Offset: src.Offset, Topic: topic, Err: err}
	}
	return nil
}

// retryDue reads HeaderRetryDue.
func retryDue(r *Record) (time.Time, error) {
	for _, h := range r.Headers {
		if h.Key == HeaderRetryDue {
			ms, err := strconv.ParseInt(string(h.Value), 10, 64)
			return time.UnixMilli(ms), err
		}
	}
	return time.Time{}, fmt.Errorf("%w: no %s header", ErrNotDeadLetter, HeaderRetryDue)
}

// resumeDue resumes the paused retry partitions whose first record is
// due.
func (hs *handling) resumeDue() {
	now := time.Now()
	for tp, due := range hs.paused {
		if !now.Before(due) {
			hs.g.k.Resume(tp.Topic, tp.Partition)
			delete(hs.paused, tp)
		}
	}
}
