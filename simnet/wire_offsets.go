package simnet

import (
	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/proto/strandpb"
)

// The random readers' mix, out of readerMix operations: describeShare
// are DescribeTopics, listShare ListOffsets, the rest fetches.
const (
	readerMix     = 16
	describeShare = 1
	listShare     = 4
)

// offsetQuery is one ListOffsets operation: which offset it asks for.
type offsetQuery struct {
	p         int
	spec      linearizability.OffsetSpec
	timestamp int64 // node.TimestampLatest, TimestampEarliest, or a time in ms
}

// nextQuery draws a reader's ListOffsets: latest, earliest or by a
// timestamp between the run's start and now.
func (c *wireClient) nextQuery(p int) offsetQuery {
	switch c.rng.IntN(3) {
	case 0:
		return offsetQuery{p: p, spec: linearizability.OffsetLatest, timestamp: -1}
	case 1:
		return offsetQuery{p: p, spec: linearizability.OffsetEarliest, timestamp: -2}
	}
	nowMs := int64(c.ww.w.now() / 1e6)
	return offsetQuery{p: p, timestamp: epochMillis(0) + c.rng.Int64N(nowMs+1)}
}

// listOffsets sends one ListOffsets attempt. Latest and earliest are
// checked operations of the history (linearizable through ReadIndex, like
// a fetch); a timestamp lookup is checked against the answer's own bounds
// (the log model keeps no timestamps) and moves the reader there.
func (c *wireClient) listOffsets(q offsetQuery) {
	w := c.ww.w
	c.attempts++
	topicID, inc, ok := c.topicID(q.p)
	if !ok {
		c.refreshTopic(q.p)
		c.retryListOffsets(q)
		return
	}
	floor := w.work.floor(q.p, inc)
	var op *histOp
	if q.timestamp < 0 {
		op = &histOp{id: w.hist.h.CallListOffsets(linearizability.ClientID(c.index), w.hist.key(q.p, inc), q.spec, ns(w.now()))}
	}
	req := &strandpb.Request{Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
		Partitions: []*strandpb.ListOffsetsRequest_Partition{{Topic: c.ww.tps[q.p].Topic, Partition: c.ww.tps[q.p].Partition,
			TimestampMs: q.timestamp, TopicId: topicID}},
	}}}
	target := c.leaderOf(q.p)
	c.ww.call(c, target, req, func(resp *strandpb.Response, err error) {
		var part *strandpb.ListOffsetsResponse_Partition
		if err == nil {
			err = wireErr(resp.GetError())
		}
		if err == nil {
			ps := resp.GetListOffsets().GetPartitions()
			if len(ps) != 1 {
				w.fail("list offsets answered %d partitions for one", len(ps))
				err = &clientlib.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST}
			} else {
				part = ps[0]
				err = wireErr(part.GetError())
			}
		}
		c.onListOffsets(q, inc, floor, target, op, part, err)
	})
}

// onListOffsets checks and records a ListOffsets answer, or retries.
func (c *wireClient) onListOffsets(q offsetQuery, inc int, floor int64, target int, op *histOp,
	part *strandpb.ListOffsetsResponse_Partition, err error) {
	w := c.ww.w
	if err != nil {
		if op != nil {
			w.hist.fetchFail(op, w.now())
		}
		a := c.react(q.p, err)
		if code := errCode(err); !a.Retriable && code != strandpb.ErrorCode_ERROR_CODE_NONE &&
			code != strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID {
			w.fail("list offsets %d (timestamp %d) refused by node %d: %v", q.p, q.timestamp, target+1, err)
		}
		c.retryListOffsets(q)
		return
	}
	off, hwm, start := part.GetOffset(), part.GetHighWatermark(), part.GetLogStartOffset()
	want := off
	switch q.timestamp {
	case -1:
		want = hwm
	case -2:
		want = start
	}
	switch {
	case off != want || start > hwm || off < start || off > hwm:
		w.fail("list offsets %d (timestamp %d) at node %d: offset %d outside or off its bounds [%d, %d]",
			q.p, q.timestamp, target+1, off, start, hwm)
	case hwm < floor:
		w.fail("partition %d: list offsets at node %d returned hwm %d after a fetch had returned %d",
			q.p, target+1, hwm, floor)
	}
	w.work.raise(q.p, inc, hwm)
	if op != nil {
		w.hist.h.ReturnOffset(op.id, off, ns(w.now()))
	}
	if q.timestamp >= 0 {
		// A reader seeks by time, as a consumer would: the same operation
		// fetches from the looked-up batch on.
		w.coverage.Inc("event/list-offsets-time")
		c.readOffset, c.attempts = off, 0
		c.fetch(q.p)
		return
	}
	c.fetchDone(q.p, nil)
}

// retryListOffsets tries q again after a backoff, or gives it up after
// the operation's deadline.
func (c *wireClient) retryListOffsets(q offsetQuery) {
	w := c.ww.w
	if w.now()-c.opStart > w.opts.OpDeadline {
		c.fetchDone(q.p, nil)
		return
	}
	c.after(wireBackoff.Delay(c.attempts, c.rng), func() { c.listOffsets(q) })
}

// describe asks a random node for a random topic's description (one
// attempt; it reads the node's applied metadata): a node that knows the
// topic must give the partition count and replication factor it was
// created with.
func (c *wireClient) describe() {
	w := c.ww.w
	o := w.opts
	target := c.randomNode()
	t := c.ww.topics[c.rng.IntN(len(c.ww.topics))]
	req := &strandpb.Request{Body: &strandpb.Request_DescribeTopics{DescribeTopics: &strandpb.DescribeTopicsRequest{
		Names: []string{t.name}}}}
	c.ww.call(c, target, req, func(resp *strandpb.Response, err error) {
		if err == nil {
			err = wireErr(resp.GetError())
		}
		if err == nil {
			ts := resp.GetDescribeTopics().GetTopics()
			switch {
			case len(ts) != 1 || ts[0].GetName() != t.name:
				w.fail("describe topics %q at node %d answered %d topics", t.name, target+1, len(ts))
			case ts[0].GetError() != nil && ts[0].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE:
				// A node whose metadata has not replayed yet may not know it.
			case !c.ww.describedCount(t, ts[0].GetPartitions()) || ts[0].GetReplicationFactor() != int32(o.Replication):
				w.fail("describe topics %q at node %d: %d partitions, replication %d; created with %d and %d",
					t.name, target+1, ts[0].GetPartitions(), ts[0].GetReplicationFactor(), t.partitions, o.Replication)
			default:
				w.coverage.Inc("event/describe-topics")
			}
		}
		c.fetchDone(0, nil)
	})
}
