package node

import (
	"log/slog"
	"time"

	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// sweepEvery is how often, in real time, a coordinator checks member
// liveness, empty groups and deleted topics.
const sweepEvery = time.Second

// sweepGroups runs on Tick. For every __strand_offsets partition this node
// leads it catches the coordinator up and proposes what the leader's clock
// decides: the expiry of members silent past the session timeout, the
// expiry of groups empty past the offsets retention, and the removal of
// offsets of deleted topics. Liveness is leader-local (a member's last
// heartbeat is not replicated: writing every heartbeat's time would be a
// write per heartbeat just to keep a timer); a new coordinator starts every
// member's timer afresh when it first sees it, so a failover delays an
// expiry by at most one session timeout and never expires a member early —
// Kafka's coordinator does the same.
func (c *Core) sweepGroups() {
	every := uint64(max(1, sweepEvery/c.cfg.TickDuration))
	if c.ticks < c.coord.lastSweep+every || c.meta == nil {
		return
	}
	c.coord.lastSweep = c.ticks
	t, ok := c.meta.meta.Topic(OffsetsTopic)
	if !ok {
		return
	}
	for _, g := range c.groups {
		if g.tp.Topic != OffsetsTopic || g.part == nil || g.topicID != t.ID {
			continue
		}
		if _, _, leading := g.leadership(); !leading {
			delete(c.coord.coords, g.tp) // lookup-only map: deletion order does not leak
			continue
		}
		co, err := c.coordinatorFor(g)
		if err != nil {
			continue
		}
		if err := c.catchUp(g, co); err != nil {
			g.logs.log(slog.LevelWarn, "group coordinator cannot read its log", slog.Any("err", err))
			continue
		}
		c.probeRestore(g, co)
		c.sweepCoordinator(g, co)
	}
}

// probeRestore, when Config.CoordinatorRestored is set (the simulator),
// restores a throwaway coordinator from g's log as a new leader would and
// shows its state, so the restore from the compacted log is checked every
// sweep, not only at failovers. It reads as a coordinator does.
func (c *Core) probeRestore(g *group, co *groupsvc.Coordinator) {
	if c.cfg.CoordinatorRestored == nil {
		return
	}
	probe := groupsvc.New(co.Term, g.topicID, g.part.LogStartOffset())
	if probe.CatchUp(coordinatorLog{c: c, g: g, probe: true}, c.groupsConfig().SnapshotEvery) == nil {
		c.cfg.CoordinatorRestored(g.tp, g.topicID, probe.Next, probe.State.Snapshot(probe.Next))
	}
}

// sweepCoordinator proposes one coordinator's expiries and cleanups
// (groupsvc.Sweep decides the members'; the node's clocks time them).
func (c *Core) sweepCoordinator(g *group, co *groupsvc.Coordinator) {
	cfg := c.groupsConfig()
	p := co.NewSweep(func(cmd *strandpb.GroupCommand, done func(groupsvc.Applied)) { c.proposeGroup(g, co, cmd, done) },
		func(msg string, err error) { g.logs.log(slog.LevelWarn, msg, slog.Any("err", err)) })
	expireEmpty := p.SweepMembers(groupsvc.Timers{
		Now: c.ticks, Session: uint64(max(1, cfg.SessionTimeout/c.cfg.TickDuration)),
		Rebalance: uint64(max(1, cfg.RebalanceTimeout/c.cfg.TickDuration)),
		NowMs:     c.cfg.Clock.Realtime().UnixMilli(), OffsetsRetentionMs: cfg.OffsetsRetention.Milliseconds(),
	})
	if co.SnapshotDue(cfg.SnapshotEvery) {
		p.Propose("\x00snapshot", &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Snapshot{Snapshot: co.State.Snapshot(co.Next)}})
	}
	if expireEmpty {
		p.Propose("\x00expire-offsets", &strandpb.GroupCommand{Body: &strandpb.GroupCommand_ExpireOffsetsRetentionMs{
			ExpireOffsetsRetentionMs: cfg.OffsetsRetention.Milliseconds(),
		}})
	}
	c.sweepDeletedTopics(g, co, p)
}

// sweepDeletedTopics proposes the removal of the offsets of every topic
// the coordinator holds that the metadata no longer has, once a
// linearizable metadata read confirms it gone.
func (c *Core) sweepDeletedTopics(g *group, co *groupsvc.Coordinator, p *groupsvc.Sweep) {
	for _, topic := range co.State.Topics() {
		if _, exists := c.meta.meta.Topic(topic); exists {
			continue
		}
		key := "\x00delete-topic\x00" + topic
		if co.InFlight[key] {
			continue
		}
		// This node's metadata may lag a create another node's heartbeat
		// already used: only a linearizable metadata read (ReadIndex on the
		// metadata group) that still lacks the topic proves it deleted.
		co.InFlight[key] = true
		c.confirmTopicGone(topic, func(gone bool) {
			delete(co.InFlight, key)
			if gone && c.coord.coords[g.tp] == co {
				p.Propose(key, &strandpb.GroupCommand{Body: &strandpb.GroupCommand_DeleteTopic{DeleteTopic: topic}})
			}
		})
	}
}

// confirmTopicGone calls done(true) once a ReadIndex on the metadata group
// shows topic absent from the applied metadata, done(false) otherwise.
func (c *Core) confirmTopicGone(topic string, done func(gone bool)) {
	lead, term := c.metaLeader()
	if lead == 0 || c.meta.live >= c.cfg.PendingRequestsMax {
		done(false)
		return
	}
	c.readIndex(c.meta.group, term, func(*group) {
		c.completions = append(c.completions, func() {
			_, exists := c.meta.meta.Topic(topic)
			done(!exists)
		})
	}, func(error, NodeID) { c.completions = append(c.completions, func() { done(false) }) })
}
