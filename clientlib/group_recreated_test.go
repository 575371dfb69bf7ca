package clientlib_test

import (
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
)

// A group's committed offsets are tied to the topic's id: after the topic
// is deleted and re-created under its name, the old offsets are not
// applied to the new topic, a member still holding positions of the old
// one cannot commit them (UNKNOWN_TOPIC_ID), and a new member starts the
// new topic where StartWithoutCommit says (issue 19, item 5: offsets were
// keyed by name, so a namesake inherited them).
func TestGroupOffsetsDoNotApplyToRecreatedNamesake(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner(), groupRetries)
	produceValues(t, ctx, client, "t", 0, 10)
	tp := clientlib.TopicPartition{Topic: "t", Partition: 0}
	// An empty group's commit (an operator's reset) is stamped with the
	// topic's id too.
	if err := client.CommitOffsets(ctx, "reset", map[clientlib.TopicPartition]int64{tp: 4}); err != nil {
		t.Fatal(err)
	}
	a, err := clientlib.NewGroupConsumer(client, "g", []string{"t"}, clientlib.AutoCommitInterval(0),
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 10; n += len(a.Poll(ctx).Records()) {
		if ctx.Err() != nil {
			t.Fatalf("read %d of 10", n)
		}
	}
	if err := cluster.RecreateTopic("t"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, newClient(t, cluster), "t", 100, 3)
	if err := a.CommitOffsets(ctx, map[clientlib.TopicPartition]int64{tp: 10}); !errors.Is(err, clientlib.ErrUnknownTopicID) {
		t.Fatalf("commit of the old topic's position after the re-create: %v, want UNKNOWN_TOPIC_ID", err)
	}
	a.Close(ctx)
	for _, group := range []string{"g", "reset"} {
		offs, err := client.FetchOffsets(ctx, group, tp)
		if err != nil || len(offs) != 0 {
			t.Fatalf("group %s: offsets %v, %v; the old topic's must not apply to the new one", group, offs, err)
		}
	}
	b, err := clientlib.NewGroupConsumer(client, "reset", []string{"t"}, clientlib.AutoCommitInterval(0),
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	var got []string
	for len(got) < 3 {
		if ctx.Err() != nil {
			t.Fatalf("new member read %v", got)
		}
		fs := b.Poll(ctx)
		if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
			t.Fatalf("new member: %v", err)
		}
		for _, r := range fs.Records() {
			got = append(got, string(r.Value))
		}
	}
	if got[0] != "100" || got[2] != "102" {
		t.Fatalf("new member read %v, want the new topic from its start (100 101 102)", got)
	}
}
