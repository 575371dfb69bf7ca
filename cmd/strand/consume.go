package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// cmdConsume prints a topic's records, by default from the earliest, until
// Ctrl-C, or with --until-end until it reaches the high-water marks it saw
// at start. Short flags follow kcat: -t topic, -p partition, -o offset,
// -e exit at end, -f format, -c count.
func cmdConsume(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("consume")
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	topicFlag := fs.StringP("topic", "t", "", "topic to read (instead of the TOPIC argument)")
	from := fs.StringP("from", "o", "earliest", "where to start: earliest, latest, an offset, or a time (RFC3339)")
	format := fs.StringP("format", "f", `%v\n`, `output per record: %k key, %v value, %p partition, %o offset, %t timestamp, %T topic, %% and \n \t`)
	untilEnd := fs.BoolP("until-end", "e", false, "exit once the high-water marks seen at start are reached")
	partition := fs.Int32P("partition", "p", -1, "read only this partition (-1: all)")
	count := fs.Int64P("count", "c", 0, "exit after this many records (0: no limit)")
	group := fs.StringP("group", "g", "", "consume as a member of this consumer group: partitions are shared among its members and what is printed is committed; --from applies only where the group has no committed offset")
	instance := fs.String("instance-id", "", "with --group: a static member id; restarted with the same id within 45 s, it gets its partitions back without a rebalance")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	topic, err := topicArg(fs, *topicFlag)
	if err != nil {
		return err
	}
	if *partition < -1 {
		return usageError("--partition %d: want a partition number, or -1 for all", *partition)
	}
	if *count < 0 {
		return usageError("--count %d: want 0 (no limit) or more", *count)
	}
	start, err := parseFrom(*from)
	if err != nil {
		return err
	}
	if *group == "" && *instance != "" {
		return usageError("--instance-id needs --group")
	}
	if *group != "" && fs.Changed("partition") {
		return usageError("--partition and --group: the group assigns the partitions; drop one")
	}
	f, err := parseFormat(*format)
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := signalContext()
	defer stop()
	cs := &consumeSession{c: c, k: clientlib.NewConsumer(c), topic: topic, format: f,
		out: bufio.NewWriter(stdout), limit: *count, timeout: cf.timeout}
	defer cs.out.Flush()
	if *group != "" {
		return topicErr(topic, cs.runGroup(ctx, *group, *instance, start, *untilEnd, stderr))
	}
	if err := cs.assign(ctx, *partition, start, exactOffset(*from), *untilEnd); err != nil {
		return topicErr(topic, err)
	}
	return topicErr(topic, cs.run(ctx))
}

// consumeSession is one consume command's state.
type consumeSession struct {
	c       *clientlib.Client
	k       *clientlib.Consumer
	topic   string
	format  []formatPart
	out     *bufio.Writer
	limit   int64
	printed int64
	timeout time.Duration
	ends    map[int32]int64 // --until-end: stop offsets; nil: run forever
}

// assign assigns the partitions and, for --until-end, notes their
// high-water marks. An exact --from outside a partition's readable range
// fails here, the same with and without --until-end.
func (cs *consumeSession) assign(ctx context.Context, partition int32, start clientlib.Offset, exact int64, untilEnd bool) error {
	actx, cancel := context.WithTimeout(ctx, cs.timeout)
	defer cancel()
	var parts []int32
	if partition >= 0 {
		if err := cs.checkPartition(actx, partition); err != nil {
			return err
		}
		parts = []int32{partition}
	}
	offs, err := cs.c.ListOffsets(actx, cs.topic, parts, clientlib.OffsetLatest())
	if err != nil {
		return err
	}
	for _, o := range offs {
		if o.Err != nil {
			return wrapErr(o.Err, "%s/%d", cs.topic, o.Partition)
		}
		if exact >= 0 && (exact > o.HighWatermark || exact < o.LogStartOffset) {
			return userErr(clientlib.ErrOffsetOutOfRange, "%s",
				offsetOutOfRange(cs.topic, o.Partition, exact, o.LogStartOffset, o.HighWatermark))
		}
	}
	if partition >= 0 {
		cs.k.Assign(cs.topic, partition, start)
	} else if err := cs.k.AssignTopic(actx, cs.topic, start); err != nil {
		return err
	}
	if untilEnd {
		cs.ends = map[int32]int64{}
		for _, o := range offs {
			cs.ends[o.Partition] = o.HighWatermark
		}
	}
	return nil
}

// checkPartition fails when topic has no partition p.
func (cs *consumeSession) checkPartition(ctx context.Context, p int32) error {
	info, err := cs.c.Metadata(ctx)
	if err != nil {
		return err
	}
	for _, t := range info.Topics {
		if t.Name == cs.topic && t.Err == nil {
			if int(p) >= len(t.Partitions) {
				return userErr(nil, "%s has no partition %d (it has %d: 0 to %d)",
					cs.topic, p, len(t.Partitions), len(t.Partitions)-1)
			}
			return nil
		}
	}
	return topicErr(cs.topic, clientlib.ErrUnknownTopic)
}

// run polls and prints until done, Ctrl-C, or a non-retriable error.
func (cs *consumeSession) run(ctx context.Context) error {
	for ctx.Err() == nil {
		if cs.finished() {
			return nil
		}
		fetches := cs.k.Poll(ctx)
		for _, fp := range fetches {
			if fp.Err != nil && ctx.Err() == nil && !clientlib.IsRetriable(fp.Err) {
				return consumeError(cs.topic, fp)
			}
			for _, r := range fp.Records {
				if end, ok := cs.ends[r.Partition]; ok && r.Offset >= end {
					break
				}
				if cs.limit > 0 && cs.printed >= cs.limit {
					break
				}
				writeRecord(cs.out, cs.format, r)
				cs.printed++
			}
		}
		if err := cs.out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// consumeError says in plain words why consuming stopped: the topic or
// the cluster changed under the consumer (its offsets mean nothing in the
// new log, so it stops rather than skip or repeat records), or the
// partition's error.
func consumeError(topic string, fp clientlib.FetchPartition) error {
	var re *clientlib.TopicRecreatedError
	var ce *clientlib.ClusterChangedError
	switch {
	case errors.As(fp.Err, &re) && len(re.NewID) > 0:
		return userErr(fp.Err, "topic %s was deleted and re-created (id %s → %s) while consuming; offsets from the old topic do not apply: start again with --from earliest",
			topic, clientlib.FormatID(re.OldID), clientlib.FormatID(re.NewID))
	case errors.As(fp.Err, &re):
		return userErr(fp.Err, "topic %s (id %s) was deleted while consuming; offsets from the old topic do not apply: once it exists again, start again with --from earliest",
			topic, clientlib.FormatID(re.OldID))
	case errors.As(fp.Err, &ce):
		return userErr(fp.Err, "the cluster at %s was replaced (cluster id %s → %s) while consuming; offsets from the old cluster do not apply: start again with --from earliest",
			ce.Addr, clientlib.FormatID(ce.OldID), clientlib.FormatID(ce.NewID))
	}
	return wrapErr(fp.Err, "%s/%d", topic, fp.Partition)
}

// finished says whether --count or --until-end is satisfied; partitions
// that reached their end are unassigned so Poll no longer waits on them.
func (cs *consumeSession) finished() bool {
	if cs.limit > 0 && cs.printed >= cs.limit {
		return true
	}
	if cs.ends == nil {
		return false
	}
	for p, end := range cs.ends {
		if pos, ok := cs.k.Position(cs.topic, p); ok && pos >= end {
			cs.k.Unassign(cs.topic, p)
			delete(cs.ends, p)
		}
	}
	return len(cs.ends) == 0
}

// parseFrom reads --from.
func parseFrom(s string) (clientlib.Offset, error) {
	switch s {
	case "earliest", "beginning", "start", "oldest":
		return clientlib.OffsetEarliest(), nil
	case "latest", "end", "newest":
		return clientlib.OffsetLatest(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return clientlib.OffsetExact(n), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return clientlib.OffsetAtTimestamp(t), nil
	}
	return clientlib.Offset{}, usageError("--from %q: want earliest, latest, an offset or an RFC3339 time", s)
}

// exactOffset is --from as an offset, or -1 when it is not a number.
func exactOffset(from string) int64 {
	if n, err := strconv.ParseInt(from, 10, 64); err == nil && n >= 0 {
		return n
	}
	return -1
}

// formatPart is a literal or one record field of --format.
type formatPart struct {
	literal string
	field   byte // 0: literal
}

// parseFormat compiles --format: %k %v %p %o %t %T %% and \n \t \r \\.
func parseFormat(s string) ([]formatPart, error) {
	var parts []formatPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, formatPart{literal: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if (ch != '%' && ch != '\\') || i+1 == len(s) {
			lit.WriteByte(ch)
			continue
		}
		i++
		next := s[i]
		switch {
		case ch == '\\':
			lit.WriteString(map[byte]string{'n': "\n", 't': "\t", 'r': "\r", '\\': "\\"}[next])
			if !strings.ContainsRune("ntr\\", rune(next)) {
				lit.WriteByte('\\')
				lit.WriteByte(next)
			}
		case next == '%':
			lit.WriteByte('%')
		case strings.IndexByte("kvpotT", next) >= 0:
			flush()
			parts = append(parts, formatPart{field: next})
		default:
			return nil, usageError("--format: unknown %%%c (want %%k %%v %%p %%o %%t %%T %%%%)", next)
		}
	}
	flush()
	return parts, nil
}

// writeRecord prints one record in the compiled format.
func writeRecord(w *bufio.Writer, format []formatPart, r *clientlib.Record) {
	for _, p := range format {
		switch p.field {
		case 0:
			w.WriteString(p.literal)
		case 'k':
			w.Write(r.Key)
		case 'v':
			w.Write(r.Value)
		case 'p':
			w.WriteString(strconv.FormatInt(int64(r.Partition), 10))
		case 'o':
			w.WriteString(strconv.FormatInt(r.Offset, 10))
		case 't':
			w.WriteString(r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		case 'T':
			w.WriteString(r.Topic)
		}
	}
}
