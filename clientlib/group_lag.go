package clientlib

import (
	"context"
	"strconv"
	"time"
)

// PartitionLag is one partition's lag for a group (R24): in records, in
// time, and against the topic's retention.
type PartitionLag struct {
	TopicPartition
	// Committed is the group's committed offset; -1 when it has none.
	Committed      int64
	HighWatermark  int64
	LogStartOffset int64
	// LastStableOffset is where read_committed reads end: the first offset
	// of the oldest open transaction, or the high-water mark when none is
	// open.
	LastStableOffset int64
	// Isolation is what Lag is measured for: ReadUncommitted to
	// HighWatermark, ReadCommitted to LastStableOffset.
	Isolation IsolationLevel
	// Lag is the end the isolation reaches (HighWatermark or
	// LastStableOffset) minus Committed (minus LogStartOffset without a
	// commit), in records.
	Lag int64
	// LagTime is the age of the first unconsumed record (now minus its
	// timestamp); 0 when caught up.
	LagTime time.Duration
	// Retention is the topic's retention.ms; 0 when unlimited.
	Retention time.Duration
	// Headroom is how long until the first unconsumed record ages out of
	// retention (its timestamp plus Retention minus now); -1 when nothing
	// is at risk (caught up, or unlimited retention). Committed below the
	// log start: 0 — records were already lost.
	Headroom time.Duration
	// AtRisk: Headroom is under 10% of Retention, or records were lost.
	AtRisk bool
	// Owner is the member id the partition is assigned to ("" if none).
	Owner string
	// DeadLetters is how many of the partition's records the group
	// dead-lettered (GroupConsumer.Handle keeps it in the committed
	// offset's metadata; 0 for other consumers).
	DeadLetters int64
	Err         error
}

// GroupLag reports every partition the group has a committed offset for
// or has assigned: committed, high-water mark, lag in records and in time,
// and retention headroom. now is the time lag is measured against. Lag is
// measured to the high-water mark, as for a read_uncommitted consumer
// (Kafka's default and what its tools show); GroupLagIsolated measures it
// for read_committed.
func (c *Client) GroupLag(ctx context.Context, group string, now time.Time) ([]PartitionLag, error) {
	return c.GroupLagIsolated(ctx, group, now, ReadUncommitted)
}

// GroupLagIsolated is GroupLag for consumers reading at iso: at
// ReadCommitted, lag in records and time is measured to the last stable
// offset, the end a read_committed consumer can reach while a transaction
// is open (Kafka does not record a group's isolation level, so the caller
// says it).
func (c *Client) GroupLagIsolated(ctx context.Context, group string, now time.Time, iso IsolationLevel) ([]PartitionLag, error) {
	d, err := c.DescribeGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	rows := map[TopicPartition]*PartitionLag{}
	var order []TopicPartition
	row := func(tp TopicPartition) *PartitionLag {
		if r := rows[tp]; r != nil {
			return r
		}
		r := &PartitionLag{TopicPartition: tp, Committed: -1, Headroom: -1, LastStableOffset: -1, Isolation: iso}
		rows[tp] = r
		order = append(order, tp)
		return r
	}
	for _, o := range d.Offsets {
		r := row(o.TopicPartition)
		r.Committed = o.Offset
		r.DeadLetters, _ = DeadLetterCount(o.Metadata)
	}
	for _, m := range d.Members {
		for _, tp := range m.Target {
			row(tp).Owner = m.MemberID
		}
	}
	sortPartitions(order)
	c.fillOffsets(ctx, order, rows)
	c.fillRetention(ctx, order, rows)
	c.fillLagTime(ctx, order, rows, now, iso)
	out := make([]PartitionLag, len(order))
	for i, tp := range order {
		out[i] = *rows[tp]
	}
	return out, nil
}

// fillOffsets sets high-water marks, last stable offsets, log starts and
// lag in records (one read_committed ListOffsets answers all three).
func (c *Client) fillOffsets(ctx context.Context, order []TopicPartition, rows map[TopicPartition]*PartitionLag) {
	for _, tp := range order {
		r := rows[tp]
		lo, err := c.listOffset(ctx, tp.Topic, tp.Partition, OffsetLastStable())
		if err != nil {
			r.Err = err
			continue
		}
		r.HighWatermark, r.LastStableOffset, r.LogStartOffset = lo.HighWatermark, lo.Offset, lo.LogStartOffset
		from, end := r.Committed, r.HighWatermark
		if from < 0 {
			from = r.LogStartOffset
		}
		if r.Isolation == ReadCommitted {
			end = r.LastStableOffset
		}
		r.Lag = max(0, end-from)
		if r.Committed >= 0 && r.Committed < r.LogStartOffset {
			r.Headroom, r.AtRisk = 0, true
		}
	}
}

// fillRetention sets each row's topic retention.
func (c *Client) fillRetention(ctx context.Context, order []TopicPartition, rows map[TopicPartition]*PartitionLag) {
	var topics []string
	for i, tp := range order {
		if i == 0 || order[i-1].Topic != tp.Topic {
			topics = append(topics, tp.Topic)
		}
	}
	details, err := c.DescribeTopics(ctx, topics...)
	if err != nil {
		return
	}
	retention := map[string]time.Duration{}
	for _, t := range details {
		if ms, err := strconv.ParseInt(t.Configs["retention.ms"], 10, 64); err == nil && ms > 0 {
			retention[t.Name] = time.Duration(ms) * time.Millisecond
		}
	}
	for _, tp := range order {
		rows[tp].Retention = retention[tp.Topic]
	}
}

// fillLagTime reads the first unconsumed record of every lagging
// partition (bounded polls, at iso: a read_committed consumer's first
// record skips aborted ones) to date lag in time and headroom.
func (c *Client) fillLagTime(ctx context.Context, order []TopicPartition, rows map[TopicPartition]*PartitionLag, now time.Time, iso IsolationLevel) {
	k := NewConsumer(c, FetchMaxWait(100*time.Millisecond), FetchMaxPartitionBytes(1), FetchIsolation(iso))
	pending := map[TopicPartition]bool{}
	for _, tp := range order {
		r := rows[tp]
		if r.Err != nil || r.Lag == 0 || r.Committed < r.LogStartOffset {
			continue
		}
		k.Assign(tp.Topic, tp.Partition, OffsetExact(max(r.Committed, r.LogStartOffset)))
		pending[tp] = true
	}
	for attempt := 0; attempt < 5 && len(pending) > 0 && ctx.Err() == nil; attempt++ {
		for _, f := range k.Poll(ctx) {
			tp := TopicPartition{f.Topic, f.Partition}
			if !pending[tp] || len(f.Records) == 0 {
				continue
			}
			delete(pending, tp)
			k.Unassign(f.Topic, f.Partition)
			r := rows[tp]
			ts := f.Records[0].Timestamp
			r.LagTime = max(0, now.Sub(ts))
			if r.Retention > 0 {
				r.Headroom = max(0, ts.Add(r.Retention).Sub(now))
				r.AtRisk = r.Headroom < r.Retention/10
			}
		}
	}
}
