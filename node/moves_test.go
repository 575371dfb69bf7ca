package node

import (
	"slices"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// moveReq asks to move tp to replicas.
func moveReq(corr uint64, tp TopicPartition, replicas ...uint64) *strandpb.Request {
	return &strandpb.Request{CorrelationId: corr, Body: &strandpb.Request_MovePartitions{MovePartitions: &strandpb.MovePartitionsRequest{
		Moves: []*strandpb.MovePartitionsRequest_Move{{Topic: tp.Topic, Partition: tp.Partition, Replicas: replicas}},
	}}}
}

// moveFixture is 4 nodes with topic m of one partition on 3 of them and
// some records in it; it returns the cluster, the partition, its replicas
// and the node outside them.
func moveFixture(t *testing.T, seed uint64) (*cluster, TopicPartition, []uint64, uint64) {
	c := newMetaCluster(t, seed, 4, nil)
	tp := TopicPartition{Topic: "m", Partition: 0}
	c.createTopic(c.metaLeaderOf(), "m", 1, 3)
	lead := c.leader(tp)
	for i := range 5 {
		if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "a", i+1)}); res.Err != nil {
			t.Fatalf("produce: %v", res.Err)
		}
	}
	current, err := c.cores[lead].meta.meta.Assignment("m", 0)
	if err != nil {
		t.Fatal(err)
	}
	var spare uint64
	for id := uint64(1); id <= 4; id++ {
		if !slices.Contains(current, id) {
			spare = id
		}
	}
	return c, tp, current, spare
}

// waitMoved ticks until every live node's metadata says tp's replicas are
// want with no move in progress, and the nodes outside want host nothing.
func (c *cluster) waitMoved(tp TopicPartition, want []uint64) {
	c.t.Helper()
	for range 2000 {
		done := true
		for _, id := range c.ids {
			core := c.cores[id]
			if core == nil {
				continue
			}
			r, _ := core.meta.meta.Assignment(tp.Topic, tp.Partition)
			_, moving := core.meta.meta.MoveOf(tp.Topic, tp.Partition)
			hosts := core.byTP[tp] != nil
			done = done && !moving && slices.Equal(r, want) && hosts == slices.Contains(want, uint64(id))
		}
		if done {
			return
		}
		c.tick(1)
	}
	c.t.Fatalf("move of %v to %v did not finish", tp, want)
}

// checkMovedGroup fails unless tp's raft configuration on its leader is
// exactly want (no learners, not joint) and every record is still there.
func checkMovedGroup(t *testing.T, c *cluster, tp TopicPartition, want []uint64, records int) {
	t.Helper()
	lead := c.leader(tp)
	if !slices.Contains(want, uint64(lead)) {
		t.Fatalf("leader %d outside the target %v", lead, want)
	}
	cs := c.cores[lead].byTP[tp].confState
	voters := slices.Clone(cs.GetVoters())
	slices.Sort(voters)
	sorted := slices.Clone(want)
	slices.Sort(sorted)
	if !slices.Equal(voters, sorted) || len(cs.GetLearners()) != 0 || len(cs.GetVotersOutgoing()) != 0 {
		t.Fatalf("conf state %v, want voters %v", cs, sorted)
	}
	batches, hw := c.fetchAll(lead, tp)
	n := 0
	for _, b := range batches {
		n += int(batchRecordCount(b.Batch))
	}
	if n != records || hw != int64(records) {
		t.Fatalf("%d records up to %d after the move, want %d", n, hw, records)
	}
}

// TestMovePartitionReplacesFollower moves a partition off one follower
// onto a new node: learner, joint change, completion; the removed node
// stops and deletes its replica, and every record survives.
func TestMovePartitionReplacesFollower(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 41)
	lead := uint64(c.leader(tp))
	var target []uint64
	for _, id := range current {
		if id == lead || len(target) < 1 {
			target = append(target, id)
		}
	}
	for _, id := range current {
		if len(target) < 2 && !slices.Contains(target, id) {
			target = append(target, id)
		}
	}
	target = append(target, spare)
	resp, _ := c.handle(NodeID(lead), moveReq(9, tp, target...))
	if m := resp.GetMovePartitions().GetMoves(); len(m) != 1 || m[0].GetError() != nil || !slices.Equal(m[0].GetTargetReplicas(), target) {
		t.Fatalf("move answered %v", resp)
	}
	c.waitMoved(tp, target)
	checkMovedGroup(t, c, tp, target, 15)
	var removed uint64
	for _, id := range current {
		if !slices.Contains(target, id) {
			removed = id
		}
	}
	dir := managedDir("m", c.cores[NodeID(lead)].byTP[tp].topicID, 0)
	if !deletedHere(c.cores[NodeID(removed)].cfg, dir) {
		t.Fatalf("node %d left no tombstone in %s", removed, dir)
	}
}

// TestMovePartitionRemovesLeader moves a partition to a set without its
// leader: the leader hands leadership on and the move completes.
func TestMovePartitionRemovesLeader(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 43)
	lead := uint64(c.leader(tp))
	target := []uint64{spare}
	for _, id := range current {
		if id != lead {
			target = append(target, id)
		}
	}
	resp, _ := c.handle(NodeID(lead), moveReq(9, tp, target...))
	if m := resp.GetMovePartitions().GetMoves(); len(m) != 1 || m[0].GetError() != nil {
		t.Fatalf("move answered %v", resp)
	}
	c.waitMoved(tp, target)
	checkMovedGroup(t, c, tp, target, 15)
	if res := c.produce(c.leader(tp), ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "b", 2)}); res.Err != nil {
		t.Fatalf("produce after the move: %v", res.Err)
	}
}

// TestMovePartitionsRefused shows refusals: a repeated node before
// proposing, an unknown node and a second move from the metadata group.
func TestMovePartitionsRefused(t *testing.T) {
	c, tp, current, spare := moveFixture(t, 47)
	cases := []struct {
		replicas []uint64
		want     strandpb.ErrorCode
	}{
		{[]uint64{1, 1, 2}, strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT},
		{nil, strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT},
		{[]uint64{1, 2, 9}, strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT},
	}
	for i, tc := range cases {
		resp, _ := c.handle(1, moveReq(uint64(10+i), tp, tc.replicas...))
		if got := resp.GetMovePartitions().GetMoves()[0].GetError().GetCode(); got != tc.want {
			t.Fatalf("move to %v: %v, want %v", tc.replicas, got, tc.want)
		}
	}
	target := append([]uint64{spare}, current[1:]...)
	// Hold the move: drop every frame to the spare node, so it cannot
	// catch up and the move stays in progress.
	c.drop = func(e envelope) bool { return e.to == NodeID(spare) || e.from == NodeID(spare) }
	if resp, _ := c.handle(1, moveReq(20, tp, target...)); resp.GetMovePartitions().GetMoves()[0].GetError() != nil {
		t.Fatalf("move: %v", resp)
	}
	resp, _ := c.handle(1, moveReq(21, tp, current...))
	if got := resp.GetMovePartitions().GetMoves()[0].GetError().GetCode(); got != strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS {
		t.Fatalf("second move: %v, want reassignment_in_progress", got)
	}
	c.drop = nil
	c.waitMoved(tp, target)
}
