package node

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// flipMiddle flips one bit in the middle of the first raft log segment of
// node id's replica of tp: damage inside synced, committed data.
func (c *cluster) flipMiddle(id NodeID, dir string) {
	c.t.Helper()
	names, err := c.disks[id].List(dir + "/log")
	if err != nil || len(names) == 0 {
		c.t.Fatalf("no log segment in %s: %v", dir, err)
	}
	name := dir + "/log/" + names[0]
	f, err := c.disks[id].Open(name)
	if err != nil {
		c.t.Fatalf("%v", err)
	}
	size, _ := f.Size()
	f.Close()
	c.disks[id].FlipBit(name, size/2, 3)
}

// produceN writes n acks=all batches of 2 records to tp through its leader.
func (c *cluster) produceN(tp TopicPartition, n int) int64 {
	c.t.Helper()
	for i := range n {
		lead := c.leader(tp)
		res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(c.t, fmt.Sprintf("%v-%d", tp, i), 2)})
		if res.Err != nil {
			c.t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
	return int64(2 * n)
}

// A replica whose log is corrupt at open is discarded and rebuilt from
// its peers while the node's other replica runs; then the two other
// nodes are killed in turn, so the rebuilt copy must hold everything.
// Before repair the node could not open at all (raftlog.ErrCorrupt).
func TestCorruptReplicaAtOpenIsRebuilt(t *testing.T) {
	corruptReplicaAtOpen(t, nil)
}

// The same with the damage in a sealed segment (small segments): Open
// reads only its seal, and the check of the entries to replay
// (raftlog.VerifyFrom) finds it. Without that check the node opened and
// raft panicked on the entry when applying it.
func TestCorruptSealedSegmentAtOpenIsRebuilt(t *testing.T) {
	corruptReplicaAtOpen(t, func(cfg *Config) { cfg.SegmentBytesMax = 2048 })
}

func corruptReplicaAtOpen(t *testing.T, config func(*Config)) {
	c := newMetaCluster(t, 21, 3, config)
	c.createTopic(c.metaLeaderOf(), "t", 2, 3)
	tp, other := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}
	want := c.produceN(tp, 30)
	c.produceN(other, 3)
	lead := c.leader(tp)
	victim := c.ids[(slices.Index(c.ids, lead)+1)%len(c.ids)]
	dir := c.replicaDir(victim, tp)
	c.crash(victim)
	c.flipMiddle(victim, dir)
	c.start(victim)
	for i := 0; i < 300 && c.cores[victim].Stats().ReplicasRepaired == 0; i++ {
		c.tick(1) // the replica opens when the metadata log replays
	}
	if got := c.cores[victim].Stats().ReplicasRepaired; got != 1 {
		t.Fatalf("replicas repaired %d, want 1", got)
	}
	if rejoinPhase(c.cores[victim], tp) != rejoinProbing || rejoinPhase(c.cores[victim], other) != 0 {
		t.Fatalf("phases after open: damaged %d, other %d", rejoinPhase(c.cores[victim], tp), rejoinPhase(c.cores[victim], other))
	}
	for i := 0; i < 500 && rejoinPhase(c.cores[victim], tp) != rejoinDone; i++ {
		c.tick(1)
	}
	if got := rejoinPhase(c.cores[victim], tp); got != rejoinDone {
		t.Fatalf("damaged replica still in phase %d", got)
	}
	c.checkSurvivesLosingOthers(victim, tp, want)
}

// checkSurvivesLosingOthers kills every node but keep and one other in
// turn, and checks tp's high-water mark each time.
func (c *cluster) checkSurvivesLosingOthers(keep NodeID, tp TopicPartition, want int64) {
	c.t.Helper()
	for _, id := range c.ids {
		if id == keep {
			continue
		}
		c.crash(id)
		lead := c.leader(tp)
		if _, hwm := c.fetchAll(lead, tp); hwm != want {
			c.t.Fatalf("node %d down: high-water mark %d, want %d", id, hwm, want)
		}
		c.start(id)
		for i := 0; i < 300 && len(c.hosted(id)) == 0; i++ {
			c.tick(1)
		}
	}
}

// A leader that reads a corrupt committed entry back for a fetch stops
// serving that partition only (the fetch fails retriably with
// ErrReplicaRecovering), rebuilds it from the others, and the partition's
// data is whole. Before repair the read stopped the whole node.
func TestCorruptReadRebuildsOnlyThatReplica(t *testing.T) {
	c := newMetaCluster(t, 22, 3, func(cfg *Config) { cfg.LogTailCacheBytesMax = -1 })
	c.createTopic(c.metaLeaderOf(), "t", 2, 3)
	tp, other := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}
	want := c.produceN(tp, 30)
	c.produceN(other, 3)
	lead := c.leader(tp)
	c.flipMiddle(lead, c.replicaDir(lead, tp))
	var failed error
	for offset := int64(0); offset < want && failed == nil; offset += 2 {
		failed = c.fetch(lead, FetchRequest{TopicPartition: tp, Offset: offset, MaxBytes: 1}).Err
	}
	if !errors.Is(failed, ErrReplicaRecovering) {
		t.Fatalf("fetch over the damage: %v, want ErrReplicaRecovering", failed)
	}
	c.tick(1)
	if err := c.cores[lead].Process(); err != nil {
		t.Fatalf("the node stopped: %v", err)
	}
	if rejoinPhase(c.cores[lead], tp) == 0 || rejoinPhase(c.cores[lead], other) != 0 {
		t.Fatalf("phases: damaged %d, other %d", rejoinPhase(c.cores[lead], tp), rejoinPhase(c.cores[lead], other))
	}
	for i := 0; i < 500 && rejoinPhase(c.cores[lead], tp) != rejoinDone; i++ {
		c.tick(1)
	}
	if got := rejoinPhase(c.cores[lead], tp); got != rejoinDone {
		t.Fatalf("damaged replica still in phase %d", got)
	}
	c.checkSurvivesLosingOthers(lead, tp, want)
}

// A leader whose damage sits in a sealed segment (which Open does not read)
// meets it only when raft reads those entries to send them to a follower
// that fell behind: the replica is rebuilt and the node keeps running.
// Before the groupStorage check raft panicked, and since Open reads only
// seals the panic came back after every restart.
func TestCorruptSealedSegmentSentByRaftIsRepaired(t *testing.T) {
	c := newMetaCluster(t, 23, 3, func(cfg *Config) {
		cfg.SegmentBytesMax = 2048
		cfg.LogTailCacheBytesMax = -1
	})
	c.createTopic(c.metaLeaderOf(), "t", 1, 3)
	tp := TopicPartition{Topic: "t", Partition: 0}
	c.produceN(tp, 1)
	lead := c.leader(tp)
	lagger := c.ids[(slices.Index(c.ids, lead)+1)%len(c.ids)]
	c.crash(lagger)
	want := c.produceN(tp, 60) + 2
	if names, _ := c.disks[lead].List(c.replicaDir(lead, tp) + "/log"); len(names) < 4 {
		t.Fatalf("leader's log has %d files, want several sealed segments", len(names))
	}
	c.flipMiddle(lead, c.replicaDir(lead, tp))
	c.start(lagger)
	for i := 0; i < 500 && c.cores[lead].Stats().ReplicasRepaired == 0; i++ {
		c.tick(1)
	}
	if got := c.cores[lead].Stats().ReplicasRepaired; got != 1 {
		t.Fatalf("replicas repaired on the leader: %d, want 1", got)
	}
	for i := 0; i < 1000 && rejoinPhase(c.cores[lead], tp) != rejoinDone; i++ {
		c.tick(1)
	}
	if _, hwm := c.fetchAll(c.leader(tp), tp); hwm != want {
		t.Fatalf("high-water mark %d, want %d", hwm, want)
	}
	c.checkSurvivesLosingOthers(lead, tp, want)
}
