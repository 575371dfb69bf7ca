package node

import (
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

func abortTxnReq(id string) *strandpb.Request {
	return &strandpb.Request{CorrelationId: 11, Body: &strandpb.Request_AbortTransaction{AbortTransaction: &strandpb.AbortTransactionRequest{
		TransactionalId: id}}}
}

// replicaViewOf is tp's replica in node id's AdminView.
func (c *cluster) replicaViewOf(id NodeID, tp TopicPartition) ReplicaView {
	c.t.Helper()
	for _, r := range c.cores[id].AdminView().Replicas {
		if r.TopicPartition == tp {
			return r
		}
	}
	c.t.Fatalf("node %d hosts no %v", id, tp)
	return ReplicaView{}
}

// TestTxnAdminAbort shows strand txn abort's request: a transaction left
// open over two partitions is aborted by an operator. The answer comes
// once the abort is decided, naming the producer at the abort's epoch and
// the partitions; the markers are written, so the last stable offset
// moves up to the high-water mark and read_committed never sees the
// records; the old producer is fenced (its EndTxn, AddPartitions and
// transactional produce refused); a second abort, an id without a
// transaction and an unknown id are each a typed refusal. The counters
// and gauges of /metrics follow. Checked to fail: without the AdminAbort
// command the request is refused INVALID_REQUEST.
func TestTxnAdminAbort(t *testing.T) {
	c := newCluster(t, 61, 3, replicated(3, "t", 2), txnTestConfig(PartitionMarkers{}))
	t0, t1 := TopicPartition{"t", 0}, TopicPartition{"t", 1}
	c.plainWrite(t0, "before")
	p := c.initTxn("app")
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0, 1)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq := txnSeq{}
	for _, tp := range []TopicPartition{t0, t1} {
		if r := c.produceTxn("app", p, tp, seq, "hang", 2); r.GetError() != nil {
			t.Fatalf("write to %v: %v", tp, r)
		}
	}
	coord := c.findTxnCoordinator("app")
	if v := c.cores[coord].AdminView(); v.Txn.Open != 1 || v.Txn.OldestStartMs < 0 || v.Stats.TxnBegun != 1 {
		t.Fatalf("coordinator's view while open: %+v, begun %d", v.Txn, v.Stats.TxnBegun)
	}
	if r := c.replicaViewOf(c.leader(t0), t0); r.LastStableOffset != 1 || r.HighWatermark != 3 {
		t.Fatalf("t/0 while open: LSO %d, high-water mark %d, want 1 and 3", r.LastStableOffset, r.HighWatermark)
	}

	r := c.txnCall("app", abortTxnReq("app"))
	a := r.GetAbortTransaction()
	if r.GetError() != nil || a.GetProducerId() != p.ID || a.GetProducerEpoch() != int32(p.Epoch)+1 || a.GetAlready() ||
		len(a.GetTopics()) != 1 || !slices.Equal(a.GetTopics()[0].GetPartitions(), []int32{0, 1}) {
		t.Fatalf("abort: %v", r)
	}
	c.waitTxnState("app", "CompleteAbort")
	for _, tp := range []TopicPartition{t0, t1} {
		c.tick(20)
		if lso, hwm := c.lsoOn(tp); lso != hwm {
			t.Fatalf("%v after the abort: LSO %d, high-water mark %d", tp, lso, hwm)
		}
	}
	if got := c.valuesOf(c.fetchWire(t0, 0, 1)); !slices.Equal(got, []string{"0:before-0"}) {
		t.Fatalf("read_committed of t/0 after the abort: %v", got)
	}
	if got := c.valuesOf(c.fetchWire(t1, 0, 1)); len(got) != 0 {
		t.Fatalf("read_committed of t/1 after the abort: %v", got)
	}

	wantCode(t, "the old producer's commit", c.txnCall("app", endTxnReq("app", p, true)), strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED)
	wantCode(t, "the old producer's add", c.txnCall("app", addPartitionsReq("app", p, "t", 0)), strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED)
	if w := c.produceTxn("app", p, t0, seq, "zombie", 1); w.GetError() == nil {
		t.Fatalf("the old producer's write was taken: %v", w)
	}
	wantCode(t, "a second abort", c.txnCall("app", abortTxnReq("app")), strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE)
	wantCode(t, "an unknown id", c.txnCall("nobody", abortTxnReq("nobody")), strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND)
	next := c.initTxn("app")
	if next.ID != p.ID || next.Epoch != p.Epoch+2 {
		t.Fatalf("init after the abort: %+v, want epoch %d", next, p.Epoch+2)
	}
	coord = c.findTxnCoordinator("app")
	if v := c.cores[coord].AdminView(); v.Txn.Open != 0 || v.Txn.OldestStartMs != -1 || v.Stats.TxnAborted != 1 || v.Stats.TxnCommitted != 0 {
		t.Fatalf("coordinator's view after the abort: %+v, aborted %d", v.Txn, v.Stats.TxnAborted)
	}
}

// TestTxnAdminAbortWhileAborting shows an abort of a transaction already
// being aborted (its markers held back) is answered already, at the
// abort's epoch, and that the markers still complete it.
func TestTxnAdminAbortWhileAborting(t *testing.T) {
	w := &holdingMarkers{all: true}
	c := newCluster(t, 62, 3, replicated(3, "t", 1), txnTestConfig(w))
	p := c.initTxn("app")
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	if r := c.txnCall("app", abortTxnReq("app")); r.GetError() != nil || r.GetAbortTransaction().GetAlready() {
		t.Fatalf("abort: %v", r)
	}
	r := c.txnCall("app", abortTxnReq("app"))
	if a := r.GetAbortTransaction(); r.GetError() != nil || !a.GetAlready() || a.GetProducerEpoch() != int32(p.Epoch)+1 {
		t.Fatalf("abort while aborting: %v", r)
	}
	w.release()
	c.waitTxnState("app", "CompleteAbort")
}

// TestTxnMarkerForDeletedTopic shows a committed transaction whose
// partition's topic was deleted before its marker completes: the
// coordinator confirms the deletion with the metadata group and counts
// that marker done (Kafka drops a deleted partition), so the transaction
// reaches CompleteCommit, the other partition's records are visible and
// the id takes its next transaction. Checked to fail: without the
// confirmation the marker is retried forever and the id stays
// PrepareCommit (its next InitProducerId CONCURRENT_TRANSACTIONS).
func TestTxnMarkerForDeletedTopic(t *testing.T) {
	w := &holdingMarkers{}
	c := newCluster(t, 63, 3, replicated(3, "t", 1), txnTestConfig(w))
	c.createTopic(c.metaLeaderOf(), "gone", 1, 3)
	t0, gone := TopicPartition{"t", 0}, TopicPartition{"gone", 0}
	for range 50 {
		if c.leader(gone) != 0 {
			break
		}
		c.tick(5)
	}
	p := c.initTxn("app")
	add := &strandpb.Request{CorrelationId: 2, Body: &strandpb.Request_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnRequest{
		TransactionalId: "app", Producer: wireProducer(p), Topics: []*strandpb.TxnPartitions{{Topic: "t", Partitions: []int32{0}},
			{Topic: "gone", Partitions: []int32{0}}}}}}
	if r := c.txnCall("app", add); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	seq := txnSeq{}
	for _, tp := range []TopicPartition{t0, gone} {
		if r := c.produceTxn("app", p, tp, seq, "x", 1); r.GetError() != nil {
			t.Fatalf("write to %v: %v", tp, r)
		}
	}
	w.hold = map[TopicPartition]bool{gone: true}
	if r := c.txnCall("app", endTxnReq("app", p, true)); r.GetError() != nil {
		t.Fatalf("commit: %v", r.GetError())
	}
	del := &strandpb.Request{CorrelationId: 5, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"gone"}}}}
	if r, _ := c.handle(c.metaLeaderOf(), del); r.GetError() != nil || r.GetDeleteTopics().GetTopics()[0].GetError() != nil {
		t.Fatalf("delete topic: %v", r)
	}
	c.tick(20)
	w.release()
	c.waitTxnState("app", "CompleteCommit")
	if got := c.valuesOf(c.fetchWire(t0, 0, 1)); !slices.Equal(got, []string{"0:x-0"}) {
		t.Fatalf("read_committed of t/0: %v", got)
	}
	if next := c.initTxn("app"); next != (txn.Producer{ID: p.ID, Epoch: p.Epoch + 2}) {
		t.Fatalf("init after the commit: %+v", next)
	}
}
