package simnet

import (
	"testing"

	"github.com/strandlog/strand/node"
)

// electCore is a node as canElectWithout reads it: its replica's status
// and applied configuration.
type electCore struct {
	core
	status node.GroupStatus
	cfg    node.ReplicaConfig
}

func (c *electCore) AppendStatus(dst []node.GroupStatus) []node.GroupStatus {
	return append(dst, c.status)
}

func (c *electCore) PartitionConfig(node.TopicPartition) (node.ReplicaConfig, bool) {
	return c.cfg, true
}

// TestCanElectWithoutCountsEachHalfOfAJointConfig shows the disk-stall
// check's "can the others elect" counts a majority in each half of a joint
// configuration, as raft does. A move from voters 1 2 3 to 2 3 4 is in
// its joint configuration; node 1 is the victim and node 3 rebuilds its
// wiped replica: nodes 2 and 4 are a majority of the incoming voters but
// only node 2 of the outgoing ones, so nobody can win an election, and the
// check must not demand one. Counting voters against a majority of the
// replication factor, as before, said 2 of 3 could.
func TestCanElectWithoutCountsEachHalfOfAJointConfig(t *testing.T) {
	tp := node.TopicPartition{Topic: "t", Partition: 0}
	joint := node.ReplicaConfig{Voters: []node.NodeID{2, 3, 4}, VotersOutgoing: []node.NodeID{1, 2, 3}}
	w := &world{opts: Options{Partitions: 1, Replication: 3}, groupOf: map[node.TopicPartition]int{tp: 0},
		wire: &wireWorkload{tps: []node.TopicPartition{tp}}}
	for i := range 4 {
		c := &electCore{status: node.GroupStatus{TopicPartition: tp, TopicID: 7}, cfg: joint}
		c.status.Rejoining = i == 2 // node 3 rebuilds
		w.nodes = append(w.nodes, &simNode{index: i, id: node.NodeID(i + 1), up: true, core: c})
	}
	p := &planner{w: w}
	if p.canElectWithout(0, 0, 7) {
		t.Fatalf("nodes 2 and 4 counted able to elect without node 1 in the joint configuration %+v", joint)
	}
	w.nodes[2].core.(*electCore).status.Rejoining = false
	if !p.canElectWithout(0, 0, 7) {
		t.Fatalf("nodes 2, 3 and 4 counted unable to elect without node 1 in %+v", joint)
	}
	for _, n := range w.nodes {
		n.core.(*electCore).cfg = node.ReplicaConfig{Voters: []node.NodeID{2, 3, 4}} // the move done
	}
	w.nodes[2].core.(*electCore).status.Rejoining = true
	if !p.canElectWithout(0, 0, 7) {
		t.Fatalf("nodes 2 and 4 counted unable to elect without node 1 among voters 2 3 4")
	}
}
