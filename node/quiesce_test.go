package node

import (
	"testing"
)

// quiescedOn counts node id's partition groups that are quiesced.
func quiescedOn(c *cluster, id NodeID) (quiesced, groups int) {
	for _, g := range c.cores[id].partitionGroups() {
		groups++
		if g.quiesced {
			quiesced++
		}
	}
	return quiesced, groups
}

// settledQuiet ticks a three-node cluster with a 4-partition topic until
// every partition replica is quiesced (bounded), failing otherwise.
func settledQuiet(t *testing.T, config func(*Config)) *cluster {
	t.Helper()
	c := newCluster(t, 3, 3, replicated(3, "t", 4), config)
	for p := range 4 {
		c.leader(TopicPartition{Topic: "t", Partition: int32(p)})
	}
	for range 100 {
		all := true
		for _, id := range c.ids {
			q, n := quiescedOn(c, id)
			all = all && q == n
		}
		if all {
			return c
		}
		c.tick(1)
	}
	for _, id := range c.ids {
		q, n := quiescedOn(c, id)
		t.Errorf("node %d: %d of %d replicas quiesced", id, q, n)
	}
	t.FailNow()
	return nil
}

// TestIdleGroupsQuiesce shows idle partition groups stop ticking and
// sending: once every replica is quiesced, further ticks send only the
// metadata group's heartbeats and the liveness frames, and a produce wakes
// its group and completes as usual.
func TestIdleGroupsQuiesce(t *testing.T) {
	c := settledQuiet(t, nil)
	sent := func() (n uint64) {
		for _, id := range c.ids {
			n += c.cores[id].Stats().MessagesSent
		}
		return n
	}
	before := sent()
	c.tick(10)
	// Ten ticks of the metadata group's leader: 2 heartbeats and 2
	// responses each; without quiescence the 4 partitions add 16 a tick.
	if got := sent() - before; got > 40 {
		t.Errorf("10 idle ticks sent %d raft messages; want at most 40 (the metadata group's)", got)
	}
	tp := TopicPartition{Topic: "t", Partition: 2}
	lead := c.leader(tp)
	res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "a", 2)})
	if res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("produce to a quiesced group: %+v", res)
	}
	if g := c.cores[lead].byTP[tp]; g.quiesced {
		t.Fatalf("the group stayed quiesced through a produce")
	}
}

// TestQuiescedFollowersElectAfterLeaderCrash crashes the node leading a
// quiesced partition: the followers, which do not tick, must notice the
// leader's node went silent, wake and elect a new leader.
func TestQuiescedFollowersElectAfterLeaderCrash(t *testing.T) {
	c := settledQuiet(t, nil)
	tp := TopicPartition{Topic: "t", Partition: 1}
	old := c.leader(tp)
	c.crash(old)
	c.awaitWokenLeader(tp, old, 100, "silence", func(s Stats) uint64 { return s.WokenBySilence })
}

// awaitWokenLeader ticks c until tp has a leader other than old (at most
// ticks), and fails unless old's peers counted wakes (woken) by why.
func (c *cluster) awaitWokenLeader(tp TopicPartition, old NodeID, ticks int, why string, woken func(Stats) uint64) {
	c.t.Helper()
	for range ticks {
		c.tick(1)
		if lead := c.agreedLeader(tp); lead != 0 && lead != old {
			var n uint64
			for _, id := range c.ids {
				if id != old {
					n += woken(c.cores[id].Stats())
				}
			}
			if n == 0 {
				c.t.Fatalf("new leader %d without a wake by %s", lead, why)
			}
			return
		}
	}
	c.t.Fatalf("no new leader for %v within %d ticks of its leader's node %d going (%s)", tp, ticks, old, why)
}

// TestQuiescedFollowersElectAfterLeaderRestartsFull restarts the node
// leading a quiesced partition at once, on a disk that filled while it was
// down (the real-process TestFullNodeHandsOffLeadership): it never looks
// silent, and being full it may not campaign, so only its new incarnation
// tells the quiesced followers to wake and elect one of them.
func TestQuiescedFollowersElectAfterLeaderRestartsFull(t *testing.T) {
	c := settledQuiet(t, func(cfg *Config) { cfg.MinFreeBytes = 1 << 20 })
	tp := TopicPartition{Topic: "t", Partition: 1}
	old := c.leader(tp)
	c.crash(old)
	d := c.disks[old]
	d.SetCapacity(d.UsedBytes() + 512<<10) // below the floor: full from its first tick
	c.start(old)
	c.awaitWokenLeader(tp, old, 200, "restart", func(s Stats) uint64 { return s.WokenByRestart })
	if !c.cores[old].diskFull() {
		t.Fatalf("restarted node %d not full", old)
	}
}
