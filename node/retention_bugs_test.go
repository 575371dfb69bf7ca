//go:build simbugs

package node

import (
	"slices"
	"testing"
)

// CompactPastStart: node 1 deletes the segment holding the first retained
// batch, so its log start runs ahead of the agreed one: at the same applied
// index it refuses offsets the other replicas still serve.
func TestBugCompactPastStartLosesRetainedBatch(t *testing.T) {
	c := newMetaCluster(t, 11, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.Bugs.CompactPastStart = cfg.ID == 1
	})
	c.createTopicWith(c.metaLeaderOf(), "r", 1, 3, map[string]string{
		"segment.bytes": "4096", "retention.bytes": "12288", "retention.ms": "-1",
	})
	tp := TopicPartition{Topic: "r", Partition: 0}
	c.fillPartition(tp, 200)
	c.tick(30)
	bugged, good := statusOf(c.cores[1], tp), statusOf(c.cores[2], tp)
	if bugged.AppliedIndex != good.AppliedIndex || bugged.LogStartOffset <= good.LogStartOffset {
		t.Fatalf("node 1 %+v, node 2 %+v: want node 1's log start past the agreed one", bugged, good)
	}
}

// StaleSnapshot: the compaction snapshot skips the entries since the
// previous one, so a follower that installs it holds a high-water mark
// behind the others' at the same applied index.
func TestBugStaleSnapshotDivergesFollower(t *testing.T) {
	c := newMetaCluster(t, 11, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.Bugs.StaleSnapshot = true
	})
	c.createTopicWith(c.metaLeaderOf(), "r", 1, 3, map[string]string{
		"segment.bytes": "4096", "retention.bytes": "12288", "retention.ms": "-1",
	})
	tp := TopicPartition{Topic: "r", Partition: 0}
	lead := c.leader(tp)
	follower := c.ids[(slices.Index(c.ids, lead)+1)%len(c.ids)]
	c.fillPartition(tp, 4)
	c.crash(follower)
	c.fillPartition(tp, 200)
	c.tick(30)
	c.start(follower)
	c.tick(60)
	lead = c.leader(tp)
	got, want := statusOf(c.cores[follower], tp), statusOf(c.cores[lead], tp)
	if c.cores[follower].Stats().SnapshotsInstalled == 0 || got.AppliedIndex != want.AppliedIndex || got.HighWatermark == want.HighWatermark {
		t.Fatalf("follower %+v, leader %+v: want a snapshot installed and the high-water marks apart", got, want)
	}
}
