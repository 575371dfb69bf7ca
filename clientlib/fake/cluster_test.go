package fake

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// rawConn speaks the wire protocol by hand, without clientlib.
type rawConn struct {
	t    *testing.T
	nc   net.Conn
	r    *bufio.Reader
	corr uint64
}

func dialRaw(t *testing.T, addr string) *rawConn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { nc.Close() })
	c := &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	resp := c.do(&strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: 1, VersionMax: 1}}})
	if resp.GetHello().GetVersion() != 1 {
		t.Fatalf("hello: %v", resp)
	}
	return c
}

func (c *rawConn) send(req *strandpb.Request) {
	c.t.Helper()
	c.corr++
	req.CorrelationId = c.corr
	buf, err := frame.Append(nil, req)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(buf); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) do(req *strandpb.Request) *strandpb.Response {
	c.t.Helper()
	c.send(req)
	var resp strandpb.Response
	if _, err := frame.Decode(c.r, nil, frame.BytesMaxDefault, &resp); err != nil {
		c.t.Fatal(err)
	}
	if resp.GetCorrelationId() != c.corr {
		c.t.Fatalf("answer for %d, sent %d", resp.GetCorrelationId(), c.corr)
	}
	return &resp
}

func (c *rawConn) produce(epoch, seq int32, records int) *strandpb.ProduceResponse_Partition {
	c.t.Helper()
	resp := c.do(produceRequest(c.t, epoch, seq, records))
	return resp.GetProduce().GetPartitions()[0]
}

// produceRequest is an acks=all produce of records to t/0 by producer 7.
func produceRequest(t *testing.T, epoch, seq int32, records int) *strandpb.Request {
	rs := make([]recordbatch.Record, records)
	for i := range rs {
		rs[i].Value = []byte("v")
	}
	batch, err := recordbatch.Encode(nil, rs)
	if err != nil {
		t.Fatal(err)
	}
	return &strandpb.Request{Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1,
		Partitions: []*strandpb.ProduceRequest_Partition{{Topic: "t", ProducerId: 7, ProducerEpoch: epoch, BaseSequence: seq, Batch: batch}}}}}
}

// The fake runs the real engine: a retry of one of the last 5 batches is
// a duplicate answered with its original offset, an older one or a gap is
// OUT_OF_ORDER_SEQUENCE, a new epoch must start at 0, and an older epoch
// is fenced.
func TestIdempotenceRules(t *testing.T) {
	cluster, err := New(Nodes(1), Topic("t", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	c := dialRaw(t, cluster.Addrs()[0])
	for i := int32(0); i < 6; i++ { // batches of 2 records: sequences 0,2,…,10
		if r := c.produce(0, 2*i, 2); r.GetError() != nil || r.GetBaseOffset() != int64(2*i) {
			t.Fatalf("batch %d: %v", i, r)
		}
	}
	if r := c.produce(0, 4, 2); r.GetError() != nil || !r.GetDuplicate() || r.GetBaseOffset() != 4 {
		t.Fatalf("retry of a recent batch: %v", r)
	}
	code := func(r *strandpb.ProduceResponse_Partition) strandpb.ErrorCode { return r.GetError().GetCode() }
	if r := c.produce(0, 0, 2); code(r) != strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE {
		t.Fatalf("retry of the 6th newest batch: %v", r)
	}
	if r := c.produce(0, 14, 1); code(r) != strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE {
		t.Fatalf("a gap: %v", r)
	}
	if r := c.produce(1, 3, 1); code(r) != strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE {
		t.Fatalf("new epoch not at 0: %v", r)
	}
	if r := c.produce(1, 0, 1); r.GetError() != nil || r.GetBaseOffset() != 12 {
		t.Fatalf("new epoch at 0: %v", r)
	}
	if r := c.produce(0, 12, 1); code(r) != strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED {
		t.Fatalf("old epoch: %v", r)
	}
	if n := len(cluster.Log("t", 0)); n != 13 {
		t.Fatalf("log holds %d records, want 13", n)
	}
}

// A node that does not lead a partition answers NOT_LEADER naming the
// leader and its proxy's address (what clients must dial); after
// MoveLeader another node leads and the old leader's hint follows it.
func TestNotLeaderHintNamesProxies(t *testing.T) {
	cluster, err := New(Topic("t", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	// check asks a node other than lead. Under load raft may elect another
	// leader between the question and the answer (5 ms ticks), and a node
	// that led for a moment answers TIMEOUT for the entry it proposed; that
	// is not the property under test, so any other answer asks again
	// (following the current leader), a bounded number of times.
	check := func(lead uint64) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			other := lead%3 + 1
			r := dialRaw(t, cluster.Addrs()[other-1]).produce(0, 0, 1)
			e := r.GetError()
			if e.GetCode() == strandpb.ErrorCode_ERROR_CODE_NOT_LEADER && e.GetLeaderId() == lead &&
				e.GetLeaderAddress() == cluster.Addrs()[lead-1] {
				return
			}
			if attempt < 10 {
				lead = cluster.Leader("t", 0)
				continue
			}
			t.Fatalf("node %d answered %v; leader is %d at %s", other, r, lead, cluster.Addrs()[lead-1])
		}
	}
	old := cluster.Leader("t", 0)
	check(old)
	lead, err := cluster.MoveLeader("t", 0)
	if err != nil || lead == old || cluster.Leader("t", 0) != lead {
		t.Fatalf("moved from %d to %d: %v", old, lead, err)
	}
	check(lead)
}

// Duplicate forwards a produce twice: the real engine answers the second
// copy as a duplicate of the first, at the same offset; DropAfter applies
// a produce and closes the connection without an answer.
func TestDuplicateAndDropAfter(t *testing.T) {
	cluster, err := New(Nodes(1), Topic("t", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	remove := cluster.Control(func(_ uint64, req *strandpb.Request) (Action, bool) {
		return Action{Duplicate: true}, req.GetProduce() != nil
	})
	c := dialRaw(t, cluster.Addrs()[0])
	if r := c.produce(0, 0, 1); r.GetError() != nil || !r.GetDuplicate() || r.GetBaseOffset() != 0 {
		t.Fatalf("duplicated produce answered %v", r)
	}
	remove()
	cluster.Control(func(_ uint64, req *strandpb.Request) (Action, bool) {
		return Action{DropAfter: true}, req.GetProduce() != nil
	})
	c.send(produceRequest(t, 0, 1, 1))
	var resp strandpb.Response
	if _, err := frame.Decode(c.r, nil, frame.BytesMaxDefault, &resp); err == nil {
		t.Fatalf("DropAfter answered %v", &resp)
	}
	if log := cluster.Log("t", 0); len(log) != 2 {
		t.Fatalf("log holds %d records, want 2", len(log))
	}
}

// Leader answers 0 for a partition the topic does not have (without
// waiting out the readiness bound), and MoveLeader refuses a cluster too
// small to elect another node.
func TestLeaderEdges(t *testing.T) {
	cluster, err := New(Nodes(1), Topic("t", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	if lead := cluster.Leader("t", 0); lead != 1 {
		t.Fatalf("leader of t/0 is %d, want 1", lead)
	}
	if lead := cluster.Leader("t", 5); lead != 0 {
		t.Fatalf("leader of t/5 is %d, want 0", lead)
	}
	if _, err := cluster.MoveLeader("t", 0); err == nil {
		t.Fatal("MoveLeader on one node succeeded")
	}
}
