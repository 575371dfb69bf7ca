package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
)

// testTimeout bounds every test: a safety net, never a synchronisation.
const testTimeout = 20 * time.Second

func setup(t *testing.T, fakeOpts []fake.Opt, opts ...clientlib.Opt) (*fake.Cluster, *clientlib.Client, context.Context) {
	t.Helper()
	cluster, err := fake.New(fakeOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cluster.Close()
		if err := cluster.Err(); err != nil {
			t.Errorf("a server failed during the test: %v", err)
		}
	})
	base := []clientlib.Opt{
		clientlib.SeedAddresses(cluster.Addrs()...),
		clientlib.RetryBackoff(time.Millisecond, 10*time.Millisecond),
		clientlib.RandSeed(1),
	}
	client, err := clientlib.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return cluster, client, ctx
}

// consumeAll reads a partition from offset 0 until it has n records.
func consumeAll(t *testing.T, ctx context.Context, client *clientlib.Client, topic string, partition int32, n int) []*clientlib.Record {
	t.Helper()
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(50*time.Millisecond))
	k.Assign(topic, partition, clientlib.OffsetEarliest())
	var out []*clientlib.Record
	for len(out) < n {
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(out), n)
		}
		fs := k.Poll(ctx)
		if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
			t.Fatalf("poll: %v", err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// Records produced with ProduceSync come back from a consumer with dense
// offsets from 0, in order, with keys, values and headers intact.
func TestProduceConsumeRoundTrip(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)})
	const n = 500
	var rs []*clientlib.Record
	for i := 0; i < n; i++ {
		rs = append(rs, &clientlib.Record{Topic: "t", Value: []byte(fmt.Sprint(i)),
			Headers: []clientlib.Header{{Key: "h", Value: []byte("v")}}})
	}
	if err := client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Offset != int64(i) || r.Partition != 0 {
			t.Fatalf("record %d acked at %d/%d", i, r.Partition, r.Offset)
		}
	}
	got := consumeAll(t, ctx, client, "t", 0, n)
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprint(i) || len(r.Headers) != 1 || r.Headers[0].Key != "h" {
			t.Fatalf("record %d: offset %d value %q headers %v", i, r.Offset, r.Value, r.Headers)
		}
	}
}

// Keyed records land on murmur2(key) mod partitions, as with Kafka's
// default partitioner; keyless ones spread over partitions.
func TestKeyedRecordsLandOnMurmur2Partitions(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("k", 7)})
	var rs []*clientlib.Record
	for i := 0; i < 100; i++ {
		rs = append(rs, &clientlib.Record{Topic: "k", Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte("v")})
	}
	if err := client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	perPartition := map[int32]int{}
	for _, r := range rs {
		if want := clientlib.KeyPartition(r.Key, 7); r.Partition != want {
			t.Fatalf("key %s went to %d, want %d", r.Key, r.Partition, want)
		}
		perPartition[r.Partition]++
	}
	for p := int32(0); p < 7; p++ {
		if n := len(cluster.Log("k", p)); n != perPartition[p] {
			t.Fatalf("partition %d holds %d records, client acked %d", p, n, perPartition[p])
		}
	}
}

// A record over 1 MiB fails at once with ErrRecordTooLarge and is never
// sent; a record of exactly 1 MiB is accepted.
func TestRecordTooLarge(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)})
	big := &clientlib.Record{Topic: "t", Key: []byte("k"), Value: make([]byte, 1<<20)}
	called := false
	client.Produce(ctx, big, func(_ *clientlib.Record, err error) {
		called = true
		if !errors.Is(err, clientlib.ErrRecordTooLarge) || clientlib.IsRetriable(err) {
			t.Errorf("error %v, want a non-retriable ErrRecordTooLarge", err)
		}
	})
	if !called {
		t.Fatal("promise of a too-large record not called before Produce returned")
	}
	exact := &clientlib.Record{Topic: "t", Value: make([]byte, 1<<20)}
	if err := client.ProduceSync(ctx, exact).FirstErr(); err != nil {
		t.Fatalf("a 1 MiB record: %v", err)
	}
	if n := len(cluster.Log("t", 0)); n != 1 {
		t.Fatalf("log holds %d records, want only the 1 MiB one", n)
	}
}

// Produce to a topic that does not exist fails with ErrUnknownTopic once
// the delivery timeout passes, instead of hanging.
func TestUnknownTopicFails(t *testing.T) {
	_, client, ctx := setup(t, nil, clientlib.DeliveryTimeout(50*time.Millisecond))
	err := client.ProduceSync(ctx, &clientlib.Record{Topic: "missing", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, clientlib.ErrUnknownTopic) {
		t.Fatalf("got %v, want ErrUnknownTopic", err)
	}
}
