package simnet

import (
	"time"

	"github.com/strandlog/strand/node"
)

// The full-disk leadership check (node/diskfull.go): a node whose disk is
// below its free-space floor refuses produce, so every partition it leads
// takes no writes until it hands the leadership on, which it must do to a
// voter whose disk has space. At every tick of a node whose disk the
// planner filled (fillDisk) and whose free space the simulator sees below
// the floor, each partition group it hosts (the topic's and the
// coordinators'; not the metadata group, which a full node deliberately
// leads on) is looked at: while another voter of the replica's incoming
// configuration could lead it (fullTarget: up, unpaused, unstarved, its
// disk neither filled nor stalled nor failing, hosting the same
// incarnation, a voter of its own configuration, not rejoining, reaching
// the full node both ways and a majority of the voters), for fullBound
// without a break, counted from the later of the disk dropping below the
// floor and that stretch beginning, the full node must not lead it. The
// bound is the node's free-space check interval in its own ticks (when
// it notices) plus two election timeouts in the slowest node's ticks (a
// transfer raft aborts after one, then another) plus a second. A full
// node that takes a leadership (only it could win: the hold-off's end)
// is given the bound again from then. Within the bound plus
// fullLeaderlessSlack of the stretch's start, or of its last leader's
// going, some replica must lead the group: a full node that
// restarted leaves it to its peers' quiesced followers, woken by its new
// incarnation, or to itself past its hold-off. A restart,
// a pause or a starved tick rate of the full node restarts the wait, as
// does its disk getting space back (retention freed some, or the planner
// lifted the fill). Every way a full node keeps a leadership it could
// hand on fails: a hand-off never started, always aimed at a replica that
// cannot take it, or a transfer the node itself takes back.
//
// Planted FullLeaderKeepsLeading (the node refuses produce but never hands
// off) is caught here and nowhere else: its partitions only refuse writes,
// which the workload retries, and nothing is lost.

// fullWatch is one node's full-disk check state.
type fullWatch struct {
	// below is since when the node's disk has been below its floor, plus
	// one (0: not now); inc the incarnation watched, lastTick the time of
	// its last tick looked at (a gap: it was paused).
	below    time.Duration
	inc      uint32
	lastTick time.Duration
	// fair[g] is since when another voter could have led partition group
	// g, plus one (0: none can now); led[g]: the node led g during that
	// stretch; done[g]: the stretch was checked.
	fair []time.Duration
	led  []bool
	done []bool
	// leading[g]: the node led g at its last look; ledAt[g]: when some
	// replica last led g in the stretch, plus one (0: none yet).
	leading []bool
	ledAt   []time.Duration
	// buf holds the node's statuses of the look, peers its peers'.
	buf   []node.GroupStatus
	peers [][]node.GroupStatus
}

// fullBound is how long node n's disk may be below its floor, with
// another voter able to lead, before it leads none of its partitions.
func (w *world) fullBound(n *simNode) time.Duration {
	check := time.Duration(node.SpaceCheckTicks) * w.opts.TickInterval
	return w.inTicksOf(check, n.tickInterval) + 2*w.electionTimeoutSlowest() + time.Second
}

// lookAtFullNode runs the check at a tick of node n.
func (w *world) lookAtFullNode(n *simNode) {
	fw := &n.full
	now := w.now()
	full := n.fullUntil != 0 && !n.starved && n.pausedUntil <= now
	if full {
		free, _ := n.disk.FreeBytes()
		full = free < simMinFreeBytes
	}
	if !full || fw.inc != n.incarnation || now-fw.lastTick > 2*n.tickInterval {
		fw.below, fw.inc = 0, n.incarnation
		clear(fw.fair)
	}
	fw.lastTick = now
	if !full {
		return
	}
	if fw.below == 0 {
		fw.below = now + 1
	}
	if groups := w.probeGroups(); len(fw.fair) < groups {
		fw.fair, fw.led, fw.done = make([]time.Duration, groups), make([]bool, groups), make([]bool, groups)
		fw.leading, fw.ledAt = make([]bool, groups), make([]time.Duration, groups)
	}
	fw.buf = n.core.AppendStatus(fw.buf[:0])
	peersRead := false
	bound := w.fullBound(n)
	for _, s := range fw.buf {
		g, ok := w.groupOf[s.TopicPartition]
		if !ok || g == w.opts.Partitions || g >= len(fw.fair) {
			continue
		}
		if !peersRead {
			w.readPeerStatuses(n)
			peersRead = true
		}
		to := w.fullTarget(n, s)
		took := s.IsLeader && !fw.leading[g]
		fw.leading[g] = s.IsLeader
		if to < 0 {
			fw.fair[g] = 0
			continue
		}
		if fw.fair[g] == 0 || took {
			// A new stretch; or the full node took the leadership in
			// this one (it campaigns after two election timeouts
			// without a leader, node/quiesce.go's holdOff, when only it
			// can win): from then it must hand it on within the bound.
			fw.fair[g], fw.led[g], fw.done[g], fw.ledAt[g] = now+1, false, false, 0
		}
		fw.led[g] = fw.led[g] || s.IsLeader
		start := max(fw.below, fw.fair[g]) - 1
		if s.IsLeader || peerLeads(fw.peers, s) {
			if fw.ledAt[g] == 0 {
				w.coverage.Inc("check/full-disk-served")
			}
			fw.ledAt[g] = now + 1
		} else if since := max(start, fw.ledAt[g]-1); now >= since+bound+w.fullLeaderlessSlack() {
			// Leaderless since the stretch began, or since its last
			// leader went (a crash in the stretch restarts the wait).
			w.fail("full disk: group %d (%s) has had no leader since %v, while node %d's disk was below its free-space "+
				"floor and node %d, with space, could lead it (bound %v)",
				g, w.groupLabel(g), since, n.id, w.nodes[to].id, bound+w.fullLeaderlessSlack())
			return
		}
		if fw.done[g] || now < start+bound {
			continue
		}
		fw.done[g] = true
		if s.IsLeader {
			w.fail("full disk: node %d's disk has been below its free-space floor since %v and it still leads group %d "+
				"(%s) in term %d, %v later, while node %d, with space, could lead it since %v (bound %v)",
				n.id, fw.below-1, g, w.groupLabel(g), s.Term, now-(fw.below-1), w.nodes[to].id, fw.fair[g]-1, bound)
			return
		}
		w.coverage.Inc("check/full-disk-leader")
		if fw.led[g] {
			w.coverage.Inc("check/full-disk-handed-off")
		}
	}
}

// fullLeaderlessSlack is how much longer than fullBound a full node's
// group may be without any leader: the full node's hold-off of two
// election timeouts (node/quiesce.go's heldOffMax) and its own randomized
// election timeout, up to two more, in the slowest node's ticks.
func (w *world) fullLeaderlessSlack() time.Duration {
	return 4 * w.electionTimeoutSlowest()
}

// peerLeads reports whether a peer's replica of s's group (the same
// incarnation) leads it.
func peerLeads(peers [][]node.GroupStatus, s node.GroupStatus) bool {
	for _, statuses := range peers {
		if ps, ok := findStatus(statuses, s.TopicPartition); ok && ps.IsLeader && ps.TopicID == s.TopicID {
			return true
		}
	}
	return false
}

// readPeerStatuses reads every live node's statuses but n's for a look.
func (w *world) readPeerStatuses(n *simNode) {
	fw := &n.full
	if len(fw.peers) != len(w.nodes) {
		fw.peers = make([][]node.GroupStatus, len(w.nodes))
	}
	for i, m := range w.nodes {
		fw.peers[i] = fw.peers[i][:0]
		if m != n && m.up {
			fw.peers[i] = m.core.AppendStatus(fw.peers[i])
		}
	}
}

// fullTarget is the index of a node that could lead full node n's
// partition group (n's status s) in its place, or -1: a voter of n's
// replica's incoming configuration on a node that is up, unpaused,
// unstarved, whose disk is neither filled, stalled nor failing a sync,
// not held down, whose replica hosts the same incarnation, is a voter of
// its own configuration and not rejoining, that reaches n both ways and
// reaches, both ways, a majority of the voters (of each half of a joint
// configuration) that can vote (up, unpaused, disk not stalled; n is
// one). It reads readPeerStatuses' answer.
func (w *world) fullTarget(n *simNode, s node.GroupStatus) int {
	cfg, ok := partitionConfig(n, s.TopicPartition)
	if !ok {
		return -1
	}
	now := w.now()
	for _, id := range cfg.Voters {
		t := w.nodeByID(id)
		if t == nil || t == n || !t.up || t.dead || t.pausedUntil > now || t.starved || t.fullUntil != 0 ||
			t.diskStalled || t.failSync || t.heldDown || w.net.isCut(n.index, t.index) || w.net.isCut(t.index, n.index) {
			continue
		}
		ts, ok := findStatus(n.full.peers[t.index], s.TopicPartition)
		if !ok || ts.Rejoining || ts.TopicID != s.TopicID {
			continue
		}
		if votes, _ := replicaVotes(t, s.TopicPartition); !votes {
			continue
		}
		if w.reachesMajority(t, n, cfg.Voters) && (len(cfg.VotersOutgoing) == 0 || w.reachesMajority(t, n, cfg.VotersOutgoing)) {
			return t.index
		}
	}
	return -1
}

// reachesMajority reports whether candidate t, with voter n, reaches a
// majority of voters both ways among the nodes that can vote now (up,
// unpaused, disk not stalled).
func (w *world) reachesMajority(t, n *simNode, voters []node.NodeID) bool {
	k := 0
	for _, id := range voters {
		v := w.nodeByID(id)
		switch {
		case v == nil:
		case v == t || v == n:
			k++
		case v.up && v.pausedUntil <= w.now() && !v.diskStalled && !w.net.isCut(t.index, v.index) && !w.net.isCut(v.index, t.index):
			k++
		}
	}
	return k >= len(voters)/2+1
}

// partitionConfig is n's replica's applied raft configuration of tp.
func partitionConfig(n *simNode, tp node.TopicPartition) (node.ReplicaConfig, bool) {
	pc, ok := n.core.(interface {
		PartitionConfig(node.TopicPartition) (node.ReplicaConfig, bool)
	})
	if !ok {
		return node.ReplicaConfig{}, false
	}
	return pc.PartitionConfig(tp)
}

// findStatus is the status of tp among statuses.
func findStatus(statuses []node.GroupStatus, tp node.TopicPartition) (node.GroupStatus, bool) {
	for _, s := range statuses {
		if s.TopicPartition == tp {
			return s, true
		}
	}
	return node.GroupStatus{}, false
}

// nodeByID is the node with id, or nil.
func (w *world) nodeByID(id node.NodeID) *simNode {
	for _, m := range w.nodes {
		if m.id == id {
			return m
		}
	}
	return nil
}
