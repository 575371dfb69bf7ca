package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/clientlib"
)

// checkConsumeFlags refuses consume's flag values and combinations that
// cannot run (partitionGiven: --partition was on the command line).
func checkConsumeFlags(partition int32, count int64, group, instance string, partitionGiven bool) error {
	switch {
	case partition < -1:
		return usageError("--partition %d: want a partition number, or -1 for all", partition)
	case count < 0:
		return usageError("--count %d: want 0 (no limit) or more", count)
	case group == "" && instance != "":
		return usageError("--instance-id needs --group")
	case group != "" && partitionGiven:
		return usageError("--partition and --group: the group assigns the partitions; drop one")
	}
	return nil
}

// cmdConsume prints a topic's records, by default from the earliest, until
// Ctrl-C, or with --until-end until it reaches the high-water marks it saw
// at start, or until the end --from names. Short flags follow kcat: -t
// topic, -p partition, -o offset (twice: a start and an e@ end), -e exit
// at end, -f format, -J JSON, -Z print nulls as NULL, -D and -K
// delimiters, -c count.
func cmdConsume(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("consume")
	o := registerConsumeFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	topic, err := topicArg(fs, *o.topicFlag)
	if err != nil {
		return err
	}
	if err := checkConsumeFlags(*o.partition, *o.count, *o.group, *o.instance, fs.Changed("partition")); err != nil {
		return err
	}
	level, err := parseIsolation(*o.isolation)
	if err != nil {
		return err
	}
	rng, err := parseOffsets(*o.from, time.Now())
	if err != nil {
		return err
	}
	if err := o.ef.validate(fs, topic, *o.group); err != nil {
		return err
	}
	f, err := consumeFormat(fs, *o.format, *o.asJSON, *o.null, *o.delim, *o.keyDelim)
	if err != nil {
		return err
	}
	var groupFrom clientlib.Offset
	if *o.group != "" {
		if groupFrom, err = groupStart(rng, *o.from); err != nil {
			return err
		}
	}
	c, err := o.cf.client(o.ef.clientOpts()...)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := signalContext()
	defer stop()
	cs := &consumeSession{c: c, k: clientlib.NewConsumer(c, clientlib.FetchIsolation(level)), isolation: level, topic: topic, format: f,
		out: bufio.NewWriter(stdout), limit: *o.count, timeout: o.cf.timeout, stderr: stderr}
	defer cs.out.Flush()
	if o.ef.cmd != "" {
		return topicErr(topic, cs.runExec(ctx, *o.group, *o.instance, groupFrom, *o.untilEnd || rng.untilEnd, o.ef))
	}
	if *o.group != "" {
		return topicErr(topic, cs.runGroup(ctx, *o.group, *o.instance, groupFrom, *o.untilEnd || rng.untilEnd, stderr))
	}
	if err := cs.assign(ctx, *o.partition, rng, *o.untilEnd || rng.untilEnd); err != nil {
		return topicErr(topic, err)
	}
	return topicErr(topic, cs.run(ctx))
}

// consumeFlags are cmdConsume's flags.
type consumeFlags struct {
	cf                                 clientFlags
	ef                                 execFlags
	topicFlag, format, delim, keyDelim *string
	group, instance, isolation         *string
	from                               *[]string
	asJSON, null, untilEnd             *bool
	partition                          *int32
	count                              *int64
}

// registerConsumeFlags registers cmdConsume's flags on fs.
func registerConsumeFlags(fs *pflag.FlagSet) *consumeFlags {
	o := &consumeFlags{}
	o.cf.register(fs, 30*time.Second)
	o.topicFlag = fs.StringP("topic", "t", "", "topic to read (instead of the TOPIC argument)")
	o.from = fs.StringArrayP("from", "o", []string{"earliest"}, "where to start, and optionally stop (repeatable: a start and an end): "+offsetHelp)
	o.format = fs.StringP("format", "f", `%v\n`, formatHelp)
	o.asJSON = fs.BoolP("json", "J", false, "print each record as one JSON object (kcat's -J; same as --format json)")
	o.null = fs.BoolP("null", "Z", false, "print a null key or value as NULL (else as nothing), as kcat's -Z")
	o.delim = fs.StringP("delimiter", "D", `\n`, `without --format: what follows each value (kcat's -D; escapes \n \r \t \\ \xNN)`)
	o.keyDelim = fs.StringP("key-delimiter", "K", "", "without --format: print the key and this before each value")
	o.untilEnd = fs.BoolP("until-end", "e", false, "exit once the high-water marks seen at start are reached")
	o.partition = fs.Int32P("partition", "p", -1, "read only this partition (-1: all)")
	o.count = fs.Int64P("count", "c", 0, "exit after this many records (0: no limit)")
	o.group = fs.StringP("group", "g", "", "consume as a member of this consumer group: partitions are shared among its members and what is printed is committed; --from applies only where the group has no committed offset")
	o.instance = fs.String("instance-id", "", "with --group: a static member id; restarted with the same id within 45 s, it gets its partitions back without a rebalance")
	o.isolation = fs.String("isolation", "read_uncommitted", "what to read of transactions, as Kafka's isolation.level: read_uncommitted (every record up to the high-water mark) or read_committed (only committed transactions' records, up to the last stable offset; --until-end stops there)")
	o.ef.register(fs)
	return o
}

// offsetHelp is --from's flag help.
const offsetHelp = "earliest|beginning, latest|end, N (absolute; outside a partition it is clamped to it with a note, " +
	"or fails with -p), -N (N before the end of each partition, kcat and rpk), +N (N after the start of each partition, rpk; " +
	"kcat reads +N as the absolute N), s@TIME or @TIME (the first record at or after TIME), e@TIME or @:TIME " +
	"(stop before the first record at or after TIME), @T1:T2, O1:O2 or :O2 (stop before offset O2), :end (as -e), " +
	"RFC3339; TIME is Unix ms (kcat), RFC3339, YYYY-MM-DD or a duration before now (-1h)"

// consumeFormat compiles the output format from --format, --json, --null,
// --delimiter and --key-delimiter.
func consumeFormat(fs *pflag.FlagSet, format string, asJSON, null bool, delim, keyDelim string) ([]formatPart, error) {
	nullText := ""
	if null {
		nullText = "NULL"
	}
	switch {
	case asJSON && fs.Changed("format") && format != "json":
		return nil, usageError("--json and --format %q: give one", format)
	case asJSON:
		format = "json"
	}
	if !fs.Changed("delimiter") && !fs.Changed("key-delimiter") {
		return parseFormat(format, nullText)
	}
	if fs.Changed("format") || asJSON {
		return nil, usageError("--delimiter and --key-delimiter apply only without --format and --json: put them in the format")
	}
	d, err := parseDelimiter(delim, "--delimiter")
	if err != nil {
		return nil, err
	}
	var parts []formatPart
	if fs.Changed("key-delimiter") {
		kd, err := parseDelimiter(keyDelim, "--key-delimiter")
		if err != nil {
			return nil, err
		}
		parts = append(parts, formatPart{field: 'k', null: nullText}, formatPart{literal: string(kd)})
	}
	return append(parts, formatPart{field: 'v', null: nullText}, formatPart{literal: string(d)}), nil
}

// consumeSession is one consume command's state.
type consumeSession struct {
	c *clientlib.Client
	k *clientlib.Consumer
	// isolation is --isolation: the consumers' level, and where
	// --until-end stops (the last stable offset at read_committed).
	isolation clientlib.IsolationLevel
	topic     string
	format    []formatPart
	out       *bufio.Writer
	stderr    io.Writer
	limit     int64
	printed   int64
	timeout   time.Duration
	ends      map[int32]int64 // stop offsets (not included); nil: run forever
	// stopAt, when set, stops each partition before its first record at
	// or after it (e@); open are the partitions that have not met such a
	// record yet and have no stop offset.
	stopAt time.Time
	open   map[int32]bool
}

// assign assigns the partitions, each at its start, and notes where each
// stops: the high-water mark for --until-end, the end offset or the
// offset of the end time --from names. An absolute --from outside a
// partition fails with -p, and over every partition is clamped to each
// with a note on stderr, so one shorter partition does not fail the rest.
func (cs *consumeSession) assign(ctx context.Context, partition int32, rng offsetRange, untilEnd bool) error {
	actx, cancel := context.WithTimeout(ctx, cs.timeout)
	defer cancel()
	var parts []int32
	if partition >= 0 {
		if err := cs.checkPartition(actx, partition); err != nil {
			return err
		}
		parts = []int32{partition}
	}
	offs, err := cs.c.ListOffsets(actx, cs.topic, parts, cs.latest())
	if err != nil {
		return err
	}
	var atTime map[int32]int64
	if !rng.endTime.IsZero() {
		if atTime, err = cs.endsAtTime(actx, parts, rng.endTime, offs); err != nil {
			return err
		}
	}
	starts := make([]clientlib.Offset, len(offs))
	for i, o := range offs {
		if o.Err != nil {
			return wrapErr(o.Err, "%s/%d", cs.topic, o.Partition)
		}
		s := rng.start
		if partition >= 0 && s.kind == startExact && (s.n > o.HighWatermark || s.n < o.LogStartOffset) {
			return userErr(clientlib.ErrOffsetOutOfRange, "%s",
				offsetOutOfRange(cs.topic, o.Partition, s.n, o.LogStartOffset, o.HighWatermark))
		}
		var note string
		if starts[i], note = resolveStart(s, cs.topic, o.Partition, o.LogStartOffset, o.HighWatermark); note != "" {
			fmt.Fprintf(cs.stderr, "strand: %s\n", note)
		}
	}
	for i, o := range offs {
		cs.k.Assign(cs.topic, o.Partition, starts[i])
	}
	cs.setEnds(offs, rng, untilEnd, atTime)
	return nil
}

// setEnds records where each partition stops: the lowest of the
// high-water mark (--until-end), the end offset and the end time's
// offset; a partition with only an end time not reached yet stays open.
func (cs *consumeSession) setEnds(offs []clientlib.ListedOffset, rng offsetRange, untilEnd bool, atTime map[int32]int64) {
	if !untilEnd && !rng.hasEnd() {
		return
	}
	cs.ends, cs.open, cs.stopAt = map[int32]int64{}, map[int32]bool{}, rng.endTime
	for _, o := range offs {
		end, ok := int64(-1), false
		lower := func(n int64) {
			if !ok || n < end {
				end, ok = n, true
			}
		}
		if untilEnd {
			lower(cs.endOf(o))
		}
		if rng.endOffset >= 0 {
			lower(rng.endOffset)
		}
		if n, found := atTime[o.Partition]; found {
			lower(n)
		}
		if ok {
			cs.ends[o.Partition] = end
		} else {
			cs.open[o.Partition] = true
		}
	}
}

// endsAtTime is, per partition, the offset of its first record at or
// after t (ListOffsets by timestamp, Kafka's offsetsForTimes); a partition
// with no such record yet is left out (it stays open until one arrives).
func (cs *consumeSession) endsAtTime(ctx context.Context, parts []int32, t time.Time, latest []clientlib.ListedOffset) (map[int32]int64, error) {
	offs, err := cs.c.ListOffsets(ctx, cs.topic, parts, clientlib.OffsetAtTimestamp(t))
	if err != nil {
		return nil, err
	}
	hwm := map[int32]int64{}
	for _, o := range latest {
		hwm[o.Partition] = o.HighWatermark
	}
	ends := map[int32]int64{}
	for _, o := range offs {
		if o.Err != nil {
			return nil, wrapErr(o.Err, "%s/%d", cs.topic, o.Partition)
		}
		if o.Offset >= 0 && o.Offset < max(o.HighWatermark, hwm[o.Partition]) {
			ends[o.Partition] = o.Offset
		}
	}
	return ends, nil
}

// latest is where the consumer's reads end for now: the high-water mark,
// or the last stable offset at read_committed.
func (cs *consumeSession) latest() clientlib.Offset {
	if cs.isolation == clientlib.ReadCommitted {
		return clientlib.OffsetLastStable()
	}
	return clientlib.OffsetLatest()
}

// endOf is where --until-end stops in o, an answer of ListOffsets at
// cs.latest().
func (cs *consumeSession) endOf(o clientlib.ListedOffset) int64 {
	if cs.isolation == clientlib.ReadCommitted {
		return o.Offset
	}
	return o.HighWatermark
}

// parseIsolation is --isolation's value.
func parseIsolation(s string) (clientlib.IsolationLevel, error) {
	switch s {
	case "read_uncommitted":
		return clientlib.ReadUncommitted, nil
	case "read_committed":
		return clientlib.ReadCommitted, nil
	}
	return 0, usageError("--isolation %q: want read_uncommitted or read_committed", s)
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
				if cs.stopsAt(r) {
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

// stopsAt says whether r is at or past its partition's stop: its stop
// offset, or, for a partition still open, a timestamp at or after the
// end time (which then becomes its stop offset).
func (cs *consumeSession) stopsAt(r *clientlib.Record) bool {
	if end, ok := cs.ends[r.Partition]; ok {
		return r.Offset >= end
	}
	if cs.open[r.Partition] && !r.Timestamp.Before(cs.stopAt) {
		delete(cs.open, r.Partition)
		cs.ends[r.Partition] = r.Offset
		return true
	}
	return false
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
	return len(cs.ends) == 0 && len(cs.open) == 0
}
