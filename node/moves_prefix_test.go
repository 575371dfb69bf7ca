package node

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// carriesPrefixChunk reports whether frame is a RaftFrame with a compacted
// prefix chunk in it.
func carriesPrefixChunk(frame []byte) bool {
	var f strandpb.RaftFrame
	return proto.Unmarshal(frame, &f) == nil && len(f.GetPrefixChunks()) > 0
}

// TestMoveLeavesJointOnceIncomingHoldPrefix shows a move of a compacted
// partition leaves the joint configuration only once a majority of the
// incoming voters hold in their compacted prefixes what the raft logs
// dropped (moves.go incomingHoldPrefixes): the added node catches up from
// a raft snapshot past its empty prefix and, while no prefix chunk reaches
// it, holds nothing below its raft log, and the other follower that stays
// is down (it reports nothing). Leaving then would have the removed
// replica delete its prefix, and of the voters up only the leader would
// hold the records below the trim (the simulator's seed 42 on the
// clientlib reconnect branch: two of the three incoming voters held no
// prefix). Once the follower is back, a majority holds again and the
// move completes.
func TestMoveLeavesJointOnceIncomingHoldPrefix(t *testing.T) {
	c := newMetaCluster(t, 61, 4, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.CheckpointEntries = 16
		cfg.PrefixChunkBytes = 256
	})
	c.createTopicWith(c.metaLeaderOf(), "kv", 1, 3, map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096"})
	kv := TopicPartition{Topic: "kv"}
	c.fillKeys(kv, 80, 8)
	c.tick(60)
	lead := c.leader(kv)
	if from := c.raftLogFrom(lead, kv); from == 0 {
		t.Fatalf("leader's raft log not trimmed (record %+v): nothing to hold in prefixes", c.cores[lead].byTP[kv].part.Compaction())
	}
	current, _ := c.cores[lead].meta.meta.Assignment("kv", 0)
	var spare, out, down uint64
	for id := uint64(1); id <= 4; id++ {
		switch {
		case !slices.Contains(current, id):
			spare = id
		case NodeID(id) == lead:
		case out == 0:
			out = id
		default:
			down = id
		}
	}
	target := []uint64{spare}
	for _, id := range current {
		if id != out {
			target = append(target, id)
		}
	}
	c.crash(NodeID(down))
	c.tick(int(c.cores[lead].heldReportTicks()) + 1) // its last report no longer counts
	c.drop = func(e envelope) bool { return e.to == NodeID(spare) && carriesPrefixChunk(e.frame) }
	if resp, _ := c.handle(1, moveReq(9, kv, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	c.tick(400)
	added := c.cores[NodeID(spare)].byTP[kv]
	if added == nil || added.pass.stuck == "" {
		t.Fatalf("node %d: want a replica stuck below a raft snapshot, have %+v", spare, added)
	}
	if c.cores[NodeID(out)].byTP[kv] == nil {
		t.Fatalf("node %d deleted its replica while node %d held no prefix: the move left the joint configuration", out, spare)
	}
	if cs := c.cores[c.leader(kv)].byTP[kv].confState; len(cs.GetVotersOutgoing()) == 0 {
		t.Fatalf("configuration %v: want the move held in its joint configuration", cs)
	}
	c.drop = nil
	c.start(NodeID(down))
	c.waitMoved(kv, target)
	holders := 0
	for _, id := range target {
		if core := c.cores[NodeID(id)]; core.ownHeldEnd(core.byTP[kv]) > 0 {
			holders++
		}
	}
	if holders < 2 {
		t.Fatalf("the move completed with %d of the voters %v holding a prefix", holders, target)
	}
}
