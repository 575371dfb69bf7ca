package clientlib_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// Create, list, describe, list offsets and delete a topic through the
// admin calls; creating it twice fails with ErrTopicExists.
func TestAdminTopicLifecycle(t *testing.T) {
	_, client, ctx := setup(t, nil)
	if err := client.CreateTopic(ctx, "orders", 4, 3, map[string]string{"max.message.bytes": "1048576"}); err != nil {
		t.Fatal(err)
	}
	if err := client.CreateTopic(ctx, "orders", 4, 3, nil); !errors.Is(err, clientlib.ErrTopicExists) {
		t.Fatalf("second create: %v, want ErrTopicExists", err)
	}
	// Every node applies the metadata log on its own, so a node may answer
	// from before the create for a moment (as Kafka's brokers do).
	eventually(t, "list shows orders", func() error {
		names, err := client.ListTopics(ctx)
		if err != nil || !slices.Equal(names, []string{"orders"}) {
			return fmt.Errorf("list: %v %v", names, err)
		}
		return nil
	})
	var ds []clientlib.TopicDetail
	eventually(t, "describe knows orders", func() error {
		var err error
		ds, err = client.DescribeTopics(ctx, "orders", "nope")
		if err != nil || len(ds) != 2 || ds[0].Err != nil {
			return fmt.Errorf("describe: %+v %v", ds, err)
		}
		return nil
	})
	if ds[0].Partitions != 4 || ds[0].ReplicationFactor != 3 || ds[0].Configs["max.message.bytes"] != "1048576" {
		t.Fatalf("describe orders: %+v", ds[0])
	}
	if !errors.Is(ds[1].Err, clientlib.ErrUnknownTopic) {
		t.Fatalf("describe nope: %+v", ds[1])
	}
	waitLeaders(t, client, "orders", 4)
	if err := client.ProduceSync(ctx, &clientlib.Record{Topic: "orders", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	los, err := client.ListOffsets(ctx, "orders", nil, clientlib.OffsetLatest())
	if err != nil || len(los) != 4 {
		t.Fatalf("list offsets: %v %v", los, err)
	}
	total := int64(0)
	for _, lo := range los {
		if lo.Err != nil || lo.Offset != lo.HighWatermark {
			t.Fatalf("list offsets %+v", lo)
		}
		total += lo.HighWatermark
	}
	if total != 1 {
		t.Fatalf("high-water marks sum to %d, want 1", total)
	}
	if err := client.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := client.DeleteTopic(ctx, "orders"); !errors.Is(err, clientlib.ErrUnknownTopic) {
		t.Fatalf("second delete: %v", err)
	}
}

// eventually polls f until it returns nil, failing the test with f's last
// error after testTimeout.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, testTimeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLeaders polls Metadata until it names 3 nodes and a leader and 3
// replicas for each of the topic's partitions: a new topic's partitions
// elect their leaders after CreateTopic returns.
func waitLeaders(t *testing.T, client *clientlib.Client, topic string, partitions int) {
	t.Helper()
	eventually(t, "leaders of "+topic, func() error {
		info, err := client.Metadata(t.Context())
		if err != nil || len(info.Nodes) != 3 || len(info.Topics) != 1 || info.Topics[0].Name != topic ||
			len(info.Topics[0].Partitions) != partitions {
			return fmt.Errorf("metadata: %+v %v", info, err)
		}
		for _, p := range info.Topics[0].Partitions {
			if p.LeaderID == 0 || len(p.Replicas) != 3 {
				return fmt.Errorf("partition %+v has no leader or replicas", p)
			}
		}
		return nil
	})
}

// An admin call answered NOT_CONTROLLER twice is retried until it succeeds.
func TestAdminRetriesNotController(t *testing.T) {
	cluster, client, ctx := setup(t, nil)
	cluster.Control(fake.FailTimes(2, strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER,
		func(_ uint64, req *strandpb.Request) bool { return req.GetCreateTopics() != nil }))
	if err := client.CreateTopic(ctx, "t", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
}

// acks=1 and acks=0 write the records but report offset -1: the leader
// cannot know an offset before the entry is applied.
func TestAcksLeaderAndNone(t *testing.T) {
	for _, acks := range []clientlib.Acks{clientlib.AcksLeader, clientlib.AcksNone} {
		cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.RequiredAcks(acks))
		r := &clientlib.Record{Topic: "t", Value: []byte("x")}
		if err := client.ProduceSync(ctx, r).FirstErr(); err != nil || r.Offset != -1 {
			t.Fatalf("acks %d: offset %d, err %v", acks, r.Offset, err)
		}
		// acks=0 gives no answer to wait for: read the log until it lands.
		k := clientlib.NewConsumer(client)
		k.Assign("t", 0, clientlib.OffsetEarliest())
		if got, err := pollUntil(t, ctx, k, 1); err != nil || string(got[0].Value) != "x" {
			t.Fatalf("acks %d: consumed %v %v", acks, got, err)
		}
		if len(cluster.Log("t", 0)) != 1 {
			t.Fatalf("acks %d: log %v", acks, cluster.Log("t", 0))
		}
	}
}

// A client with no reachable seed fails requests with a retriable
// connection error instead of hanging.
func TestUnreachableCluster(t *testing.T) {
	cluster, err := fake.New(fake.Nodes(1))
	if err != nil {
		t.Fatal(err)
	}
	addr := cluster.Addrs()[0]
	cluster.Close()
	client, err := clientlib.NewClient(clientlib.SeedAddresses(addr), clientlib.MaxRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_, err = client.Metadata(t.Context())
	var ce *clientlib.ConnError
	if !errors.As(err, &ce) || !clientlib.IsRetriable(err) {
		t.Fatalf("got %v, want a ConnError", err)
	}
}

// Calls after Close fail with ErrClientClosed; Close flushed what was
// produced before it.
func TestCloseFlushesThenRefuses(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.Linger(time.Hour))
	done := make(chan error, 1)
	client.Produce(ctx, &clientlib.Record{Topic: "t", Value: []byte("x")}, func(_ *clientlib.Record, err error) { done <- err })
	client.Close()
	if err := <-done; err != nil {
		t.Fatalf("record produced before Close: %v", err)
	}
	if len(cluster.Log("t", 0)) != 1 {
		t.Fatal("Close did not flush the lingering batch")
	}
	err := client.ProduceSync(ctx, &clientlib.Record{Topic: "t", Value: []byte("y")}).FirstErr()
	if !errors.Is(err, clientlib.ErrClientClosed) {
		t.Fatalf("produce after Close: %v", err)
	}
}
