package node

import (
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/raftlog"
)

// group is one hosted replica: a raft group, its log and its engine.
type group struct {
	//lint:ignore U1000 empty without -tags simbugs
	groupBugs // planted-bug state: empty unless built with -tags simbugs
	tp        TopicPartition
	replicas  []NodeID // sorted: current ∪ target, the nodes it talks to
	// statusSeq is the Core's StatusSeq when this replica's status last
	// may have changed on its own (groupStatusChanged; RefreshStatus).
	statusSeq uint64
	// current, target and boot are the metadata's replica set, the target
	// of a move in progress (nil: none) and the bootstrap set, sorted
	// (moves.go); nil for the metadata group.
	current, target, boot, leaving []NodeID
	// targetOrder is the target in the operator's order (its first is
	// the preferred leader), for describing the move.
	targetOrder []NodeID
	move        moveState
	dir         string
	wire        string  // the topic its raft messages carry (see wireTopic)
	logs        coreLog // records carry node and the group's topic and partition

	log     *raftlog.Log
	storage *groupStorage
	raw     *raft.RawNode
	// sm is the replicated state: the partition's engine or the cluster
	// metadata (statemachine.go). The host reaches it only through sm.
	sm stateMachine
	// part is the partition state machine's engine, which the partition
	// services read; nil in the metadata group.
	part      *engine.Partition
	confState *raftpb.ConfState // as of appliedRaft, for checkpoints

	// topicID is the metadata topic id of a replica started by the
	// metadata group. It is part of the
	// replica's directory and of its raft messages' topic, so a replica of
	// a deleted topic never talks to, or reuses the files of, a new topic
	// of the same name.
	topicID uint64
	// topicUUID is the topic's cluster-wide id (zero for a static
	// replica): requests naming another id are refused (checkTopicID).
	topicUUID metadata.UUID
	// reportQueued: the group waits in Core.leaderReports.
	reportQueued bool
	// readyMarked: the group is in Core.ready.marked (ready.go).
	readyMarked bool
	// quiesced: the group is idle and not ticked (quiesce.go);
	// quiescedLeader is the leader it quiesced under (this node when it
	// leads).
	quiesced       bool
	quiescedLeader NodeID
	// heldOff counts the raft ticks this replica, on a node that cannot
	// write, did not tick while its group had no leader it heard from
	// (holdOff); 0 once it hears from one. leaderContact is the Core tick
	// at which it last stepped a message only a leader sends.
	heldOff       int
	leaderContact uint64
	// parked are the long-poll fetches to wake when the high-water mark
	// moves; finished ones are dropped lazily.
	parked []*fetchSession
	// readsDeferred: g has servable reads or parked wakes left for the
	// next Process call by the fetch read budget (fetchbudget.go).
	readsDeferred bool

	appliedRaft     uint64 // last raft index applied to the engine
	checkpointIndex uint64 // raft index of the last checkpoint written
	// ck is the checkpoint in flight, nil when none (checkpoint_job.go).
	ck *checkpointFlight
	// rejoin is the replica's disk-loss recovery (rejoin.go); nil when it
	// never lost its state.
	rejoin *rejoin
	// ret is the replica's retention and compaction state (retention.go).
	ret retentionState
	// tier is the tiered-storage bookkeeping (tier.go).
	tier tierState
	// pass is the replica's compaction passes (compaction_replica.go).
	pass passState
	// leaderTerm is the term in which this replica was last seen leading,
	// 0 when it was not leading at the last check.
	leaderTerm uint64
	// loggedLeading: this replica led at the last leadership log record.
	loggedLeading bool
	// freshCampaigns is the early campaigns left to a new partition's
	// preferred replica, freshCampaignAt the tick before which it makes
	// none (elect.go).
	freshCampaigns  int
	freshCampaignAt uint64
	// handedTo and handedTerm are the target and term of the last
	// leadership transfer a full or stalled node started (diskfull.go).
	handedTo   NodeID
	handedTerm uint64

	// Produces waiting, in proposal order; byProposal finds one whose index
	// is not known yet, byIndex one whose entry's index is known (acks=all).
	produces   []*produceWait
	byProposal map[uint64]*produceWait
	byIndex    map[uint64]*produceWait
	unindexed  int // waits in byProposal

	// Fetches waiting for their read index or for apply to reach it.
	reads  []*readWait
	readBy map[uint64]*readWait
	// readShared is the latest ReadIndex later reads may share while
	// nothing was applied since appliedRaft was readSharedApplied.
	readShared        *readWait
	readSharedApplied uint64

	live int // waits of both kinds not completed: bounded by PendingRequestsMax

	pipe groupPipe // the storage pipeline's state (pipeline.go)
}

// produceWait is a produce waiting for its entry to be synced or applied.
type produceWait struct {
	//lint:ignore U1000 empty without -tags simbugs
	produceBugs // planted-bug state: empty unless built with -tags simbugs
	proposalID  uint64
	term        uint64 // leader term it was proposed in
	index       uint64 // raft index, 0 until seen in a Ready
	acks        Acks
	records     int32
	deadline    uint64 // tick after which it fails with ErrTimeout
	done        func(ProduceResult)
	finished    bool
	proposedAt  time.Duration // Clock.Monotonic at the proposal (latency.go)
}

// readWait is a linearizable read (a fetch, a list-offsets or a metadata
// read) waiting for its ReadIndex and then for apply. Exactly one of serve
// (once the read index is applied) and fail runs.
type readWait struct {
	id         uint64
	term       uint64
	index      uint64 // read index, valid once indexKnown
	indexKnown bool
	deadline   uint64
	serve      func(g *group)
	fail       func(err error, lead NodeID)
	finished   bool
	// joined are the reads sharing this one's read index (fetch.go,
	// readIndexShared); they are in the group's reads but not in readBy.
	joined []*readWait
}

// newGroup returns a partition replica's group; the metadata group replaces
// its state machine (meta.go).
func newGroup(tp TopicPartition, replicas []NodeID, dir string) *group {
	g := &group{
		tp:         tp,
		replicas:   replicas,
		dir:        dir,
		wire:       tp.Topic,
		byProposal: make(map[uint64]*produceWait),
		byIndex:    make(map[uint64]*produceWait),
		readBy:     make(map[uint64]*readWait),
	}
	g.sm = &partitionSM{g: g}
	return g
}

// leadership reports the leader this replica knows, the term, and whether
// it leads.
func (g *group) leadership() (lead NodeID, term uint64, leading bool) {
	st := g.raw.BasicStatus()
	return NodeID(st.Lead), st.GetTerm(), st.RaftState == raft.StateLeader
}

// isReplica tells whether id is one of the group's peers: a replica, or one
// its state machine knows (metadataSM.knownPeer).
func (g *group) isReplica(id NodeID) bool {
	for _, r := range g.replicas {
		if r == id {
			return true
		}
	}
	return g.sm.knownPeer(id)
}

// trimWaits drops finished waits from the front of both queues, and
// compacts a queue when finished waits pile up in its middle.
func (g *group) trimWaits() {
	n := 0
	for n < len(g.produces) && g.produces[n].finished {
		n++
	}
	g.produces = g.produces[n:]
	n = 0
	for n < len(g.reads) && g.reads[n].finished {
		n++
	}
	g.reads = g.reads[n:]
	if len(g.produces) > 2*g.live+64 {
		g.produces = compactWaits(g.produces, func(w *produceWait) bool { return w.finished })
	}
	if len(g.reads) > 2*g.live+64 {
		g.reads = compactWaits(g.reads, func(w *readWait) bool { return w.finished })
	}
}

// compactWaits keeps the waits not finished, in order, in a fresh slice.
func compactWaits[W any](ws []W, finished func(W) bool) []W {
	kept := make([]W, 0, len(ws)/2)
	for _, w := range ws {
		if !finished(w) {
			kept = append(kept, w)
		}
	}
	return kept
}
