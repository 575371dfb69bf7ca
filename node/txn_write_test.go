package node

import (
	"strings"
	"testing"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/txn"
	"github.com/strandlog/strand/proto/strandpb"
)

// placeLeader moves the leadership of tp to node to (bounded).
func (c *cluster) placeLeader(tp TopicPartition, to NodeID) {
	c.t.Helper()
	for range 20 {
		lead := c.leader(tp)
		if lead == to {
			return
		}
		c.transferLeader(tp, lead, to)
		c.tick(5)
	}
	c.t.Fatalf("%v: leadership does not move to node %d", tp, to)
}

// proposeOn proposes the entry encode builds on tp's leader and waits for
// its outcome.
func (c *cluster) proposeOn(tp TopicPartition, encode func(id uint64) []byte) ProduceResult {
	c.t.Helper()
	lead := c.leader(tp)
	var res *ProduceResult
	core := c.cores[lead]
	core.proposeEntry(core.byTP[tp], encode, func(r ProduceResult) { res = &r })
	core.flush()
	for i := 0; res == nil && i < 200; i++ {
		c.tick(1)
	}
	if res == nil {
		c.t.Fatalf("proposal on %v never completed", tp)
	}
	return *res
}

// waitTxnState ticks until id's coordinator describes it in state want.
func (c *cluster) waitTxnState(id, want string) *strandpb.DescribeTransactionsResponse_Transaction {
	c.t.Helper()
	var d *strandpb.DescribeTransactionsResponse_Transaction
	for range 60 {
		if d = c.describeTxn(id); d.GetState() == want {
			return d
		}
		c.tick(10)
	}
	c.t.Fatalf("%q stays %v, want %s", id, d, want)
	return nil
}

// openOn lists the live replicas of tp on which producer p has a
// transaction open.
func (c *cluster) openOn(tp TopicPartition, p txn.Producer) []NodeID {
	var out []NodeID
	for _, id := range c.ids {
		if core := c.cores[id]; core != nil && core.byTP[tp] != nil {
			if _, open := core.byTP[tp].part.TxnOpen(p.ID); open {
				out = append(out, id)
			}
		}
	}
	return out
}

// TestTxnMarkersReachEveryPartition shows the real marker writer: a
// committed transaction's markers end it on every replica of both
// partitions, one led by the coordinator's node (proposed there) and one
// led by another node (asked through WriteTxnMarkers between nodes); the
// coordinator completes the commit only then. Checked to fail: with
// writeTxnMarker answering done without proposing, the transactions stay
// open on every replica.
func TestTxnMarkersReachEveryPartition(t *testing.T) {
	c := newCluster(t, 41, 3, replicated(3, "t", 2), txnTestConfig(PartitionMarkers{}))
	p := c.initTxn("app")
	coord := c.findTxnCoordinator("app")
	other := c.ids[0]
	if other == coord {
		other = c.ids[1]
	}
	c.placeLeader(TopicPartition{"t", 0}, coord)
	c.placeLeader(TopicPartition{"t", 1}, other)
	if r := c.txnCall("app", addPartitionsReq("app", p, "t", 0, 1)); r.GetError() != nil {
		t.Fatalf("add partitions: %v", r.GetError())
	}
	for _, tp := range []TopicPartition{{"t", 0}, {"t", 1}} {
		res := c.proposeOn(tp, func(id uint64) []byte { return engine.EncodeTxnBeginEntry(nil, 1, id, p.ID, int32(p.Epoch)) })
		if res.Err != nil {
			t.Fatalf("begin on %v: %v", tp, res.Err)
		}
		if open := c.openOn(tp, p); len(open) != 3 {
			t.Fatalf("%v: transaction open on %v after the begin", tp, open)
		}
	}
	if r := c.txnCall("app", endTxnReq("app", p, true)); r.GetError() != nil {
		t.Fatalf("end: %v", r.GetError())
	}
	c.waitTxnState("app", "CompleteCommit")
	for _, tp := range []TopicPartition{{"t", 0}, {"t", 1}} {
		if open := c.openOn(tp, p); len(open) != 0 {
			t.Fatalf("%v: transaction still open on %v after CompleteCommit", tp, open)
		}
	}
	// A marker the partition already took is done again (a re-ask), and a
	// marker of an older coordinator epoch is refused.
	marker := TxnMarker{TransactionalID: "app", Commit: true, Producer: txn.Producer{ID: p.ID, Epoch: p.Epoch + 1},
		Partition: TopicPartition{"t", 1}, CoordinatorEpoch: coordinatorEpoch(c.cores[coord].txn.coords[TopicPartition{TransactionsTopic, TxnPartition("app", 2)}].Term)}
	if err := c.writeMarker(coord, marker); err != nil {
		t.Fatalf("re-asked marker: %v", err)
	}
	marker.CoordinatorEpoch--
	if err := c.writeMarker(coord, marker); err == nil || !strings.Contains(err.Error(), "transaction_coordinator_fenced") {
		t.Fatalf("marker of an older coordinator epoch: %v", err)
	}
}

// writeMarker runs PartitionMarkers on node id and waits for its outcome.
func (c *cluster) writeMarker(id NodeID, m TxnMarker) error {
	c.t.Helper()
	var out error
	done := false
	core := c.cores[id]
	PartitionMarkers{}.WriteTxnMarker(core, m, func(err error) { out, done = err, true })
	core.flush()
	for i := 0; !done && i < 200; i++ {
		c.tick(1)
	}
	if !done {
		c.t.Fatalf("marker write on node %d never completed", id)
	}
	return out
}
