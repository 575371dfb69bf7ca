package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// holdingMarkers is PartitionMarkers that keeps the markers of the
// partitions in hold (and every marker while all is set) instead of
// writing them, until released: a marker delayed on one partition, or a
// coordinator that crashes before writing any.
type holdingMarkers struct {
	hold map[TopicPartition]bool
	all  bool
	held []func()
}

func (w *holdingMarkers) WriteTxnMarker(c *Core, m TxnMarker, done func(error)) {
	if w.all || w.hold[m.Partition] {
		w.held = append(w.held, func() { PartitionMarkers{}.WriteTxnMarker(c, m, done) })
		return
	}
	PartitionMarkers{}.WriteTxnMarker(c, m, done)
}

// release writes the held markers (of live nodes: the caller says which
// node's are gone by dropping them first).
func (w *holdingMarkers) release() {
	held := w.held
	w.held, w.hold, w.all = nil, nil, false
	for _, f := range held {
		f()
	}
}

// fetchWire reads tp from offset on its leader over the wire at isolation
// iso (0 read_uncommitted, 1 read_committed), without waiting.
func (c *cluster) fetchWire(tp TopicPartition, offset int64, iso int32) *strandpb.FetchResponse_Partition {
	c.t.Helper()
	return c.fetchWireMax(tp, offset, iso, 1<<20)
}

// fetchWireMax is fetchWire with a partition byte budget (the first batch
// read goes out whole).
func (c *cluster) fetchWireMax(tp TopicPartition, offset int64, iso, maxBytes int32) *strandpb.FetchResponse_Partition {
	c.t.Helper()
	for range 20 {
		resp, _ := c.handle(c.leader(tp), &strandpb.Request{CorrelationId: 8, Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
			IsolationLevel: iso, Partitions: []*strandpb.FetchRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, MaxBytes: maxBytes}}}}})
		ps := resp.GetFetch().GetPartitions()
		if len(ps) != 1 {
			c.t.Fatalf("fetch answered %v", resp)
		}
		if e := ps[0].GetError(); e != nil && e.GetCode().Info().Retriable {
			c.tick(5)
			continue
		}
		if ps[0].GetError() != nil {
			c.t.Fatalf("fetch %v at %d: %v", tp, offset, ps[0].GetError())
		}
		return ps[0]
	}
	c.t.Fatalf("fetch of %v kept failing", tp)
	return nil
}

// valuesOf lists the record values a fetch answer holds, with offsets.
func (c *cluster) valuesOf(p *strandpb.FetchResponse_Partition) []string {
	var out []string
	for _, b := range p.GetBatches() {
		for i, v := range recordValues(c.t.(*testing.T), b.GetRecords()) {
			out = append(out, fmt.Sprintf("%d:%s", b.GetBaseOffset()+int64(i), v))
		}
	}
	return out
}

// listLatest is ListOffsets latest of tp at isolation iso.
func (c *cluster) listLatest(tp TopicPartition, iso int32) int64 {
	c.t.Helper()
	resp, _ := c.handle(c.leader(tp), &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
		IsolationLevel: iso, Partitions: []*strandpb.ListOffsetsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, TimestampMs: TimestampLatest}}}}})
	ps := resp.GetListOffsets().GetPartitions()
	if len(ps) != 1 || ps[0].GetError() != nil {
		c.t.Fatalf("list offsets: %v", resp)
	}
	return ps[0].GetOffset()
}

// plainWrite appends a non-transactional batch of one record to tp.
func (c *cluster) plainWrite(tp TopicPartition, tag string) {
	c.t.Helper()
	if res := c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(c.t, tag, 1)}); res.Err != nil {
		c.t.Fatalf("plain write: %v", res.Err)
	}
}

// TestTxnReadCommitted shows what read_committed and read_uncommitted
// native readers see of a committed and an aborted transaction over two
// partitions: while open, read_committed sees nothing of either partition
// from the transaction's first offset on (not even a later plain write),
// and ListOffsets latest is the LSO; once the commit's marker is written
// on a partition, all of the transaction's records there appear at once,
// and not before (the other partition's marker held back keeps them
// hidden there); an aborted transaction is never returned to
// read_committed, while read_uncommitted gets its batches with the
// aborted transaction listed; markers are never served as records.
// Checked to fail: reading at read_uncommitted whatever the level asked
// (the open transaction shows), and without dropping aborted batches.
func TestTxnReadCommitted(t *testing.T) {
	w := &holdingMarkers{}
	c := newCluster(t, 43, 3, replicated(3, "t", 2), txnTestConfig(w))
	t0, t1 := TopicPartition{"t", 0}, TopicPartition{"t", 1}
	p := c.initTxn("app")
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0, 1)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq := txnSeq{}
	for _, tp := range []TopicPartition{t0, t1} {
		for _, tag := range []string{"c1", "c2"} {
			if r := c.produceTxn("app", p, tp, seq, tag, 2); r.GetError() != nil {
				t.Fatalf("write %s to %v: %v", tag, tp, r)
			}
		}
	}
	c.plainWrite(t0, "plain")
	if got := c.valuesOf(c.fetchWire(t0, 0, 1)); len(got) != 0 {
		t.Fatalf("read_committed sees the open transaction: %v", got)
	}
	if rc, ru := c.listLatest(t0, 1), c.listLatest(t0, 0); rc != 0 || ru != 5 {
		t.Fatalf("latest offsets while open: read_committed %d, read_uncommitted %d, want 0 and 5", rc, ru)
	}
	if got := c.fetchWire(t0, 0, 0); len(c.valuesOf(got)) != 5 || got.GetLastStableOffset() != 0 {
		t.Fatalf("read_uncommitted while open: %v", got)
	}

	w.hold = map[TopicPartition]bool{t1: true}
	if r := c.txnCall("app", endTxnReq("app", p, true)); r.GetError() != nil {
		t.Fatalf("end: %v", r.GetError())
	}
	c.tick(30)
	want0 := []string{"0:c1-0", "1:c1-1", "2:c2-0", "3:c2-1", "4:plain-0"}
	if got := c.valuesOf(c.fetchWire(t0, 0, 1)); !slices.Equal(got, want0) {
		t.Fatalf("read_committed of t/0 after its commit marker: %v, want %v", got, want0)
	}
	if got := c.valuesOf(c.fetchWire(t1, 0, 1)); len(got) != 0 {
		t.Fatalf("read_committed of t/1 before its marker: %v", got)
	}
	w.release()
	c.waitTxnState("app", "CompleteCommit")
	if got := c.valuesOf(c.fetchWire(t1, 0, 1)); len(got) != 4 {
		t.Fatalf("read_committed of t/1 after its marker: %v", got)
	}

	// An aborted transaction over both partitions.
	next := txn.Producer{ID: p.ID, Epoch: p.Epoch + 1}
	if r := c.txnRetry("app", addPartitionsReq("app", next, "t", 0, 1)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq = txnSeq{}
	for _, tp := range []TopicPartition{t0, t1} {
		if r := c.produceTxn("app", next, tp, seq, "ab", 2); r.GetError() != nil {
			t.Fatalf("write to %v: %v", tp, r)
		}
	}
	if r := c.txnCall("app", endTxnReq("app", next, false)); r.GetError() != nil {
		t.Fatalf("abort: %v", r.GetError())
	}
	c.waitTxnState("app", "CompleteAbort")
	c.plainWrite(t0, "after")
	rc := c.fetchWire(t0, 0, 1)
	if got := c.valuesOf(rc); strings.Contains(strings.Join(got, " "), "ab-") || !slices.Equal(got, append(want0, "9:after-0")) {
		t.Fatalf("read_committed of t/0 after the abort: %v", got)
	}
	ru := c.fetchWire(t0, 0, 0)
	aborted := ru.GetAbortedTransactions()
	if got := c.valuesOf(ru); !slices.Contains(got, "6:ab-0") || len(aborted) != 1 ||
		aborted[0].GetProducerId() != p.ID || aborted[0].GetFirstOffset() != 6 || aborted[0].GetLastOffset() != 8 {
		t.Fatalf("read_uncommitted of t/0 after the abort: %v, aborted %v", got, aborted)
	}
	if ru.GetLastStableOffset() != ru.GetHighWatermark() || ru.GetHighWatermark() != 10 {
		t.Fatalf("after the abort: LSO %d, high-water mark %d", ru.GetLastStableOffset(), ru.GetHighWatermark())
	}
	// A read_committed read whose budget holds only the aborted batch
	// answers no batch, and says where to go on: past it and the abort
	// marker the read skipped after it (8), to the plain write at 9.
	// Without next_offset the reader asked for offset 6 again forever
	// (the simulator's seed 11 with a one-batch budget).
	if only := c.fetchWireMax(t0, 6, 1, 1); len(only.GetBatches()) != 0 || only.GetNextOffset() != 9 {
		t.Fatalf("read_committed of the aborted batch alone: %v, next offset %d, want none and 9", c.valuesOf(only), only.GetNextOffset())
	}
}

// waitCommitted ticks until read_committed of tp returns n records and
// the partition's LSO is its high-water mark.
func (c *cluster) waitCommitted(tp TopicPartition, n int) {
	c.t.Helper()
	var got []string
	for range 60 {
		r := c.fetchWire(tp, 0, 1)
		if got = c.valuesOf(r); len(got) == n && r.GetLastStableOffset() == r.GetHighWatermark() {
			return
		}
		c.tick(10)
	}
	c.t.Fatalf("read_committed of %v: %v, want %d records", tp, got, n)
}

// TestTxnCommitSurvivesCoordinatorCrash shows a commit decided by a
// coordinator that crashes before writing any marker (EndTxn answered,
// PrepareCommit durable) ends with its markers on every partition: the
// new coordinator's sweep asks for them again, and read_committed readers
// of both partitions get every record. Checked to fail with the sweep not
// driving the markers of prepared transactions.
func TestTxnCommitSurvivesCoordinatorCrash(t *testing.T) {
	w := &holdingMarkers{}
	c := newCluster(t, 44, 3, replicated(3, "t", 2), txnTestConfig(w))
	p := c.initTxn("app")
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0, 1)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq := txnSeq{}
	for _, tp := range []TopicPartition{{"t", 0}, {"t", 1}} {
		if r := c.produceTxn("app", p, tp, seq, "x", 3); r.GetError() != nil {
			t.Fatalf("write to %v: %v", tp, r)
		}
	}
	w.all = true
	if r := c.txnCall("app", endTxnReq("app", p, true)); r.GetError() != nil {
		t.Fatalf("end: %v", r.GetError())
	}
	coord := c.findTxnCoordinator("app")
	if len(w.held) != 2 {
		t.Fatalf("markers asked before the crash: %d, want 2", len(w.held))
	}
	c.crash(coord)
	w.held, w.all = nil, false // the crashed coordinator's: never written
	c.waitTxnState("app", "CompleteCommit")
	for _, tp := range []TopicPartition{{"t", 0}, {"t", 1}} {
		c.waitCommitted(tp, 3)
	}
	c.start(coord)
	c.tick(50)
	for _, tp := range []TopicPartition{{"t", 0}, {"t", 1}} {
		c.waitCommitted(tp, 3)
	}
}

// TestTxnCommitSurvivesPartitionLeaderCrash shows a transaction whose
// partition leaders crash mid-way: after a first write, the partition's
// new leader takes the next write of the same transaction (the begin is
// replicated); the commit's marker request to that leader is lost when it
// crashes too, the call times out, the coordinator's sweep asks again and
// the next leader writes it; every replica, the restarted ones too, then
// serves the whole transaction to read_committed. Checked to fail when a
// marker write that failed is never retried (its flight not cleared).
func TestTxnCommitSurvivesPartitionLeaderCrash(t *testing.T) {
	w := &holdingMarkers{}
	c := newCluster(t, 45, 3, replicated(3, "t", 1), txnTestConfig(w))
	t0 := TopicPartition{"t", 0}
	p := c.initTxn("app")
	coord := c.findTxnCoordinator("app")
	var others []NodeID
	for _, id := range c.ids {
		if id != coord {
			others = append(others, id)
		}
	}
	first, second := others[0], others[1]
	c.placeLeader(t0, first)
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq := txnSeq{}
	if r := c.produceTxn("app", p, t0, seq, "before", 2); r.GetError() != nil {
		t.Fatalf("first write: %v", r)
	}
	c.crash(first)
	c.placeLeader(t0, second)
	if r := c.produceTxn("app", p, t0, seq, "after", 2); r.GetError() != nil || r.GetBaseOffset() != 2 {
		t.Fatalf("write at the new leader: %v", r)
	}
	c.start(first)
	c.tick(20)
	w.hold = map[TopicPartition]bool{t0: true}
	if r := c.txnCall("app", endTxnReq("app", p, true)); r.GetError() != nil {
		t.Fatalf("end: %v", r.GetError())
	}
	c.placeLeader(t0, second)
	w.release()     // the WriteTxnMarkers request to second is in flight...
	c.crash(second) // ...and lost
	c.waitTxnState("app", "CompleteCommit")
	c.waitCommitted(t0, 4)
	c.start(second)
	c.tick(50)
	c.placeLeader(t0, second)
	c.waitCommitted(t0, 4)
}
