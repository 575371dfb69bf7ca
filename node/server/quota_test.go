package server

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// TestProduceQuotaThrottles sets a produce quota for the anonymous
// principal (a node without SASL) and shows a produce past it answered
// with throttle_ms, while a principal without a quota is not throttled.
func TestProduceQuotaThrottles(t *testing.T) {
	rt := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := clientlib.NewClient(clientlib.SeedAddresses(rt.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for ctx.Err() == nil {
		if err = cl.CreateTopic(ctx, "q", 1, 1, nil); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling readiness, bounded by ctx
	}
	if err != nil {
		t.Fatal(err)
	}
	batch, err := recordbatch.Encode(nil, []recordbatch.Record{{Value: bytes.Repeat([]byte("x"), 64<<10)}})
	if err != nil {
		t.Fatal(err)
	}
	produce := func(c *testConn, id uint64) int32 {
		for ctx.Err() == nil {
			c.send(&strandpb.Request{CorrelationId: id, Body: &strandpb.Request_Produce{Produce: &strandpb.ProduceRequest{Acks: -1,
				Partitions: []*strandpb.ProduceRequest_Partition{{Topic: "q", ProducerId: -1, Batch: batch}}}}})
			resp, err := c.receive()
			if err != nil {
				t.Fatal(err)
			}
			if p := resp.GetProduce().GetPartitions(); len(p) == 1 && p[0].GetError() == nil {
				return resp.GetProduce().GetThrottleMs()
			}
			time.Sleep(50 * time.Millisecond) // the partition elects its leader
		}
		t.Fatal("produce never succeeded")
		return 0
	}
	c := dialTest(t, rt)
	c.hello(1, 1)
	if ms := produce(c, 1); ms != 0 {
		t.Fatalf("throttled %d ms without a quota", ms)
	}
	if err := cl.SetQuota(ctx, "User:ANONYMOUS", 16<<10, 0); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil && rtQuota(rt, "User:ANONYMOUS").ProduceBytesPerSec == 0 {
		time.Sleep(10 * time.Millisecond) // the loop rebuilds its view after the apply
	}
	// 64 KiB at 16 KiB/s with a 16 KiB burst: about 3 s of debt.
	if ms := produce(c, 2); ms < 2000 || ms > 4000 {
		t.Fatalf("throttle %d ms for 64 KiB at 16 KiB/s, want about 3000", ms)
	}
}

// rtQuota is principal's quota in rt's security view (zero: none).
func rtQuota(rt *Server, principal node.Principal) metadata.Quota {
	q, _ := rt.round.Security().Quota(principal)
	return q
}

// countingListener counts the connections it accepted.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// TestClientHoldsThrottledConnection: clientlib's producer past its
// principal's quota keeps its one connection. The node pauses reading a
// throttled connection for throttle_ms; the client holds its next produce
// until then instead of writing it into the pause. Before, that produce
// stalled (nothing read for StallTimeout), the client killed the
// connection, suspected a healthy node and produced on a new, unthrottled
// connection: the quota did not hold against Strand's own client.
func TestClientHoldsThrottledConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	rt, err := Start(Config{Core: node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: ln.Addr().String()}}},
		DataDir: t.TempDir(), Listener: cl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := clientlib.NewClient(clientlib.SeedAddresses(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for ctx.Err() == nil {
		if err = admin.CreateTopic(ctx, "q", 1, 1, nil); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling readiness, bounded by ctx
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.SetQuota(ctx, "User:ANONYMOUS", 16<<10, 0); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil && rtQuota(rt, "User:ANONYMOUS").ProduceBytesPerSec == 0 {
		time.Sleep(10 * time.Millisecond) // the loop rebuilds its view after the apply
	}
	p, err := clientlib.NewClient(clientlib.SeedAddresses(ln.Addr().String()), clientlib.StallTimeout(300*time.Millisecond),
		clientlib.RequestTimeout(20*time.Second), clientlib.Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	before := cl.accepted.Load()
	// 32 KiB at 16 KiB/s with a 16 KiB burst: each produce after the first
	// is answered throttled about a second, far past the 300 ms stall bound.
	value := bytes.Repeat([]byte("x"), 32<<10)
	for i := range 3 {
		if err := p.ProduceSync(ctx, &clientlib.Record{Topic: "q", Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if n := cl.accepted.Load() - before; n != 1 {
		t.Fatalf("the throttled producer opened %d connections; want 1 (a throttle is not a stall)", n)
	}
}
