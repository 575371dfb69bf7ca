package node

import (
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
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

// TestAskedLeaderHoldsPasses: a leader a stuck peer asked for its prefix
// decides no pass for installHoldTicks, so the generation the peer installs
// stays current; after the hold it decides again. Without the hold the
// peer chased generations for as long as passes came faster than an
// install (the simulator's seed 230: every replica stuck, the final read
// short by 30 s).
func TestAskedLeaderHoldsPasses(t *testing.T) {
	c := newMetaCluster(t, 24, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 16
	})
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096"})
	kv := TopicPartition{Topic: "kv"}
	c.fillPartition(kv, 60)
	c.tick(40)
	lead := c.leader(kv)
	first, ok := c.cores[lead].compactionDecision(kv)
	if !ok || first.Generation == 0 {
		t.Fatalf("no first decision: %+v", first)
	}
	core := c.cores[lead]
	g := core.byTP[kv]
	var peer NodeID
	for _, id := range c.ids {
		if id != lead {
			peer = id
			break
		}
	}
	core.servePrefix(peer, &strandpb.PrefixRequest{Topic: wireTopic(g.tp.Topic, g.topicID), Partition: g.tp.Partition, Generation: first.Generation + 7})
	hold := core.installHoldTicks()
	for i := 0; i < 3; i++ {
		c.fillPartition(kv, 30)
		c.tick(int(hold) / 4)
		if got, _ := core.compactionDecision(kv); c.leader(kv) == lead && got.Generation != first.Generation {
			t.Fatalf("asked %d ticks ago, the leader decided %+v after %+v", core.ticks-g.pass.askedAt, got, first)
		}
	}
	c.fillPartition(kv, 30)
	c.tick(int(hold))
	if got, _ := c.cores[c.leader(kv)].compactionDecision(kv); got.Generation <= first.Generation {
		t.Fatalf("after the hold no new decision: %+v", got)
	}
}
