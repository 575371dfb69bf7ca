package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
)

// Keyless records stick to one partition while its batch is open: ten
// records produced under a long linger all land on the same partition.
func TestKeylessRecordsStick(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 8)}, clientlib.Linger(time.Hour))
	done := make(chan *clientlib.Record, 10)
	for i := 0; i < 10; i++ {
		client.Produce(ctx, &clientlib.Record{Topic: "t", Value: []byte(fmt.Sprint(i))}, func(r *clientlib.Record, err error) {
			if err != nil {
				t.Error(err)
			}
			done <- r
		})
	}
	if err := client.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	first := <-done
	for i := 1; i < 10; i++ {
		if r := <-done; r.Partition != first.Partition {
			t.Fatalf("record went to %d, sticky partition %d", r.Partition, first.Partition)
		}
	}
	if n := len(cluster.Log("t", first.Partition)); n != 10 {
		t.Fatalf("sticky partition holds %d records", n)
	}
}

// A paused partition is not fetched; Resume picks up where it stopped.
func TestConsumerPauseResume(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 2)}, clientlib.ManualPartitioner())
	var rs []*clientlib.Record
	for p := int32(0); p < 2; p++ {
		rs = append(rs, &clientlib.Record{Topic: "t", Partition: p, Value: []byte(fmt.Sprint(p))})
	}
	if err := client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(5*time.Millisecond))
	k.Assign("t", 0, clientlib.OffsetEarliest())
	k.Assign("t", 1, clientlib.OffsetEarliest())
	k.Pause("t", 1)
	got, err := pollUntil(t, ctx, k, 1)
	if err != nil || len(got) != 1 || got[0].Partition != 0 {
		t.Fatalf("while paused: %v %v", got, err)
	}
	for i := 0; i < 3; i++ {
		if fs := k.Poll(ctx); len(fs.Records()) != 0 {
			t.Fatalf("paused partition fetched: %v", fs.Records())
		}
	}
	k.Resume("t", 1)
	got, err = pollUntil(t, ctx, k, 1)
	if err != nil || got[0].Partition != 1 || got[0].Offset != 0 {
		t.Fatalf("after resume: %v %v", got, err)
	}
}

// The client keeps one connection per node: producing to six partitions
// and consuming them dials no node twice and every partition's leader
// once, through the Dial option. (Raft, not the test, places the leaders,
// so a node may lead none and never be dialed.)
func TestOneConnectionPerNode(t *testing.T) {
	var mu sync.Mutex
	dials := map[string]int{}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		mu.Lock()
		dials[addr]++
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 6)}, clientlib.Dial(dial), clientlib.ManualPartitioner())
	var rs []*clientlib.Record
	for p := int32(0); p < 6; p++ {
		rs = append(rs, &clientlib.Record{Topic: "t", Partition: p, Value: []byte("v")})
	}
	if err := client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(5*time.Millisecond))
	if err := k.AssignTopic(ctx, "t", clientlib.OffsetEarliest()); err != nil {
		t.Fatal(err)
	}
	if got, err := pollUntil(t, ctx, k, 6); err != nil || len(got) != 6 {
		t.Fatalf("consumed %v %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for addr, n := range dials {
		if n != 1 || !slices.Contains(cluster.Addrs(), addr) {
			t.Fatalf("dials per address %v, want at most 1 per node of %v", dials, cluster.Addrs())
		}
	}
	for p := int32(0); p < 6; p++ {
		if lead := cluster.Leader("t", p); lead == 0 || dials[cluster.Addrs()[lead-1]] != 1 {
			t.Fatalf("partition %d led by node %d; dials per address %v", p, lead, dials)
		}
	}
}

// Produce blocks while MaxBufferedRecords records are buffered; when its
// context ends first, the promise gets the context's error and the record
// is never sent.
func TestProduceBlocksOnFullBuffer(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.MaxBufferedRecords(1), clientlib.Linger(time.Hour))
	first := make(chan error, 1)
	client.Produce(ctx, &clientlib.Record{Topic: "t", Value: []byte("a")}, func(_ *clientlib.Record, err error) { first <- err })
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	var second error
	client.Produce(canceled, &clientlib.Record{Topic: "t", Value: []byte("b")}, func(_ *clientlib.Record, err error) { second = err })
	if !errors.Is(second, context.Canceled) {
		t.Fatalf("second record: %v, want context.Canceled", second)
	}
	if err := client.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if log := cluster.Log("t", 0); len(log) != 1 || string(log[0].Value) != "a" {
		t.Fatalf("log %v, want only a", log)
	}
}
