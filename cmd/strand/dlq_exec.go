package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// execFlags are `consume --exec`'s flags: the command and its retry and
// dead-letter policy.
type execFlags struct {
	cmd            string
	maxAttempts    int
	backoff        time.Duration
	attemptTimeout time.Duration
	dlqTopic       string
	retryTopic     string
}

// execFlagNames are the flags that mean something only with --exec.
var execFlagNames = []string{"max-attempts", "retry-backoff", "exec-timeout", "dlq-topic", "retry-topic"}

// register adds the --exec flags to fs.
func (ef *execFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&ef.cmd, "exec", "", "with --group: run this shell command (sh -c) once per record, the value on stdin and "+
		"STRAND_TOPIC, STRAND_PARTITION, STRAND_OFFSET, STRAND_KEY, STRAND_TIMESTAMP (Unix ms), STRAND_GROUP and STRAND_ATTEMPT "+
		"in its environment; a non-zero exit is a failed attempt, and a record that fails every attempt goes to the dead-letter topic")
	fs.IntVar(&ef.maxAttempts, "max-attempts", 3, "with --exec: attempts per record before it is dead-lettered (1: no retry)")
	fs.DurationVar(&ef.backoff, "retry-backoff", 200*time.Millisecond, "with --exec: the wait before the first retry, doubling (with jitter) up to 25 times it")
	fs.DurationVar(&ef.attemptTimeout, "exec-timeout", 30*time.Second, "with --exec: kill an attempt after this long and count it failed (0: no limit)")
	fs.StringVar(&ef.dlqTopic, "dlq-topic", "", "with --exec: where records that fail every attempt go (default TOPIC.dlq, created on first use like TOPIC)")
	fs.StringVar(&ef.retryTopic, "retry-topic", "", "with --exec: retry out of order through this topic (created like TOPIC), so a failing record does not hold its partition; default: retry in place, in order")
}

// validate checks the --exec flags against the rest of the command line.
func (ef *execFlags) validate(fs *pflag.FlagSet, topic, group string) error {
	if ef.cmd == "" {
		for _, name := range execFlagNames {
			if fs.Changed(name) {
				return usageError("--%s needs --exec", name)
			}
		}
		return nil
	}
	switch {
	case group == "":
		return usageError("--exec needs --group GROUP: the group commits what was handled, so a restart resumes after it")
	case fs.Changed("format") || fs.Changed("json") || fs.Changed("key-delimiter") || fs.Changed("delimiter"):
		return usageError("--exec runs a command per record instead of printing it: drop --format, --json and the delimiters")
	case ef.maxAttempts < 1:
		return usageError("--max-attempts %d: want at least 1 (1: no retry)", ef.maxAttempts)
	case ef.backoff < 0 || ef.attemptTimeout < 0:
		return usageError("--retry-backoff and --exec-timeout: want 0 or a positive duration")
	case ef.deadLetterTopic(topic) == topic:
		return usageError("--dlq-topic %s is the topic being consumed: dead letters would be read again; name another topic", topic)
	case ef.retryTopic != "" && (ef.retryTopic == topic || ef.retryTopic == ef.deadLetterTopic(topic)):
		return usageError("--retry-topic %s: name a topic other than the one consumed and the dead-letter topic", ef.retryTopic)
	}
	return nil
}

// deadLetterTopic is where topic's dead letters go.
func (ef *execFlags) deadLetterTopic(topic string) string {
	if ef.dlqTopic != "" {
		return ef.dlqTopic
	}
	return topic + clientlib.DeadLetterSuffix
}

// clientOpts: with --exec, dead letters go to their source partition's
// number in the dead-letter topic (created with as many partitions), so
// one source partition's dead letters stay in order.
func (ef *execFlags) clientOpts() []clientlib.Opt {
	if ef.cmd == "" {
		return nil
	}
	return []clientlib.Opt{clientlib.ManualPartitioner()}
}

// policy is the clientlib retry policy the flags describe.
func (ef *execFlags) policy() clientlib.RetryPolicy {
	return clientlib.RetryPolicy{MaxAttempts: ef.maxAttempts,
		Backoff: clientlib.Backoff{Base: ef.backoff, Max: 25 * ef.backoff}, AttemptTimeout: ef.attemptTimeout}
}

// execSession is `strand consume TOPIC --group G --exec CMD`.
type execSession struct {
	cs      *consumeSession
	group   string
	ef      execFlags
	g       *clientlib.GroupConsumer
	stderr  io.Writer
	handled int64
	dead    int64
}

// runExec joins group and runs the command per record until Ctrl-C, the
// end (--until-end), --count records settled, or an error.
func (cs *consumeSession) runExec(ctx context.Context, group, instance string, start clientlib.Offset, untilEnd bool, ef execFlags) error {
	es := &execSession{cs: cs, group: group, ef: ef, stderr: cs.stderr}
	g, err := clientlib.NewGroupConsumer(cs.c, group, []string{cs.topic},
		clientlib.StartWithoutCommit(start), clientlib.InstanceID(instance),
		clientlib.GroupConsumerOpts(clientlib.FetchIsolation(cs.isolation)),
		clientlib.OnAssigned(func(_ context.Context, ps []clientlib.TopicPartition) {
			fmt.Fprintf(cs.stderr, "strand: group %s: assigned %s\n", group, formatPartitions(ps))
		}),
		clientlib.OnRevoked(func(_ context.Context, ps []clientlib.TopicPartition) {
			fmt.Fprintf(cs.stderr, "strand: group %s: revoked %s\n", group, formatPartitions(ps))
		}),
		clientlib.OnLost(func(ps []clientlib.TopicPartition) {
			fmt.Fprintf(cs.stderr, "strand: group %s: lost %s (fenced or session expired; rejoining)\n", group, formatPartitions(ps))
		}))
	if err != nil {
		return err
	}
	es.g = g
	if err := cs.readEnds(ctx, untilEnd); err != nil {
		return err
	}
	how := clientlib.Handling{Retry: ef.policy(),
		DeadLetterTopic: func(string) string { return ef.deadLetterTopic(cs.topic) },
		OnDeadLetter:    es.noteDead, Done: func() bool { return es.finished(ctx) }}
	if ef.retryTopic != "" {
		how.RetryTopic = func(string) string { return ef.retryTopic }
	}
	err = g.Handle(ctx, es.handle, how)
	cctx, cancel := context.WithTimeout(context.Background(), cs.timeout)
	defer cancel()
	if cerr := g.Close(cctx); err == nil && cerr != nil && ctx.Err() == nil {
		err = wrapErr(cerr, "leaving group %s", group)
	}
	fmt.Fprintf(cs.stderr, "strand: group %s: %s handled, %d dead-lettered to %s\n",
		group, plural(int(es.handled), "record"), es.dead, ef.deadLetterTopic(cs.topic))
	return es.explain(err)
}

// handle runs the command once for r.
func (es *execSession) handle(ctx context.Context, r *clientlib.Record) error {
	attempt := clientlib.HandlerAttempt(ctx)
	cmd := exec.CommandContext(ctx, "sh", "-c", es.ef.cmd)
	cmd.Stdin = bytes.NewReader(r.Value)
	cmd.Env = append(os.Environ(),
		"STRAND_TOPIC="+r.Topic,
		"STRAND_PARTITION="+strconv.FormatInt(int64(r.Partition), 10),
		"STRAND_OFFSET="+strconv.FormatInt(r.Offset, 10),
		"STRAND_KEY="+string(r.Key),
		"STRAND_TIMESTAMP="+strconv.FormatInt(r.Timestamp.UnixMilli(), 10),
		"STRAND_GROUP="+es.group,
		"STRAND_ATTEMPT="+strconv.Itoa(attempt))
	var errTail tailBuffer
	cmd.Stdout, cmd.Stderr = es.cs.out, io.MultiWriter(es.stderr, &errTail)
	err := cmd.Run()
	es.cs.out.Flush()
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("killed after --exec-timeout %v", es.ef.attemptTimeout)
		}
		if msg := errTail.lastLine(); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		fmt.Fprintf(es.stderr, "strand: %s/%d@%d attempt %d of %d failed: %v\n",
			r.Topic, r.Partition, r.Offset, attempt, es.ef.maxAttempts, err)
		return err
	}
	es.handled++
	return nil
}

// noteDead reports a dead letter written.
func (es *execSession) noteDead(d clientlib.DeadLetter, out *clientlib.Record) {
	es.dead++
	fmt.Fprintf(es.stderr, "strand: dead-lettered %s/%d@%d to %s/%d@%d after %d attempts: %s\n",
		d.Source.Topic, d.Source.Partition, d.Source.Offset, out.Topic, out.Partition, out.Offset, d.Attempts, d.Err)
}

// finished: --count records settled, or with --until-end every owned
// partition settled up to the high-water mark seen at start and, with
// --retry-topic, every owned retry partition up to its high-water mark
// now (nothing left waiting for a retry).
func (es *execSession) finished(ctx context.Context) bool {
	cs := es.cs
	if cs.limit > 0 && es.handled+es.dead >= cs.limit {
		return true
	}
	owned := es.g.Assigned()
	if cs.ends == nil || len(owned) == 0 {
		return false
	}
	var retries []clientlib.TopicPartition
	for _, tp := range owned {
		if tp.Topic != cs.topic {
			retries = append(retries, tp)
			continue
		}
		if pos, ok := es.g.Position(tp.Topic, tp.Partition); !ok || pos < cs.ends[tp.Partition] {
			return false
		}
	}
	return es.retriesDone(ctx, retries)
}

// retriesDone reports whether the owned retry partitions rs are read to
// their high-water marks.
func (es *execSession) retriesDone(ctx context.Context, rs []clientlib.TopicPartition) bool {
	if len(rs) == 0 {
		return true
	}
	offs, err := es.cs.c.ListOffsets(ctx, es.ef.retryTopic, nil, clientlib.OffsetLatest())
	if err != nil {
		return false
	}
	hwm := map[int32]int64{}
	for _, o := range offs {
		hwm[o.Partition] = o.HighWatermark
	}
	for _, tp := range rs {
		if pos, ok := es.g.Position(tp.Topic, tp.Partition); !ok || pos < hwm[tp.Partition] {
			return false
		}
	}
	return true
}

// explain turns a dead letter that could not be written into what to do.
func (es *execSession) explain(err error) error {
	var de *clientlib.DeadLetterError
	if errors.As(err, &de) && errors.Is(de.Err, clientlib.ErrUnknownTopic) {
		return userErr(nil, "could not dead-letter %s/%d@%d to %s: it has no partition %d (dead letters keep their source partition's number, so it needs as many partitions as %s); nothing from that record on was committed, so it is handled again on the next run: add partitions (strand topic add-partitions %s -p N) or name another topic with --dlq-topic",
			de.Source.Topic, de.Source.Partition, de.Offset, de.Topic, de.Source.Partition, de.Source.Topic, de.Topic)
	}
	if errors.As(err, &de) {
		return userErr(nil, "could not dead-letter %s/%d@%d to %s: %s; nothing from that record on was committed, so it is handled again on the next run: check the topic (strand topic describe %s) or name another with --dlq-topic",
			de.Source.Topic, de.Source.Partition, de.Offset, de.Topic, userMessage(de.Err), de.Topic)
	}
	return err
}

// tailBuffer keeps the last 4 KiB written to it: the command's stderr,
// whose last line becomes the dead letter's error text.
type tailBuffer struct{ b []byte }

// Write implements io.Writer.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

// lastLine is the last non-empty line written.
func (t *tailBuffer) lastLine() string {
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
