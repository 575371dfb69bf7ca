//go:build simbugs

package node

import (
	"testing"

	"github.com/strandlog/strand/engine"
)

// CompactActiveSegment: node 1's passes clean up to its own last stable
// offset, through the raft segment still being appended to: its prefix of
// generation 1 ends past the decision's cleanable end, where the other
// replicas' end, and its outcome differs from theirs.
func TestBugCompactActiveSegment(t *testing.T) {
	c := newMetaCluster(t, 24, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CompactedTopicsUnfinished = true
		cfg.CheckpointEntries = 16
		cfg.Bugs.CompactActiveSegment = cfg.ID == 1
	})
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096"})
	kv := TopicPartition{Topic: "kv"}
	c.fillPartition(kv, 60)
	c.tick(40)
	idx := c.compactIndex(2, kv, 1)
	if idx == 0 {
		t.Fatal("no decision of generation 1")
	}
	ents, err := c.cores[2].byTP[kv].log.Entries(idx, idx+1, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	f, err := engine.DecodeEntry(ents[0].GetData())
	if err != nil {
		t.Fatal(err)
	}
	bugged, good := c.cores[1].byTP[kv].pass.store, c.cores[2].byTP[kv].pass.store
	if bugged == nil || good == nil || bugged.Generation() < 1 || good.Generation() < 1 {
		t.Fatalf("prefixes %v and %v: want generation 1 or later on both", bugged, good)
	}
	if bugged.Generation() != 1 || bugged.End() <= f.CompactOffset {
		t.Fatalf("node 1's prefix: generation %d end %d; want generation 1 past the decision's cleanable end %d",
			bugged.Generation(), bugged.End(), f.CompactOffset)
	}
	t.Logf("decision 1 cleans below %d; node 1's prefix ends at %d; node 2 is at generation %d, end %d",
		f.CompactOffset, bugged.End(), good.Generation(), good.End())
}
