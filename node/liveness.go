package node

import (
	"slices"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// Node liveness as one node sees its peers (issue 19 item 2). Every node
// sends every peer a frame on every raft tick (quiesce.go: liveness
// frames, carrying the sender's disk state), so the tick a peer was last
// heard from is a last contact that quiesced groups do not blur. A peer
// not heard from for livenessDownElections election timeouts is *down*:
//
//   - a follower on a down node is under-replicated whatever its lag
//     (FollowerView.Silent, LaggingReplicas), so a dead follower a few
//     entries behind is not shown in step;
//   - ClusterMembers, answered by the metadata leader, says per node up or
//     down and the last contact as that leader saw it (`strand cluster`,
//     `strand cluster health`).
//
// Raft's own Progress.RecentActive was rejected as the source: it is reset
// only on a ticking leader's CheckQuorum, so a quiesced group never clears
// it and a freshly elected leader sets it for every peer.

// livenessDownElections is how many election timeouts of silence make a
// peer down.
const livenessDownElections = 3

// PeerLiveness is one peer as this node sees it.
type PeerLiveness struct {
	Node NodeID
	// Down: not heard from for livenessDownElections election timeouts.
	Down bool
	// SilentFor is the time since the last frame from the peer (or since
	// this node started watching it, when never heard).
	SilentFor time.Duration
	// DiskFull: the peer's last liveness frame said it refuses produce for
	// want of space (diskfull.go).
	DiskFull bool
	// DiskStalled: the peer's last liveness frame said a storage job of
	// its has not returned for longer than its DiskStallAfter (stall.go).
	DiskStalled bool
}

// downAfterTicks is the silence, in Core ticks, after which a peer is down.
func (c *Core) downAfterTicks() uint64 {
	return uint64(livenessDownElections * c.cfg.ElectionTicks * c.cfg.TicksPerRaftTick)
}

// peerIndex finds id among the watched peers.
func (c *Core) peerIndex(id NodeID) (int, bool) {
	return slices.BinarySearch(c.liveness.peers, id)
}

// peerDown reports whether the peer id has been silent long enough to be
// down; this node itself and unwatched nodes are never down.
func (c *Core) peerDown(id NodeID) bool {
	i, ok := c.peerIndex(id)
	return ok && id != c.cfg.ID && c.ticks-c.liveness.heard[i] > c.downAfterTicks()
}

// peerFull reports whether the peer's last liveness frame said its disk is
// full (this node: its own state).
func (c *Core) peerFull(id NodeID) bool {
	if id == c.cfg.ID {
		return c.space.full
	}
	return c.peerDisk(id) == diskStateFull
}

// peerStalled reports whether the peer's last liveness frame said its disk
// is stalled (this node: its own state; stall.go).
func (c *Core) peerStalled(id NodeID) bool {
	if id == c.cfg.ID {
		return c.stall.stalled
	}
	return c.peerDisk(id) == diskStateStalled
}

// peerCannotWrite reports whether the peer's disk is full or stalled: it
// should not lead while a peer that can write is up.
func (c *Core) peerCannotWrite(id NodeID) bool { return c.peerFull(id) || c.peerStalled(id) }

// peerDisk is the disk state the peer's last liveness frame said
// (diskState*; 0: none heard or not watched).
func (c *Core) peerDisk(id NodeID) uint64 {
	if i, ok := c.peerIndex(id); ok {
		return c.liveness.disk[i]
	}
	return 0
}

// livenessView lists the watched peers (this node included, never down) by id.
func (c *Core) livenessView() []PeerLiveness {
	out := make([]PeerLiveness, 0, len(c.liveness.peers))
	for i, id := range c.liveness.peers {
		pl := PeerLiveness{Node: id, DiskFull: c.peerFull(id), DiskStalled: c.peerStalled(id)}
		if id != c.cfg.ID {
			pl.Down = c.peerDown(id)
			pl.SilentFor = time.Duration(c.ticks-c.liveness.heard[i]) * c.cfg.TickDuration
		}
		out = append(out, pl)
	}
	return out
}

// notePeerDisk records the disk state a peer's frame carried.
func (c *Core) notePeerDisk(from NodeID, state uint64) {
	if i, ok := c.peerIndex(from); ok {
		c.liveness.disk[i] = state
	}
}

// LaggingEntriesMax is how far, in raft entries, a follower may trail its
// leader and still count as in step (FollowerView.Lagging).
const LaggingEntriesMax = 256

// laggingFollowers lists the followers of the leader g not in step
// (FollowerView.Lagging with LaggingEntriesMax), by node id.
func (c *Core) laggingFollowers(g *group) []uint64 {
	last, err := g.log.LastIndex()
	if err != nil {
		return nil
	}
	var out []uint64
	for _, f := range c.followers(g) {
		if f.Lagging(last, LaggingEntriesMax) {
			out = append(out, uint64(f.Node))
		}
	}
	return out
}

// fillMemberLiveness sets m's liveness fields from this node's view.
func (c *Core) fillMemberLiveness(m *strandpb.ClusterMembersResponse_Member) {
	id := NodeID(m.GetId())
	m.DiskFull, m.DiskStalled = c.peerFull(id), c.peerStalled(id)
	if i, ok := c.peerIndex(id); ok && id != c.cfg.ID {
		m.Down = c.peerDown(id)
		m.LastContactMs = uint64((time.Duration(c.ticks-c.liveness.heard[i]) * c.cfg.TickDuration).Milliseconds())
	}
}
