package node

import (
	"testing"
)

// TestReadyPollsOnlyTouchedGroups produces to one partition of fifty on a
// settled cluster and counts the groups the Ready rounds asked HasReady:
// only the partition written to (and never every group of every round, as
// a full scan would: 51 groups per round).
func TestReadyPollsOnlyTouchedGroups(t *testing.T) {
	const partitions = 50
	c := newCluster(t, 1, 3, replicated(3, "t", partitions), nil)
	tp := TopicPartition{Topic: "t", Partition: 7}
	lead := c.leader(tp)
	for p := range partitions {
		c.leader(TopicPartition{Topic: "t", Partition: int32(p)})
	}
	polls := func() (n uint64) {
		for _, id := range c.ids {
			n += c.cores[id].Stats().ReadyPolls
		}
		return n
	}
	before := polls()
	res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "a", 3)})
	if res.Err != nil {
		t.Fatalf("produce: %v", res.Err)
	}
	if got := polls() - before; got == 0 || got >= partitions {
		t.Fatalf("an acks=all produce to one partition polled %d groups on 3 nodes; want 1..%d", got, partitions-1)
	}
}

// TestReadyMarksCheckCatchesUnmarkedCall shows the invariants build's check
// fails when a RawNode is called without markReady: a proposal slipped in
// behind the core's back leaves its group ready after Process.
func TestReadyMarksCheckCatchesUnmarkedCall(t *testing.T) {
	if !invariantsEnabled {
		t.Skip("the check runs only with -tags invariants")
	}
	c := newCluster(t, 1, 3, replicated(3, "t", 2), nil)
	tp := TopicPartition{Topic: "t", Partition: 1}
	lead := c.leader(tp)
	g := c.cores[lead].byTP[tp]
	if err := g.raw.Propose(nil); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Process left a group ready without a mark, and the invariants check did not panic")
		}
	}()
	_ = c.cores[lead].Process()
}

// TestTicksPerRaftTick shows Config.TicksPerRaftTick slows raft's clock
// only: with raft ticked every 5th Core.Tick, no metadata leader is
// elected before 5 × ElectionTicks ticks (with every tick it takes
// ElectionTicks to 2 × ElectionTicks).
func TestTicksPerRaftTick(t *testing.T) {
	for _, every := range []int{1, 5} {
		c := newCluster(t, 1, 3, nil, func(cfg *Config) { cfg.TicksPerRaftTick = every })
		ticks := 0
		for ; ticks < 1000 && !anyMetaLeader(c); ticks++ {
			c.tick(1)
		}
		if min, max := every*10, every*20+1; ticks < min || ticks > max {
			t.Errorf("TicksPerRaftTick %d: metadata leader after %d ticks, want %d..%d", every, ticks, min, max)
		}
	}
}

// anyMetaLeader tells whether some node leads the metadata group.
func anyMetaLeader(c *cluster) bool {
	for _, id := range c.ids {
		if st, _ := c.cores[id].MetadataStatus(); st.IsLeader {
			return true
		}
	}
	return false
}

// TestTailCachesShareNodeBudget hosts 16 partitions under a 4 MiB budget
// for all tail caches: every log's cache is bounded by an equal share
// (4 MiB / 17 logs with the metadata group's), where each used to get
// raftlog's 8 MiB whatever the number of logs.
func TestTailCachesShareNodeBudget(t *testing.T) {
	const total = 4 << 20
	c := newCluster(t, 1, 3, replicated(3, "t", 16), func(cfg *Config) { cfg.LogTailCacheBytesTotal = total })
	for _, id := range c.ids {
		for _, g := range c.cores[id].groups {
			if got := g.log.TailCacheBytesMax(); got != total/17 {
				t.Fatalf("node %d %v: tail cache bound %d, want %d", id, g.tp, got, total/17)
			}
		}
	}
}
