package clientlib_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
)

// A consumer following a topic that is deleted (not re-created) stops
// within a few seconds with a TopicRecreatedError without a new id,
// instead of retrying in silence (issue 19, item 5: a consumer of a
// deleted topic sat silent for 30 s and more).
func TestConsumerOfDeletedTopicStopsFast(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 5)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(20*time.Millisecond))
	if err := k.AssignTopic(ctx, "t", clientlib.OffsetEarliest()); err != nil {
		t.Fatal(err)
	}
	if rs, err := pollUntil(t, ctx, k, 5); err != nil || len(rs) != 5 {
		t.Fatalf("first records: %d, %v", len(rs), err)
	}
	info, err := client.Metadata(ctx)
	if err != nil || len(info.Topics) != 1 {
		t.Fatalf("metadata: %+v, %v", info, err)
	}
	oldID := info.Topics[0].ID
	if err := cluster.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = followUntilErr(t, sctx, k)
	var re *clientlib.TopicRecreatedError
	if !errors.As(err, &re) || re.Topic != "t" || len(re.NewID) != 0 || !bytes.Equal(re.OldID, oldID) {
		t.Fatalf("after the delete: %v, want a TopicRecreatedError without a new id (old id %x)", err, oldID)
	}
}
