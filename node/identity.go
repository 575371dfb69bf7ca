package node

import (
	"fmt"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// ErrUnknownTopicID: the request names a topic id the topic does not have
// (it was deleted, and maybe created again under the same name). Definite:
// offsets of the old topic mean nothing in the new one.
var ErrUnknownTopicID = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID, "node: unknown topic id")

// ClusterID is the cluster's id as this node has applied it: zero in
// static mode and until the metadata group applied its first command. The
// runtime returns it in the Hello answer.
func (c *Core) ClusterID() metadata.UUID {
	if c.meta == nil {
		return metadata.UUID{}
	}
	return c.meta.meta.ClusterID()
}

// nameTopic is the topic a request partition names: its name, or, when it
// names the topic by id alone (Kafka's Fetch and Produce v13+), the name
// of the applied metadata's topic with that id; "" when none has it, which
// checkTopicID refuses.
func (c *Core) nameTopic(topic string, id []byte) string {
	if topic != "" || c.meta == nil {
		return topic
	}
	if u, ok := metadata.UUIDFromBytes(id); ok {
		topic, _ = c.meta.meta.TopicByUUID(u)
	}
	return topic
}

// checkTopicID refuses a request for tp that names another topic id than
// the topic's current one, with ErrUnknownTopicID. An empty id is not
// checked (a client that never resolved one). The id is the hosted
// replica's, else the applied metadata's; a node that knows no topic of
// that name leaves the answer to the request's own path (unknown topic).
// A node whose metadata lags may refuse the newer id of a re-created
// topic: the client checks its own fresh metadata before giving up.
func (c *Core) checkTopicID(tp TopicPartition, id []byte) error {
	if len(id) == 0 || c.bugSkipTopicID() {
		return nil
	}
	if tp.Topic == "" { // named by id alone, and no topic has it (nameTopic)
		return fmt.Errorf("%w: no topic has id %x", ErrUnknownTopicID, id)
	}
	want, ok := metadata.UUIDFromBytes(id)
	if !ok {
		return fmt.Errorf("%w: topic id of %d bytes", ErrInvalidRequest, len(id))
	}
	var have metadata.UUID
	switch g := c.byTP[tp]; {
	case g != nil:
		have = g.topicUUID
	case c.meta != nil:
		u, ok := c.meta.meta.TopicUUID(tp.Topic)
		if !ok {
			return nil
		}
		have = u
	default:
		return nil
	}
	if have != want {
		return fmt.Errorf("%w: topic %q has id %s, the request names %s (deleted and re-created?)", ErrUnknownTopicID, tp.Topic, have, want)
	}
	return nil
}

// partitionLeader is the leader a metadata answer names for partition p
// of t: the one the metadata group recorded, unless this node's replica
// knows a newer term, then the replica's view (no leader while its term's
// election runs). The answer never names a leader older than what this
// node knows.
func (c *Core) partitionLeader(t metadata.Topic, p int32) (NodeID, uint64) {
	var rec metadata.Leader
	if int(p) < len(t.Leaders) {
		rec = t.Leaders[p]
	}
	g := c.byTP[TopicPartition{Topic: t.Name, Partition: p}]
	if g == nil || (t.ID != 0 && g.topicID != t.ID) {
		return NodeID(rec.Node), rec.Term
	}
	lead, term, _ := g.leadership()
	if term > rec.Term || (term == rec.Term && lead != 0) {
		return lead, term
	}
	return NodeID(rec.Node), rec.Term
}

// queueLeaderReport queues g for a leader report if it leads and is not
// queued yet; maybeReportLeaders decides whether the report is needed.
func (c *Core) queueLeaderReport(g *group) {
	if c.meta == nil || !g.sm.policy().reportsLeadership || g.reportQueued {
		return
	}
	if _, _, leading := g.leadership(); !leading {
		return
	}
	g.reportQueued = true
	c.leaderReports = append(c.leaderReports, g)
}

// maybeReportLeaders tells the metadata group which partitions this node
// leads, so every node's metadata answers name every partition's leader
// (finding 4 of issue 7). One ReportLeaders proposal at a time carries up
// to LeaderReportsMax groups, queued when they became leader; groups whose
// current term the applied state already records are skipped, and a
// proposal that failed requeues its groups. Called once per tick: the
// cost is bounded by the queue, not by the hosted partitions.
func (c *Core) maybeReportLeaders() {
	if c.meta == nil || c.closed || c.reportWait != nil || len(c.leaderReports) == 0 {
		return
	}
	if lead, _ := c.metaLeader(); lead == 0 {
		return
	}
	n := min(len(c.leaderReports), metadata.LeaderReportsMax)
	taken := c.leaderReports[:n:n]
	c.leaderReports = c.leaderReports[n:]
	var reports []metadata.LeaderReport
	var sent []*group
	for _, g := range taken {
		g.reportQueued = false
		if c.byTP[g.tp] != g {
			continue // stopped: its topic was deleted
		}
		_, term, leading := g.leadership()
		if rec, _ := c.meta.meta.Leader(g.tp.Topic, g.tp.Partition); !leading || rec.Term >= term {
			continue
		}
		reports = append(reports, metadata.LeaderReport{
			Topic: g.tp.Topic, TopicID: g.topicID, Partition: g.tp.Partition,
			Leader: metadata.Leader{Node: uint64(c.cfg.ID), Term: term},
		})
		sent = append(sent, g)
	}
	if len(reports) == 0 {
		return
	}
	data, err := metadata.EncodeReportLeaders(reports)
	if err != nil {
		panic(fmt.Sprintf("node: encode leader reports: %v", err)) // names were validated at create
	}
	c.reportWait = c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(res metadata.Result, err error) {
		c.reportWait = nil
		if err != nil || res.Err != nil {
			for _, g := range sent {
				c.queueLeaderReport(g)
			}
		}
	})
}
