package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kadm's DeleteOffsets (Kafka's OffsetDelete) against a real `strand serve
// --kafka-listen`, with Kafka's rules: while a kgo consumer of the group
// subscribes to topic a, deleting a/0 answers GROUP_SUBSCRIBED_TO_TOPIC
// and keeps it, while b/0 (no member subscribes to b) is deleted in the
// same request; once the member has left, a/0 is deleted too; FetchOffsets
// shows exactly what is left; a missing group answers GROUP_ID_NOT_FOUND.
// Before key 47 was served, kadm failed with UNSUPPORTED_VERSION.
func TestKafkaOffsetDelete(t *testing.T) {
	skipShort(t)
	c := startKafkaCluster(t, 1)
	adm := kafkaAdmin(t, c.kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const group = "odg"
	createKafkaTopics(ctx, t, adm, 2, 1, "a", "b")
	var os kadm.Offsets
	os.AddOffset("a", 0, 5, -1)
	os.AddOffset("a", 1, 6, -1)
	os.AddOffset("b", 0, 7, -1)
	waitFor(t, "commit", 30*time.Second, func() error {
		r, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = r.Error()
		}
		return err
	})
	assigned := make(chan struct{}, 1)
	member, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("a"),
		kgo.DisableAutoCommit(), kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil && !member.PollFetches(ctx).IsClientClosed() {
		}
	}()
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("the consumer was never assigned partitions")
	}
	del, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{"a": {0: {}}, "b": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := del["a"][0]; !errors.Is(e, kerr.GroupSubscribedToTopic) {
		t.Fatalf("delete of a/0 while subscribed: %v", e)
	}
	if e, ok := del["b"][0]; !ok || e != nil {
		t.Fatalf("delete of b/0: %v (answered %v)", e, ok)
	}
	checkCommitted(ctx, t, adm, group, map[string]int64{"a/0": 5, "a/1": 6})
	member.Close() // leaves the group
	waitFor(t, "delete after leaving", 30*time.Second, func() error {
		del, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{"a": {0: {}}})
		if err == nil {
			err = del["a"][0]
		}
		return err
	})
	checkCommitted(ctx, t, adm, group, map[string]int64{"a/1": 6})
	if _, err := adm.DeleteOffsets(ctx, "no-such-group", kadm.TopicsSet{"a": {0: {}}}); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("delete in a missing group: %v", err)
	}
}

// checkCommitted compares the group's committed offsets, as "topic/partition"
// to offset, with want.
func checkCommitted(ctx context.Context, t *testing.T, adm *kadm.Client, group string, want map[string]int64) {
	t.Helper()
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]int64{}
	got.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			have[o.Topic+"/"+string(rune('0'+o.Partition))] = o.At
		}
	})
	if len(have) != len(want) {
		t.Fatalf("committed %v, want %v", have, want)
	}
	for k, v := range want {
		if have[k] != v {
			t.Fatalf("committed %v, want %v", have, want)
		}
	}
}
