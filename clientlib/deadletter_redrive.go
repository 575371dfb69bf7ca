package clientlib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// HeaderRedriveFrom marks a redriven record with the dead letter it came
// from, "<dead-letter topic>/<partition>/<offset>": a redrive that
// crashed before recording its work finds it by this header and does not
// write it twice.
const HeaderRedriveFrom = "strand.redrive.from"

// RedriveLedgerSuffix names the topic where Redrive records what it
// redrove: "orders.dlq" keeps its ledger in "orders.dlq.redriven".
const RedriveLedgerSuffix = ".redriven"

// redriveBatch bounds the dead letters written between two ledger writes.
const redriveBatch = 200

// DeadLetterEntry is one record of a dead-letter topic with what its
// headers say and whether Redrive already wrote it back.
type DeadLetterEntry struct {
	Record   *Record
	Info     DeadLetterInfo
	Err      error // set when the record is not a dead letter (Info is then empty)
	Redriven bool
}

// ledgerEntry is one record of a redrive ledger (JSON value, key
// "<partition>/<offset>" of the dead letter): an intent names where the
// dead letter is about to go and the destination's high-water mark before
// it; done names where it went.
type ledgerEntry struct {
	State     string `json:"state"` // "intent" or "done"
	Partition int32  `json:"dlq_partition"`
	Offset    int64  `json:"dlq_offset"`
	To        string `json:"to"`
	ToPart    int32  `json:"to_partition"`
	From      int64  `json:"from,omitempty"`      // intent: the destination's high-water mark before writing
	ToOffset  int64  `json:"to_offset,omitempty"` // done: where it was written
}

// key is the dead letter's coordinates in the dead-letter topic.
func (e ledgerEntry) key() string { return fmt.Sprintf("%d/%d", e.Partition, e.Offset) }

// ReadDeadLetters reads every record of the dead-letter topic dlq up to
// its high-water marks, in partition then offset order, marking those its
// redrive ledger says were written back.
func (c *Client) ReadDeadLetters(ctx context.Context, dlq string) ([]DeadLetterEntry, error) {
	ledger, err := c.readLedger(ctx, dlq)
	if err != nil {
		return nil, err
	}
	recs, err := c.readToEnd(ctx, dlq)
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetterEntry, 0, len(recs))
	doneSources := map[string]bool{} // source coordinates of letters written back
	for _, r := range recs {
		info, perr := ParseDeadLetter(r)
		e := ledger[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]
		out = append(out, DeadLetterEntry{Record: r, Info: info, Err: perr, Redriven: e.State == "done"})
		if perr == nil && e.State == "done" {
			doneSources[info.sourceKey()] = true
		}
	}
	for i := range out {
		if out[i].Err == nil && doneSources[out[i].Info.sourceKey()] {
			out[i].Redriven = true // a second dead letter of a record already written back
		}
	}
	return out, nil
}

// sourceKey names the source record: at least once, a record may be
// dead-lettered twice (a member died between the dead letter and its
// commit), and Redrive writes it back once.
func (i DeadLetterInfo) sourceKey() string {
	return fmt.Sprintf("%s/%d/%d", i.Source.Topic, i.Source.Partition, i.Offset)
}

// RedriveOptions says what Redrive writes back, and where.
type RedriveOptions struct {
	To     string                       // destination topic; "": each dead letter's source topic
	Filter func(DeadLetterInfo) bool    // nil: every dead letter
	OnEach func(DeadLetterEntry, int64) // after each dead letter is written (its new offset)
}

// RedriveReport counts what a Redrive did.
type RedriveReport struct {
	Redriven  int // written back now
	Recovered int // found written by an earlier redrive that crashed before recording it
	Already   int // recorded as redriven before
	Skipped   int // left out by the filter
	// Duplicates are second dead letters of a source record written back
	// in this run (at least once, a record may be dead-lettered twice).
	Duplicates int
	Invalid    int // records without dead-letter headers, left alone
}

// Redrive writes the dead letters of dlq back to their source topic (or
// opts.To), in their source partition's number, with their original key,
// value, timestamp and headers plus HeaderRedriveFrom. It records each
// one in the ledger topic dlq+RedriveLedgerSuffix (created on first use):
// an intent with the destination's high-water mark before the write, then
// done with its offset. A dead letter recorded done is never written
// again, nor is a second dead letter of the same source record (same
// topic, partition and offset; at-least-once handling can write two);
// one with only an intent (a redrive that crashed mid-batch) is
// looked for in its destination from that mark and written only if
// absent, so running Redrive again never duplicates. Two Redrives of one
// topic must not run at once. The client should use ManualPartitioner so
// records return to their source partition (else the partitioner places
// them by key).
func (c *Client) Redrive(ctx context.Context, dlq string, opts RedriveOptions) (RedriveReport, error) {
	var rep RedriveReport
	if err := c.ensureLedger(ctx, dlq); err != nil {
		return rep, err
	}
	ledger, err := c.readLedger(ctx, dlq)
	if err != nil {
		return rep, err
	}
	if rep.Recovered, err = c.recoverIntents(ctx, dlq, ledger); err != nil {
		return rep, err
	}
	entries, err := c.ReadDeadLetters(ctx, dlq)
	if err != nil {
		return rep, err
	}
	var todo []DeadLetterEntry
	queued := map[string]bool{}
	for _, e := range entries {
		switch {
		case e.Err != nil:
			rep.Invalid++
		case e.Redriven:
			rep.Already++
		case opts.Filter != nil && !opts.Filter(e.Info):
			rep.Skipped++
		case queued[e.Info.sourceKey()]:
			rep.Duplicates++
		default:
			queued[e.Info.sourceKey()] = true
			todo = append(todo, e)
		}
	}
	rep.Already -= rep.Recovered
	if err := c.checkDestinations(ctx, todo, opts.To); err != nil {
		return rep, err
	}
	for len(todo) > 0 {
		n := min(len(todo), redriveBatch)
		if err := c.redriveBatch(ctx, dlq, todo[:n], opts); err != nil {
			return rep, err
		}
		rep.Redriven += n
		todo = todo[n:]
	}
	return rep, nil
}

// destination is where e goes.
func destination(e DeadLetterEntry, to string) TopicPartition {
	if to == "" {
		to = e.Info.Source.Topic
	}
	return TopicPartition{Topic: to, Partition: e.Info.Source.Partition}
}

// checkDestinations fails, before anything is written, when a destination
// topic is missing or lacks a dead letter's source partition.
func (c *Client) checkDestinations(ctx context.Context, todo []DeadLetterEntry, to string) error {
	need := map[string]int32{}
	for _, e := range todo {
		d := destination(e, to)
		need[d.Topic] = max(need[d.Topic], d.Partition+1)
	}
	names := make([]string, 0, len(need))
	for t := range need {
		names = append(names, t)
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	ds, err := c.DescribeTopics(ctx, names...)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if d.Err != nil {
			return fmt.Errorf("redrive destination %s: %w", d.Name, d.Err)
		}
		if d.Partitions < need[d.Name] {
			return &Error{Code: ErrUnknownTopic.Code, Message: fmt.Sprintf(
				"redrive destination %s has %d partitions; dead letters from partition %d need %d", d.Name, d.Partitions, need[d.Name]-1, need[d.Name])}
		}
	}
	return nil
}

// redriveBatch writes intents, the records, then done entries.
func (c *Client) redriveBatch(ctx context.Context, dlq string, batch []DeadLetterEntry, opts RedriveOptions) error {
	marks := map[TopicPartition]int64{}
	for _, e := range batch {
		d := destination(e, opts.To)
		if _, ok := marks[d]; ok {
			continue
		}
		offs, err := c.ListOffsets(ctx, d.Topic, []int32{d.Partition}, OffsetLatest())
		if err != nil {
			return err
		}
		if len(offs) != 1 || offs[0].Err != nil {
			return fmt.Errorf("high-water mark of %s/%d: %v", d.Topic, d.Partition, offs)
		}
		marks[d] = offs[0].HighWatermark
	}
	intents, recs := make([]ledgerEntry, len(batch)), make([]*Record, len(batch))
	for i, e := range batch {
		d := destination(e, opts.To)
		intents[i] = ledgerEntry{State: "intent", Partition: e.Record.Partition, Offset: e.Record.Offset, To: d.Topic, ToPart: d.Partition, From: marks[d]}
		recs[i] = e.Info.Redrive(e.Record, d.Topic)
		recs[i].Headers = append(recs[i].Headers, Header{Key: HeaderRedriveFrom, Value: []byte(redriveFrom(dlq, e.Record))})
	}
	if err := c.writeLedger(ctx, dlq, intents); err != nil {
		return err
	}
	if err := c.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("redriving to %s: %w (rerun redrive: what was written is found and not written again)", recs[0].Topic, err)
	}
	done := make([]ledgerEntry, len(batch))
	for i := range batch {
		done[i] = intents[i]
		done[i].State, done[i].From, done[i].ToPart, done[i].ToOffset = "done", 0, recs[i].Partition, recs[i].Offset
		if opts.OnEach != nil {
			opts.OnEach(batch[i], recs[i].Offset)
		}
	}
	return c.writeLedger(ctx, dlq, done)
}

// redriveFrom is HeaderRedriveFrom's value for dead letter r of dlq.
func redriveFrom(dlq string, r *Record) string {
	return dlq + "/" + strconv.FormatInt(int64(r.Partition), 10) + "/" + strconv.FormatInt(r.Offset, 10)
}

// recoverIntents finds, for each intent without done, whether the record
// reached its destination (by HeaderRedriveFrom, from the intent's mark
// on) and records it done if so. It returns how many it found.
func (c *Client) recoverIntents(ctx context.Context, dlq string, ledger map[string]ledgerEntry) (int, error) {
	byDest := map[TopicPartition][]ledgerEntry{}
	for _, e := range ledger {
		if e.State == "intent" {
			d := TopicPartition{Topic: e.To, Partition: e.ToPart}
			byDest[d] = append(byDest[d], e)
		}
	}
	var found []ledgerEntry
	for d, es := range byDest {
		from := es[0].From
		want := map[string]ledgerEntry{}
		for _, e := range es {
			from = min(from, e.From)
			want[redriveFrom(dlq, &Record{Partition: e.Partition, Offset: e.Offset})] = e
		}
		recs, err := c.readPartition(ctx, d.Topic, d.Partition, from)
		if err != nil {
			return 0, err
		}
		for _, r := range recs {
			for _, h := range r.Headers {
				if e, ok := want[string(h.Value)]; ok && h.Key == HeaderRedriveFrom {
					e.State, e.From, e.ToOffset = "done", 0, r.Offset
					found = append(found, e)
					delete(want, string(h.Value))
				}
			}
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].key() < found[j].key() })
	if len(found) == 0 {
		return 0, nil
	}
	for _, e := range found {
		ledger[e.key()] = e
	}
	return len(found), c.writeLedger(ctx, dlq, found)
}

// ensureLedger creates dlq's ledger topic (one partition, dlq's
// replication factor) unless it exists.
func (c *Client) ensureLedger(ctx context.Context, dlq string) error {
	ds, err := c.DescribeTopics(ctx, dlq, dlq+RedriveLedgerSuffix)
	if err != nil {
		return err
	}
	if len(ds) != 2 || ds[0].Err != nil {
		if len(ds) == 2 {
			err = ds[0].Err
		}
		return fmt.Errorf("dead-letter topic %s: %w", dlq, err)
	}
	if ds[1].Err == nil {
		return nil
	}
	err = c.CreateTopic(ctx, dlq+RedriveLedgerSuffix, 1, ds[0].ReplicationFactor, nil)
	if err != nil && !errors.Is(err, ErrTopicExists) {
		return err
	}
	return nil
}

// readLedger reads dlq's ledger (none yet: empty), the last entry per
// dead letter winning.
func (c *Client) readLedger(ctx context.Context, dlq string) (map[string]ledgerEntry, error) {
	out := map[string]ledgerEntry{}
	recs, err := c.readToEnd(ctx, dlq+RedriveLedgerSuffix)
	if errors.Is(err, ErrUnknownTopic) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		var e ledgerEntry
		if err := json.Unmarshal(r.Value, &e); err != nil {
			return nil, fmt.Errorf("redrive ledger %s at offset %d: %w", dlq+RedriveLedgerSuffix, r.Offset, err)
		}
		if e.State == "done" || out[e.key()].State != "done" {
			out[e.key()] = e
		}
	}
	return out, nil
}

// writeLedger appends es to dlq's ledger and waits for them.
func (c *Client) writeLedger(ctx context.Context, dlq string, es []ledgerEntry) error {
	recs := make([]*Record, len(es))
	for i, e := range es {
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		recs[i] = &Record{Topic: dlq + RedriveLedgerSuffix, Partition: 0, Key: []byte(e.key()), Value: v}
	}
	if err := c.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("recording the redrive in %s: %w", dlq+RedriveLedgerSuffix, err)
	}
	return nil
}

// readToEnd reads every partition of topic from its log start to the
// high-water mark it has now.
func (c *Client) readToEnd(ctx context.Context, topic string) ([]*Record, error) {
	offs, err := c.ListOffsets(ctx, topic, nil, OffsetLatest())
	if err != nil {
		return nil, err
	}
	var out []*Record
	for _, o := range offs {
		if o.Err != nil {
			return nil, o.Err
		}
		recs, err := c.readPartition(ctx, topic, o.Partition, o.LogStartOffset)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}

// readPartition reads topic/partition from offset from (clamped to the
// log start) to its high-water mark now.
func (c *Client) readPartition(ctx context.Context, topic string, partition int32, from int64) ([]*Record, error) {
	offs, err := c.ListOffsets(ctx, topic, []int32{partition}, OffsetLatest())
	if err != nil {
		return nil, err
	}
	if len(offs) != 1 || offs[0].Err != nil {
		return nil, fmt.Errorf("%s/%d: %v", topic, partition, offs)
	}
	end := offs[0].HighWatermark
	from = max(from, offs[0].LogStartOffset)
	if from >= end {
		return nil, nil
	}
	k := NewConsumer(c)
	k.Assign(topic, partition, OffsetExact(from))
	defer k.Unassign(topic, partition)
	var out []*Record
	for pos := from; pos < end; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, fp := range k.Poll(ctx) {
			if fp.Err != nil && !IsRetriable(fp.Err) {
				return nil, fp.Err
			}
			for _, r := range fp.Records {
				if r.Offset < end {
					out = append(out, r)
				}
			}
		}
		if p, ok := k.Position(topic, partition); ok {
			pos = p
		}
	}
	return out, nil
}
