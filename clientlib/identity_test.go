package clientlib_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// newClient is a second client of cluster, for writes that must not share
// the consumer's client (its idempotent state, its cluster id).
func newClient(t *testing.T, cluster *fake.Cluster) *clientlib.Client {
	t.Helper()
	c, err := clientlib.NewClient(clientlib.SeedAddresses(cluster.Addrs()...),
		clientlib.RetryBackoff(time.Millisecond, 10*time.Millisecond), clientlib.ManualPartitioner())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// followUntilErr polls until a non-retriable error, failing on any record
// (none may come: they would belong to another log).
func followUntilErr(t *testing.T, ctx context.Context, k *clientlib.Consumer) error {
	t.Helper()
	for ctx.Err() == nil {
		fs := k.Poll(ctx)
		if rs := fs.Records(); len(rs) > 0 {
			t.Fatalf("read %d records of another log as a continuation, first at offset %d", len(rs), rs[0].Offset)
		}
		if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
			return err
		}
	}
	t.Fatal("no error before the deadline")
	return nil
}

// A consumer following a topic that is deleted and re-created under its
// name stops with a TopicRecreatedError naming both ids, returned by every
// later Poll, instead of reading the new topic's records at the old
// offsets (issue 7, finding 2: it used to print offsets 10.. of the new
// log as if they followed the old one).
func TestConsumerTopicRecreatedIsTypedError(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 10)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(20*time.Millisecond))
	if err := k.AssignTopic(ctx, "t", clientlib.OffsetEarliest()); err != nil {
		t.Fatal(err)
	}
	if rs, err := pollUntil(t, ctx, k, 10); err != nil || len(rs) != 10 {
		t.Fatalf("first 10 records: %d, %v", len(rs), err)
	}
	info, err := client.Metadata(ctx)
	if err != nil || len(info.Topics) != 1 || len(info.Topics[0].ID) != 16 {
		t.Fatalf("metadata: %+v, %v", info, err)
	}
	oldID := info.Topics[0].ID
	if err := cluster.RecreateTopic("t"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, newClient(t, cluster), "t", 100, 15)
	for i := range 2 {
		err := followUntilErr(t, ctx, k)
		var re *clientlib.TopicRecreatedError
		if !errors.As(err, &re) || !errors.Is(err, clientlib.ErrUnknownTopicID) || clientlib.IsRetriable(err) {
			t.Fatalf("poll %d: %v, want a TopicRecreatedError", i, err)
		}
		if re.Topic != "t" || !bytes.Equal(re.OldID, oldID) || len(re.NewID) != 16 || bytes.Equal(re.NewID, oldID) {
			t.Fatalf("poll %d: %+v, old id %x", i, re, oldID)
		}
	}
	// Seek starts over on the new topic.
	k.Seek("t", 0, clientlib.OffsetEarliest())
	if rs, err := pollUntil(t, ctx, k, 15); err != nil || string(rs[0].Value) != "100" {
		t.Fatalf("after Seek: %v, %v", rs, err)
	}
}

// Every batch a Poll hands out names the id of the topic it was read
// from (FetchPartition.TopicID), and PositionTopicID names the id the
// position counts in: after a re-create and a Seek, both are the new
// topic's, so an application tells the two logs' records apart.
func TestConsumerNamesTopicIDOfRecords(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 3)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(20*time.Millisecond))
	k.Assign("t", 0, clientlib.OffsetEarliest())
	if id := k.PositionTopicID("t", 0); id != nil {
		t.Fatalf("position topic id before the start resolved: %x", id)
	}
	ids := func(n int) [][]byte {
		var out [][]byte
		for got := 0; got < n; {
			if ctx.Err() != nil {
				t.Fatalf("got %d of %d records before the deadline", got, n)
			}
			for _, f := range k.Poll(ctx) {
				if len(f.Records) > 0 {
					out = append(out, f.TopicID)
					got += len(f.Records)
				}
			}
		}
		return out
	}
	info, err := client.Metadata(ctx)
	if err != nil || len(info.Topics) != 1 || len(info.Topics[0].ID) != 16 {
		t.Fatalf("metadata: %+v, %v", info, err)
	}
	oldID := info.Topics[0].ID
	for _, id := range ids(3) {
		if !bytes.Equal(id, oldID) {
			t.Fatalf("batch of the first topic names id %x, want %x", id, oldID)
		}
	}
	if id := k.PositionTopicID("t", 0); !bytes.Equal(id, oldID) {
		t.Fatalf("position topic id %x, want %x", id, oldID)
	}
	if err := cluster.RecreateTopic("t"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, newClient(t, cluster), "t", 100, 2)
	if err := followUntilErr(t, ctx, k); !errors.Is(err, clientlib.ErrUnknownTopicID) {
		t.Fatalf("after the re-create: %v", err)
	}
	k.Seek("t", 0, clientlib.OffsetEarliest())
	for _, id := range ids(2) {
		if len(id) != 16 || bytes.Equal(id, oldID) {
			t.Fatalf("batch of the new topic names id %x (old %x)", id, oldID)
		}
	}
	if id := k.PositionTopicID("t", 0); len(id) != 16 || bytes.Equal(id, oldID) {
		t.Fatalf("position topic id %x after the Seek, want the new topic's (old %x)", id, oldID)
	}
}

// A consumer whose cluster was replaced behind the same addresses (a
// restarted `strand dev`) stops with a ClusterChangedError, never reading
// the new cluster's log at the old offsets.
func TestConsumerClusterReplacedIsTypedError(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 5)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(20*time.Millisecond))
	k.Assign("t", 0, clientlib.OffsetExact(0))
	if rs, err := pollUntil(t, ctx, k, 5); err != nil || len(rs) != 5 {
		t.Fatalf("first records: %d, %v", len(rs), err)
	}
	before := client.ClusterID()
	if err := cluster.Replace(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, ctx, newClient(t, cluster), "t", 100, 8)
	err := followUntilErr(t, ctx, k)
	var ce *clientlib.ClusterChangedError
	if !errors.As(err, &ce) || !errors.Is(err, clientlib.ErrClusterIDMismatch) || !bytes.Equal(ce.OldID, before) || len(ce.NewID) != 16 {
		t.Fatalf("poll: %v, want a ClusterChangedError from %x", err, before)
	}
	if err := followUntilErr(t, ctx, k); !errors.Is(err, clientlib.ErrClusterIDMismatch) {
		t.Fatalf("next poll: %v", err)
	}
}

// A node whose metadata lags a re-create refuses the topic's new id with
// UNKNOWN_TOPIC_ID; the consumer checks its own fresh metadata, finds its
// id still current, and keeps reading: no false stop.
func TestConsumerUnknownTopicIDFromLaggingNodeIsRetried(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.ManualPartitioner())
	produceValues(t, ctx, client, "t", 0, 6)
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(20*time.Millisecond))
	k.Assign("t", 0, clientlib.OffsetExact(0))
	if rs, err := pollUntil(t, ctx, k, 3); err != nil || len(rs) < 3 {
		t.Fatalf("first records: %d, %v", len(rs), err)
	}
	cluster.Control(fake.FailTimes(2, strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID, fake.IsFetch))
	produceValues(t, ctx, client, "t", 6, 4)
	next, _ := k.Position("t", 0)
	for next < 10 && ctx.Err() == nil {
		fs := k.Poll(ctx)
		for _, r := range fs.Records() {
			if r.Offset != next {
				t.Fatalf("record at offset %d, want %d", r.Offset, next)
			}
			next++
		}
		if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
			t.Fatalf("at offset %d: %v", next, err)
		}
	}
	if next != 10 {
		t.Fatalf("stopped at offset %d", next)
	}
}
