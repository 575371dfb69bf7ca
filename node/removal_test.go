package node

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// removeWhileDown decommissions node 3 of a 4-node cluster, crashes it,
// deletes the only topic (node 3 held a replica of it) and removes node 3
// while it is down.
func removeWhileDown(t *testing.T) *cluster {
	join := true
	c := joinCluster(t, 5, &join)
	c.addNode4(1)
	c.waitRole(4, MetaRoleVoter)
	c.createTopic(c.metaLeaderOf(), "t", 1, 4)
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_DECOMMISSION, 3); e != nil {
		t.Fatalf("decommission: %v", e)
	}
	c.waitRole(3, MetaRoleLearner)
	c.crash(3)
	resp, _ := c.handle(1, &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{"t"}}}})
	if resp.GetError() != nil {
		t.Fatalf("delete: %v", resp)
	}
	if e := c.nodeAdmin(1, strandpb.NodeAction_NODE_ACTION_REMOVE, 3); e != nil {
		t.Fatalf("remove: %v", e)
	}
	return c
}

// TestRemovedNodeLearnsItsRemoval: a node removed while it was down is kept
// in the metadata group until it caught up, so when it comes back it learns
// that its replicas went and that it was removed, and drops its replica.
// Removed from the configuration at once (before the fix), it came back
// knowing only what it had applied: still decommissioning, still hosting
// topic t, forever. Node 3 then logs that it was removed (meta.go).
func TestRemovedNodeLearnsItsRemoval(t *testing.T) {
	c := removeWhileDown(t)
	c.tick(50)
	var buf bytes.Buffer
	config := c.config
	c.config = func(cfg *Config) {
		if config != nil {
			config(cfg)
		}
		if cfg.ID == 3 {
			cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
		}
	}
	c.start(3)
	tp := TopicPartition{Topic: "t"}
	for i := 0; ; i++ {
		n, _ := c.cores[3].meta.meta.Node(3)
		_, hosts := c.cores[3].byTP[tp]
		if n.State == metadata.NodeRemoved && !hosts && c.cores[1].MetadataRole(3) == MetaRoleNone {
			break
		}
		if i == 600 {
			t.Fatalf("node 3 after restart: state %s, hosts t/0 %v, role at node 1 %v", n.State, hosts, c.cores[1].MetadataRole(3))
		}
		c.tick(1)
	}
	if !strings.Contains(buf.String(), "this node was removed from the cluster") {
		t.Fatalf("node 3 did not log its removal:\n%s", buf.String())
	}
}

// TestRemovedNodeGoneForGoodLeaves: a removed node that never comes back
// leaves the metadata group once the grace (removalGraceElections) ran out,
// counted in Stats.RemovalsForced (the simulator's membership check then
// expects no clean-up from that node).
func TestRemovedNodeGoneForGoodLeaves(t *testing.T) {
	c := removeWhileDown(t)
	for i := 0; c.cores[1].MetadataRole(3) != MetaRoleNone; i++ {
		if i == 3000 {
			t.Fatalf("removed node 3, down for good, still in the metadata group: %v", c.cores[1].MetadataRole(3))
		}
		c.tick(1)
	}
	var forced uint64
	for _, id := range c.ids {
		if c.cores[id] != nil {
			forced += c.cores[id].Stats().RemovalsForced
		}
	}
	if forced != 1 {
		t.Fatalf("%d forced removals counted, want 1", forced)
	}
}
