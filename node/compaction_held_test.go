package node

import "testing"

// raftLogFrom is the first offset node id's raft log of tp holds.
func (c *cluster) raftLogFrom(id NodeID, tp TopicPartition) int64 {
	c.t.Helper()
	from, ok := c.cores[id].firstInRaftLog(c.cores[id].byTP[tp])
	if !ok {
		c.t.Fatalf("node %d: no raft log", id)
	}
	return from
}

// TestRaftTrimWaitsForMajorityPrefix shows a replica trims its raft log
// only below what a majority of the voters' compacted prefixes hold
// (compaction_held.go). With one follower down and the other's pass
// jobs never finishing, the leader passes alone, its pass is reported,
// and its raft log still holds every record its prefix covers: were it
// trimmed, the down follower would come back to a raft snapshot past its
// (empty) prefix and the records below would live on the leader only.
// Once the others pass too (the follower whose jobs were held restarts,
// the down one starts and catches up from the raft log, no install),
// the leader's raft log is trimmed up to the prefixes.
func TestRaftTrimWaitsForMajorityPrefix(t *testing.T) {
	c, kv := compactedCluster(t, 31)
	lead, slow, down := passOnLeaderOnly(c, kv)
	g := c.cores[lead].byTP[kv]
	if g.pass.store == nil || g.pass.store.Generation() == 0 || g.part.Compaction().DoneGeneration == 0 {
		t.Fatalf("leader's prefix %v, record %+v: want a pass reported", g.pass.store, g.part.Compaction())
	}
	if n := c.cores[slow].Stats().CompactionPasses; n != 0 {
		t.Fatalf("node %d passed %d times with its pass jobs held", slow, n)
	}
	if from := c.raftLogFrom(lead, kv); from > 0 {
		t.Fatalf("leader's raft log starts at offset %d with its prefix (end %d) on it alone: the others could lose the records below",
			from, g.pass.store.End())
	}
	c.hold = nil
	c.crash(slow)
	c.start(slow)
	c.start(down)
	c.tick(200)
	st := c.checkPrefixesAgree(kv, 1)
	if n := c.cores[down].Stats().PrefixInstalls; n != 0 {
		t.Fatalf("node %d installed %d prefixes: the leader's raft log was trimmed past it", down, n)
	}
	if from := c.raftLogFrom(lead, kv); from == 0 {
		t.Fatalf("leader's raft log not trimmed with every prefix at generation %d (end %d)", st.DoneGeneration, st.CleanedTo)
	}
	c.checkSameState(kv)
}

// passOnLeaderOnly crashes one follower of kv and holds the other's
// compaction pass jobs (c.hold) while 120 records are written: the leader
// passes, the followers do not. It returns the leader, the follower whose
// passes are held and the one that is down.
func passOnLeaderOnly(c *cluster, kv TopicPartition) (lead, slow, down NodeID) {
	lead = c.leader(kv)
	slow, down = c.othersThan(lead)
	c.crash(down)
	c.hold = func(id NodeID, j SyncJob) bool { return id == slow && j.passPhase != 0 }
	for range 3 {
		c.fillPartition(kv, 40)
		c.tick(40)
	}
	return lead, slow, down
}
