package node

import (
	"testing"
)

// freshPlacement is each partition's replica order of topic, as the
// metadata placed it (the first is the preferred leader).
func freshPlacement(t *testing.T, c *cluster, topic string) [][]uint64 {
	t.Helper()
	_, topics := c.cores[c.ids[0]].MetadataNodes()
	for _, tp := range topics {
		if tp.Name == topic {
			return tp.Replicas
		}
	}
	t.Fatalf("topic %s not in the metadata", topic)
	return nil
}

// ticksToLeaders ticks until every partition of topic has a leader all
// its replicas agree on, and returns the ticks it took (bounded).
func ticksToLeaders(t *testing.T, c *cluster, topic string, partitions int) int {
	t.Helper()
	for ticks := 0; ticks < 100; ticks++ {
		all := true
		for p := range partitions {
			all = all && c.agreedLeader(TopicPartition{Topic: topic, Partition: int32(p)}) != 0
		}
		if all {
			return ticks
		}
		c.tick(1)
	}
	t.Fatalf("%s: no leaders after 100 ticks", topic)
	return 0
}

// A new topic's partitions are led by their preferred replicas within a
// raft tick or two of creation: the preferred replica campaigns at once
// instead of waiting out a randomized election timeout (ElectionTicks to
// twice that, 1–2 s in production), which made the first produce to a new
// topic take 1–1.6 s (issue 19 item 10). Before the fix no leader came
// before ElectionTicks ticks, and then whichever replica timed out first.
func TestNewPartitionElectsPreferredAtOnce(t *testing.T) {
	c := newMetaCluster(t, 19, 3, nil)
	c.createTopic(c.metaLeaderOf(), "fresh", 3, 3)
	ticks := ticksToLeaders(t, c, "fresh", 3)
	t.Logf("leaders after %d raft ticks", ticks)
	if ticks >= electionTicksDefault {
		t.Fatalf("leaders after %d raft ticks, want fewer than the election timeout (%d)", ticks, electionTicksDefault)
	}
	for p, replicas := range freshPlacement(t, c, "fresh") {
		tp := TopicPartition{Topic: "fresh", Partition: int32(p)}
		if lead := c.agreedLeader(tp); lead != NodeID(replicas[0]) {
			t.Fatalf("%v led by %d, want its preferred replica %d (placement %v)", tp, lead, replicas[0], replicas)
		}
		if n := c.cores[NodeID(replicas[0])].Stats().FreshCampaigns; n == 0 {
			t.Fatalf("%v: node %d made no early campaign", tp, replicas[0])
		}
	}
}

// When the preferred replica's first campaign is lost (its peers had not
// opened the replica yet, and dropped its pre-votes), it campaigns again
// on its next raft tick rather than waiting out an election timeout.
func TestNewPartitionCampaignRetriedWhenLost(t *testing.T) {
	c := newMetaCluster(t, 20, 3, nil)
	c.createTopic(c.metaLeaderOf(), "fresh", 1, 3)
	preferred := NodeID(freshPlacement(t, c, "fresh")[0][0])
	if n := c.cores[preferred].Stats().FreshCampaigns; n != 0 {
		t.Fatalf("node %d campaigned %d times before any tick", preferred, n)
	}
	c.drop = func(e envelope) bool { return e.from == preferred }
	c.tick(1) // the first campaign: every frame from the preferred node is lost
	c.drop = nil
	if n := c.cores[preferred].Stats().FreshCampaigns; n != 1 {
		t.Fatalf("node %d campaigned %d times in its first tick, want 1", preferred, n)
	}
	ticks := 1 + ticksToLeaders(t, c, "fresh", 1)
	t.Logf("leader after %d raft ticks, %d campaigns", ticks, c.cores[preferred].Stats().FreshCampaigns)
	if ticks >= electionTicksDefault {
		t.Fatalf("leader after %d raft ticks, want fewer than the election timeout (%d)", ticks, electionTicksDefault)
	}
	tp := TopicPartition{Topic: "fresh", Partition: 0}
	if lead := c.agreedLeader(tp); lead != preferred {
		t.Fatalf("led by %d, want the preferred replica %d", lead, preferred)
	}
	if n := c.cores[preferred].Stats().FreshCampaigns; n < 2 {
		t.Fatalf("node %d campaigned %d times, want a second campaign after the lost one", preferred, n)
	}
}
