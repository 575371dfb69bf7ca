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
		c.sweepCoordinator(g, co)
	}
}

// sweepCoordinator proposes one coordinator's expiries and cleanups.
func (c *Core) sweepCoordinator(g *group, co *groupsvc.Coordinator) {
	cfg := c.groupsConfig()
	p := &sweepProposer{c: c, g: g, co: co}
	expireEmpty := c.sweepMembers(co, cfg, p)
	if co.SinceSnapshot >= cfg.SnapshotEvery {
		p.propose("\x00snapshot", &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Snapshot{Snapshot: co.State.Snapshot(co.Next)}})
	}
	if expireEmpty {
		p.propose("\x00expire-offsets", &strandpb.GroupCommand{Body: &strandpb.GroupCommand_ExpireOffsetsRetentionMs{
			ExpireOffsetsRetentionMs: cfg.OffsetsRetention.Milliseconds(),
		}})
	}
	c.sweepDeletedTopics(g, co, p)
}

// sweepProposer proposes one sweep's group commands: at most one in flight
// per key, and at most sweepProposalsMax in one sweep.
type sweepProposer struct {
	c        *Core
	g        *group
	co       *groupsvc.Coordinator
	proposed int // proposals made by this sweep
}

// propose proposes cmd under key unless key is already in flight or the
// sweep has proposed its maximum.
func (p *sweepProposer) propose(key string, cmd *strandpb.GroupCommand) {
	g, co := p.g, p.co
	if co.InFlight[key] || p.proposed >= sweepProposalsMax {
		return
	}
	co.InFlight[key] = true
	p.proposed++
	p.c.proposeGroup(g, co, cmd, func(res groupsvc.Applied) {
		delete(co.InFlight, key)
		if res.Err != nil && cmd.GetSnapshot() != nil {
			// Too large for one record, or not applied: try again only
			// after another interval (replaying the log stays correct).
			co.SinceSnapshot = 0
			g.logs.log(slog.LevelWarn, "group snapshot not written", slog.Any("err", res.Err))
		}
		if res.Err == nil && cmd.GetExpire() != nil {
			delete(co.Live, key)
		}
	})
}

// sweepMembers proposes the expiry of every member silent past the session
// timeout or revoking past the rebalance timeout, starts the timers of
// members first seen and prunes those of members gone. It reports whether
// some group has been empty past the offsets retention.
func (c *Core) sweepMembers(co *groupsvc.Coordinator, cfg GroupsConfig, p *sweepProposer) (expireEmpty bool) {
	session := uint64(max(1, cfg.SessionTimeout/c.cfg.TickDuration))
	rebalance := uint64(max(1, cfg.RebalanceTimeout/c.cfg.TickDuration))
	nowMs := c.cfg.Clock.Realtime().UnixMilli()
	live := make(map[string]bool) // the members seen now, to prune the timers of the others
	for _, id := range co.State.GroupIDs() {
		v, _ := co.State.Describe(id)
		if len(v.Members) == 0 && nowMs-v.EmptySinceMs >= cfg.OffsetsRetention.Milliseconds() {
			expireEmpty = true
		}
		for _, m := range v.Members {
			key := groupsvc.LiveKey(id, m.ID)
			live[key] = true
			if co.Heartbeating[key] > 0 {
				continue // its answer restarts the timer (trackHeartbeat)
			}
			expire := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Expire{Expire: &strandpb.GroupExpireCommand{
				Group: id, MemberId: m.ID, MemberEpoch: m.Epoch,
			}}}
			if len(m.Revoking) == 0 {
				delete(co.RevokingSince, key)
			} else if since, ok := co.RevokingSince[key]; !ok {
				co.RevokingSince[key] = c.ticks
			} else if c.ticks-since > rebalance {
				p.propose(key, expire) // it never gave the partitions up
			}
			seen, ok := co.Live[key]
			if !ok {
				co.Live[key] = c.ticks // first seen by this coordinator: its timer starts now
				continue
			}
			if c.ticks-seen > session {
				p.propose(key, expire)
			}
		}
	}
	pruneTimers(co.Live, live)
	pruneTimers(co.RevokingSince, live)
	return expireEmpty
}

// sweepDeletedTopics proposes the removal of the offsets of every topic
// the coordinator holds that the metadata no longer has, once a
// linearizable metadata read confirms it gone.
func (c *Core) sweepDeletedTopics(g *group, co *groupsvc.Coordinator, p *sweepProposer) {
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
				p.propose(key, &strandpb.GroupCommand{Body: &strandpb.GroupCommand_DeleteTopic{DeleteTopic: topic}})
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

// pruneTimers drops the timers of members no longer in the state (left,
// expired, replaced by a static restart). Deleting while ranging over a
// map is safe, and nothing here depends on the order.
func pruneTimers(timers map[string]uint64, live map[string]bool) {
	for key := range timers {
		if !live[key] {
			delete(timers, key)
		}
	}
}
