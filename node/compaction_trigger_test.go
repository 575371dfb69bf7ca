package node

import (
	"testing"
)

// TestLeaderProposesCompact shows the wired trigger: on nodes that let a
// topic compact, the leader of a compacted partition proposes COMPACT
// once a pass is due, and every replica applies the same decision of
// generation 1, its cleanable end above 0 and bounded by the leader's
// checkpoint and open segment (never past the high-water mark), and later
// decisions never go back; a delete topic gets none. (The replicas' passes and the later
// generations: compaction_replica_test.go.)
func TestLeaderProposesCompact(t *testing.T) {
	c := newMetaCluster(t, 24, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 16
	})
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096"})
	c.createTopic(c.metaLeaderOf(), "plain", 1, 3)
	kv, plain := TopicPartition{Topic: "kv"}, TopicPartition{Topic: "plain"}
	c.fillPartition(kv, 60)
	c.fillPartition(plain, 10)
	c.tick(40)
	lead := c.leader(kv)
	want, ok := c.cores[lead].compactionDecision(kv)
	hwm := statusOf(c.cores[lead], kv).HighWatermark
	if !ok || want.Generation != 1 || want.CleanableEnd <= 0 || want.CleanableEnd >= hwm || want.OffsetMapBytes != compactionMapBytes {
		t.Fatalf("leader's decision %+v (high-water mark %d)", want, hwm)
	}
	for _, id := range c.ids {
		if got, _ := c.cores[id].compactionDecision(kv); got != want {
			t.Fatalf("node %d decided %+v, leader %+v", id, got, want)
		}
		if got, _ := c.cores[id].compactionDecision(plain); got.Generation != 0 {
			t.Fatalf("node %d: a delete topic got a decision %+v", id, got)
		}
	}
	t.Logf("decision %+v, high-water mark %d, checkpointed %d", want, hwm, c.cores[lead].byTP[kv].checkpointIndex)
	c.fillPartition(kv, 20)
	c.tick(40)
	if got, _ := c.cores[c.leader(kv)].compactionDecision(kv); got.Generation < want.Generation {
		t.Fatalf("decision went back from %+v to %+v", want, got)
	}
	c.checkSameState(kv)
}

// A quiet compacted partition compacts: 40 batches, far fewer applied
// entries than Config.CheckpointEntries (1,024 here, the default), reach no
// periodic checkpoint, and a pass's cleanable end stops at the leader's
// checkpoint. The leader takes one early when only it holds a pass back,
// and proposes the pass; every replica applies it. Before, no decision
// ever came (a connector's config topic never compacted).
func TestQuietCompactedTopicCompacts(t *testing.T) {
	c := newMetaCluster(t, 28, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 1024
	})
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096"})
	kv := TopicPartition{Topic: "kv"}
	c.fillPartition(kv, 40)
	c.tick(60)
	lead := c.leader(kv)
	d, ok := c.cores[lead].compactionDecision(kv)
	if !ok || d.Generation == 0 || d.CleanableEnd <= 0 {
		t.Fatalf("no compaction decided on a quiet partition: %+v (applied %d, checkpointed %d)", d,
			c.cores[lead].byTP[kv].appliedRaft, c.cores[lead].byTP[kv].checkpointIndex)
	}
	for _, id := range c.ids {
		if got, _ := c.cores[id].compactionDecision(kv); got.Generation < 1 {
			t.Fatalf("node %d decided %+v, leader %+v", id, got, d)
		}
	}
	c.checkSameState(kv)
}
