package node

import (
	"bytes"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/strandlog/strand/engine/metadata"
)

// Quiescence (CockroachDB's): an idle partition group stops ticking.
//
// A leader whose followers all hold its whole log, with everything
// committed and applied, no request waiting and nothing to send, sends each
// follower one last heartbeat marked quiesceContext and stops ticking the
// group: no more heartbeats. A follower that steps such a heartbeat from
// its leader, in its term, and holds exactly the leader's committed log
// stops ticking too, so it cannot time out and campaign. Any other call
// into the group wakes it (touch: a proposal, a read, any raft message but
// heartbeat responses and the quiesce heartbeat itself), and it ticks
// again from where it stopped. Raft's safety never depends on ticks; only
// liveness does, so:
//
//   - a quiesced follower must notice its leader's node dying. Every node
//     sends every peer a frame on every raft tick (an empty one when it has
//     nothing else: liveness frames), and a node wakes the quiesced
//     followers of a leader whose node it has not heard from for an
//     election timeout; they time out and elect a new leader as usual.
//     A node that restarts within an election timeout never looks silent,
//     and its replicas came back as followers that may not campaign (a
//     full disk holds them off): liveness frames carry an incarnation
//     drawn at each start, and a changed one wakes the followers of
//     leaders on that node too.
//   - a quiesced leader no longer steps down by CheckQuorum; it wakes on the
//     first request or message, and then does.
//
// The metadata group never quiesces (its traffic is small and it carries
// the registration and leader reports). Rejected: coalesced heartbeats per
// node pair (every group still steps a heartbeat per interval: the CPU
// scales with groups); a longer heartbeat interval (slower failover).

// quiesceContext marks the heartbeat that quiesces a follower: eight zero
// bytes. etcd raft (v3.7) puts in a heartbeat's context the little-endian
// count of ReadIndex requests it confirms (nil when none, so never zero)
// and the leader takes the maximum of the echoed counts: a zero count
// confirms nothing, where any other value could confirm reads that no
// quorum acknowledged.
var quiesceContext = make([]byte, 8)

// touch wakes g and marks it for the next round: for every call into g's
// RawNode on behalf of a request (Propose, ReadIndex).
func (c *Core) touch(g *group) {
	g.quiesced = false
	c.markReady(g)
}

// raftTickGroup ticks g's RawNode unless it is quiesced, first quiescing
// it when it leads an idle group.
func (c *Core) raftTickGroup(g *group) {
	if g.quiesced || c.maybeQuiesce(g) {
		return
	}
	if c.holdsOffLeadership(g) && c.holdOff(g) {
		return // full: never time out and campaign while a replica with space can lead (diskfull.go)
	}
	g.raw.Tick()
	c.markReady(g)
}

// holdOff reports whether g's replica, on a node that cannot write,
// keeps from ticking (so never times out and campaigns) this raft tick:
// while it hears from a leader, and for heldOffMax election timeouts
// without one. Past that no replica with space has won. Either this one
// alone holds the newest entry (raft's vote rule lets only it win), or
// it is what stops the others: not ticking, it still counts its last
// leader's lease as running and refuses their pre-votes (seed 19: node 2,
// full, held leader 1 of term 6 long after; nodes 1 and 3 could not
// elect). So it ticks again: its lease runs out, it grants votes or
// campaigns, and once leading hands the leadership on to a replica with
// space as soon as that one caught up (diskfull.go).
func (c *Core) holdOff(g *group) bool {
	st := g.raw.BasicStatus()
	if st.RaftState == raft.StateLeader {
		return false
	}
	timeout := uint64(c.cfg.ElectionTicks * c.cfg.TicksPerRaftTick)
	if st.Lead != 0 && c.ticks-g.leaderContact <= timeout {
		g.heldOff = 0
		return true
	}
	g.heldOff++
	return g.heldOff <= heldOffMax*c.cfg.ElectionTicks
}

// heldOffMax is how many election timeouts without a leader a replica on
// a node that cannot write waits before it campaigns.
const heldOffMax = 2

// maybeQuiesce quiesces g when it leads an idle group whose followers all
// match its log, sending each the quiesce heartbeat; it reports whether it
// did.
func (c *Core) maybeQuiesce(g *group) bool {
	if !g.sm.policy().quiesces || g.live > 0 || g.pipe.syncing != 0 || len(g.pipe.appends) > 0 || len(g.pipe.held) > 0 {
		return false
	}
	st := g.raw.BasicStatus()
	commit := st.GetCommit()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 || st.Applied != commit || g.appliedRaft != commit {
		return false
	}
	last, err := g.log.LastIndex()
	if err != nil || last != commit || g.raw.HasReady() {
		return false
	}
	matched := 0
	g.raw.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if NodeID(id) != c.cfg.ID && pr.Match == last && pr.State == tracker.StateReplicate {
			matched++
		}
	})
	if matched != len(g.replicas)-1 {
		return false
	}
	msgs := make([]*raftpb.Message, 0, len(g.replicas)-1)
	for _, r := range g.replicas {
		if r == c.cfg.ID {
			continue
		}
		msgs = append(msgs, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: ptr(uint64(r)),
			From: ptr(uint64(c.cfg.ID)), Term: ptr(st.GetTerm()), Commit: ptr(commit), Context: quiesceContext})
	}
	for _, m := range msgs {
		c.queueMessage(g, m)
	}
	g.quiesced = true
	g.quiescedLeader = c.cfg.ID
	c.stats.Quiesced++
	return true
}

func ptr[T any](v T) *T { return &v }

// steppedQuiesced tells whether g stays (or becomes) quiesced after m, from
// node from, was stepped into it: a leader stays quiesced through heartbeat
// responses; a follower quiesces on its leader's quiesce heartbeat when it
// holds exactly the leader's committed log; anything else wakes the group.
func (c *Core) steppedQuiesced(g *group, wasQuiesced bool, from NodeID, m *raftpb.Message) bool {
	if !g.sm.policy().quiesces {
		return false
	}
	switch m.GetType() {
	case raftpb.MsgHeartbeatResp:
		return wasQuiesced && g.quiescedLeader == c.cfg.ID
	case raftpb.MsgHeartbeat:
		if !bytes.Equal(m.GetContext(), quiesceContext) {
			return false
		}
		st := g.raw.BasicStatus()
		last, err := g.log.LastIndex()
		if err != nil || st.RaftState != raft.StateFollower || NodeID(st.Lead) != from || st.GetTerm() != m.GetTerm() ||
			st.GetCommit() != m.GetCommit() || last != m.GetCommit() {
			return false
		}
		g.quiescedLeader = from
		return true
	}
	return false
}

// peerLiveness tracks when each peer node was last heard from, in Core
// ticks, so quiesced followers of a silent leader can be woken.
type peerLiveness struct {
	peers []NodeID // sorted: Config.Nodes and the registered nodes not removed
	heard []uint64 // by position in peers
	disk  []uint64 // by position: the disk state the peer's last liveness frame said (diskState*; 0 none)
	// incarnation, by position: what the peer's last liveness frame said
	// (0 none yet).
	incarnation []uint64
}

// noteHeard records a frame from node from.
func (c *Core) noteHeard(from NodeID) {
	if i, ok := slices.BinarySearch(c.liveness.peers, from); ok {
		c.liveness.heard[i] = c.ticks
	}
}

// refreshLiveness sets the peers to Config.Nodes and the registered nodes
// not removed (a node that joined is watched too); a new peer counts as
// heard now.
func (c *Core) refreshLiveness() {
	var ids []NodeID
	for _, p := range c.cfg.Nodes {
		ids = append(ids, p.ID)
	}
	if c.meta != nil {
		for _, n := range c.meta.meta.Nodes() {
			if n.State != metadata.NodeRemoved {
				ids = append(ids, NodeID(n.ID))
			}
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	heard, disk, incarnation := make([]uint64, len(ids)), make([]uint64, len(ids)), make([]uint64, len(ids))
	for i, id := range ids {
		heard[i] = c.ticks
		if j, ok := slices.BinarySearch(c.liveness.peers, id); ok {
			heard[i], disk[i], incarnation[i] = c.liveness.heard[j], c.liveness.disk[j], c.liveness.incarnation[j]
		}
	}
	c.liveness = peerLiveness{peers: ids, heard: heard, disk: disk, incarnation: incarnation}
}

// livenessRaftTick runs on every raft tick: it sends every peer an empty
// frame carrying this node's disk state (so a node with only quiesced
// groups still shows it is alive, and peers know whether it has space) and
// wakes the quiesced followers of leaders on nodes silent for longer than
// an election timeout.
func (c *Core) livenessRaftTick() {
	silentAfter := uint64(c.cfg.ElectionTicks * c.cfg.TicksPerRaftTick)
	var silent []NodeID
	for i, id := range c.liveness.peers {
		if id == c.cfg.ID {
			continue
		}
		c.cfg.Network.Send(id, encodeLivenessFrame(c.cfg.ID, c.diskState(), c.incarnation))
		c.stats.FramesSent++
		if c.ticks-c.liveness.heard[i] > silentAfter && !c.bugQuiescedNeverWake() {
			silent = append(silent, id)
		}
	}
	for _, id := range silent {
		c.stats.WokenBySilence += c.wakeFollowersOf(id)
	}
}

// notePeerIncarnation records the incarnation a peer's liveness frame
// carried. A change means the peer restarted, however quickly: its raft
// replicas came back as followers, so the quiesced followers here of a
// leader on it would otherwise wait for a leader that no longer exists —
// forever when the restarted node may not campaign (a full or stalled
// disk holds it off, diskfull.go), as its frames keep it from looking
// silent.
func (c *Core) notePeerIncarnation(from NodeID, incarnation uint64) {
	i, ok := slices.BinarySearch(c.liveness.peers, from)
	if !ok {
		return
	}
	was := c.liveness.incarnation[i]
	c.liveness.incarnation[i] = incarnation
	if was != 0 && was != incarnation && !c.bugRestartNeverWakes() {
		c.stats.WokenByRestart += c.wakeFollowersOf(from)
	}
}

// wakeFollowersOf wakes this node's quiesced followers of a leader on node
// id, returning how many it woke; they tick again, time out and elect.
func (c *Core) wakeFollowersOf(id NodeID) (woken uint64) {
	for _, g := range c.groups {
		if g.quiesced && g.quiescedLeader != c.cfg.ID && g.quiescedLeader == id {
			g.quiesced = false
			woken++
		}
	}
	return woken
}
