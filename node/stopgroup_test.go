package node

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestDeleteWhileProduceWaitsIsMaybeWritten: a produce the partition's
// leader proposed, still waiting for its commit when the leader applies
// the topic's delete, is answered maybe written (ErrReplicaStopped, a
// TIMEOUT), not UNKNOWN_TOPIC_OR_PARTITION: the entry may commit on the
// other replicas, and one that has not applied the delete serves it (the
// simulator's seed 4 with batched rounds read a record so refused). The
// leader's outbound frames are dropped so its entry cannot commit first;
// it still receives the metadata group's, and applies the delete.
func TestDeleteWhileProduceWaitsIsMaybeWritten(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		c := newMetaCluster(t, seed, 3, nil)
		meta := c.metaLeaderOf()
		c.createTopic(meta, "a", 1, 3)
		tp := TopicPartition{Topic: "a", Partition: 0}
		lead := c.leader(tp)
		if lead == meta {
			continue // the metadata leader's frames must flow: try another seed
		}
		c.drop = func(e envelope) bool { return e.from == lead }
		var res *ProduceResult
		c.cores[lead].produceNow(ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "x", 1)},
			func(r ProduceResult) { res = &r })
		c.settle()
		if res != nil {
			t.Fatalf("seed %d: produce answered %+v before any follower could acknowledge it", seed, *res)
		}
		resp, _ := c.handle(meta, &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_DeleteTopics{
			DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"a"}}}})
		if e := resp.GetDeleteTopics().GetTopics()[0].GetError(); e != nil {
			t.Fatalf("seed %d: delete: %v", seed, e)
		}
		for i := 0; res == nil && i < 200; i++ {
			c.tick(1)
			c.settle()
		}
		if res == nil {
			t.Fatalf("seed %d: the waiting produce was never answered after the delete", seed)
		}
		if !errors.Is(res.Err, ErrTimeout) || errors.Is(res.Err, ErrUnknownTopicPartition) {
			t.Fatalf("seed %d: waiting produce answered %v after its topic's delete, want a maybe-written TIMEOUT", seed, res.Err)
		}
		return
	}
	t.Fatal("no seed of 1-10 placed the partition's leader off the metadata leader")
}
