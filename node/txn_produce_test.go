package node

import (
	"testing"

	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// txnSeq numbers a producer's batches per partition (idempotence).
type txnSeq map[TopicPartition]int32

// produceTxn sends a transactional batch of count records of p to tp's
// leader over the wire, resending on retriable answers (bounded).
func (c *cluster) produceTxn(id string, p txn.Producer, tp TopicPartition, seq txnSeq, tag string, count int) *strandpb.ProduceResponse_Partition {
	c.t.Helper()
	req := &strandpb.Request{CorrelationId: 7, Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{
		Acks: -1, TransactionalId: id, Partitions: []*strandpb.ProduceRequest_Partition{{
			Topic: tp.Topic, Partition: tp.Partition, ProducerId: p.ID, ProducerEpoch: int32(p.Epoch),
			BaseSequence: seq[tp], Batch: testBatch(c.t, tag, count), Transactional: true}}}}}
	for range 20 {
		resp, _ := c.handle(c.leader(tp), req)
		out := resp.GetProduce().GetPartitions()
		if len(out) != 1 {
			c.t.Fatalf("produce answered %v", resp)
		}
		if e := out[0].GetError(); e != nil && e.GetCode().Info().Retriable {
			c.tick(5)
			continue
		}
		if out[0].GetError() == nil {
			seq[tp] += int32(count)
		}
		return out[0]
	}
	c.t.Fatalf("transactional produce to %v kept failing", tp)
	return nil
}

// lsoOn returns the last stable offset and high-water mark of tp on its
// leader.
func (c *cluster) lsoOn(tp TopicPartition) (lso, hwm int64) {
	part := c.cores[c.leader(tp)].byTP[tp].part
	return part.LastStableOffset(), part.HighWatermark()
}

// TestTxnProduceIsVerified shows a transactional write is accepted only in
// the transaction the coordinator knows (KIP-890): a partition added to
// the transaction takes it (the coordinator on another node verified it),
// holding the last stable offset back until the commit's marker; a
// partition not added is refused INVALID_TXN_STATE with nothing written;
// a zombie producer (an older epoch, after a new InitProducerId aborted
// its transaction) is refused PRODUCER_FENCED. Checked to fail: with
// produceTransactional skipping the verification, the write to the
// partition not added is accepted; and a late duplicate of a marker
// (whose epoch is the next transaction's) ends the next transaction
// without the guard in writeMarkerHere.
func TestTxnProduceIsVerified(t *testing.T) {
	c := newCluster(t, 42, 3, replicated(3, "t", 2), txnTestConfig(PartitionMarkers{}))
	p := c.initTxn("app")
	coord := c.findTxnCoordinator("app")
	for i, tp := range []TopicPartition{{"t", 0}, {"t", 1}} {
		other := c.ids[i]
		if other == coord {
			other = c.ids[2]
		}
		c.placeLeader(tp, other)
	}
	seq := txnSeq{}
	t0, t1 := TopicPartition{"t", 0}, TopicPartition{"t", 1}
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	if r := c.produceTxn("app", p, t0, seq, "a", 3); r.GetError() != nil || r.GetBaseOffset() != 0 {
		t.Fatalf("write to an added partition: %v", r)
	}
	if r := c.produceTxn("app", p, t0, seq, "b", 2); r.GetError() != nil || r.GetBaseOffset() != 3 {
		t.Fatalf("second write: %v", r)
	}
	if lso, hwm := c.lsoOn(t0); lso != 0 || hwm != 5 {
		t.Fatalf("open transaction: LSO %d, high-water mark %d, want 0 and 5", lso, hwm)
	}
	r := c.produceTxn("app", p, t1, seq, "x", 1)
	if r.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE {
		t.Fatalf("write to a partition not added: %v", r)
	}
	if _, hwm := c.lsoOn(t1); hwm != 0 {
		t.Fatalf("the refused write took offsets: high-water mark %d", hwm)
	}
	if r := c.txnCall("app", endTxnReq("app", p, true)); r.GetError() != nil {
		t.Fatalf("end: %v", r.GetError())
	}
	c.waitTxnState("app", "CompleteCommit")
	if lso, hwm := c.lsoOn(t0); lso != 6 || hwm != 6 {
		t.Fatalf("after the commit: LSO %d, high-water mark %d, want 6 (the marker took offset 5)", lso, hwm)
	}

	// A zombie: the next transaction is open, a new InitProducerId takes
	// the id (aborting it); the old producer's writes are fenced.
	next := txn.Producer{ID: p.ID, Epoch: p.Epoch + 1}
	if r := c.txnRetry("app", addPartitionsReq("app", next, "t", 0)); r.GetError() != nil {
		t.Fatalf("add for the next transaction: %v", r.GetError())
	}
	if r := c.produceTxn("app", next, t0, txnSeq{}, "c", 1); r.GetError() != nil {
		t.Fatalf("write of the next transaction: %v", r)
	}
	// A late duplicate of the first commit's marker (its epoch is the next
	// transaction's) is answered done and does not end the next one.
	stale := TxnMarker{TransactionalID: "app", Commit: true, Producer: next, Partition: t0, CoordinatorEpoch: 1 << 20}
	if err := c.writeMarker(coord, stale); err != nil {
		t.Fatalf("late marker: %v", err)
	}
	if lso, hwm := c.lsoOn(t0); lso != 6 || hwm != 7 {
		t.Fatalf("after a late marker: LSO %d, high-water mark %d, want 6 and 7 (the next transaction still open)", lso, hwm)
	}
	wantCode(t, "init on an open transaction", c.txnCall("app", initTxnReq("app", 60_000)), strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS)
	c.waitTxnState("app", "CompleteAbort")
	if lso, hwm := c.lsoOn(t0); lso != hwm {
		t.Fatalf("after the fencing abort: LSO %d, high-water mark %d", lso, hwm)
	}
	if r := c.produceTxn("app", next, t0, txnSeq{t0: 1}, "zombie", 1); r.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED {
		t.Fatalf("zombie write: %v", r)
	}
}

// TestTxnKeptEpochMarkersEndEachTransaction shows a transactions v1
// client (EndTxn keep_epoch: Kafka's EndTxn below v5) runs transaction
// after transaction at one epoch, and each one's markers are written and
// end it: the partition's last stable offset reaches the high-water mark
// after each commit, the second transaction included, whose marker
// carries the epoch it ran at. Checked to fail: with writeMarkerHere's
// late-duplicate guard applied to kept-epoch markers, the first commit's
// marker is answered done unwritten and the LSO stays at 0 (of 2).
func TestTxnKeptEpochMarkersEndEachTransaction(t *testing.T) {
	c := newCluster(t, 43, 3, replicated(3, "t", 1), txnTestConfig(PartitionMarkers{}))
	p := c.initTxn("v1")
	coord := c.findTxnCoordinator("v1")
	t0 := TopicPartition{"t", 0}
	for _, id := range c.ids {
		if id != coord {
			c.placeLeader(t0, id)
			break
		}
	}
	seq := txnSeq{}
	for round := range 2 {
		if r := c.txnRetry("v1", addPartitionsReq("v1", p, "t", 0)); r.GetError() != nil {
			t.Fatalf("round %d: add partitions: %v", round, r.GetError())
		}
		if r := c.produceTxn("v1", p, t0, seq, "v", 2); r.GetError() != nil {
			t.Fatalf("round %d: write: %v", round, r)
		}
		end := endTxnReq("v1", p, true)
		end.GetEndTxn().KeepEpoch = true
		r := c.txnCall("v1", end)
		if r.GetError() != nil {
			t.Fatalf("round %d: end: %v", round, r.GetError())
		}
		if got := r.GetEndTxn(); got.GetProducerId() != p.ID || got.GetProducerEpoch() != int32(p.Epoch) {
			t.Fatalf("round %d: end answered %v, want the same producer %+v", round, got, p)
		}
		c.waitTxnState("v1", "CompleteCommit")
		if lso, hwm := c.lsoOn(t0); lso != hwm || hwm != int64(3*(round+1)) {
			t.Fatalf("round %d: LSO %d, high-water mark %d, want both %d", round, lso, hwm, 3*(round+1))
		}
	}
}

// TestTxnProduceRefusesDamagedBatchFirst shows a transactional batch whose
// CRC does not match is refused CORRUPT_BATCH before the verification
// with the coordinator: the simulator (seed 12 of the transactional
// workload) saw a damaged batch answered TIMEOUT, the verification's
// answer while the coordinator was away, hiding the damage. Checked to
// fail without the check: the write to a partition not added is answered
// INVALID_TXN_STATE.
func TestTxnProduceRefusesDamagedBatchFirst(t *testing.T) {
	c := newCluster(t, 42, 3, replicated(3, "t", 1), txnTestConfig(PartitionMarkers{}))
	p := c.initTxn("app")
	tp := TopicPartition{"t", 0}
	batch := testBatch(t, "d", 2)
	batch[len(batch)-1] ^= 1 // a record byte: the CRC no longer matches
	req := &strandpb.Request{CorrelationId: 7, Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{
		Acks: -1, TransactionalId: "app", Partitions: []*strandpb.ProduceRequest_Partition{{
			Topic: tp.Topic, Partition: tp.Partition, ProducerId: p.ID, ProducerEpoch: int32(p.Epoch),
			Batch: batch, Transactional: true}}}}}
	resp, _ := c.handle(c.leader(tp), req)
	out := resp.GetProduce().GetPartitions()
	if len(out) != 1 || out[0].GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH {
		t.Fatalf("damaged transactional batch answered %v, want CORRUPT_BATCH", resp)
	}
	if _, hwm := c.lsoOn(tp); hwm != 0 {
		t.Fatalf("the refused write took offsets: high-water mark %d", hwm)
	}
}
