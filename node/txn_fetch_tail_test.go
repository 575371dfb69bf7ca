package node

import (
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// readOn reads tp natively at isolation iso from offset as a reader does:
// past the batches each answer holds, or to its next_offset when that is
// further; it stops when an answer moves it no further (at most 10
// answers). It returns where the reader got and the values it read.
func (c *cluster) readOn(tp TopicPartition, offset int64, iso int32) (int64, []string) {
	c.t.Helper()
	var vals []string
	for range 10 {
		p := c.fetchWire(tp, offset, iso)
		pos := offset
		for _, b := range p.GetBatches() {
			pos = max(pos, b.GetBaseOffset()+int64(batchRecordCount(b.GetRecords())))
		}
		pos = max(pos, p.GetNextOffset())
		vals = append(vals, c.valuesOf(p)...)
		if pos == offset {
			break
		}
		offset = pos
	}
	return offset, vals
}

// TestTxnFetchPastTrailingMarker: a native reader (no include_markers)
// whose fetch covers only transaction markers, or an aborted
// transaction's batches and its marker, at the end of the log moves past
// them to the high-water mark, at read_committed and read_uncommitted:
// the answer's next_offset is past the markers it skipped, as Kafka's
// consumer moves past a control batch. A long poll for min_bytes at such
// a marker answers at once, as Kafka counts the control batch. Checked to
// fail without next_offset past skipped markers: the reader stayed on
// the marker (next_offset 0, no batch), one short of the high-water mark.
func TestTxnFetchPastTrailingMarker(t *testing.T) {
	c := newCluster(t, 45, 3, replicated(3, "t", 1), txnTestConfig(&holdingMarkers{}))
	t0 := TopicPartition{"t", 0}
	p := c.initTxn("app")
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	if r := c.produceTxn("app", p, t0, txnSeq{}, "c", 2); r.GetError() != nil {
		t.Fatalf("write: %v", r)
	}
	if r := c.txnCall("app", endTxnReq("app", p, true)); r.GetError() != nil {
		t.Fatalf("commit: %v", r.GetError())
	}
	c.waitTxnState("app", "CompleteCommit")
	// c at 0-1, the commit marker at 2, the last entry.
	for _, iso := range []int32{0, 1} {
		if at := c.fetchWire(t0, 2, iso); at.GetHighWatermark() != 3 || len(at.GetBatches()) != 0 || at.GetNextOffset() != 3 {
			t.Fatalf("isolation %d: fetch at the commit marker: batches %v, next offset %d, high-water mark %d; want none, 3, 3",
				iso, at.GetBatches(), at.GetNextOffset(), at.GetHighWatermark())
		}
		for _, from := range []int64{0, 2} {
			if pos, vals := c.readOn(t0, from, iso); pos != 3 || from == 0 && !slices.Equal(vals, []string{"0:c-0", "1:c-1"}) {
				t.Fatalf("isolation %d: reading from %d got to %d with %v; want 3", iso, from, pos, vals)
			}
		}
	}

	next := txn.Producer{ID: p.ID, Epoch: p.Epoch + 1}
	if r := c.txnRetry("app", addPartitionsReq("app", next, "t", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	if r := c.produceTxn("app", next, t0, txnSeq{}, "a", 2); r.GetError() != nil {
		t.Fatalf("write: %v", r)
	}
	if r := c.txnCall("app", endTxnReq("app", next, false)); r.GetError() != nil {
		t.Fatalf("abort: %v", r.GetError())
	}
	c.waitTxnState("app", "CompleteAbort")
	// a at 3-4, the abort marker at 5, the last entry.
	for _, tc := range []struct {
		iso  int32
		from int64
		want []string
	}{
		{1, 0, []string{"0:c-0", "1:c-1"}}, {1, 2, nil}, {1, 3, nil}, {1, 5, nil},
		{0, 0, []string{"0:c-0", "1:c-1", "3:a-0", "4:a-1"}}, {0, 3, []string{"3:a-0", "4:a-1"}}, {0, 5, nil},
	} {
		if pos, vals := c.readOn(t0, tc.from, tc.iso); pos != 6 || !slices.Equal(vals, tc.want) {
			t.Fatalf("isolation %d: reading from %d got to %d with %v; want 6 with %v", tc.iso, tc.from, pos, vals, tc.want)
		}
	}
	for _, iso := range []int32{0, 1} {
		resp, ticks := c.handle(c.leader(t0), &strandpb.Request{CorrelationId: 8, Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
			IsolationLevel: iso, MinBytes: 1, MaxWaitMs: 5000,
			Partitions: []*strandpb.FetchRequest_Partition{{Topic: t0.Topic, Partition: t0.Partition, Offset: 5, MaxBytes: 1 << 20}}}}})
		ps := resp.GetFetch().GetPartitions()
		if len(ps) != 1 || ps[0].GetError() != nil || ps[0].GetNextOffset() != 6 || ticks > 20 {
			t.Fatalf("isolation %d: long poll at the abort marker: %v after %d ticks; want next offset 6 at once", iso, resp, ticks)
		}
	}
}
