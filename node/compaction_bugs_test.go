//go:build simbugs

package node

import (
	"testing"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/raftlog/compacted"
)

// CompactActiveSegment: node 1's passes clean up to its own last stable
// offset, through the raft segment still being appended to: its prefix of
// generation 1 ends past the decision's cleanable end, where the other
// replicas' end, and its outcome differs from theirs (then it installs
// the record's generation from a peer).
func TestBugCompactActiveSegment(t *testing.T) {
	c := newMetaCluster(t, 24, 3, func(cfg *Config) {
		retentionConfig(cfg)
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
	// Its outcome differs from the record, so it installs the record's
	// generation from a peer (compaction_install.go) once the record
	// names it: either is seen.
	installed := c.cores[1].Stats().PrefixInstalls
	if (bugged.Generation() != 1 || bugged.End() <= f.CompactOffset) && installed == 0 {
		t.Fatalf("node 1's prefix: generation %d end %d, no install; want generation 1 past the decision's cleanable end %d",
			bugged.Generation(), bugged.End(), f.CompactOffset)
	}
	t.Logf("decision 1 cleans below %d; node 1's prefix ends at %d; node 2 is at generation %d, end %d",
		f.CompactOffset, bugged.End(), good.Generation(), good.End())
}

// PrefixInstallUnchecked: a replica whose generation 2 differs from the
// record installs the peer's prefix, but switches after the first chunk
// without checking what it wrote against the record's digest: its
// manifest names the record's end and digest over a part of the batches,
// which Verify (and the simulator's prefix check) refuses.
func TestBugPrefixInstallUnchecked(t *testing.T) {
	compacted.SetInstallBugs(true)
	defer compacted.SetInstallBugs(false)
	c := newMetaCluster(t, 29, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 16
		cfg.PrefixChunkBytes = 256
		cfg.Bugs.PrefixInstallUnchecked = true
	})
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096"})
	kv := TopicPartition{Topic: "kv"}
	c.fillPartition(kv, 60)
	c.tick(40)
	c.checkPrefixesAgree(kv, 1)
	odd := c.otherPrefix(kv)
	c.fillKeys(kv, 40, 8)
	c.tick(60)
	s := c.cores[odd].byTP[kv].pass.store
	if c.cores[odd].Stats().PrefixInstalls == 0 || s == nil {
		t.Fatalf("node %d installed nothing", odd)
	}
	if err := s.Verify(); err == nil {
		t.Fatalf("node %d's installed prefix of generation %d verifies", odd, s.Generation())
	} else {
		t.Logf("node %d: %v", odd, err)
	}
}

// PrefixTrimUnheld: with one follower down and the other's pass jobs
// never finishing, the leader trims its raft log up to its own prefix, the
// only one: the down follower comes back to a raft snapshot past its empty
// prefix and must install the leader's (TestRaftTrimWaitsForMajorityPrefix
// shows the fixed path).
func TestBugPrefixTrimUnheld(t *testing.T) {
	c := newMetaCluster(t, 31, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 16
		cfg.PrefixChunkBytes = 256
		cfg.Bugs.PrefixTrimUnheld = true
	})
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096"})
	kv := TopicPartition{Topic: "kv"}
	lead, _, down := passOnLeaderOnly(c, kv)
	end := c.cores[lead].byTP[kv].pass.store.End()
	if from := c.raftLogFrom(lead, kv); from == 0 || end == 0 {
		t.Fatalf("leader's raft log starts at %d, prefix end %d: want it trimmed up to its prefix", from, end)
	}
	c.start(down)
	c.tick(100)
	if n := c.cores[down].Stats().PrefixInstalls; n == 0 {
		t.Fatalf("node %d caught up without a prefix install", down)
	}
}
