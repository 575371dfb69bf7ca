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

// Dead-letter headers. A dead letter is a plain record: the source
// record's key, value, timestamp and headers, plus these headers (numbers
// in decimal ASCII), so Kafka clients read and write dead-letter topics as
// any other topic.
const (
	HeaderDLQTopic     = "strand.dlq.topic"     // the source topic
	HeaderDLQPartition = "strand.dlq.partition" // the source partition
	HeaderDLQOffset    = "strand.dlq.offset"    // the source offset
	HeaderDLQTimestamp = "strand.dlq.timestamp" // the source record's timestamp, Unix ms
	HeaderDLQKey       = "strand.dlq.key"       // the source key (absent when null)
	HeaderDLQGroup     = "strand.dlq.group"     // the consumer group that gave up
	HeaderDLQAttempts  = "strand.dlq.attempts"  // how many times the handler was tried
	HeaderDLQError     = "strand.dlq.error"     // the last attempt's error text
	// headerDLQPrefix starts every header above; redrive strips them.
	headerDLQPrefix = "strand.dlq."
)

// DeadLetterSuffix names a source topic's default dead-letter topic:
// "orders" dead-letters to "orders.dlq".
const DeadLetterSuffix = ".dlq"

// errorTextMax bounds the error text carried in HeaderDLQError.
const errorTextMax = 4096

// RetryPolicy bounds how long one record may hold its partition: the
// handler is tried MaxAttempts times, waiting Backoff.Delay(n) before
// retry n, each attempt under a context that ends after AttemptTimeout.
// Records of a partition are handled in order, so the partition waits at
// most MaxDelay for one bad record.
type RetryPolicy struct {
	MaxAttempts    int           // attempts per record, at least 1 (1: no retry)
	Backoff        Backoff       // the wait before each retry, with jitter
	AttemptTimeout time.Duration // the deadline of each attempt's context; 0: none
}

// DefaultRetryPolicy tries a record 3 times, 200 ms then 400 ms apart
// (with jitter), each attempt for at most 30 s.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 3, Backoff: Backoff{Base: 200 * time.Millisecond, Max: 5 * time.Second},
	AttemptTimeout: 30 * time.Second}

// validate refuses a policy that could not bound a record's time.
func (p RetryPolicy) validate() error {
	switch {
	case p.MaxAttempts < 1:
		return &OptionError{Option: "RetryPolicy.MaxAttempts", Value: p.MaxAttempts, Reason: "at least 1 attempt (1: no retry)"}
	case p.Backoff.Base < 0 || p.Backoff.Max < 0:
		return &OptionError{Option: "RetryPolicy.Backoff", Value: p.Backoff, Reason: "non-negative durations"}
	case p.AttemptTimeout < 0:
		return &OptionError{Option: "RetryPolicy.AttemptTimeout", Value: p.AttemptTimeout, Reason: "0 (none) or a positive duration"}
	}
	return nil
}

// MaxDelay is the longest one record can hold its partition: every
// attempt at its timeout plus every backoff at its longest. With no
// AttemptTimeout it counts only the backoffs (the handler's own time is
// then unbounded).
func (p RetryPolicy) MaxDelay() time.Duration {
	total := time.Duration(max(p.MaxAttempts, 1)) * p.AttemptTimeout
	for n := 1; n < p.MaxAttempts; n++ {
		total += p.Backoff.step(n)
	}
	return total
}

// HandlerPanicError is a handler's panic, turned into a failed attempt so
// a record that crashes its parser is retried and dead-lettered, not the
// process taken down.
type HandlerPanicError struct{ Value any }

// Error implements error.
func (e *HandlerPanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// retry runs attempt under p until it succeeds or p's attempts run out,
// waiting with wait between attempts (wait returns early with ctx's error
// when ctx ends). It returns how many attempts ran and the last error.
// Pure but for what attempt and wait do: tests pass a recording wait.
func (p RetryPolicy) retry(ctx context.Context, rng *rand.Rand, wait func(context.Context, time.Duration) error,
	attempt func(context.Context) error) (int, error) {
	var err error
	for n := 1; n <= p.MaxAttempts; n++ {
		if n > 1 {
			if werr := wait(ctx, p.Backoff.Delay(n-1, rng)); werr != nil {
				return n - 1, err
			}
		}
		if err = p.once(context.WithValue(ctx, attemptKey{}, attemptBase(ctx)+n), attempt); err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			return n, err
		}
	}
	return p.MaxAttempts, err
}

// attemptKey carries the attempt number in a handler's context;
// attemptBaseKey the attempts made before this retry call (a record back
// from a retry topic).
type (
	attemptKey     struct{}
	attemptBaseKey struct{}
)

// HandlerAttempt is the number of the attempt a handler's ctx belongs to: 1 for
// the first, counting the attempts a retry topic carried; 0 outside
// Handle.
func HandlerAttempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// attemptBase is the attempts made before the current retry call.
func attemptBase(ctx context.Context) int {
	n, _ := ctx.Value(attemptBaseKey{}).(int)
	return n
}

// once runs one attempt under AttemptTimeout, turning a panic into an
// error.
func (p RetryPolicy) once(ctx context.Context, attempt func(context.Context) error) (err error) {
	if p.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.AttemptTimeout)
		defer cancel()
	}
	defer func() {
		if v := recover(); v != nil {
			err = &HandlerPanicError{Value: v}
		}
	}()
	return attempt(ctx)
}

// DeadLetter is a record the handler gave up on, with why.
type DeadLetter struct {
	Source   *Record // the consumed record (its Topic, Partition and Offset are the coordinates)
	Group    string  // the consumer group that gave up ("" outside a group)
	Attempts int     // how many attempts failed
	Err      string  // the last attempt's error text
}

// Record is the dead letter to write to topic: the source record's key,
// value, timestamp and headers plus the HeaderDLQ* headers, in the source
// partition (the dead-letter topic is created with as many).
func (d DeadLetter) Record(topic string) *Record {
	src := d.Source
	hs := make([]Header, 0, len(src.Headers)+8)
	for _, h := range src.Headers {
		if !strings.HasPrefix(h.Key, headerDLQPrefix) { // a redriven record failing again carries fresh ones
			hs = append(hs, h)
		}
	}
	text := d.Err
	if len(text) > errorTextMax {
		text = text[:errorTextMax]
	}
	hs = append(hs,
		Header{Key: HeaderDLQTopic, Value: []byte(src.Topic)},
		Header{Key: HeaderDLQPartition, Value: []byte(strconv.FormatInt(int64(src.Partition), 10))},
		Header{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(src.Offset, 10))},
		Header{Key: HeaderDLQTimestamp, Value: []byte(strconv.FormatInt(src.Timestamp.UnixMilli(), 10))})
	if src.Key != nil {
		hs = append(hs, Header{Key: HeaderDLQKey, Value: src.Key})
	}
	hs = append(hs,
		Header{Key: HeaderDLQGroup, Value: []byte(d.Group)},
		Header{Key: HeaderDLQAttempts, Value: []byte(strconv.Itoa(d.Attempts))},
		Header{Key: HeaderDLQError, Value: []byte(text)})
	return &Record{Topic: topic, Partition: src.Partition, Key: src.Key, Value: src.Value, Headers: hs, Timestamp: src.Timestamp}
}

// DeadLetterInfo is what a dead letter's headers say, read back by
// ParseDeadLetter.
type DeadLetterInfo struct {
	Source    TopicPartition
	Offset    int64
	Timestamp time.Time
	Group     string
	Attempts  int
	Err       string
	Key       []byte   // the source key (nil when null)
	Headers   []Header // the source record's own headers
}

// ErrNotDeadLetter matches a record ParseDeadLetter cannot read: it lacks
// a HeaderDLQ* header or one does not parse.
var ErrNotDeadLetter = errors.New("clientlib: not a dead letter")

// ParseDeadLetter reads a dead letter's coordinates and error from its
// headers; a record without them fails with an error matching
// ErrNotDeadLetter that names the header.
func ParseDeadLetter(r *Record) (DeadLetterInfo, error) {
	info := DeadLetterInfo{Key: r.Key}
	seen := map[string][]byte{}
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, headerDLQPrefix) {
			seen[h.Key] = h.Value
		} else {
			info.Headers = append(info.Headers, h)
		}
	}
	num := func(key string) (int64, error) {
		v, ok := seen[key]
		if !ok {
			return 0, fmt.Errorf("%w: no %s header", ErrNotDeadLetter, key)
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: header %s=%q is not a number", ErrNotDeadLetter, key, v)
		}
		return n, nil
	}
	topic, ok := seen[HeaderDLQTopic]
	if !ok || len(topic) == 0 {
		return info, fmt.Errorf("%w: no %s header", ErrNotDeadLetter, HeaderDLQTopic)
	}
	var nums [4]int64
	for i, key := range []string{HeaderDLQPartition, HeaderDLQOffset, HeaderDLQTimestamp, HeaderDLQAttempts} {
		n, err := num(key)
		if err != nil {
			return info, err
		}
		nums[i] = n
	}
	info.Source = TopicPartition{Topic: string(topic), Partition: int32(nums[0])}
	info.Offset, info.Timestamp, info.Attempts = nums[1], time.UnixMilli(nums[2]), int(nums[3])
	info.Group, info.Err = string(seen[HeaderDLQGroup]), string(seen[HeaderDLQError])
	return info, nil
}

// Redrive is the record to write back for a dead letter read from the
// dead-letter topic: the source key, value, timestamp and own headers, to
// topic (the source topic when ""), in the source partition.
func (i DeadLetterInfo) Redrive(dead *Record, topic string) *Record {
	if topic == "" {
		topic = i.Source.Topic
	}
	return &Record{Topic: topic, Partition: i.Source.Partition, Key: dead.Key, Value: dead.Value,
		Headers: append([]Header(nil), i.Headers...), Timestamp: i.Timestamp}
}
