package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// cmdConsume prints a topic's records, by default from the earliest, until
// Ctrl-C, or with --until-end until it reaches the high-water marks it saw
// at start.
func cmdConsume(args []string, stdout io.Writer) error {
	fs := newFlags("consume")
	var cf clientFlags
	cf.register(fs, 30*time.Second)
	from := fs.String("from", "earliest", "where to start: earliest, latest, an offset, or a time (RFC3339)")
	format := fs.String("format", `%v\n`, `output per record: %k key, %v value, %p partition, %o offset, %t timestamp, %T topic, %% and \n \t`)
	untilEnd := fs.Bool("until-end", false, "exit once the high-water marks seen at start are reached")
	partition := fs.Int32("partition", -1, "read only this partition (-1: all)")
	count := fs.Int64("count", 0, "exit after this many records (0: no limit)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("consume: want one topic")
	}
	start, err := parseFrom(*from)
	if err != nil {
		return err
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
	cs := &consumeSession{c: c, k: clientlib.NewConsumer(c), topic: fs.Arg(0), format: f,
		out: bufio.NewWriter(stdout), limit: *count, timeout: cf.timeout}
	defer cs.out.Flush()
	if err := cs.assign(ctx, *partition, start, *untilEnd); err != nil {
		return err
	}
	return cs.run(ctx)
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
// high-water marks.
func (cs *consumeSession) assign(ctx context.Context, partition int32, start clientlib.Offset, untilEnd bool) error {
	actx, cancel := context.WithTimeout(ctx, cs.timeout)
	defer cancel()
	var parts []int32
	if partition >= 0 {
		parts = []int32{partition}
		cs.k.Assign(cs.topic, partition, start)
	} else if err := cs.k.AssignTopic(actx, cs.topic, start); err != nil {
		return err
	}
	if !untilEnd {
		return nil
	}
	offs, err := cs.c.ListOffsets(actx, cs.topic, parts, clientlib.OffsetLatest())
	if err != nil {
		return err
	}
	cs.ends = map[int32]int64{}
	for _, o := range offs {
		if o.Err != nil {
			return fmt.Errorf("partition %d: %w", o.Partition, o.Err)
		}
		cs.ends[o.Partition] = o.HighWatermark
	}
	return nil
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
		return fmt.Errorf("topic %s was deleted and re-created (id %s → %s) while consuming; offsets from the old topic do not apply: start again with --from earliest",
			topic, clientlib.FormatID(re.OldID), clientlib.FormatID(re.NewID))
	case errors.As(fp.Err, &re):
		return fmt.Errorf("topic %s (id %s) was deleted while consuming; offsets from the old topic do not apply: once it exists again, start again with --from earliest",
			topic, clientlib.FormatID(re.OldID))
	case errors.As(fp.Err, &ce):
		return fmt.Errorf("the cluster at %s was replaced (cluster id %s → %s) while consuming; offsets from the old cluster do not apply: start again with --from earliest",
			ce.Addr, clientlib.FormatID(ce.OldID), clientlib.FormatID(ce.NewID))
	}
	return fmt.Errorf("partition %d: %w", fp.Partition, fp.Err)
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
	case "earliest", "beginning":
		return clientlib.OffsetEarliest(), nil
	case "latest", "end":
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
