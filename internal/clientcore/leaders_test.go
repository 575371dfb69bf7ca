package clientcore

import (
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

func metadata(leader, term uint64) *strandpb.MetadataResponse {
	return &strandpb.MetadataResponse{
		Nodes: []*strandpb.MetadataResponse_Node{{Id: 1, Address: "a1"}, {Id: 2, Address: "a2"}, {Id: 3, Address: "a3"}},
		Topics: []*strandpb.MetadataResponse_Topic{{Name: "t", Partitions: []*strandpb.MetadataResponse_Partition{
			{Partition: 0, LeaderId: leader, LeaderTerm: term}}}},
	}
}

// The leader cache applies newer metadata, ignores an older term from a
// lagging node, and applies NOT_LEADER hints at once.
func TestLeaderCache(t *testing.T) {
	c := NewLeaderCache()
	c.ApplyMetadata(metadata(1, 5))
	if id, addr, ok := c.Leader("t", 0); !ok || id != 1 || addr != "a1" {
		t.Fatalf("leader %d %q %v", id, addr, ok)
	}
	c.ApplyMetadata(metadata(2, 4)) // stale answer
	if id, _, _ := c.Leader("t", 0); id != 1 {
		t.Fatalf("stale metadata moved the leader to %d", id)
	}
	if !c.ApplyNotLeader("t", 0, 4, "a4") {
		t.Fatal("hint not applied")
	}
	if id, addr, ok := c.Leader("t", 0); !ok || id != 4 || addr != "a4" {
		t.Fatalf("after hint: %d %q %v", id, addr, ok)
	}
	c.ApplyMetadata(metadata(3, 6))
	if id, _, _ := c.Leader("t", 0); id != 3 {
		t.Fatalf("newer term did not apply: leader %d", id)
	}
	c.ForgetLeader("t", 0)
	if _, _, ok := c.Leader("t", 0); ok {
		t.Fatal("forgotten leader still known")
	}
}

// An answer naming no leader at a higher term (a replica's election that
// came to nothing, its term then lost with its disk) does not hide the
// leaders later answers name at a lower term: a cache with no leader
// takes any named one (a stale one costs one NOT_LEADER), else the
// partition stays leaderless for the client while the cluster has a
// leader (the simulator's seed 149: sim/1 led at term 3, the clients'
// caches stuck at term 4 with no leader for 40 s).
func TestLeaderCacheLeaderlessTermDoesNotWedge(t *testing.T) {
	c := NewLeaderCache()
	c.ApplyMetadata(metadata(1, 3))
	c.ApplyMetadata(metadata(0, 4)) // a candidate's term, no leader
	if _, _, ok := c.Leader("t", 0); ok {
		t.Fatal("a leaderless answer at a newer term kept the old leader")
	}
	c.ApplyMetadata(metadata(3, 3))
	if id, addr, ok := c.Leader("t", 0); !ok || id != 3 || addr != "a3" {
		t.Fatalf("the cluster's leader at term 3 not taken after a leaderless term 4: %d %q %v", id, addr, ok)
	}
	c.ApplyMetadata(metadata(2, 2)) // a lagging node, while a leader is known
	if id, _, _ := c.Leader("t", 0); id != 3 {
		t.Fatalf("an older term moved a known leader to %d", id)
	}
	c.ForgetLeader("t", 0)
	c.ApplyMetadata(metadata(0, 2)) // no leader named: nothing to take
	c.ApplyMetadata(metadata(3, 5))
	if id, _, _ := c.Leader("t", 0); id != 3 {
		t.Fatalf("newer term did not apply: leader %d", id)
	}
}
