package clientlib_test

import (
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
)

// Auto-commit commits only what earlier Polls returned: after every Poll,
// the group's committed offset is at most the offset after the last
// record handed out by the Polls before it, so a member that dies while
// processing a batch leaves that batch to the next owner (issue 19, item
// 1: Poll used to commit the positions of the records it was about to
// return, and a member killed mid-batch skipped it for good). Close then
// commits the positions of everything returned.
func TestGroupAutoCommitNeverPassesWhatEarlierPollsReturned(t *testing.T) {
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner(), groupRetries)
	for i := 0; i < 30; i += 3 {
		produceValues(t, ctx, client, "t", i, 3) // ten batches: FetchMaxPartitionBytes makes one a Poll
	}
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.AutoCommitInterval(time.Nanosecond),
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond), clientlib.FetchMaxPartitionBytes(64)))
	if err != nil {
		t.Fatal(err)
	}
	tp := clientlib.TopicPartition{Topic: "t", Partition: 0}
	returned, polls := int64(0), 0 // the offset after the last record handed out
	for ; returned < 30 && ctx.Err() == nil; polls++ {
		before := returned
		fs := g.Poll(ctx)
		for _, r := range fs.Records() {
			if r.Offset != returned {
				t.Fatalf("record at offset %d, want %d", r.Offset, returned)
			}
			returned++
		}
		offs, err := client.FetchOffsets(ctx, "g", tp)
		if err != nil {
			t.Fatal(err)
		}
		if len(offs) == 1 && offs[0].Offset > before {
			t.Fatalf("after poll %d: committed %d, but earlier polls returned only offsets below %d (this one returned up to %d)",
				polls, offs[0].Offset, before, returned)
		}
	}
	if returned != 30 {
		t.Fatalf("read %d of 30 records", returned)
	}
	if polls < 3 {
		t.Fatalf("read everything in %d polls; the test needs several batches", polls)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := client.FetchOffsets(ctx, "g", tp)
	if err != nil || len(offs) != 1 || offs[0].Offset != 30 {
		t.Fatalf("after Close: %v, %v; want everything returned (30) committed", offs, err)
	}
}
