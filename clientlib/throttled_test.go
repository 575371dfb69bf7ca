package clientlib

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// Over real connections: a node that throttles the client's data
// connection for hours (its fetch quota) is asked for metadata after
// every other node, so each of eight refreshes is answered by the other
// node at once. Before, candidates drew a random first node: about half
// the refreshes drew the throttled one, waited out RequestTimeout (15 s)
// behind its throttle and failed.
func TestLookupSkipsThrottledNode(t *testing.T) {
	a, b := startThrottleNode(t, hours), startThrottleNode(t, hours)
	nodes := []*strandpb.MetadataResponse_Node{{Id: 1, Address: a.addr}, {Id: 2, Address: b.addr}}
	a.member(1, nodes)
	b.member(2, nodes)
	c, err := NewClient(SeedAddresses(a.addr), RandSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.RefreshMetadata(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := c.request(ctx, a.addr, fetchT0(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetFetch().GetThrottleMs() == 0 {
		t.Fatal("the fetch was not throttled")
	}
	before := a.metadataReads()
	for i := range 8 {
		if err := c.RefreshMetadata(ctx); err != nil {
			t.Fatalf("refresh %d: %v (it waited behind the throttled node)", i, err)
		}
	}
	if got := b.metadataReads(); got != 8 {
		t.Fatalf("the unthrottled node read %d metadata requests; want 8", got)
	}
	if got := a.metadataReads(); got != before {
		t.Fatalf("the throttled node read %d metadata requests in its throttle", got-before)
	}
	// The order itself: the throttled node last, whatever the draw.
	for range 16 {
		if got := c.candidates(); len(got) != 2 || got[1] != a.addr {
			t.Fatalf("candidates %v; want %s last", got, a.addr)
		}
	}
}

// In virtual time: a consumer whose partition's leader n1 throttles
// every fetch for an hour refreshes its metadata every 200 ms
// (MetadataMaxAge) from n2, never waiting for n1: no Poll takes more than
// its long poll and a backoff, and n1 reads no metadata request during
// the run. Before, a refresh that drew n1 waited out the hour.
func TestSimulatedLookupSkipsThrottledNode(t *testing.T) {
	w := newThrottleWorld(t, time.Hour)
	const run = 10 * time.Second
	reads := map[string]int{} // metadata requests read within the run, by node
	answer := w.answer
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		if req.GetMetadata() != nil && w.throttled > 0 && w.now < run {
			reads[addr]++
		}
		return answer(addr, req)
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), MetadataMaxAge(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	k := NewConsumer(c, FetchMaxWait(100*time.Millisecond))
	k.Assign("t", 0, OffsetExact(0))
	var longest, at time.Duration
	c.SimRun(func(ctx context.Context) {
		for w.now < run {
			start := w.now
			k.Poll(ctx)
			if d := w.now - start; d > longest {
				longest, at = d, start
			}
		}
	}, func() {})
	w.run(t, 1000000)
	if w.throttled == 0 {
		t.Fatal("no fetch was throttled")
	}
	if longest > time.Second {
		t.Fatalf("the Poll at %v took %v: a lookup waited out n1's throttle", at, longest)
	}
	if reads["n1"] > 0 || reads["n2"] < 20 {
		t.Fatalf("metadata read in the throttle: %v; want none by n1, at least 20 by n2", reads)
	}
}
