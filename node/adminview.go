package node

import (
	"cmp"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node/groupsvc"
)

// AdminView is one node's state as an operator sees it: the metadata it
// applied, every hosted replica, the consumer groups it coordinates and its
// counters. The admin listener (node/server) takes one per scrape or page
// load through the loop, so metrics, the JSON API and the console all show
// the same values. Everything is copied: the view shares nothing with the
// Core.
type AdminView struct {
	ID NodeID
	// MetaLeader and MetaTerm are the metadata group's leader (0: none
	// known) and term; MetaVersion is the applied metadata version.
	MetaLeader  NodeID
	MetaTerm    uint64
	MetaVersion uint64
	// Registered: this node's registration is in the applied metadata.
	Registered bool
	// Nodes are the registered nodes (by id), Peers the configured ones
	// (Config.Nodes), Topics the topics (by name) with replica sets and
	// reported leaders.
	Nodes  []metadata.Node
	Peers  []Peer
	Topics []metadata.Topic
	// Moves are the partition moves in progress the applied metadata
	// records (by topic, partition); a moving replica led here carries
	// its learners' progress (ReplicaView.Move).
	Moves []metadata.MoveInProgress
	// DiskFull: this node refuses produce for want of space (diskfull.go).
	DiskFull bool
	// DiskStalled: a storage job has been in flight longer than
	// Config.DiskStallAfter, so the node does not lead (stall.go);
	// OldestStorageJob is the age of the oldest job in flight at the last
	// check, OldestStorageJobFile its file (relative to the Disk's root;
	// node/server's View joins the data directory).
	DiskStalled          bool
	OldestStorageJob     time.Duration
	OldestStorageJobFile string
	// Liveness is each watched node (this one included) as this node
	// sees it: down after three election timeouts of silence (liveness.go).
	Liveness []PeerLiveness
	Stats    Stats
	// Replicas are the hosted partition replicas by topic and partition.
	Replicas []ReplicaView
	// Groups are the consumer groups this node coordinates, by
	// coordinator partition then id; GroupsTruncated says some were left
	// out (AdminGroupsMax).
	Groups          []GroupView
	GroupsTruncated bool
	// Txn is what the transaction coordinators this node leads hold open.
	Txn TxnView
}

// ReplicaView is one hosted replica.
type ReplicaView struct {
	GroupStatus
	SizeBytes         int64
	OldestTimestampMs int64 // append time of the oldest batch, -1 when empty
	// LastStableOffset is the replica's LSO: below it no transaction is
	// open (HighWatermark - LastStableOffset is what read_committed
	// readers wait for).
	LastStableOffset int64
	LastIndex        uint64
	// Followers is the leader's view of each other replica (empty on a
	// follower), by node id.
	Followers []FollowerView
	// Move is, on the leader of a partition being moved, the progress of
	// each node the move adds, in target order (empty otherwise).
	Move []MoveProgress
	// Compaction is the replica's compaction state (compaction_view.go).
	Compaction CompactionView
	// Tier is the replica's two tiers (tier_view.go; Tiered false when
	// its topic is not tiered on this node).
	Tier TierView
}

// MoveRatio is the fraction of a move's catch-up done, from a leader's
// progress: the least caught-up added node's match over the leader's last
// index (a node already promoted to voter counts as done); 1 with nothing
// to add (a move that only removes replicas).
func MoveRatio(progress []MoveProgress) float64 {
	ratio := 1.0
	for _, p := range progress {
		switch {
		case p.Voter:
		case p.LastIndex == 0:
			ratio = 0
		default:
			ratio = min(ratio, float64(min(p.MatchIndex, p.LastIndex))/float64(p.LastIndex))
		}
	}
	return ratio
}

// FollowerView is a leader's view of one follower's progress.
type FollowerView struct {
	Node NodeID
	// Match is the last raft index known replicated there; Replicating
	// says raft streams to it (not probing or sending a snapshot).
	Match       uint64
	Replicating bool
	// Silent: the follower's node has not been heard from for a few
	// election timeouts (liveness.go): down as this leader sees it.
	Silent bool
}

// Lagging reports whether the follower could not take part in the next
// commit without catching up first (LaggingReplicas' rule): raft probes it
// or sends it a snapshot, it is more than entriesMax entries behind, or
// its node has been silent long enough to be down, whatever its lag.
func (f FollowerView) Lagging(last, entriesMax uint64) bool {
	return !f.Replicating || f.Silent || f.Match+entriesMax < last
}

// followers is the leader g's view of each other replica, by node id.
func (c *Core) followers(g *group) []FollowerView {
	var out []FollowerView
	g.raw.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if NodeID(id) != c.cfg.ID {
			out = append(out, FollowerView{Node: NodeID(id), Match: pr.Match, Replicating: pr.State == tracker.StateReplicate,
				Silent: c.peerDown(NodeID(id))})
		}
	})
	slices.SortFunc(out, func(a, b FollowerView) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// GroupView is one consumer group on its coordinator.
type GroupView struct {
	ID          string
	State       string
	Members     int
	Epoch       int32
	Coordinator TopicPartition // its __strand_offsets partition
	// CaughtUp: the coordinator has read its partition's log up to the
	// applied end (a new coordinator replays first).
	CaughtUp bool
	Offsets  []GroupOffsetView
}

// GroupOffsetView is one committed offset with what this node knows of
// its partition.
type GroupOffsetView struct {
	TopicPartition
	Committed int64
	Metadata  string // the committed offset's metadata (clientlib's Handle keeps a dead-letter count there)
	// Hosted: this node hosts a replica of the partition, and the fields
	// below are that replica's (a follower's may trail its leader's).
	Hosted         bool
	HighWatermark  int64
	LogStartOffset int64
	// LastStableOffset is where read_committed reads end (the first offset
	// of the oldest open transaction, else HighWatermark): a read_committed
	// group's lag is measured to it.
	LastStableOffset int64
	// NextAppendTimeMs is the append time of the batch holding the first
	// record the group has not consumed, -1 when there is none (no lag, or
	// the offset is below the log start).
	NextAppendTimeMs int64
}

// AdminGroupsMax bounds the groups one AdminView carries.
const AdminGroupsMax = 4096

// AdminView returns the node's state; see AdminView. It reads only.
func (c *Core) AdminView() AdminView {
	v := AdminView{ID: c.cfg.ID, DiskFull: c.space.full, DiskStalled: c.stall.stalled, Stats: c.stats,
		Peers: slices.Clone(c.cfg.Nodes), Liveness: c.livenessView(), Txn: c.txnView()}
	v.OldestStorageJob, v.OldestStorageJobFile = c.oldestStorageJob()
	if c.meta != nil {
		v.MetaLeader, v.MetaTerm = c.metaLeader()
		v.MetaVersion = c.meta.meta.Version()
		v.Nodes, v.Topics, v.Moves = c.meta.meta.Nodes(), c.meta.meta.Topics(), c.meta.meta.Moves()
		_, v.Registered = c.meta.meta.Node(uint64(c.cfg.ID))
	}
	for _, g := range c.partitionGroups() {
		v.Replicas = append(v.Replicas, c.replicaView(g))
		if co := c.coord.coords[g.tp]; co != nil && g.tp.Topic == OffsetsTopic {
			v.GroupsTruncated = c.appendGroupViews(&v, g, co) || v.GroupsTruncated
		}
	}
	return v
}

// replicaView is g as AdminView shows it.
func (c *Core) replicaView(g *group) ReplicaView {
	st := c.groupStatus(g)
	st.HighWatermark, st.LogStartOffset = g.part.HighWatermark(), g.part.LogStartOffset()
	rv := ReplicaView{GroupStatus: st, SizeBytes: g.log.SizeBytes(), OldestTimestampMs: g.part.OldestTimestampMs(),
		LastStableOffset: g.part.LastStableOffset(), Compaction: c.compactionView(g), Tier: c.tierView(g)}
	rv.LastIndex, _ = g.log.LastIndex()
	if st.IsLeader {
		rv.Followers = c.followers(g)
		rv.Move = c.moveProgress(g)
	}
	return rv
}

// appendGroupViews appends the groups of coordinator co (leading g); it
// reports whether AdminGroupsMax cut them short.
func (c *Core) appendGroupViews(v *AdminView, g *group, co *groupsvc.Coordinator) bool {
	for _, id := range co.State.GroupIDs() {
		if len(v.Groups) >= AdminGroupsMax {
			return true
		}
		d, ok := co.State.Describe(id)
		if !ok {
			continue
		}
		gv := GroupView{ID: id, State: d.State, Members: len(d.Members), Epoch: d.Epoch, Coordinator: g.tp,
			CaughtUp: !co.Fresh && co.Next >= g.part.HighWatermark()}
		for _, o := range d.Offsets {
			gv.Offsets = append(gv.Offsets, c.groupOffsetView(o))
		}
		v.Groups = append(v.Groups, gv)
	}
	return false
}

// groupOffsetView is one committed offset with the local replica's bounds.
func (c *Core) groupOffsetView(o groups.CommittedOffset) GroupOffsetView {
	tp := TopicPartition{Topic: o.Partition.Topic, Partition: o.Partition.Partition}
	ov := GroupOffsetView{TopicPartition: tp, Committed: o.Offset, Metadata: o.Metadata, HighWatermark: -1, LogStartOffset: -1,
		LastStableOffset: -1, NextAppendTimeMs: -1}
	g := c.byTP[tp]
	if g == nil || g.part == nil {
		return ov
	}
	ov.Hosted = true
	ov.HighWatermark, ov.LogStartOffset, ov.LastStableOffset = g.part.HighWatermark(), g.part.LogStartOffset(), g.part.LastStableOffset()
	if o.Offset >= ov.LogStartOffset && o.Offset < ov.HighWatermark {
		if locs, err := g.part.Locate(o.Offset, 1); err == nil && len(locs) > 0 {
			ov.NextAppendTimeMs = locs[0].AppendTimeMs
		}
	}
	return ov
}
