package clientlib

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// Over real connections: a node that refuses connections is not dialled
// again within its reconnect backoff (an hour here): the next request
// fails at once with a *ConnError, not sent, naming the refusal, and no
// dial. Past the backoff it is dialled again, and a dial that connects
// ends the backoff. Before, every request dialled it again.
func TestRefusedNodeNotRedialledInBackoff(t *testing.T) {
	n := startThrottleNode(t, 0)
	refused := errors.New("connection refused")
	var mu sync.Mutex
	dials, accept := 0, false
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		mu.Lock()
		dials++
		ok := accept
		mu.Unlock()
		if !ok {
			return nil, refused
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", n.addr)
	}
	c, err := NewClient(SeedAddresses("node-a"), RandSeed(1), Dial(dial), ReconnectBackoff(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	dialed := func() int {
		mu.Lock()
		defer mu.Unlock()
		return dials
	}
	if err := c.RefreshMetadata(ctx); !errors.Is(err, refused) {
		t.Fatalf("first refresh: %v; want the refusal", err)
	}
	for i := range 3 {
		err := c.RefreshMetadata(ctx)
		var ce *ConnError
		if !errors.As(err, &ce) || ce.Sent || !errors.Is(err, refused) {
			t.Fatalf("refresh %d in the backoff: %v; want a *ConnError, not sent, naming the refusal", i, err)
		}
		if got := dialed(); got != 1 {
			t.Fatalf("%d dials after refresh %d; want 1 (in the backoff)", got, i)
		}
	}
	c.mu.Lock()
	c.redial["node-a"] = redialState{failures: 1, err: refused} // the backoff lapsed
	c.mu.Unlock()
	mu.Lock()
	accept = true
	mu.Unlock()
	if err := c.RefreshMetadata(ctx); err != nil {
		t.Fatalf("refresh past the backoff: %v", err)
	}
	if got := dialed(); got != 2 {
		t.Fatalf("%d dials; want 2", got)
	}
	c.mu.Lock()
	_, backingOff := c.redial["node-a"]
	c.mu.Unlock()
	if backingOff {
		t.Fatal("a dial that connected left the backoff in place")
	}
}

// refusedLeaderWorld models connections (clientcore.Conns) for a two-node
// cluster: n1 leads t/0, whose log always has a record at the asked
// offset; n2 leads t/1 and refuses every connection. dials are the
// virtual times of the dials to n2.
type refusedLeaderWorld struct {
	scriptedWorld
	conns int
	dials []time.Duration
}

func newRefusedLeaderWorld(t *testing.T) *refusedLeaderWorld {
	w := &refusedLeaderWorld{}
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{
				Nodes: []*strandpb.MetadataResponse_Node{{Id: 1, Address: "n1"}, {Id: 2, Address: "n2"}},
				Topics: []*strandpb.MetadataResponse_Topic{{Name: "t", Partitions: []*strandpb.MetadataResponse_Partition{
					{Partition: 0, LeaderId: 1}, {Partition: 1, LeaderId: 2}}}},
			}}}
		case req.GetFetch() != nil:
			out := &strandpb.FetchResponse{}
			for _, p := range req.GetFetch().GetPartitions() {
				enc, err := recordbatch.Encode(nil, []recordbatch.Record{{Value: []byte{1}}})
				if err != nil {
					t.Fatal(err)
				}
				out.Partitions = append(out.Partitions, &strandpb.FetchResponse_Partition{Topic: p.GetTopic(), Partition: p.GetPartition(),
					HighWatermark: p.GetOffset() + 1, Batches: []*strandpb.FetchResponse_Batch{{BaseOffset: p.GetOffset(), Records: enc}}})
			}
			return &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: out}}
		}
		t.Fatalf("unexpected request %T", req.GetBody())
		return nil
	}
	return w
}

func (w *refusedLeaderWorld) Dial(addr string) uint64 {
	if addr == "n2" {
		w.dials = append(w.dials, w.now)
	}
	w.conns++
	return uint64(w.conns)
}

func (w *refusedLeaderWorld) Open(uint64) bool { return true }
func (w *refusedLeaderWorld) Close(uint64)     {}

func (w *refusedLeaderWorld) CallOn(_ uint64, addr string, req *strandpb.Request, done func(*strandpb.Response, error)) {
	switch {
	case addr == "n2":
		w.After(time.Millisecond, func() { done(nil, &ConnError{Addr: addr, Err: errors.New("connection refused")}) })
	case req.GetHello() != nil:
		resp := &strandpb.Response{Body: &strandpb.Response_Hello{Hello: &strandpb.HelloResponse{NodeId: 1, Version: protocolVersionMin}}}
		w.After(time.Millisecond, func() { done(resp, nil) })
	default:
		w.Call(addr, req, done)
	}
}

// refusedDials runs a simulated consumer of t/0 and t/1 for 5 s of
// virtual time with the client's random source seeded with seed, and
// returns when it dialled n2.
func refusedDials(t *testing.T, seed uint64) []time.Duration {
	w := newRefusedLeaderWorld(t)
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	k := NewConsumer(c, FetchMaxWait(100*time.Millisecond))
	k.Assign("t", 0, OffsetExact(0))
	k.Assign("t", 1, OffsetExact(0))
	records := 0
	c.SimRun(func(ctx context.Context) {
		for w.now < 5*time.Second {
			records += len(k.Poll(ctx).Records())
		}
	}, func() {})
	w.run(t, 1000000)
	if records < 20 {
		t.Fatalf("%d records from n1 in 5 s; want a steady stream", records)
	}
	return w.dials
}

// In virtual time: a consumer whose one leader refuses connections while
// the other hands out records at every Poll dials the refusing node
// within its reconnect backoff only (50 ms doubling to 1 s, jittered):
// 11 times in 5 s (at most 20 allowed), not at every Poll, and the dials'
// times come from the client's seeded source (the same seed replays
// them, another spreads them). Before, every Poll's fetch to n2 and
// metadata refresh dialled it again: 89 times in 5 s, paced only by the
// consumer's retry backoff.
func TestSimulatedRefusedLeaderRedialledWithBackoff(t *testing.T) {
	a := refusedDials(t, 1)
	if len(a) < 3 || len(a) > 20 {
		t.Fatalf("n2 dialled %d times in 5 s; want 3..20 (its reconnect backoff)", len(a))
	}
	for i := 1; i < len(a); i++ {
		if a[i] == a[i-1] {
			t.Fatalf("n2 dialled twice at %v: in its backoff", a[i])
		}
	}
	if again := refusedDials(t, 1); !slices.Equal(a, again) {
		t.Fatalf("the same seed dialled at %v, then at %v", a, again)
	}
	if other := refusedDials(t, 2); slices.Equal(a, other) {
		t.Fatalf("seeds 1 and 2 dialled at the same times %v: no jitter", a)
	}
}
