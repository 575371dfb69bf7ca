package node

import (
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// joinCluster starts three nodes and prepares node 4 to join them: its
// Config has Join set (while joinFlag says so) and Nodes listing the three
// and itself, as `strand serve --join` gives it.
func joinCluster(t *testing.T, seed uint64, joinFlag *bool) *cluster {
	t.Helper()
	c := newCluster(t, seed, 3, nil, func(cfg *Config) {
		if cfg.ID == 4 {
			cfg.Join = *joinFlag
			cfg.Nodes = append(slices.Clone(cfg.Nodes), Peer{ID: 4, Address: addressOf(4), Rack: "rack-4"})
		}
	})
	c.waitRegistered(3)
	return c
}

// nodeAdmin sends a NodeAdmin request to node via and returns its error.
func (c *cluster) nodeAdmin(via NodeID, action strandpb.NodeAction, id NodeID) *strandpb.Error {
	c.t.Helper()
	resp, _ := c.handle(via, &strandpb.Request{CorrelationId: 71, Body: &strandpb.Request_NodeAdmin{NodeAdmin: &strandpb.NodeAdminRequest{
		Action: action, NodeId: uint64(id), Address: addressOf(id), Rack: "rack-4",
	}}})
	return resp.GetError()
}

// addNode registers node 4 through via and starts it.
func (c *cluster) addNode4(via NodeID) {
	c.t.Helper()
	if e := c.nodeAdmin(via, strandpb.NodeAction_NODE_ACTION_ADD, 4); e != nil {
		c.t.Fatalf("add node 4: %v", e)
	}
	c.ids = append(c.ids, 4)
	c.disks[4] = memdisk.New()
	c.start(4)
}

// waitRole ticks until every live node applied role for node id.
func (c *cluster) waitRole(id NodeID, role MetaRole) {
	c.t.Helper()
	for range 600 {
		all := true
		for _, n := range c.ids {
			if core := c.cores[n]; core != nil {
				all = all && core.MetadataRole(id) == role
			}
		}
		if all {
			return
		}
		c.tick(1)
	}
	var got []MetaRole
	for _, n := range c.ids {
		if core := c.cores[n]; core != nil {
			got = append(got, core.MetadataRole(id))
		}
	}
	c.t.Fatalf("node %d never became %s everywhere: %v", id, role, got)
}

// waitUnfenced ticks until every live node applied node id unfenced (a
// joined node registers itself once it is in the metadata group).
func (c *cluster) waitUnfenced(id NodeID) {
	c.t.Helper()
	for range 300 {
		all := true
		for _, n := range c.ids {
			if core := c.cores[n]; core != nil {
				node, ok := core.meta.meta.Node(uint64(id))
				all = all && ok && !node.Fenced
			}
		}
		if all {
			return
		}
		c.tick(1)
	}
	c.t.Fatalf("node %d stayed fenced", id)
}

// TestJoinNodeBecomesVoterAndHostsReplicas: a registered node started with
// Join is added as a learner, promoted to voter once caught up, applies
// the whole metadata log (it sees every registration), and receives
// replicas of a topic created afterwards; a restart of every node, the
// joined one without Join, comes back in the same membership.
func TestJoinNodeBecomesVoterAndHostsReplicas(t *testing.T) {
	join := true
	c := joinCluster(t, 1, &join)
	c.addNode4(1)
	c.waitRole(4, MetaRoleVoter)
	c.waitRegistered(4)
	c.waitUnfenced(4)
	if st, _ := c.cores[4].MetadataStatus(); st.Leader == 0 {
		t.Fatalf("joined node knows no metadata leader")
	}
	c.createTopic(c.metaLeaderOf(), "after", 4, 3)
	var on4 int
	for range 300 {
		if on4 = len(c.hosted(4)); on4 > 0 {
			break
		}
		c.tick(1)
	}
	if on4 == 0 {
		t.Fatalf("joined node hosts no replica of a topic created after it joined")
	}
	join = false
	for _, id := range c.ids {
		c.crash(id)
	}
	for _, id := range c.ids {
		c.start(id)
	}
	c.waitRole(4, MetaRoleVoter)
	for _, id := range []NodeID{1, 2, 3} {
		if r := c.cores[4].MetadataRole(id); r != MetaRoleVoter {
			t.Fatalf("after restart node 4 sees node %d as %s", id, r)
		}
	}
	c.metaLeaderOf()
}

// TestJoinSurvivesCrashes: the joining node crashes before and after its
// first entries arrive, and the metadata leader crashes right after the
// learner was added; the node still ends a voter everywhere, and a
// joined node whose log was still empty never bootstraps a group of its
// own on restart (it restarts without Join).
func TestJoinSurvivesCrashes(t *testing.T) {
	join := true
	c := joinCluster(t, 2, &join)
	c.addNode4(2)
	// Crash node 4 before it heard anything: its log is empty; Join is
	// gone from its config, the marker keeps it from bootstrapping.
	c.crash(4)
	join = false
	c.start(4)
	if st, _ := c.cores[4].MetadataStatus(); st.Leader == 4 {
		t.Fatalf("restarted joiner leads a group of its own")
	}
	// Crash the metadata leader as soon as node 4 is a learner.
	c.waitRole(4, MetaRoleLearner)
	lead := c.metaLeaderOf()
	c.crash(lead)
	c.tick(5)
	c.crash(4) // and the joiner again, mid catch-up
	c.tick(5)
	c.start(lead)
	c.start(4)
	c.waitRole(4, MetaRoleVoter)
	c.waitRegistered(4)
}

// TestDecommissionRemovesFromMetadataGroup: a decommissioning voter is
// demoted to learner once enough active voters remain, cannot be removed
// while it holds replicas, and once its topic is gone and it is removed
// leaves the metadata group's configuration; it can never register again.
func TestDecommissionRemovesFromMetadataGroup(t *testing.T) {
	join := true
	c := joinCluster(t, 3, &join)
	c.addNode4(1)
	c.waitRole(4, MetaRoleVoter)
	c.createTopic(c.metaLeaderOf(), "t", 1, 4)
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_DECOMMISSION, 3); e != nil {
		t.Fatalf("decommission: %v", e)
	}
	c.waitRole(3, MetaRoleLearner)
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_REMOVE, 3); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_MEMBERSHIP_REFUSED {
		t.Fatalf("remove node holding a replica: %v, want membership_refused", e)
	}
	resp, _ := c.handle(1, &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"t"}}}})
	if resp.GetError() != nil {
		t.Fatalf("delete: %v", resp)
	}
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_REMOVE, 3); e != nil {
		t.Fatalf("remove: %v", e)
	}
	c.waitRole(3, MetaRoleNone)
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_ADD, 3); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NODE_REMOVED {
		t.Fatalf("re-add removed node: %v, want node_removed", e)
	}
	resp, _ = c.handle(2, &strandpb.Request{CorrelationId: 10, Body: &strandpb.Request_ClusterMembers{ClusterMembers: &strandpb.ClusterMembersRequest{}}})
	var states []string
	for _, m := range resp.GetClusterMembers().GetMembers() {
		states = append(states, m.GetState().String()+"/"+m.GetRole().String())
	}
	want := []string{"MEMBER_STATE_ACTIVE/METADATA_ROLE_VOTER", "MEMBER_STATE_ACTIVE/METADATA_ROLE_VOTER",
		"MEMBER_STATE_REMOVED/METADATA_ROLE_NONE", "MEMBER_STATE_ACTIVE/METADATA_ROLE_VOTER"}
	if !slices.Equal(states, want) {
		t.Fatalf("members %v, want %v", states, want)
	}
	n, _ := c.cores[1].meta.meta.Node(3)
	if n.State != metadata.NodeRemoved {
		t.Fatalf("node 3 state %s", n.State)
	}
}

// TestElectLeadersMovesToPreferred: a partition led by a replica other
// than its preferred one hands the lead over on ElectLeaders.
func TestElectLeadersMovesToPreferred(t *testing.T) {
	c := newCluster(t, 4, 3, nil, nil)
	c.waitRegistered(3)
	c.createTopic(c.metaLeaderOf(), "e", 1, 3)
	tp := TopicPartition{Topic: "e"}
	lead := c.leader(tp)
	t0, _ := c.cores[1].meta.meta.Topic("e")
	preferred := NodeID(t0.Replicas[0][0])
	if lead == preferred {
		// Move the lead away first, then elect it back.
		other := NodeID(t0.Replicas[0][1])
		c.cores[lead].byTP[tp].raw.TransferLeader(uint64(other))
		c.cores[lead].markReady(c.cores[lead].byTP[tp])
		c.tick(20)
		lead = c.leader(tp)
		if lead == preferred {
			t.Fatalf("could not move the lead away from %d", preferred)
		}
	}
	resp, _ := c.handle(lead, &strandpb.Request{CorrelationId: 72, Body: &strandpb.Request_ElectLeaders{ElectLeaders: &strandpb.ElectLeadersRequest{}}})
	tr := resp.GetElectLeaders().GetTransfers()
	if len(tr) != 1 || NodeID(tr[0].GetTo()) != preferred {
		t.Fatalf("transfers %v, want one to %d", tr, preferred)
	}
	c.tick(20)
	if got := c.leader(tp); got != preferred {
		t.Fatalf("leader %d after election, want %d", got, preferred)
	}
}

// TestJoinedNodeRestartedAloneDefaultsToClusterSize: a joined node
// restarted knowing only itself (serve without --peers or --join) still
// creates topics with the default replication factor 3, counting the
// registered nodes, not its one-entry Config.Nodes (which gave 1).
func TestJoinedNodeRestartedAloneDefaultsToClusterSize(t *testing.T) {
	join, alone := true, false
	c := newCluster(t, 5, 3, nil, func(cfg *Config) {
		if cfg.ID == 4 {
			cfg.Join = join
			cfg.Nodes = append(slices.Clone(cfg.Nodes), Peer{ID: 4, Address: addressOf(4), Rack: "rack-4"})
			if alone {
				cfg.Nodes = []Peer{{ID: 4, Address: addressOf(4), Rack: "rack-4"}}
			}
		}
	})
	c.waitRegistered(3)
	c.addNode4(1)
	c.waitRole(4, MetaRoleVoter)
	c.crash(4)
	join, alone = false, true
	c.start(4)
	c.waitRole(4, MetaRoleVoter)
	c.metaLeaderOf()
	c.createTopic(4, "dflt", 1, 0)
	t0, _ := c.cores[1].meta.meta.Topic("dflt")
	if t0.ReplicationFactor != 3 {
		t.Fatalf("default replication factor %d through the restarted joined node, want 3", t0.ReplicationFactor)
	}
}

// TestDecommissionKeepsThreeVoters: decommissioning one node of three
// leaves it a voter until it is removed (demoting it would run the whole
// drain on two voters, tolerating no failure).
func TestDecommissionKeepsThreeVoters(t *testing.T) {
	c := newCluster(t, 6, 3, nil, nil)
	c.waitRegistered(3)
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_DECOMMISSION, 2); e != nil {
		t.Fatalf("decommission: %v", e)
	}
	c.tick(200)
	for _, id := range c.ids {
		if r := c.cores[id].MetadataRole(2); r != MetaRoleVoter {
			t.Fatalf("node %d sees decommissioning node 2 as %s, want voter", id, r)
		}
	}
}

// TestJoinUnderLossAndCrashes: over several seeds, node 4 (registered)
// joins while a fifth of all frames are lost and, at a drawn tick, the metadata leader
// crashes and comes back; once the loss stops every node applies the same
// metadata (equal digests at equal applied index) with node 4 a voter.
func TestJoinUnderLossAndCrashes(t *testing.T) {
	crashes := 0
	for seed := uint64(10); seed < 18; seed++ {
		join := true
		c := joinCluster(t, seed, &join)
		c.addNode4(1 + NodeID(seed%3))
		c.drop = func(envelope) bool { return c.rng.IntN(5) == 0 }
		crashAt := c.rng.IntN(40)
		for tick := 0; tick < 60; tick++ {
			if tick == crashAt {
				if lead, _ := c.cores[1].metaLeader(); lead != 0 && c.cores[lead] != nil {
					c.crash(lead)
					crashes++
					c.tick(3)
					c.start(lead)
				}
			}
			c.tick(1)
		}
		c.drop = nil
		c.waitRole(4, MetaRoleVoter)
		c.waitUnfenced(4)
		c.checkMetadataAgrees()
	}
	if crashes == 0 {
		t.Fatalf("no metadata leader crashed in any seed")
	}
	t.Logf("%d metadata leader crashes", crashes)
}

// checkMetadataAgrees ticks until every live node applied the same
// metadata index, then compares their digests.
func (c *cluster) checkMetadataAgrees() {
	c.t.Helper()
	for range 300 {
		var idx []uint64
		var dig []uint64
		for _, id := range c.ids {
			if core := c.cores[id]; core != nil {
				idx = append(idx, core.meta.meta.AppliedIndex())
				dig = append(dig, core.meta.meta.Digest())
			}
		}
		if slices.Min(idx) == slices.Max(idx) {
			if slices.Min(dig) != slices.Max(dig) {
				c.t.Fatalf("metadata digests differ at index %d: %v", idx[0], dig)
			}
			return
		}
		c.tick(1)
	}
	c.t.Fatalf("metadata applied indexes never met")
}

// TestSixthNodeStaysObserver: with five voters a joining node is never
// promoted: it stays a learner (an observer, as KRaft brokers), shown
// active while caught up and joining (by the leader) once it lags.
func TestSixthNodeStaysObserver(t *testing.T) {
	c := newCluster(t, 7, 5, nil, func(cfg *Config) {
		if cfg.ID == 6 {
			cfg.Join = true
			cfg.Nodes = append(slices.Clone(cfg.Nodes), Peer{ID: 6, Address: addressOf(6), Rack: "rack-6"})
		}
	})
	c.waitRegistered(5)
	resp, _ := c.handle(1, &strandpb.Request{CorrelationId: 71, Body: &strandpb.Request_NodeAdmin{NodeAdmin: &strandpb.NodeAdminRequest{
		Action: strandpb.NodeAction_NODE_ACTION_ADD, NodeId: 6, Address: addressOf(6)}}})
	if resp.GetError() != nil {
		t.Fatalf("add node 6: %v", resp.GetError())
	}
	c.ids = append(c.ids, 6)
	c.disks[6] = memdisk.New()
	c.start(6)
	c.waitRole(6, MetaRoleLearner)
	c.waitUnfenced(6)
	c.tick(50)
	if r := c.cores[1].MetadataRole(6); r != MetaRoleLearner {
		t.Fatalf("node 6 is %s with five voters, want learner", r)
	}
	state := func() string {
		lead := c.metaLeaderOf()
		resp, _ := c.handle(lead, &strandpb.Request{CorrelationId: 73, Body: &strandpb.Request_ClusterMembers{ClusterMembers: &strandpb.ClusterMembersRequest{}}})
		for _, m := range resp.GetClusterMembers().GetMembers() {
			if m.GetId() == 6 {
				return m.GetState().String() + "/" + m.GetRole().String()
			}
		}
		return "missing"
	}
	if s := state(); s != "MEMBER_STATE_ACTIVE/METADATA_ROLE_LEARNER" {
		t.Fatalf("caught-up observer shown %s", s)
	}
	c.crash(6)
	c.createTopic(c.metaLeaderOf(), "moved-on", 1, 3)
	if s := state(); s != "MEMBER_STATE_JOINING/METADATA_ROLE_LEARNER" {
		t.Fatalf("lagging observer shown %s by the leader", s)
	}
}

// TestRemovedNodeRefusesAdminRequests: a removed node that still runs
// answers a request needing the metadata group NOT_CONTROLLER at once, so
// the client asks another node. Before, it proposed into a group that had
// dropped it and answered a timeout after every attempt, and a client
// whose cached controller it was retried it forever (the simulator's seed
// 336: the admin's re-creation of a topic, 100+ timeouts).
func TestRemovedNodeRefusesAdminRequests(t *testing.T) {
	join := true
	c := joinCluster(t, 3, &join)
	c.addNode4(1)
	c.waitRole(4, MetaRoleVoter)
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_DECOMMISSION, 3); e != nil {
		t.Fatalf("decommission: %v", e)
	}
	c.waitRole(3, MetaRoleLearner)
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_REMOVE, 3); e != nil {
		t.Fatalf("remove: %v", e)
	}
	c.waitRole(3, MetaRoleNone)
	for i := 0; i < 300 && !c.cores[3].selfRemoved(); i++ {
		c.tick(1)
	}
	if !c.cores[3].selfRemoved() {
		t.Fatal("node 3 never applied its own removal")
	}
	resp, _ := c.handle(3, &strandpb.Request{CorrelationId: 11, Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
		Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: "late", Partitions: 1, ReplicationFactor: 3}}, TimeoutMs: 200,
	}}})
	if code := resp.GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER {
		t.Fatalf("create on the removed node: %v, want not_controller", resp)
	}
}

// TestDecommissionJoinerMidJoin: an operator decommissions a node right
// after registering it, while it opens with Join and is not yet a voter
// (the simulator's decommission during a join, drawn on the joiner): it
// is never promoted nor given a replica, its REMOVE is accepted at once
// (it holds none), it ends outside the metadata group everywhere, the
// three first nodes stay its voters, and a topic created afterwards is
// placed on them.
func TestDecommissionJoinerMidJoin(t *testing.T) {
	join := true
	c := joinCluster(t, 4, &join)
	c.addNode4(1)
	if e := c.nodeAdmin(2, strandpb.NodeAction_NODE_ACTION_DECOMMISSION, 4); e != nil {
		t.Fatalf("decommission the joiner: %v", e)
	}
	c.tick(100)
	for _, id := range []NodeID{1, 2, 3} { // node 4 itself may have applied nothing yet
		if r := c.cores[id].MetadataRole(4); r == MetaRoleVoter {
			t.Fatalf("node %d sees the decommissioned joiner as a voter", id)
		}
		if n, _ := c.cores[id].meta.meta.Node(4); n.State != metadata.NodeDecommissioning || !n.Fenced {
			t.Fatalf("node %d sees the joiner %s (fenced %v), want decommissioning and fenced", id, n.State, n.Fenced)
		}
	}
	if e := c.nodeAdmin(3, strandpb.NodeAction_NODE_ACTION_REMOVE, 4); e != nil {
		t.Fatalf("remove the joiner: %v", e)
	}
	c.waitRole(4, MetaRoleNone)
	c.tick(50)
	for _, id := range []NodeID{1, 2, 3} { // node 4 never joined: it applied nothing
		for _, v := range []NodeID{1, 2, 3} {
			if r := c.cores[id].MetadataRole(v); r != MetaRoleVoter {
				t.Fatalf("node %d sees node %d as %s, want voter", id, v, r)
			}
		}
	}
	c.createTopic(1, "after", 3, 3) // forwarded to the metadata leader (node 4 knows none)
	t0, _ := c.cores[1].meta.meta.Topic("after")
	for p, reps := range t0.Replicas {
		if slices.Contains(reps, 4) {
			t.Fatalf("partition %d placed on the removed joiner: %v", p, reps)
		}
	}
	c.tick(50)
	if h := c.hosted(4); len(h) > 0 {
		t.Fatalf("removed joiner hosts %v", h)
	}
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_ADD, 4); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NODE_REMOVED {
		t.Fatalf("re-add the removed joiner: %v, want node_removed", e)
	}
}

// TestRemovedNodeNamesNoCoordinator: a removed node that still runs
// answers FindCoordinator COORDINATOR_NOT_AVAILABLE, for a group and for a
// transactional id, so the client asks another node; the others still name
// the coordinator. Before, it named the leader its frozen metadata
// recorded, stale for good once the coordinator moved, and a client that
// asked it was sent to the old coordinator on every lookup (the
// simulator's seed 351).
func TestRemovedNodeNamesNoCoordinator(t *testing.T) {
	join := true
	c := newCluster(t, 3, 3, nil, func(cfg *Config) {
		cfg.Groups.OffsetsPartitions = 1
		if cfg.ID == 4 {
			cfg.Join = join
			cfg.Nodes = append(slices.Clone(cfg.Nodes), Peer{ID: 4, Address: addressOf(4), Rack: "rack-4"})
		}
	})
	c.waitRegistered(3)
	c.addNode4(1)
	c.waitRole(4, MetaRoleVoter)
	coord := c.findCoordinator("g")
	offsets, _ := c.cores[coord].meta.meta.Topic(OffsetsTopic)
	free := NodeID(0) // the one node of four without the offsets partition's replica
	for _, id := range []NodeID{1, 2, 3, 4} {
		if !slices.Contains(offsets.Replicas[0], uint64(id)) {
			free = id
		}
	}
	if free == 0 {
		t.Fatalf("__strand_offsets/0 on %v: no node is free of it", offsets.Replicas[0])
	}
	via := NodeID(1)
	if free == 1 {
		via = 2
	}
	if e := c.nodeAdmin(via, strandpb.NodeAction_NODE_ACTION_DECOMMISSION, free); e != nil {
		t.Fatalf("decommission node %d: %v", free, e)
	}
	c.tick(50)
	for i := 0; i < 300; i++ {
		if e := c.nodeAdmin(via, strandpb.NodeAction_NODE_ACTION_REMOVE, free); e == nil {
			break
		}
		c.tick(5)
	}
	c.waitRole(free, MetaRoleNone)
	for i := 0; i < 300 && !c.cores[free].selfRemoved(); i++ {
		c.tick(1)
	}
	if !c.cores[free].selfRemoved() {
		t.Fatalf("node %d never applied its own removal", free)
	}
	resp, _ := c.handle(free, &strandpb.Request{CorrelationId: 12, Body: &strandpb.Request_FindCoordinator{
		FindCoordinator: &strandpb.FindCoordinatorRequest{Group: "g"}}})
	if code := resp.GetError().GetCode(); code != strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE {
		t.Fatalf("FindCoordinator on the removed node %d: %v, want coordinator_not_available", free, resp)
	}
	if got := c.findCoordinator("g"); got == free {
		t.Fatalf("the others name the removed node %d", free)
	}
}
