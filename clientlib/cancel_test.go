package clientlib

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// hours is a throttle no test outlives: a call that waits it out shows as
// the test binary's timeout.
const hours = 10 * time.Hour

// fetchT0 is a fetch of t/0 from offset 0.
func fetchT0() *strandpb.Request {
	return &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{
		Partitions: []*strandpb.FetchRequest_Partition{{Topic: "t", Partition: 0}}}}}
}

// pollCancelledInRefresh starts poll, waits until it is in a metadata
// refresh (the only node throttles the connection it goes on for hours),
// cancels its ctx and returns what poll returned. It does not return
// before the throttle ends when the cancellation is not heard: the test
// binary's timeout is the bound.
func pollCancelledInRefresh(t *testing.T, c *Client, poll func(context.Context) Fetches) Fetches {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan Fetches, 1)
	go func() { res <- poll(ctx) }()
	for {
		c.mu.Lock()
		refreshing := c.refresh != nil
		c.mu.Unlock()
		if refreshing {
			break
		}
		select {
		case fs := <-res:
			t.Fatalf("Poll returned %v before its metadata refresh", fs)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	return <-res
}

// throttledConsumerClient is a Client of a one-node cluster (on a
// loopback port) that throttles every fetch for hours, refreshing its
// metadata at every Poll.
func throttledConsumerClient(t *testing.T) (*throttleNode, *Client) {
	n := startThrottleNode(t, hours)
	c, err := NewClient(SeedAddresses(n.addr), RandSeed(1), MetadataMaxAge(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return n, c
}

// A consumer's Poll whose ctx is cancelled while its metadata refresh
// waits out the node's throttle returns at once with context.Canceled.
// Before, the first caller ran the shared refresh itself, deaf to its ctx
// (the refresh must outlive it), and returned only when the refresh gave
// up: its request waited for the connection's write lock, held by the
// fetch goroutine waiting out the throttle (hours).
func TestPollReturnsWhenCancelledInThrottle(t *testing.T) {
	n, c := throttledConsumerClient(t)
	k := NewConsumer(c, FetchMaxWait(20*time.Millisecond))
	k.Assign("t", 0, OffsetExact(0))
	for len(n.throttled) == 0 {
		if err := k.Poll(context.Background()).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	fs := pollCancelledInRefresh(t, c, k.Poll)
	if err := fs.FirstErr(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll returned %v; want context.Canceled", err)
	}
}

// The same for a group member: its Poll, cancelled in the refresh,
// returns context.Canceled while the throttle holds the data connection.
func TestGroupPollReturnsWhenCancelledInThrottle(t *testing.T) {
	n, c := throttledConsumerClient(t)
	g, err := NewGroupConsumer(c, "g", []string{"t"}, AutoCommitInterval(0),
		GroupConsumerOpts(FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	for len(n.throttled) == 0 {
		if err := g.Poll(context.Background()).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	fs := pollCancelledInRefresh(t, c, g.Poll)
	if err := fs.FirstErr(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll returned %v; want context.Canceled", err)
	}
}

// A call that waits out a connection's throttle holds no lock another
// call waits on: a second call on the connection ends with its ctx, and a
// call that must not wait (tryBegin: the consumer's Poll, the producer's
// loop) is refused at once. Before, the first held the write lock for the
// whole throttle, and the others waited for it deaf to ctx (a group
// member's heartbeat on that connection: its Poll ignored cancellation
// for the rest of a 30 s throttle).
func TestRequestNotHeldBehindCallInThrottle(t *testing.T) {
	n := startThrottleNode(t, hours)
	c, err := NewClient(SeedAddresses(n.addr), RandSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.request(context.Background(), n.addr, fetchT0(), 0); err != nil {
		t.Fatal(err)
	}
	bc, err := c.conn(context.Background(), n.addr)
	if err != nil {
		t.Fatal(err)
	}
	meta := &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}}
	first := make(chan error, 1)
	go func() { // waits out the throttle: nothing ends it but Close
		_, err := bc.roundTrip(context.Background(), meta, false, hours, 0)
		first <- err
	}()
	for len(bc.slots) == 0 { // the first call has begun
		time.Sleep(time.Millisecond)
	}
	if err := bc.tryBegin(meta, hours, 0, func(*strandpb.Response, error) {}); !errors.Is(err, errWouldBlock) {
		t.Fatalf("tryBegin on the throttled connection: %v; want errWouldBlock", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := bc.roundTrip(ctx, meta, false, hours, 0)
		second <- err
	}()
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("the second call ended with %v; want context.Canceled", err)
	}
	select {
	case err := <-first:
		t.Fatalf("the first call ended in the throttle: %v", err)
	default:
	}
	c.Close()
	if err := <-first; err == nil {
		t.Fatal("the first call succeeded through Close")
	}
}
