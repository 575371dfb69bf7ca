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

// A group member whose topic is deleted stops within a few seconds with
// a TopicRecreatedError, reported by every later Poll, although the
// coordinator takes the partitions away (issue 19, item 5: the member
// used to sit silent with nothing assigned).
func TestGroupConsumerOfDeletedTopicStopsFast(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 2)}, clientlib.ManualPartitioner(), groupRetries)
	produceSpread(t, ctx, client, "t", 2, 0, 5)
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.AutoCommitInterval(time.Nanosecond),
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	for n := 0; n < 10; {
		if ctx.Err() != nil {
			t.Fatalf("read %d of 10 records", n)
		}
		fs := g.Poll(ctx)
		n += len(fs.Records())
	}
	if err := cluster.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	stopped, afterRevoke := 0, 0 // polls that reported it; those once nothing was assigned
	for sctx.Err() == nil && afterRevoke < 3 {
		fs := g.Poll(sctx)
		if len(fs.Records()) > 0 {
			t.Fatalf("read %d records after the delete", len(fs.Records()))
		}
		err := fs.FirstErr()
		var re *clientlib.TopicRecreatedError
		switch {
		case errors.As(err, &re) && re.Topic == "t" && len(re.NewID) == 0 && len(re.OldID) == 16:
			stopped++
			if len(g.Assigned()) == 0 {
				afterRevoke++
			}
		case err != nil && !clientlib.IsRetriable(err):
			t.Fatalf("after the delete: %v, want a TopicRecreatedError without a new id", err)
		case stopped > 0:
			t.Fatalf("a Poll after the TopicRecreatedError returned %v (assigned %v)", err, g.Assigned())
		}
	}
	if afterRevoke < 3 {
		t.Fatalf("%d polls reported the deleted topic, %d of them once the coordinator took the partitions away (assigned %v)",
			stopped, afterRevoke, g.Assigned())
	}
}
