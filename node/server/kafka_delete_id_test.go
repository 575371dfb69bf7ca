package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createKafkaTopic creates a one-partition topic over the Kafka listener,
// retrying while the metadata group elects its leader, and returns its id.
func createKafkaTopic(ctx context.Context, t *testing.T, adm *kadm.Client, name string) [16]byte {
	t.Helper()
	var created kadm.CreateTopicResponse
	var err error
	for ctx.Err() == nil {
		if created, err = adm.CreateTopic(ctx, 1, 1, nil, name); err == nil && created.Err == nil {
			return created.ID
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
	t.Fatalf("create %s: %v / %v", name, err, created.Err)
	return [16]byte{}
}

// deleteTopicsKafka sends one DeleteTopics (the newest version both sides
// serve: v6, topics by name or id) and returns its answer's topics.
func deleteTopicsKafka(ctx context.Context, t *testing.T, cl *kgo.Client, topics ...kmsg.DeleteTopicsRequestTopic) []kmsg.DeleteTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 10000
	req.Topics = topics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version < 6 || len(resp.Topics) != len(topics) {
		t.Fatalf("DeleteTopics v%d answered %d topics, want v6 and %d", resp.Version, len(resp.Topics), len(topics))
	}
	return resp.Topics
}

// msg is an answer's error message, "" when none.
func msg(m *string) string {
	if m == nil {
		return ""
	}
	return *m
}

// byID names a topic by its id only (KIP-516).
func byID(id [16]byte) kmsg.DeleteTopicsRequestTopic {
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.TopicID = id
	return t
}

// A Kafka DeleteTopics v6 naming a topic by its id only deletes the topic
// and answers its name and id; a second one answers UNKNOWN_TOPIC_ID (no
// topic has the id now). Before, the adapter refused a topic without a
// name (INVALID_REQUEST).
func TestKafkaDeleteTopicsByID(t *testing.T) {
	ctx, cl, adm := kafkaDeleteClients(t)
	id := createKafkaTopic(ctx, t, adm, "byid")

	got := deleteTopicsKafka(ctx, t, cl, byID(id))[0]
	if err := kerr.ErrorForCode(got.ErrorCode); err != nil || got.Topic == nil || *got.Topic != "byid" || got.TopicID != id {
		t.Fatalf("delete by id: %v (%v), topic %v id %v; want the topic byid and its id %v",
			err, msg(got.ErrorMessage), got.Topic, got.TopicID, id)
	}
	meta, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := meta.Topics["byid"]; ok {
		t.Fatalf("topic byid still listed after its delete by id")
	}
	again := deleteTopicsKafka(ctx, t, cl, byID(id))[0]
	if again.ErrorCode != kerr.UnknownTopicID.Code || again.TopicID != id {
		t.Fatalf("second delete by id: %v, id %v; want UNKNOWN_TOPIC_ID for %v", kerr.ErrorForCode(again.ErrorCode), again.TopicID, id)
	}
}

// A delete naming a topic's old id cannot delete the topic re-created
// under its name: by id only, no topic has the old id (UNKNOWN_TOPIC_ID);
// by name and the old id, the metadata group refuses it
// (UNKNOWN_TOPIC_ID). The re-created topic stays, with its new id. Before,
// the adapter deleted a named topic whatever id the request gave.
func TestKafkaDeleteTopicsStaleIDKeepsRecreated(t *testing.T) {
	ctx, cl, adm := kafkaDeleteClients(t)
	old := createKafkaTopic(ctx, t, adm, "again")
	if d, err := adm.DeleteTopic(ctx, "again"); err != nil || d.Err != nil {
		t.Fatalf("delete: %v / %v", err, d.Err)
	}
	fresh := createKafkaTopic(ctx, t, adm, "again")
	if fresh == old {
		t.Fatalf("the re-created topic has the old id %v", old)
	}

	named := byID(old)
	named.Topic = kmsg.StringPtr("again")
	got := deleteTopicsKafka(ctx, t, cl, byID(old), named)
	for i, g := range got {
		if g.ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("stale delete %d: %v (%v), want UNKNOWN_TOPIC_ID", i, kerr.ErrorForCode(g.ErrorCode), msg(g.ErrorMessage))
		}
	}
	meta, err := adm.Metadata(ctx, "again")
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := meta.Topics["again"]; !ok || m.Err != nil || m.ID != fresh {
		t.Fatalf("after the stale deletes: topic again %+v, want it with its new id %v", m, fresh)
	}
}

// kafkaDeleteClients starts a node with its Kafka listener and returns a
// franz-go client of it, its admin client, and a 30 s context, all ended
// with the test.
func kafkaDeleteClients(t *testing.T) (context.Context, *kgo.Client, *kadm.Client) {
	t.Helper()
	rt := startKafkaServer(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(rt.KafkaAddr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, cl, kadm.NewClient(cl)
}
