package simnet

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/strandlog/strand/node"
)

// The election bound under faults (issue 21: production's configuration,
// checked against what it promises). Raft with PreVote and CheckQuorum,
// configured with the seed's drawn election timeout, elects a leader
// within a few election timeouts of losing one, as long as a majority of
// the group's voters can reach each other: a quiesced follower wakes
// after one timeout of silence (node/quiesce.go), times out within two,
// and a lost vote or a split costs another round. The quiet probe
// (probe.go) checks that bound once, in a healed cluster; this watch
// checks it all run long, under the fault mix, wherever the faults leave
// a majority alone.
//
// Every electionWatchPoll, for every group (the probe's: topic partitions,
// the metadata group, the coordinators' partitions): its replicas that
// may vote (up, hosting its newest incarnation, not rejoining, a voter of
// its applied configuration) on nodes the faults leave alone (not paused,
// starved, stalled, full, held down or about to fail an fsync); the sets
// of them that form a majority and reach each other both ways, and since
// when each has been one without a break. While the group has no leader
// named by a majority (probeGroup's test), the time during which such a
// set exists counts, in windows: a window begins at the later of losing
// the leader and the oldest set forming, and again whenever that set
// breaks up and a younger one is the oldest. A replica's timer fires at
// most two election timeouts into a window, whatever came before, so
// the bound is the probe's (3 s + 8 election timeouts, in the slowest
// node's ticks) plus two election timeouts per window after the first:
// windows too short for an election add nothing, a group that spends
// more than that in them fails the run. A group in a joint configuration
// (a move's switch) is skipped: it needs majorities of two voter sets.
//
// Planted ElectionInCoreTicks (raft handed the election timeout in Core
// ticks: 10 to 20 s at production's ticks where 1 to 2 s are promised)
// showed before only where a run reached the liveness checks after a
// heal or the quiet probe: in a safety seed, faults to the end, its slow
// elections merely held the workload until the time limit, which a
// safety run excuses. Of the standard sample's seeds 1-200 it was caught
// in 82 before the watch; see knobs_simbugs_test.go for after.

// electionWatchPoll is how often the watch looks at the groups.
const electionWatchPoll = 100 * time.Millisecond

// electionWatchNodes bounds the nodes of a watched run (the simulator runs
// 3 or 5).
const electionWatchNodes = 8

// electionWatch is the watch's state.
type electionWatch struct {
	groups []groupWatch // per group
	buf    []node.GroupStatus
	views  [][]replicaView // groupViews' answer, reused by the next poll
}

// groupWatch is one group's: its healthy majorities and its time without
// a leader.
type groupWatch struct {
	// since[m] is since when the set of node indexes m (a bit mask) has
	// been a healthy majority of the group's voters reaching each other,
	// plus one (0: it is not one now).
	since   []time.Duration
	topicID uint64 // the incarnation watched
	// leaderless is since when the group has had no leader, plus one (0:
	// it has one).
	leaderless time.Duration
	// start is when the current window began: the later of losing the
	// leader and the oldest healthy majority forming (-1: no window).
	// healthy is the time spent leaderless in windows, windows their
	// number.
	start   time.Duration
	healthy time.Duration
	windows int
}

// watchElections starts the watch (at most electionWatchNodes nodes: the
// sets are bit masks).
func (w *world) watchElections() {
	if len(w.nodes) > electionWatchNodes {
		return
	}
	w.elections.groups = make([]groupWatch, w.probeGroups())
	for g := range w.elections.groups {
		w.elections.groups[g] = groupWatch{since: make([]time.Duration, 1<<len(w.nodes)), start: -1}
	}
	w.sched.schedule(electionWatchPoll, &event{kind: evCall, node: -1, call: w.pollElections})
}

// pollElections checks every group once and schedules the next look.
func (w *world) pollElections() {
	if w.stopped {
		return
	}
	healthy, views := w.electionHealth(), w.groupViews()
	for g := range w.elections.groups {
		if why := w.watchGroup(g, healthy, views[g]); why != "" {
			w.fail("election bound: %s", why) // once: the watch ends here
			return
		}
	}
	w.sched.schedule(electionWatchPoll, &event{kind: evCall, node: -1, call: w.pollElections})
}

// electionHealth is the mask of the nodes the faults leave alone now.
func (w *world) electionHealth() uint32 {
	now := w.now()
	var m uint32
	for _, n := range w.nodes {
		if n.up && !n.dead && !n.spare && n.pausedUntil <= now && !n.starved && !n.diskStalled &&
			n.fullUntil <= now && !n.failSync && !n.heldDown {
			m |= 1 << n.index
		}
	}
	return m
}

// replicaView is one live replica's status of a group.
type replicaView struct {
	index  int
	id     node.NodeID
	status node.GroupStatus
	votes  bool // a voter of its applied configuration, not rejoining
	joint  bool // its applied configuration is joint
}

// groupViews lists every live replica's view of every watched group,
// reading each node's statuses once. The lists are reused by the next
// call: a poll uses them and keeps none.
func (w *world) groupViews() [][]replicaView {
	views := w.elections.views
	if len(views) != len(w.elections.groups) {
		views = make([][]replicaView, len(w.elections.groups))
		w.elections.views = views
	}
	for g := range views {
		views[g] = views[g][:0]
	}
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		if s, ok := n.core.MetadataStatus(); ok && w.opts.Partitions < len(views) {
			views[w.opts.Partitions] = append(views[w.opts.Partitions], replicaView{n.index, n.id, s, !s.Rejoining && w.metaVoter(n), false})
		}
		w.elections.buf = n.core.AppendStatus(w.elections.buf[:0])
		for _, s := range w.elections.buf {
			g, ok := w.groupOf[s.TopicPartition]
			if !ok || g >= len(views) || g == w.opts.Partitions {
				continue
			}
			votes, joint := replicaVotes(n, s.TopicPartition)
			views[g] = append(views[g], replicaView{n.index, n.id, s, votes && !s.Rejoining, joint})
		}
	}
	return views
}

// replicaVotes reports whether n's replica of tp is a voter of its
// applied configuration, and whether that is joint (the coordinators'
// partitions move too).
func replicaVotes(n *simNode, tp node.TopicPartition) (votes, joint bool) {
	pc, ok := n.core.(interface {
		PartitionConfig(node.TopicPartition) (node.ReplicaConfig, bool)
	})
	if !ok {
		return true, false
	}
	cfg, ok := pc.PartitionConfig(tp)
	if !ok {
		return true, false
	}
	return containsNode(cfg.Voters, n.id) || containsNode(cfg.VotersOutgoing, n.id), len(cfg.VotersOutgoing) > 0
}

// containsNode reports whether ids holds id.
func containsNode(ids []node.NodeID, id node.NodeID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// watchGroup updates group g's majorities and windows from its
// replicas' views and returns why it broke the bound ("" if it did not).
//
// A window is a stretch without a leader during which one healthy
// majority stayed so; a new one begins when the oldest breaks up. Raft
// needs up to two election timeouts into a window for a replica's timer
// to fire, whatever happened before it, so the bound allows the probe's
// bound in all plus two election timeouts per window after the first:
// windows too short for an election add nothing, and a group that
// spends the probe's bound beyond that in windows fails.
func (w *world) watchGroup(g int, healthy uint32, views []replicaView) string {
	gw := &w.elections.groups[g]
	var topicID uint64
	for _, v := range views {
		topicID = max(topicID, v.status.TopicID)
	}
	if topicID != gw.topicID { // a new incarnation: watched anew
		*gw = groupWatch{since: gw.since, topicID: topicID, start: -1}
		clear(gw.since)
	}
	replicas := min(w.opts.Replication, len(w.nodes))
	if g == w.opts.Partitions {
		replicas = w.metaVoters()
	}
	majority := replicas/2 + 1
	voters, joint := uint32(0), false
	for _, v := range views {
		if v.status.TopicID == topicID {
			joint = joint || v.joint
			if v.votes && healthy&(1<<v.index) != 0 {
				voters |= 1 << v.index
			}
		}
	}
	electable, ok := w.electableSince(gw, voters, majority, joint)
	now := w.now()
	if hasMajorityLeader(views, topicID, majority) {
		gw.leaderless, gw.start, gw.healthy, gw.windows = 0, -1, 0, 0
		return ""
	}
	if gw.leaderless == 0 {
		gw.leaderless = now + 1
	}
	if !ok {
		gw.start = -1
		return ""
	}
	if start := max(gw.leaderless-1, electable); start != gw.start {
		gw.start = start
		gw.windows++
	}
	gw.healthy += min(electionWatchPoll, now-gw.start)
	timeout := w.electionTimeoutSlowest()
	if bound := probeBound(timeout) + time.Duration(gw.windows-1)*2*timeout; gw.healthy > bound {
		return fmt.Sprintf("group %d (%s) has had no leader since %v: %v of it in %d windows with a healthy majority "+
			"(now voters %s reaching each other since %v), over %v",
			g, w.groupLabel(g), gw.leaderless-1, gw.healthy, gw.windows, maskString(w, voters), electable, bound)
	}
	return ""
}

// electableSince updates group g's healthy majorities (the subsets of
// voters of at least majority nodes that reach each other both ways) and
// returns since when the oldest has been one; false when there is none.
func (w *world) electableSince(gw *groupWatch, voters uint32, majority int, joint bool) (time.Duration, bool) {
	since := gw.since
	oldest, ok := time.Duration(0), false
	for m := range since {
		mask := uint32(m)
		if joint || mask&^voters != 0 || bits.OnesCount32(mask) < majority || !w.connected(mask) {
			since[m] = 0
			continue
		}
		if since[m] == 0 {
			since[m] = w.now() + 1
		}
		if !ok || since[m]-1 < oldest {
			oldest, ok = since[m]-1, true
		}
	}
	return oldest, ok
}

// connected reports whether every two nodes of mask reach each other both
// ways.
func (w *world) connected(mask uint32) bool {
	for i := range w.nodes {
		for j := range w.nodes {
			if i != j && mask&(1<<i) != 0 && mask&(1<<j) != 0 && w.net.isCut(i, j) {
				return false
			}
		}
	}
	return true
}

// hasMajorityLeader reports whether a replica of incarnation topicID
// leads in the highest term any of them leads in, named by at least
// majority replicas (probeGroup's test).
func hasMajorityLeader(views []replicaView, topicID uint64, majority int) bool {
	var leader node.NodeID
	var term uint64
	for _, v := range views {
		if v.status.TopicID == topicID && v.status.IsLeader && v.status.Term >= term {
			leader, term = v.id, v.status.Term
		}
	}
	if term == 0 {
		return false
	}
	agree := 0
	for _, v := range views {
		s := v.status
		if s.TopicID == topicID && s.Term == term && (s.Leader == leader || v.id == leader) {
			agree++
		}
	}
	return agree >= majority
}

// electionTimeoutSlowest is the election timeout in the slowest node's
// ticks.
func (w *world) electionTimeoutSlowest() time.Duration {
	slowest := w.opts.TickInterval
	for _, n := range w.nodes {
		slowest = max(slowest, n.tickInterval)
	}
	return w.inTicksOf(w.electionTimeout(), slowest)
}

// groupLabel names group g for a failure.
func (w *world) groupLabel(g int) string {
	switch {
	case g == w.opts.Partitions:
		return "metadata"
	case w.wire != nil && g < len(w.wire.tps):
		return fmt.Sprint(w.wire.tps[g])
	}
	return "coordinator"
}

// maskString lists the node ids of mask.
func maskString(w *world, mask uint32) string {
	var ids []node.NodeID
	for _, n := range w.nodes {
		if mask&(1<<n.index) != 0 {
			ids = append(ids, n.id)
		}
	}
	return fmt.Sprint(ids)
}
