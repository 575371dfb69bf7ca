package clientlib_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// CreatePartitions grows a topic and says how many it added; a producer
// then writes to a new partition (the client refreshed its metadata);
// validate-only changes nothing; a shrink is ErrInvalidPartitions and a
// missing topic ErrTopicNotFound, both at once (no retries).
func TestAdminCreatePartitions(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 2)}, clientlib.ManualPartitioner())
	got, err := client.CreatePartitions(ctx, "t", 4, false)
	if err != nil || got != (clientlib.PartitionsAdded{Partitions: 4, Added: 2}) {
		t.Fatalf("grow to 4: %+v %v", got, err)
	}
	waitLeaders(t, client, "t", 4)
	r := &clientlib.Record{Topic: "t", Partition: 3, Value: []byte("new")}
	if err := client.ProduceSync(ctx, r).FirstErr(); err != nil || r.Offset != 0 {
		t.Fatalf("produce to new partition 3: offset %d, %v", r.Offset, err)
	}
	if got, err := client.CreatePartitions(ctx, "t", 6, true); err != nil || got != (clientlib.PartitionsAdded{Partitions: 6, Added: 2}) {
		t.Fatalf("validate-only grow to 6: %+v %v", got, err)
	}
	if ds, err := client.DescribeTopics(ctx, "t"); err != nil || ds[0].Partitions != 4 {
		t.Fatalf("after validate-only: %+v %v, want 4 partitions", ds, err)
	}
	if _, err := client.CreatePartitions(ctx, "t", 3, false); !errors.Is(err, clientlib.ErrInvalidPartitions) {
		t.Fatalf("shrink to 3: %v, want ErrInvalidPartitions", err)
	}
	if _, err := client.CreatePartitions(ctx, "nope", 3, false); !errors.Is(err, clientlib.ErrTopicNotFound) {
		t.Fatalf("missing topic: %v, want ErrTopicNotFound", err)
	}
}

// A grow applied whose answer was lost is retried; the retry finds the
// count already reached, and the call succeeds saying it cannot tell how
// many it added (Added -1) instead of failing with ErrInvalidPartitions.
func TestAdminCreatePartitionsLostAnswer(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)})
	var dropped atomic.Int32
	defer cluster.Control(func(_ uint64, req *strandpb.Request) (fake.Action, bool) {
		return fake.Action{DropAfter: true}, req.GetCreatePartitions() != nil && dropped.Add(1) == 1
	})()
	got, err := client.CreatePartitions(ctx, "t", 3, false)
	if err != nil || got != (clientlib.PartitionsAdded{Partitions: 3, Added: -1}) || dropped.Load() < 2 {
		t.Fatalf("grow with a lost answer: %+v %v (%d requests)", got, err, dropped.Load())
	}
}
