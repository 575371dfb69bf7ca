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

// produceSpread writes n records to each of partitions 0..parts-1 of topic.
func produceSpread(t *testing.T, ctx context.Context, client *clientlib.Client, topic string, parts int32, from, n int) {
	t.Helper()
	var rs []*clientlib.Record
	for p := range parts {
		for i := from; i < from+n; i++ {
			rs = append(rs, &clientlib.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))})
		}
	}
	if err := client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupConsumersSplitAndHandOver shows the group consumer end to end
// on a real three-node cluster: one member gets every partition, a second
// joins and the four split two and two (the first revoking before the
// second starts), every record is read once, commits land, and after the
// first member leaves the second takes everything over, starting at the
// committed offsets (no record read twice).
func TestGroupConsumersSplitAndHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for heartbeat intervals (5 s)")
	}
	_, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 4)}, clientlib.ManualPartitioner(), groupRetries)
	produceSpread(t, ctx, client, "t", 4, 0, 10)
	seen := map[string]int{}
	owners := map[clientlib.TopicPartition]string{}
	newMember := func(name string) *clientlib.GroupConsumer {
		g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.AutoCommitInterval(0),
			clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(50*time.Millisecond)),
			clientlib.OnAssigned(func(_ context.Context, ps []clientlib.TopicPartition) {
				for _, p := range ps {
					if o := owners[p]; o != "" {
						t.Errorf("%v assigned to %s while %s owns it", p, name, o)
					}
					owners[p] = name
				}
			}),
			clientlib.OnRevoked(func(_ context.Context, ps []clientlib.TopicPartition) {
				for _, p := range ps {
					delete(owners, p)
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	poll := func(g *clientlib.GroupConsumer) {
		for _, r := range g.Poll(ctx).Records() {
			seen[string(r.Value)]++
		}
		if err := g.Commit(ctx); err != nil && !errors.Is(err, clientlib.ErrStaleMemberEpoch) {
			t.Fatalf("commit: %v", err)
		}
	}
	a, b := newMember("a"), newMember("b")
	for len(a.Assigned()) != 4 || len(seen) < 40 {
		if ctx.Err() != nil {
			t.Fatalf("a owns %v, read %d", a.Assigned(), len(seen))
		}
		poll(a)
	}
	for len(a.Assigned()) != 2 || len(b.Assigned()) != 2 {
		if ctx.Err() != nil {
			t.Fatalf("a owns %v, b %v", a.Assigned(), b.Assigned())
		}
		poll(a)
		poll(b)
	}
	d, err := client.DescribeGroup(ctx, "g")
	if err != nil || len(d.Members) != 2 || len(d.Offsets) != 4 {
		t.Fatalf("describe: %+v %v", d, err)
	}
	produceSpread(t, ctx, client, "t", 4, 10, 5)
	lag, err := client.GroupLag(ctx, "g", time.Now().Add(time.Minute))
	if err != nil || len(lag) != 4 {
		t.Fatalf("lag: %v %v", lag, err)
	}
	for _, l := range lag {
		if l.Committed != 10 || l.HighWatermark != 15 || l.Lag != 5 || l.LagTime < time.Minute ||
			l.Retention != 7*24*time.Hour || l.Headroom <= 0 || l.AtRisk || l.Owner == "" {
			t.Errorf("lag of %v: %+v", l.TopicPartition, l)
		}
	}
	if err := a.Close(ctx); err != nil {
		t.Fatalf("close a: %v", err)
	}
	for len(b.Assigned()) != 4 || len(seen) < 60 {
		if ctx.Err() != nil {
			t.Fatalf("b owns %v, read %d", b.Assigned(), len(seen))
		}
		poll(b)
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s read %d times", v, n)
		}
	}
	offs, err := client.FetchOffsets(ctx, "g")
	if err != nil || len(offs) != 4 {
		t.Fatalf("offsets %v %v", offs, err)
	}
	for _, o := range offs {
		if o.Offset != 15 {
			t.Errorf("%v committed %d, want 15", o.TopicPartition, o.Offset)
		}
	}
	if err := client.DeleteGroup(ctx, "g"); !errors.Is(err, clientlib.ErrGroupNotEmpty) {
		t.Fatalf("delete with a member: %v", err)
	}
	if err := client.CommitOffsets(ctx, "g", map[clientlib.TopicPartition]int64{{Topic: "t", Partition: 0}: 0}); !errors.Is(err, clientlib.ErrGroupNotEmpty) {
		t.Fatalf("reset with a member: %v", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.DeleteGroup(ctx, "g"); err != nil {
		t.Fatalf("delete of the empty group: %v", err)
	}
}

// groupRetries gives the group tests' clients (1-10 ms backoffs) about as
// long to wait out COORDINATOR_NOT_AVAILABLE as a client with the default
// backoffs has: the first group call creates __strand_offsets, whose
// partitions must elect leaders before any coordinator answers, which on
// a loaded machine takes longer than 20 retries of 10 ms (CI failed so).
var groupRetries = clientlib.MaxRetries(500)

// TestGroupCommittedBelowLogStartIsTypedError shows R22 for groups: a
// committed offset that aged out is a hard *OffsetOutOfRangeError (the
// start-without-commit policy is not applied), and a partition without a
// commit starts where StartWithoutCommit says.
func TestGroupCommittedBelowLogStartIsTypedError(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 2)}, clientlib.ManualPartitioner(), groupRetries)
	produceSpread(t, ctx, client, "t", 2, 0, 10)
	if err := client.CommitOffsets(ctx, "g", map[clientlib.TopicPartition]int64{{Topic: "t", Partition: 0}: 2}); err != nil {
		t.Fatal(err)
	}
	cluster.TrimLogStart("t", 0, 5)
	g, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.StartWithoutCommit(clientlib.OffsetLatest()),
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		fs := g.Poll(ctx)
		if len(fs.Records()) > 0 {
			t.Fatalf("read %d records; partition 1 starts at latest and 0 is out of range", len(fs.Records()))
		}
		var oor *clientlib.OffsetOutOfRangeError
		if errors.As(fs.FirstErr(), &oor) {
			if oor.Partition != 0 || oor.Offset != 2 || oor.LogStartOffset != 5 {
				t.Fatalf("out of range: %+v", oor)
			}
			if pos, ok := g.Position("t", 1); !ok || pos != 10 {
				t.Fatalf("partition 1 at %d %v, want latest (10)", pos, ok)
			}
			return
		}
	}
	t.Fatal("no out-of-range error")
}
