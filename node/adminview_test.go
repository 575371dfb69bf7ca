package node

import (
	"testing"
	"time"
)

// AdminView shows the hosted replica with its offsets and, on the leader,
// every follower's progress; an acks=all produce counts one commit
// latency on the leader, and none on a follower.
func TestAdminViewReplicasAndCommitLatency(t *testing.T) {
	c := newCluster(t, 21, 3, replicated(3, "orders", 1), nil)
	tp := TopicPartition{Topic: "orders", Partition: 0}
	lead := c.leader(tp)
	if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "a", 3)}); res.Err != nil {
		t.Fatalf("produce: %v", res.Err)
	}
	c.settle()
	for _, id := range c.ids {
		v := c.cores[id].AdminView()
		if v.ID != id || !v.Registered || v.MetaLeader == 0 || len(v.Nodes) != 3 || len(v.Topics) != 1 {
			t.Fatalf("node %d: view id %d registered %v meta leader %d nodes %d topics %d", id, v.ID, v.Registered, v.MetaLeader, len(v.Nodes), len(v.Topics))
		}
		if len(v.Replicas) != 1 || v.Replicas[0].TopicPartition != tp {
			t.Fatalf("node %d: replicas %+v, want orders/0 alone", id, v.Replicas)
		}
		r := v.Replicas[0]
		if r.Leader != lead || r.SizeBytes <= 0 || r.LastIndex == 0 {
			t.Errorf("node %d: replica %+v", id, r)
		}
		commits := v.Stats.CommitLatency.Count
		if id != lead {
			if len(r.Followers) != 0 || commits != 0 {
				t.Errorf("follower %d: followers %+v, commit latencies %d; want none", id, r.Followers, commits)
			}
			continue
		}
		if r.HighWatermark != 3 || !r.IsLeader || commits != 1 {
			t.Errorf("leader %d: high watermark %d leading %v commit latencies %d; want 3, true, 1", id, r.HighWatermark, r.IsLeader, commits)
		}
		if len(r.Followers) != 2 || r.Followers[0].Node >= r.Followers[1].Node {
			t.Fatalf("leader %d: followers %+v, want the two others by id", id, r.Followers)
		}
		for _, f := range r.Followers {
			if f.Lagging(r.LastIndex, 0) {
				t.Errorf("leader %d: settled follower %+v lags (last index %d)", id, f, r.LastIndex)
			}
		}
	}
}

// Observe puts a duration in the first bucket whose bound covers it, and
// everything above the last bound in the overflow count.
func TestLatencyHistogramBuckets(t *testing.T) {
	var h LatencyHistogram
	h.Observe(0)
	h.Observe(LatencyBuckets[0])
	h.Observe(LatencyBuckets[0] + 1)
	h.Observe(time.Hour)
	if h.Counts[0] != 2 || h.Counts[1] != 1 || h.Counts[len(LatencyBuckets)] != 1 || h.Count != 4 {
		t.Fatalf("counts %v (count %d)", h.Counts, h.Count)
	}
	if want := 2*LatencyBuckets[0] + 1 + time.Hour; h.Sum != want {
		t.Fatalf("sum %v, want %v", h.Sum, want)
	}
}

// BenchmarkAdminView is the loop's pause for one view of a node hosting
// 600 replicas of a three-node cluster (every replica, a third led).
func BenchmarkAdminView(b *testing.B) {
	c := newCluster(b, 22, 3, replicated(3, "load", 600), nil)
	c.leader(TopicPartition{Topic: "load", Partition: 599})
	core := c.cores[1]
	b.ReportAllocs()
	for b.Loop() {
		v := core.AdminView()
		if len(v.Replicas) != 600 {
			b.Fatalf("%d replicas", len(v.Replicas))
		}
	}
}
