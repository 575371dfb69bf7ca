package node

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"slices"

	"github.com/strandlog/strand/engine/metadata"
)

// Stats counts what the core did with frames and messages, for tools and
// tests; plain counters, read with Core.Stats.
type Stats struct {
	FramesReceived       uint64 // frames given to Receive
	FramesDropped        uint64 // frames that did not decode
	MessagesStepped      uint64 // raft messages stepped into a group
	MessagesDropped      uint64 // messages malformed or failing the sanity checks
	MessagesUnknownGroup uint64 // messages for a partition not hosted here
	StepErrors           uint64 // messages raft refused (stale or foreign)
	MessagesSent         uint64
	FramesSent           uint64
	Syncs                uint64 // log syncs of the Ready cycle
	WALRotations         uint64 // write-ahead log rotations (wal.go)
	WALEarlyFlushes      uint64 // background fsyncs of logs in WAL mode (walFlushEarly)
	TrashJobs            uint64 // unlinks of compacted segments handed off the loop (startTrash)
	Checkpoints          uint64 // engine checkpoints written
	ColdReads            uint64 // fetch log reads run as storage jobs (fetch_cold.go)
	ReadyPolls           uint64 // groups asked HasReady by the Ready rounds (ready.go)
	Quiesced             uint64 // times a leader quiesced its group (quiesce.go)
	WokenBySilence       uint64 // quiesced followers woken because their leader's node went silent
	WokenByRestart       uint64 // quiesced followers woken because their leader's node restarted (a new incarnation)
	// AuthorizationsParked counts requests the applied ACLs would have
	// refused on a state not confirmed current, parked until a metadata
	// read index confirmed it (auth.go: confirmThenHandle).
	AuthorizationsParked uint64
	// VotesWithheld counts vote and pre-vote messages, in or out, that a
	// replica recovering from a lost disk did not step or send.
	VotesWithheld uint64
	// RejoinsStarted and RejoinsDone count replicas that opened having
	// lost their state, and those that finished recovering.
	RejoinsStarted uint64
	RejoinsDone    uint64
	// ReplicasRepaired counts replicas discarded for corrupt data, to be
	// rebuilt from their peers (repair.go).
	ReplicasRepaired uint64
	// DiskFullEntered counts the times the node turned full, and
	// SpaceHandOffs the leadership transfers a full node started to a
	// replica with space (diskfull.go).
	DiskFullEntered uint64
	SpaceHandOffs   uint64
	// StorageJobsSlow counts storage jobs in flight past DiskSlowAfter,
	// DiskStallsEntered the times the node turned stalled, and
	// StallHandOffs the leadership transfers a stalled node started
	// (stall.go).
	StorageJobsSlow   uint64
	DiskStallsEntered uint64
	StallHandOffs     uint64
	// CatchUpBytes counts entry bytes sent to catching-up followers under
	// the throttle, CatchUpThrottled the appends it held back (throttle.go).
	CatchUpBytes     uint64
	CatchUpThrottled uint64
	SegmentRolls     uint64 // segments rolled by age (segment.ms)
	TrimsProposed    uint64 // TRIM entries proposed by retention as leader
	// TierUploads counts objects put to the bucket, TierDeletes objects
	// deleted, TierOrphans those an orphan sweep named, TierStale ADDs of
	// ours found stale, TierFailures tier jobs failed (tier.go).
	TierUploads, TierDeletes, TierOrphans, TierStale, TierFailures int
	// TierReads counts the remote read jobs started, TierReadErrors the
	// ones that failed (tier_read.go).
	TierReads, TierReadErrors int
	Compactions               uint64 // raft log compactions behind a snapshot
	CompactionsDecided        uint64 // raft log compactions decided (Compactions: finished)
	// CompactionPasses counts this node's compaction passes made current
	// (compaction_replica.go); CompactionsDiverged the COMPACT_DONE
	// entries applied with another outcome than the one recorded.
	CompactionPasses    uint64
	CompactionsDiverged uint64
	// CompactionBytesIn and CompactionBytesOut sum the passes made current
	// on this node's replicas: the input batches' bytes each read (its
	// prefix and the raft entries gathered) and the batches it wrote
	// (compact.Stats' BytesIn and BytesOut).
	CompactionBytesIn  uint64
	CompactionBytesOut uint64
	// CompactionBudgetHolds counts the times a pass's next write step or
	// commit waited for the node's compaction I/O budget
	// (Config.CompactionBytesPerSec).
	CompactionBudgetHolds uint64
	// PrefixInstalls counts compacted prefixes this node's stuck replicas
	// installed from a peer (compaction_install.go), PrefixChunks the
	// chunks they appended.
	PrefixInstalls     uint64
	PrefixChunks       uint64
	SnapshotsSent      uint64 // raft snapshots sent to lagging followers
	SnapshotsInstalled uint64 // raft snapshots installed from a leader
	// CommitLatency is the time from proposal to apply, on the leader, of
	// the acks=all produces that applied successfully (latency.go).
	CommitLatency LatencyHistogram
	MoveSteps     uint64 // conf changes proposed to move partitions (moves.go)
	// RemovalsForced counts removed nodes the metadata leader dropped from
	// the metadata group before they caught up (removalDue): such a node
	// never learns it was removed and keeps its stale replicas until its
	// data directory is wiped.
	RemovalsForced uint64
	// FreshCampaigns counts the early campaigns of new partitions'
	// preferred replicas (elect.go).
	FreshCampaigns uint64
	// Transactions decided by the coordinators this node led when they
	// proposed them (txn_admin.go's countTxn): begun, committed, aborted
	// (by the client, a timeout, a fence or an operator) and, of those,
	// timed out; TxnMarkerRetries counts marker writes that failed and
	// are written again by the next sweep.
	TxnBegun, TxnCommitted, TxnAborted, TxnTimedOut uint64
	TxnMarkerRetries                                uint64
}

// Stats returns the counters so far.
func (c *Core) Stats() Stats { return c.stats }

// Receive steps the raft messages of a frame from a peer into their
// groups. A frame that does not decode is dropped whole; a message for a
// partition not hosted here, addressed to another node, or failing the
// sanity checks is dropped alone. Nothing here is an error: the network
// may deliver anything, late or twice. Receive keeps no reference to
// frame: the caller may reuse its buffer once Receive returns.
func (c *Core) Receive(frame []byte) {
	defer c.flush()
	if c.closed {
		return
	}
	c.stats.FramesReceived++
	var rj rejoinFrame
	from, msgs, ok := parseRaftFrame(frame, c.received[:0], &rj)
	c.received = msgs[:0]
	if !ok || from == 0 || NodeID(from) == c.cfg.ID {
		c.stats.FramesDropped++
		clear(msgs)
		return
	}
	c.noteHeard(NodeID(from))
	if rj.incarnation != 0 {
		c.notePeerIncarnation(NodeID(from), rj.incarnation)
	}
	if rj.disk != 0 {
		c.notePeerDisk(NodeID(from), rj.disk)
	}
	var topics topicCache
	for i := range msgs {
		c.receiveMessage(NodeID(from), topics.get(msgs[i].topic), &msgs[i])
	}
	clear(msgs) // keep no reference to the frame
	c.receiveRejoin(NodeID(from), &rj)
	c.receiveTxnFrame(NodeID(from), &rj.txn)
	c.receivePrefixFrame(NodeID(from), &rj.prefix)
}

// receiveMessage steps one raft message into its group.
func (c *Core) receiveMessage(from NodeID, topic string, rm *rawRaftMessage) {
	g := c.routeMessage(topic, rm.partition)
	if g == nil {
		c.stats.MessagesUnknownGroup++
		return
	}
	var m raftpb.Message
	if err := proto.Unmarshal(rm.message, &m); err != nil || !c.saneMessage(g, from, &m) {
		c.stats.MessagesDropped++
		return
	}
	if g.staleReject(&m) {
		c.handOnLostEntries(g, from, &m)
		c.stats.VotesWithheld++
		return
	}
	if !g.voteAllowed(&m) || !g.leaderMessageAllowed(&m) || c.dropForSpace(g, &m) {
		c.stats.VotesWithheld++ // recovering from a lost disk (rejoin.go)
		return
	}
	wasQuiesced := g.quiesced
	c.touch(g)
	if err := g.raw.Step(&m); err != nil {
		c.stats.StepErrors++
		return
	}
	g.quiesced = c.steppedQuiesced(g, wasQuiesced, from, &m)
	switch m.GetType() {
	case raftpb.MsgApp, raftpb.MsgHeartbeat, raftpb.MsgSnap:
		g.leaderContact = c.ticks // a leader's: holdOff counts silence from here
	}
	c.stats.MessagesStepped++
}

// saneMessage checks what raft trusts its peers with, so that a damaged or
// forged message is dropped instead of breaking raft's invariants (raft
// panics on, for instance, a heartbeat committing past its last index).
// Every message a correct peer sends passes.
func (c *Core) saneMessage(g *group, from NodeID, m *raftpb.Message) bool {
	if NodeID(m.GetTo()) != c.cfg.ID || NodeID(m.GetFrom()) != from || !g.isReplica(from) {
		return false
	}
	if g.sm.policy().forwardsProposals {
		// The metadata group forwards followers' proposals and reads to
		// the leader (raft sends both without a term).
		switch m.GetType() {
		case raftpb.MsgProp:
			return m.GetTerm() == 0 && saneProposal(m)
		case raftpb.MsgReadIndex:
			return m.GetTerm() == 0 && len(m.GetEntries()) == 1 && m.GetSnapshot() == nil
		case raftpb.MsgReadIndexResp:
			return m.GetTerm() != 0 && len(m.GetEntries()) == 1 && m.GetSnapshot() == nil
		}
	}
	if m.GetTerm() == 0 {
		return false
	}
	switch m.GetType() {
	case raftpb.MsgApp:
		return saneEntries(g, m)
	case raftpb.MsgHeartbeat:
		// A correct leader sends commit <= the follower's acknowledged
		// match, which was synced before it was acknowledged.
		last, err := g.log.LastIndex()
		return err == nil && m.GetCommit() <= last
	case raftpb.MsgAppResp:
		// A follower acknowledges only entries the leader sent, which
		// the leader wrote or queued to write before sending (queued
		// while a sync is in flight: a hung one holds them there).
		last, err := g.lastQueuedIndex()
		return err == nil && m.GetIndex() <= last && m.GetRejectHint() <= last
	case raftpb.MsgVote, raftpb.MsgVoteResp, raftpb.MsgPreVote, raftpb.MsgPreVoteResp, raftpb.MsgHeartbeatResp,
		raftpb.MsgTimeoutNow: // leadership handed on for a replica that lost its disk (rejoin.go)
		return len(m.GetEntries()) == 0 && m.GetSnapshot() == nil
	case raftpb.MsgSnap:
		return saneSnapshot(g, m)
	default:
		// Proposal and read forwarding and leader transfer are not used
		// between Strand nodes (left out: doc.go, "Receive and message batching").
		return false
	}
}

// forwardedEntriesMax bounds the entries of one forwarded proposal (raft
// forwards each Propose call as one message of one entry).
const forwardedEntriesMax = 16

// saneProposal checks a forwarded metadata proposal: a few normal entries
// (raft panics on an empty one), no configuration change, each within the
// message size bound; the leader assigns index and term itself.
func saneProposal(m *raftpb.Message) bool {
	n := len(m.GetEntries())
	if n == 0 || n > forwardedEntriesMax || m.GetSnapshot() != nil {
		return false
	}
	for _, e := range m.GetEntries() {
		if e.GetType() != raftpb.EntryNormal || len(e.GetData()) > raftMessageBytesMax {
			return false
		}
	}
	return true
}

// saneEntries checks a MsgApp's entries: consecutive indexes after
// m.Index, terms between m.LogTerm and m.Term never going down, and only
// configuration changes of the shapes Strand proposes (the bootstrap's
// AddNode, and moves' ConfChangeV2 of voters and learners: moves.go).
func saneEntries(g *group, m *raftpb.Message) bool {
	if m.GetSnapshot() != nil || m.GetLogTerm() > m.GetTerm() {
		return false
	}
	index, term := m.GetIndex(), m.GetLogTerm()
	for _, e := range m.GetEntries() {
		index++
		if e.GetIndex() != index || e.GetTerm() < term || e.GetTerm() > m.GetTerm() {
			return false
		}
		switch e.GetType() {
		case raftpb.EntryNormal:
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			if !g.sm.saneConfChange(e) { // membership changes, moves, the bootstrap
				return false
			}
		default:
			return false
		}
		term = e.GetTerm()
	}
	return true
}

// Tick advances every group's raft clock by one tick, in order, fails
// requests that waited RequestTimeoutTicks, and runs the registered
// services (services.go).
func (c *Core) Tick() {
	defer c.flush()
	if c.closed {
		return
	}
	c.ticks++
	raftTick := c.ticks%uint64(c.cfg.TicksPerRaftTick) == 0
	if raftTick {
		c.tickServices(true) // services.go
	}
	expire := c.nextWaitExpiry != 0 && c.ticks >= c.nextWaitExpiry
	if expire {
		c.nextWaitExpiry = 0 // recomputed from the waits left
	}
	if raftTick || expire {
		for _, g := range c.groups {
			if raftTick {
				c.raftTickGroup(g)
			}
			if expire {
				c.expireWaits(g)
			}
		}
	}
	if len(c.outbox) > 0 {
		c.sendFrames() // quiesce heartbeats
	}
	c.tickServices(false)
}

// noteWait keeps nextWaitExpiry at most a new wait's deadline.
func (c *Core) noteWait(deadline uint64) {
	if c.nextWaitExpiry == 0 || deadline < c.nextWaitExpiry {
		c.nextWaitExpiry = deadline
	}
}

// expireWaits fails the waits of g whose deadline passed, and notes the
// deadline of the first left. Deadlines grow in queue order (every wait
// gets now + RequestTimeoutTicks), so the expired waits are a prefix of
// each queue and the first wait left has the queue's earliest deadline.
// Tick calls it for every group only once a deadline may have passed
// (nextWaitExpiry): a scan of 2,000 idle groups each 10 ms tick was ~1% of
// a core per node.
func (c *Core) expireWaits(g *group) {
	if len(g.produces) == 0 && len(g.reads) == 0 {
		return
	}
	defer func() {
		if len(g.produces) > 0 {
			c.noteWait(g.produces[0].deadline)
		}
		if len(g.reads) > 0 {
			c.noteWait(g.reads[0].deadline)
		}
	}()
	for _, w := range g.produces {
		if w.deadline > c.ticks {
			break
		}
		if !w.finished {
			c.finishProduce(g, w, ProduceResult{Err: ErrTimeout, BaseOffset: -1})
		}
	}
	for _, r := range g.reads {
		if r.deadline > c.ticks {
			break
		}
		if !r.finished {
			c.failRead(g, r, ErrTimeout, 0)
		}
	}
	g.trimWaits()
}

// Status returns every hosted replica's state, sorted by topic and
// partition. It is the simulator's seam (simnet's checks read it after
// events); the runtime reads AdminView instead.
func (c *Core) Status() []GroupStatus {
	return c.AppendStatus(make([]GroupStatus, 0, len(c.partitionGroups())))
}

// StatusSeq returns a counter that moves whenever what AppendStatus or
// MetadataStatus report may have changed, so a caller that looks after
// every Process (the simulator) reads them again only then. It moves in
// every Process round that took a Ready or wrote (raft's term, leader,
// role and commit change only with a Ready, which the ready marks never
// miss: ready.go; applied entries and snapshots arrive in one), when the
// hosted set changes, a group's raft node or engine is replaced, and when
// a replica's rejoin phase moves (on ticks and answers, without a Ready).
// A new site that changes a status outside those must call
// statusChanged (or, for one replica's alone, groupStatusChanged, which
// lets RefreshStatus read only that replica again).
func (c *Core) StatusSeq() uint64 { return c.statusSeq }

// statusChanged moves StatusSeq for a change that may move any
// replica's status (RefreshStatus reads them all again).
func (c *Core) statusChanged() {
	c.statusSeq++
	c.statusAllSeq = c.statusSeq
}

// groupStatusChanged moves StatusSeq for a change of g's status alone: a
// Ready taken or appends written for g (processRound, writeGroup).
func (c *Core) groupStatusChanged(g *group) {
	c.statusSeq++
	g.statusSeq = c.statusSeq
}

// AppendStatus appends Status to dst and returns it, so a caller that looks
// after every event (the simulator, its only caller) reuses one buffer.
func (c *Core) AppendStatus(dst []GroupStatus) []GroupStatus {
	groups := c.partitionGroups()
	out := slices.Grow(dst, len(groups))
	for _, g := range groups {
		// Filled in place: the simulator asks after every Ready, and
		// copying each status twice on the way was 1% of its CPU.
		out = append(out, GroupStatus{})
		c.fillStatus(&out[len(out)-1], g)
	}
	return out
}

// RefreshStatus brings statuses, what AppendStatus(nil) returned when
// StatusSeq was since, up to date in place and returns it: only the
// replicas whose status may have changed since are read again, or all of
// them after a change that may move any (the hosted set, a replaced raft
// node or engine, a rejoin phase, a full disk: statusChanged). Reading
// every replica whenever one had a Ready was 2% of the simulator's CPU.
func (c *Core) RefreshStatus(statuses []GroupStatus, since uint64) []GroupStatus {
	groups := c.partitionGroups()
	if since < c.statusAllSeq || len(statuses) != len(groups) {
		return c.AppendStatus(statuses[:0])
	}
	for i, g := range groups {
		if statuses[i].TopicPartition != g.tp {
			return c.AppendStatus(statuses[:0])
		}
		if g.statusSeq > since {
			statuses[i] = GroupStatus{}
			c.fillStatus(&statuses[i], g)
		}
	}
	return statuses
}

// fillStatus sets *st (a zero status) to g's.
func (c *Core) fillStatus(st *GroupStatus, g *group) {
	c.fillGroupStatus(st, g)
	st.HighWatermark = g.part.HighWatermark()
	st.LogStartOffset = g.part.LogStartOffset()
	st.Digest, st.TailDigest = g.part.Digests() // g.sm.digest(), with the tail digest, once per change
}

// LaggingReplicas counts the followers of the partitions this node leads
// whose log ends more than entriesMax entries before the leader's, whose
// progress raft is still probing, or whose node is down (liveness.go):
// replicas that could not take a share of the next commit without catching
// up first. It is 0 when every follower is in step; a restarted node stops
// counting once it has caught up.
func (c *Core) LaggingReplicas(entriesMax uint64) int {
	lagging := 0
	for _, g := range c.partitionGroups() {
		if g.raw.BasicStatus().RaftState != raft.StateLeader {
			continue
		}
		last, err := g.log.LastIndex()
		if err != nil {
			continue // a failing log shows up elsewhere; nothing to compare against
		}
		for _, f := range c.followers(g) {
			if f.Lagging(last, entriesMax) {
				lagging++
			}
		}
	}
	return lagging
}

// groupStatus is a group's raft state.
func (c *Core) groupStatus(g *group) (st GroupStatus) {
	c.fillGroupStatus(&st, g)
	return st
}

// fillGroupStatus sets the raft state fields of *st (a zero status) to g's.
func (c *Core) fillGroupStatus(st *GroupStatus, g *group) {
	bs := g.raw.BasicStatus()
	st.TopicPartition = g.tp
	st.Term = bs.GetTerm()
	st.Leader = NodeID(bs.Lead)
	st.IsLeader = bs.RaftState == raft.StateLeader
	st.CommitIndex = bs.GetCommit()
	st.AppliedIndex = g.appliedRaft
	st.TopicID = g.topicID
	st.Rejoining = g.rejoin != nil && g.rejoin.phase != rejoinDone
}

// Close fails every waiting request (proposed produces with
// ErrStoppedWaiting, the rest with ErrStopped) and closes the logs
// without syncing (what is not synced is lost, as in a crash). The Core is
// unusable afterwards.
func (c *Core) Close() error {
	if c.closed {
		return nil
	}
	defer c.flush()
	c.closed = true
	c.stopColdReads()   // fetch_cold.go
	c.stopAuthConfirm() // auth.go
	var first error
	for _, g := range c.groups {
		for _, w := range g.produces {
			if !w.finished {
				c.finishProduce(g, w, ProduceResult{Err: ErrStoppedWaiting, BaseOffset: -1})
			}
		}
		for _, r := range g.reads {
			if !r.finished {
				c.failRead(g, r, ErrStopped, 0)
			}
		}
		c.closePrefix(g)
		if err := g.log.Close(); err != nil && first == nil {
			first = err
		}
	}
	if c.wal != nil {
		if err := c.wal.Close(); err != nil && first == nil {
			first = err
		}
	}
	for _, w := range c.metaQueue {
		if !w.finished {
			c.finishMeta(w, metadata.Result{}, ErrStopped)
		}
	}
	for _, s := range c.sessions {
		if !s.finished {
			c.finishSession(s)
		}
	}
	return first
}
