package clientlib_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// bigRecords is one 900 KiB record for each of partitions partitions of
// topic: together over the 9 MiB frame limit.
func bigRecords(topic string, partitions int32) []*clientlib.Record {
	var rs []*clientlib.Record
	for p := range partitions {
		rs = append(rs, &clientlib.Record{Topic: topic, Partition: p, Value: bytes.Repeat([]byte{byte('a' + p)}, 900<<10)})
	}
	return rs
}

// waitAllLeaders polls metadata (bounded by ctx) until every partition of
// topic has a leader.
func waitAllLeaders(t *testing.T, ctx context.Context, client *clientlib.Client, topic string, partitions int) {
	t.Helper()
	for {
		info, err := client.Metadata(ctx)
		led := 0
		for _, tm := range info.Topics {
			for _, p := range tm.Partitions {
				if tm.Name == topic && p.LeaderID != 0 {
					led++
				}
			}
		}
		if err == nil && led == partitions {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d partitions of %s have a leader at the deadline (%v)", led, partitions, topic, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a real process, bounded by ctx
	}
}

// Twelve partitions of 900 KiB records, all led by one node, are sent in
// requests under the node's frame limit. Before the cap the producer put
// all twelve batches into one 11 MB request, the node closed the connection
// at its 9 MiB limit, and every retry did the same (issue 7, finding 3).
// A consumer asking for 16 MiB per fetch reads them all: its answers are
// sized to fit the frame limit too, where before the fetch failed with a
// connection error forever (finding 9).
func TestRequestsFitTheFrameLimit(t *testing.T) {
	addr := startServer(t)
	// Batches that linger until a Flush seals them all at once, as batches
	// pile up behind a failover.
	// Dials are counted: a node closing a connection on an oversized
	// frame shows as a second dial.
	var dials atomic.Int32
	var d net.Dialer
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, "tcp", addr)
	}
	client, ctx := realClient(t, addr, clientlib.ManualPartitioner(), clientlib.DeliveryTimeout(30*time.Second),
		clientlib.BatchBytes(1<<20), clientlib.Linger(time.Minute), clientlib.Dial(dial),
		clientlib.StallTimeout(0)) // a slow (-race) node must not show as a redial
	if err := client.CreateTopic(ctx, "big", 12, 1, nil); err != nil {
		t.Fatal(err)
	}
	waitAllLeaders(t, ctx, client, "big", 12)
	rs := bigRecords("big", 12)
	errs := make(chan error, len(rs))
	for _, r := range rs {
		client.Produce(ctx, r, func(_ *clientlib.Record, err error) { errs <- err })
	}
	if err := client.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	for range rs {
		if err := <-errs; err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials to one node: a request over the frame limit closed the connection", n)
	}

	k := clientlib.NewConsumer(client, clientlib.FetchMaxBytes(16<<20), clientlib.FetchMaxPartitionBytes(16<<20),
		clientlib.FetchMaxWait(50*time.Millisecond))
	if err := k.AssignTopic(ctx, "big", clientlib.OffsetEarliest()); err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < len(rs) {
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", got, len(rs))
		}
		fs := k.Poll(ctx)
		if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
			t.Fatalf("poll: %v", err)
		}
		for _, r := range fs.Records() {
			if !bytes.Equal(r.Value, rs[r.Partition].Value) {
				t.Fatalf("partition %d: wrong value", r.Partition)
			}
			got++
		}
	}
}

// Options the client cannot honour are refused by NewClient with an
// *OptionError instead of being taken and then failing (finding 9).
func TestOptionsBeyondTheLimits(t *testing.T) {
	_, err := clientlib.NewClient(clientlib.BatchBytes(16 << 20))
	var oe *clientlib.OptionError
	if !errors.As(err, &oe) || oe.Option != "BatchBytes" {
		t.Fatalf("BatchBytes(16 MiB): %v, want an *OptionError", err)
	}
}
