package node

import (
	"log/slog"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/raftlog"
)

// stateMachine is what the multi-raft host (open.go, process.go,
// checkpoint.go, snapshot.go, receive.go) needs of the state a raft group
// replicates: it applies committed entries, checkpoints and restores
// itself, and declares the host policies that differ between kinds of
// state (replicaPolicy). The host never asks which kind a group holds.
//
// Two implement it: partitionSM (a topic partition's engine) and
// metadataSM (the cluster metadata). Methods take the Core and the group
// because applying an entry completes the waits the host keeps for it.
type stateMachine interface {
	// applyCommand applies committed entry e, whose data is not empty, at
	// raft index e.GetIndex() (engineIndex for a partition's engine, which
	// a planted bug may shift).
	applyCommand(c *Core, g *group, e *raftpb.Entry, engineIndex uint64)
	// applyEmpty consumes an index that carries no command.
	applyEmpty(index uint64)
	// confApplied follows a committed configuration change, after raft
	// applied it.
	confApplied(c *Core, cc raftpb.ConfChangeI)
	// loadCheckpoint reads the newest valid checkpoint in dir at or
	// below indexMax in the state machine's format (nil: none).
	loadCheckpoint(disk raftlog.Disk, dir string, indexMax uint64) (*checkpoint, error)
	// restoreCheckpoint makes the checkpoint's state g's; it reports
	// whether raft must replay the log from the start regardless (a
	// planted bug).
	restoreCheckpoint(c *Core, g *group, ck *checkpoint) (replayAll bool)
	// startEmpty gives g the empty state when no checkpoint exists.
	startEmpty(g *group)
	// prepareCheckpoint returns the state to write in g's checkpoint
	// header, fills ck's format fields and adds to w the other files the
	// checkpoint writes (checkpoint_job.go). Pure: no I/O.
	prepareCheckpoint(c *Core, g *group, ck *checkpoint, w *checkpointWrite) []byte
	// checkpointDone follows w's write job: err nil when the header is
	// durable.
	checkpointDone(w *checkpointWrite, err error)
	// checkpointTrimmed follows w's trim job, once older headers and the
	// files only they named are gone.
	checkpointTrimmed(w *checkpointWrite)
	// replacedBySnapshot follows the host's replacing the state with a raft
	// snapshot's (snapshot.go; only with policy().raftSnapshots).
	replacedBySnapshot()
	// digest is a hash of the replicated state, equal on replicas at the
	// same applied index (GroupStatus.Digest).
	digest() uint64
	// knownPeer reports whether id, not among g's replicas, is a peer
	// anyway (see group.isReplica).
	knownPeer(id NodeID) bool
	// saneConfChange checks a configuration change entry a peer sent.
	saneConfChange(e *raftpb.Entry) bool
	// logAttrs are the attributes of the group's log records.
	logAttrs(tp TopicPartition) []slog.Attr
	// policy is the host behaviour the state machine asks for.
	policy() replicaPolicy
}

// replicaPolicy is the host behaviour that differs between state machines:
// each field names one decision the host takes for every group alike.
type replicaPolicy struct {
	// raftSnapshots: the state can be sent and installed as a raft
	// snapshot (snapshot.go); otherwise a lagging follower replays the log.
	raftSnapshots bool
	// forwardsProposals: followers forward proposals and ReadIndex
	// requests to the leader (raft sends both without a term).
	forwardsProposals bool
	// leaderBoundWaits: waits end when the replica stops leading (a
	// produce or read of an older term can no longer complete here);
	// otherwise they end by apply or timeout.
	leaderBoundWaits bool
	// quiesces: the group may go idle and stop ticking (quiesce.go).
	quiesces bool
	// readBudgeted: its reads share the Process call's read budget
	// (fetchbudget.go).
	readBudgeted bool
	// reportsLeadership: this node's leadership of the group is reported
	// to the metadata group (identity.go).
	reportsLeadership bool
	// freshCampaigns: a new group's preferred replica campaigns early
	// (elect.go).
	freshCampaigns bool
	// repairable: corrupt committed data is repaired by rebuilding the
	// replica (repair.go); otherwise it is fatal.
	repairable bool
	// skipCheckpointOnFull: a checkpoint refused for space is skipped
	// (tried again later) instead of stopping the node.
	skipCheckpointOnFull bool
	// control: the group is the node's control plane, which must go on
	// through a full disk or a stall: it keeps leading, takes appends
	// until its own write is refused, reopens keeping its state after
	// that (diskfull.go), and a wiped node rejoins it first (rejoin.go).
	control bool
}

// partitionSM is a topic partition's state machine: g.part, the engine,
// which the partition services (produce, fetch, retention, groups) also
// read directly, and the bookkeeping of its checkpoints' index chunks.
type partitionSM struct {
	g *group
	// The offset index chunks of the partition's checkpoints
	// (checkpoint.go): indexKnown when they match the engine's ordinals
	// (its state came from an SCK2 checkpoint or a previous checkpoint
	// cleared them), indexWritten the ordinal below which they hold every
	// record, indexFreed the ordinal below which no chunk is left,
	// indexChunkEnd the end of the newest chunk a write reached (its
	// directory entry synced; 0: none, the next write begins a chunk).
	indexKnown    bool
	indexWritten  int64
	indexFreed    int64
	indexChunkEnd int64
}

// applyCommand applies a produce and completes its acks=all wait.
func (p *partitionSM) applyCommand(c *Core, g *group, e *raftpb.Entry, engineIndex uint64) {
	before := g.part.Compaction().Decision
	res := g.part.Apply(engineIndex, e.GetData())
	c.decisionApplied(g, before, res)  // compaction_replica.go
	c.tierApplied(g, e.GetData(), res) // tier.go
	w := g.byIndex[e.GetIndex()]
	if w == nil {
		return
	}
	if w.term != e.GetTerm() {
		c.finishProduce(g, w, ProduceResult{Err: ErrNotLeader, BaseOffset: -1})
		return
	}
	if res.Err == nil {
		c.noteCommitted(w)
	}
	c.finishProduce(g, w, produceResult(res, c.cfg.ID))
}

func (p *partitionSM) applyEmpty(index uint64) { p.g.part.ApplyEmpty(index) }

func (p *partitionSM) confApplied(*Core, raftpb.ConfChangeI) {}

func (p *partitionSM) loadCheckpoint(disk raftlog.Disk, dir string, indexMax uint64) (*checkpoint, error) {
	return loadCheckpoint(disk, dir, indexMax, false)
}

func (p *partitionSM) restoreCheckpoint(c *Core, g *group, ck *checkpoint) bool {
	g.part = ck.partition
	c.statusChanged()
	c.bugForgetProducers(g)
	c.bugRestoreIndexTimes(g)
	p.indexKnown, p.indexWritten, p.indexChunkEnd = ck.indexed, ck.indexEnd, 0
	if ck.indexEnd > ck.indexStart { // the header names records of this chunk
		last := ck.indexEnd - 1
		p.indexChunkEnd = last - last%indexChunkRecords + indexChunkRecords
	}
	g.checkpointIndex = ck.raftIndex
	return c.bugReapply(g)
}

func (p *partitionSM) startEmpty(g *group) { g.part = engine.NewPartition() }

// prepareCheckpoint adds the new index records to w and returns an SCK2
// header's state (checkpoint.go).
func (p *partitionSM) prepareCheckpoint(c *Core, g *group, ck *checkpoint, w *checkpointWrite) []byte {
	ck.indexed = true
	ck.indexStart, ck.indexEnd = p.prepareIndex(w)
	return c.bugCheckpointState(g.part.StateSnapshot())
}

// checkpointDone: after a failed write the chunks may lack what
// indexWritten claims; the next checkpoint rewrites them.
func (p *partitionSM) checkpointDone(_ *checkpointWrite, err error) {
	if err != nil {
		p.indexKnown = false
	}
}

// checkpointTrimmed notes the chunks the trim freed.
func (p *partitionSM) checkpointTrimmed(w *checkpointWrite) {
	start := w.indexStart
	p.indexFreed = max(p.indexFreed, start-start%indexChunkRecords)
}

// replacedBySnapshot: the index chunks no longer match the engine's
// ordinals; the next checkpoint rewrites them.
func (p *partitionSM) replacedBySnapshot() { p.indexKnown, p.indexWritten = false, 0 }

func (p *partitionSM) digest() uint64 { d, _ := p.g.part.Digests(); return d }

func (p *partitionSM) knownPeer(NodeID) bool { return false }

// saneConfChange accepts a partition move's steps (moves.go) and the
// bootstrap entry, over the bootstrap set, which a later move may have
// left.
func (p *partitionSM) saneConfChange(e *raftpb.Entry) bool {
	if e.GetType() == raftpb.EntryConfChangeV2 {
		return saneConfChangeV2(e.GetData())
	}
	return saneBootstrapConfChange(e.GetData())
}

func (p *partitionSM) logAttrs(tp TopicPartition) []slog.Attr { return groupAttrs(tp, false) }

func (p *partitionSM) policy() replicaPolicy {
	return replicaPolicy{raftSnapshots: true, leaderBoundWaits: true, quiesces: true, readBudgeted: true,
		reportsLeadership: true, freshCampaigns: true, repairable: true, skipCheckpointOnFull: true}
}

// metadataSM is the metadata group's state machine. Core.meta embeds it,
// so the metadata services read the state as c.meta.meta.
type metadataSM struct {
	meta *metadata.State
	// digestCache caches meta.Digest() (which rehashes the state) for the
	// state digestOf at its applied index digestAt: the metadata state
	// changes only in Apply, and every Apply advances the index. (Version
	// is no key: some commands change the state without a bump.)
	digestCache uint64
	digestOf    *metadata.State
	digestAt    uint64
}

// metaGroup is the metadata group: its replica and its state machine.
type metaGroup struct {
	*group
	*metadataSM
}

// digest is meta.Digest(), computed once per applied index.
func (m *metadataSM) digest() uint64 {
	if m.digestOf != m.meta || m.digestAt != m.meta.AppliedIndex() {
		m.digestCache, m.digestOf, m.digestAt = m.meta.Digest(), m.meta, m.meta.AppliedIndex()
	}
	return m.digestCache
}

// applyCommand applies a metadata command and ends its wait (meta.go).
func (m *metadataSM) applyCommand(c *Core, _ *group, e *raftpb.Entry, _ uint64) {
	c.metaApplied(m.meta.Apply(e.GetIndex(), e.GetData()))
}

func (m *metadataSM) applyEmpty(index uint64) { m.meta.ApplyEmpty(index) }

// confApplied follows a membership change (members.go).
func (m *metadataSM) confApplied(c *Core, cc raftpb.ConfChangeI) { c.metaConfApplied(cc) }

func (m *metadataSM) loadCheckpoint(disk raftlog.Disk, dir string, indexMax uint64) (*checkpoint, error) {
	return loadCheckpoint(disk, dir, indexMax, true)
}

func (m *metadataSM) restoreCheckpoint(c *Core, g *group, ck *checkpoint) bool {
	m.meta = ck.meta
	c.statusChanged()
	g.checkpointIndex = ck.raftIndex
	return false
}

// startEmpty keeps the state: a new group's is empty already, and a
// reopened one's (diskfull.go) is what it applied.
func (m *metadataSM) startEmpty(*group) {}

// prepareCheckpoint returns an SCK1 header's state.
func (m *metadataSM) prepareCheckpoint(*Core, *group, *checkpoint, *checkpointWrite) []byte {
	return m.meta.Snapshot()
}

func (m *metadataSM) checkpointDone(*checkpointWrite, error) {}

func (m *metadataSM) checkpointTrimmed(*checkpointWrite) {}

// knownPeer: any node not known as removed. A member that missed a node's
// join (it was down, cut off, or wiped and restarted over its static
// peers) must exchange messages with that node once it leads, or it never
// catches up while it does; raft itself does not ask whether a leader is
// in its configuration. Seeds 37 (the registration applied, the
// configuration change not) and 2 (neither: wiped) of TestSimJoins failed
// before.
// replacedBySnapshot is never called: the metadata group takes no raft
// snapshots (policy).
func (m *metadataSM) replacedBySnapshot() {}

func (m *metadataSM) knownPeer(id NodeID) bool {
	if id == 0 {
		return false
	}
	n, ok := m.meta.Node(uint64(id))
	return !ok || n.State != metadata.NodeRemoved
}

// saneConfChange accepts the metadata group's membership changes
// (members.go).
func (m *metadataSM) saneConfChange(e *raftpb.Entry) bool { return saneMetaConfChange(e) }

func (m *metadataSM) logAttrs(tp TopicPartition) []slog.Attr { return groupAttrs(tp, true) }

func (m *metadataSM) policy() replicaPolicy {
	return replicaPolicy{forwardsProposals: true, control: true}
}

// The two state machines the host runs today.
var (
	_ stateMachine = (*partitionSM)(nil)
	_ stateMachine = (*metadataSM)(nil)
)
