package node

import (
	"encoding/binary"
	"testing"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// fetchMarkers reads tp from offset on its leader with include_markers
// (the Kafka listener's fetch) at isolation iso.
func (c *cluster) fetchMarkers(tp TopicPartition, offset int64, iso int32) *strandpb.FetchResponse_Partition {
	c.t.Helper()
	p, _ := c.pollMarkers(tp, offset, iso, 0)
	return p
}

// pollMarkers is fetchMarkers as a long poll for min_bytes 1 (minBytes
// set) of at most 5 s, and the ticks it took to answer.
func (c *cluster) pollMarkers(tp TopicPartition, offset int64, iso, minBytes int32) (*strandpb.FetchResponse_Partition, int) {
	c.t.Helper()
	resp, ticks := c.handle(c.leader(tp), &strandpb.Request{CorrelationId: 8, Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
		IsolationLevel: iso, IncludeMarkers: true, MinBytes: minBytes, MaxWaitMs: 5000,
		Partitions: []*strandpb.FetchRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, MaxBytes: 1 << 20}}}}})
	ps := resp.GetFetch().GetPartitions()
	if len(ps) != 1 || ps[0].GetError() != nil {
		c.t.Fatalf("fetch answered %v", resp)
	}
	return ps[0], ticks
}

// TestTxnFetchIncludeMarkers: a fetch with include_markers serves each
// transaction marker at its one offset, between the batches, as a batch
// with no records, marker set (commit or abort) and the marker's producer
// id and epoch; read from a marker's own offset it is the first batch; at
// read_committed the aborted transaction's batch is dropped but its abort
// marker served; transactional batches are flagged so; a long poll for
// min_bytes answers a marker at once. A
// fetch without the flag serves none (TestTxnReadCommitted).
func TestTxnFetchIncludeMarkers(t *testing.T) {
	w := &holdingMarkers{}
	c := newCluster(t, 44, 3, replicated(3, "t", 1), txnTestConfig(w))
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
	// A long poll for min_bytes 1 at the abort marker, the last entry,
	// answers it at once (it waited its max wait: a marker had no bytes).
	if got, ticks := c.pollMarkers(t0, 5, 0, 1); len(got.GetBatches()) != 1 || got.GetBatches()[0].GetMarker() == nil || ticks > 20 {
		t.Fatalf("long poll at the abort marker: %v after %d ticks", got.GetBatches(), ticks)
	}
	c.plainWrite(t0, "after")

	// c at 0-1, commit marker at 2, a at 3-4, abort marker at 5, after at 6.
	type served struct {
		offset        int64
		marker        bool
		commit        bool
		producer      int64
		transactional bool
	}
	for iso, want := range map[int32][]served{
		0: {{0, false, false, p.ID, true}, {2, true, true, p.ID, false}, {3, false, false, p.ID, true}, {5, true, false, p.ID, false},
			{6, false, false, -1, false}},
		1: {{0, false, false, p.ID, true}, {2, true, true, p.ID, false}, {5, true, false, p.ID, false}, {6, false, false, -1, false}},
	} {
		var got []served
		for _, b := range c.fetchMarkers(t0, 0, iso).GetBatches() {
			got = append(got, served{b.GetBaseOffset(), b.GetMarker() != nil, b.GetMarker().GetCommit(), b.GetProducerId(), b.GetTransactional()})
			if b.GetMarker() != nil && len(b.GetRecords()) != 0 {
				t.Errorf("isolation %d: marker batch %v", iso, b)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("isolation %d: served %v, want %v", iso, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("isolation %d: served %v, want %v", iso, got, want)
			}
		}
	}
	if first := c.fetchMarkers(t0, 5, 0).GetBatches(); len(first) == 0 || first[0].GetBaseOffset() != 5 || first[0].GetMarker() == nil {
		t.Fatalf("fetch from the abort marker's offset: %v", first)
	}
}

// A served marker takes one offset and a Kafka-form batch its header's
// record count, so a long poll's readMore goes on after them (it read a
// marker again, and a Kafka batch's length field as its count, before).
func TestFetchedBatchNextOffset(t *testing.T) {
	kafka := make([]byte, recordbatch.KafkaHeaderBytes)
	binary.BigEndian.PutUint32(kafka[8:], 999) // the length field, not the count
	binary.BigEndian.PutUint32(kafka[recordbatch.KafkaHeaderBytes-4:], 3)
	for name, tc := range map[string]struct {
		b    FetchedBatch
		want int64
	}{
		"marker": {FetchedBatch{BaseOffset: 5, Marker: &engine.Marker{Commit: true}}, 6},
		"kafka":  {FetchedBatch{BaseOffset: 5, Batch: kafka}, 8},
		"strand": {FetchedBatch{BaseOffset: 5, Batch: testBatch(t, "s", 2)}, 7},
	} {
		if got := tc.b.nextOffset(); got != tc.want {
			t.Errorf("%s: next offset %d, want %d", name, got, tc.want)
		}
	}
}
