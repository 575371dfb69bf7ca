package node

import (
	"encoding/binary"
	"log/slog"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/metadata"
)

// Partition moves (R28). The metadata group records a move (current
// replicas, target); every node of current ∪ target hosts the partition,
// and the partition's leader drives its raft configuration to the target
// in steps it reads off raft's own configuration, so a new leader after any
// crash continues from what it sees:
//
//  1. target nodes not in the configuration join as learners
//     (ConfChangeV2 AddLearnerNode): they catch up without voting, through
//     the catch-up throttle like any lagging follower;
//  2. once every learner of the target has a match index at the leader's
//     commit and replicates, one joint change promotes them and removes the
//     voters outside the target: every commit needs a majority of the old
//     voters and of the new, all caught up, so there is never a window with
//     fewer than a majority of caught-up voters;
//  3. the joint configuration is left explicitly: a leader outside the
//     target first hands leadership to the most caught-up incoming voter,
//     which proposes the leave (an election after StepDownOnRemoval would
//     cost an election timeout of unavailability);
//  4. once the final configuration (voters = target, no learners) is
//     applied, the leader proposes CompletePartitionMove to the metadata
//     group; the nodes left outside then stop and delete their replica in
//     reconcile.
//
// A leader steps moves only while its metadata looks current
// (moveMetadataCurrent), and a leader of a partition with no move in
// progress removes any learner outside its replicas (removeStrayLearners):
// a step taken on stale metadata for a move since cancelled and completed
// would otherwise leave one for good.
//
// Rejected: removing old voters one by one with simple changes (each step
// changes the majority; joint consensus is one step whatever the overlap);
// a move coordinator in the metadata group (it would need every partition's
// raft progress; the leader has it).

// moveCheckTicks is how often (in Core ticks) a leader looks at its moves;
// moveRetryTicks how long it waits for a proposed step before proposing it
// again (raft drops a conf change while another is pending).
const (
	moveCheckTicks = 5
	moveRetryTicks = 100
)

// moveState is a leader's progress on its group's move.
type moveState struct {
	// proposedTick and proposedConf: the tick a conf change was last
	// proposed, and the configuration it was computed from; a new step
	// waits until the configuration changed or moveRetryTicks passed.
	proposedTick uint64
	proposedConf *raftpb.ConfState
	// completing: a CompletePartitionMove is in flight.
	completing bool
	// completeAt, completeTerm: the index after the leader's last one (and
	// its term) when it first saw the target configuration applied, the
	// empty entry it proposed then (proposeAfterLeave); it completes only
	// once it applied that far in the same term, so no conf change already
	// in its log can change the configuration after the completion, and a
	// majority of the target knows durably that the configuration
	// committed.
	completeAt, completeTerm uint64
}

// setPlacement sets g's replica sets from the metadata (spec): the nodes
// it talks to are current ∪ target.
func (g *group) setPlacement(spec PartitionSpec) {
	g.current = sortedIDs(spec.Replicas)
	g.target = sortedIDs(spec.Target)
	g.targetOrder = slices.Clone(spec.Target)
	g.boot = sortedIDs(spec.Bootstrap)
	g.leaving = sortedIDs(spec.Leaving)
	all := append(append(slices.Clone(spec.Replicas), spec.Target...), spec.Leaving...)
	g.replicas = slices.Compact(sortedIDs(all))
}

// spec is g's placement as a PartitionSpec, to reopen it.
func (g *group) spec() PartitionSpec {
	return PartitionSpec{TopicPartition: g.tp, Replicas: g.current, Target: g.target, Bootstrap: g.boot, Leaving: g.leaving}
}

// bootSet is the set g's empty log bootstraps over.
func (g *group) bootSet() []NodeID {
	if len(g.boot) > 0 {
		return g.boot
	}
	return g.replicas
}

// sortedIDs is a sorted copy of ids (nil for none).
func sortedIDs(ids []NodeID) []NodeID {
	if len(ids) == 0 {
		return nil
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// refSpec is the PartitionSpec of a metadata partition reference.
func refSpec(ref metadata.PartitionRef) PartitionSpec {
	spec := PartitionSpec{TopicPartition: TopicPartition{Topic: ref.Topic, Partition: ref.Partition}}
	for _, r := range ref.Replicas {
		spec.Replicas = append(spec.Replicas, NodeID(r))
	}
	for _, r := range ref.Target {
		spec.Target = append(spec.Target, NodeID(r))
	}
	for _, r := range ref.Bootstrap {
		spec.Bootstrap = append(spec.Bootstrap, NodeID(r))
	}
	for _, r := range ref.Leaving {
		spec.Leaving = append(spec.Leaving, NodeID(r))
	}
	return spec
}

// moveTick drives the moves of the partitions this node leads, and
// removes the learners a move left behind, only while this node's
// metadata is current (moveMetadataCurrent).
func (c *Core) moveTick() {
	if c.meta == nil || c.ticks%moveCheckTicks != 0 || !c.moveMetadataCurrent() {
		return
	}
	for _, g := range c.partitionGroups() {
		if g.raw == nil {
			continue
		}
		if _, _, leading := g.leadership(); !leading {
			continue
		}
		if len(g.target) == 0 {
			c.removeStrayLearners(g)
			continue
		}
		c.stepMove(g)
	}
}

// moveMetadataCurrent reports whether this node's applied metadata may
// drive a move: its metadata replica is not rebuilding, applied all it
// knows committed, and knows a metadata leader. A restarted node replays
// its metadata log first, and a move it shows in progress may have been
// cancelled and completed since: a partition leader stepping that move
// added a learner the metadata no longer places anywhere (simulator seed
// 52 on issue 21's producer branch: node 1 restarted with its metadata at
// index 51, no metadata leader known, won the lead of sim/5 whose move to
// [1 3 5] had been cancelled and completed at [1 2 5], and added node 3 as
// a learner that stayed). Not a proof of freshness (that needs a
// ReadIndex); removeStrayLearners repairs what slips through.
func (c *Core) moveMetadataCurrent() bool {
	g := c.meta
	st := g.raw.BasicStatus()
	return (g.rejoin == nil || g.rejoin.phase == rejoinDone) && g.appliedRaft >= st.GetCommit() && st.Lead != 0
}

// removeStrayLearners, on the leader of g with no move in progress,
// removes the learners outside its replicas: a leader on stale metadata
// may have added one for a move cancelled and completed meanwhile, and
// nothing else would ever remove it (the partition would never show the
// replica set a cancel returns it to: voters = replicas, no learners).
// Removing a learner changes no majority; a joint configuration is left
// alone (only a move enters one, and its leader leaves it).
//
// It reads the configuration from g.confState, what raft's is (every
// change goes through ApplyConfChange, whose answer it keeps, or comes
// from the snapshot or checkpoint raft restored): raft's Status would copy
// every follower's progress on each check, 1% of a simulated run's CPU.
func (c *Core) removeStrayLearners(g *group) {
	var learners []uint64
	var joint bool
	if cs := g.confState; cs != nil {
		learners, joint = cs.GetLearners(), len(cs.GetVotersOutgoing()) > 0
	} else {
		cfg := g.raw.Status().Config
		joint = len(cfg.Voters[1]) > 0
		for id := range cfg.Learners {
			learners = append(learners, id)
		}
	}
	if joint || len(learners) == 0 || !c.moveMayPropose(g) {
		return
	}
	var stray []uint64
	for _, id := range learners {
		if !slices.Contains(g.current, NodeID(id)) {
			stray = append(stray, id)
		}
	}
	if len(stray) == 0 {
		return
	}
	slices.Sort(stray) // map order must not reach the log
	cc := &raftpb.ConfChangeV2{}
	for _, id := range stray {
		cc.Changes = append(cc.Changes, confChangeSingle(raftpb.ConfChangeRemoveNode, NodeID(id)))
	}
	c.proposeMoveStep(g, cc, "removing learners outside the replicas")
}

// stepMove takes the next step of g's move, as its configuration says.
func (c *Core) stepMove(g *group) {
	st := g.raw.Status()
	cfg := st.Config
	incoming, outgoing := cfg.Voters[0], cfg.Voters[1]
	switch {
	case len(outgoing) > 0:
		g.move.completeAt = 0
		c.moveInJoint(g, st)
	case sameIDs(incoming, g.target) && len(cfg.Learners) == 0 && len(cfg.LearnersNext) == 0:
		c.completeMove(g, st)
	default:
		g.move.completeAt = 0
		if !c.moveMayPropose(g) {
			return
		}
		var missing []NodeID
		for _, id := range g.target {
			_, voter := incoming[uint64(id)]
			_, learner := cfg.Learners[uint64(id)]
			if !voter && !learner {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			c.proposeMoveStep(g, learnersChange(missing), "adding learners")
			return
		}
		if !c.learnersCaughtUp(g, st) {
			return
		}
		c.proposeMoveStep(g, jointChange(g.target, incoming, cfg.Learners), "entering joint configuration")
	}
}

// moveInJoint handles a joint configuration. The joint change asks for an
// explicit leave, so a leader outside the target first hands the lead to
// the most caught-up incoming voter (which then leaves the joint config),
// and a leader inside it proposes the leave.
func (c *Core) moveInJoint(g *group, st raft.Status) {
	if _, in := st.Config.Voters[0][uint64(c.cfg.ID)]; !in {
		if to := bestVoter(st, c.cfg.ID); to != 0 && st.LeadTransferee == 0 {
			g.logs.log(slog.LevelInfo, "move: leader leaves the partition; handing leadership on",
				slog.Uint64("to", uint64(to)))
			c.markReady(g)
			g.raw.TransferLeader(uint64(to))
		}
		return
	}
	if !c.incomingHoldPrefixes(g) {
		return
	}
	if c.moveMayPropose(g) {
		c.proposeMoveStep(g, &raftpb.ConfChangeV2{}, "leaving joint configuration")
	}
}

// incomingHoldPrefixes tells whether a majority of g's incoming voters
// holds in their compacted prefixes every record of the log that some
// voter may hold in no raft log (compaction_held.go): the raft logs were
// trimmed up to what the outgoing majority held (its reported ends), and
// up to this leader's own first raft-log offset; a voter added by a raft
// snapshot holds nothing below its log until it installs a peer's prefix.
// Leaving the joint configuration before that would leave those records
// on fewer than a majority of the new voters, and removed replicas delete
// theirs (the simulator's seed 42 on the clientlib reconnect branch: the
// move [2 3 5]→[2 4 5] left the joint configuration 4 ms after node 4,
// snapshot-installed with its raft log from offset 54 and no prefix, took
// the lead; node 3 then deleted its replica and node 5 alone held offsets
// 0-54). Offsets below the log start need no holder. Always true for a
// partition never compacted.
func (c *Core) incomingHoldPrefixes(g *group) bool {
	out := g.confState.GetVotersOutgoing()
	if len(out) == 0 || g.part == nil || g.part.Compaction().Decision.Generation == 0 {
		return true
	}
	need := c.majorityEnd(g, out)
	if first, ok := c.firstInRaftLog(g); ok {
		need = max(need, first)
	}
	in := c.majorityEnd(g, g.confState.GetVoters())
	if max(in, g.part.LogStartOffset()) >= need {
		return true
	}
	if c.ticks%moveRetryTicks == 0 {
		g.logs.log(slog.LevelInfo, "move: the incoming voters' compacted prefixes hold less than the raft logs dropped; leaving the joint configuration waits for them to install a peer's",
			slog.Int64("incoming_end", in), slog.Int64("needed_end", need))
	}
	return false
}

// bestVoter is the incoming voter other than self with the highest match
// that replicates (0: none).
func bestVoter(st raft.Status, self NodeID) NodeID {
	var best NodeID
	var match uint64
	ids := make([]uint64, 0, len(st.Config.Voters[0]))
	for id := range st.Config.Voters[0] {
		ids = append(ids, id)
	}
	slices.Sort(ids) // map order must not pick the transferee
	for _, id := range ids {
		pr, ok := st.Progress[id]
		if NodeID(id) == self || !ok || pr.State != tracker.StateReplicate {
			continue
		}
		if best == 0 || pr.Match > match {
			best, match = NodeID(id), pr.Match
		}
	}
	return best
}

// learnersCaughtUp tells whether every target node that is not a voter
// replicates with a match index at the leader's commit.
func (c *Core) learnersCaughtUp(g *group, st raft.Status) bool {
	for _, id := range g.target {
		if _, voter := st.Config.Voters[0][uint64(id)]; voter {
			continue
		}
		pr, ok := st.Progress[uint64(id)]
		if !ok || pr.State != tracker.StateReplicate || pr.Match < st.GetCommit() {
			return false
		}
	}
	return true
}

// moveMayPropose tells whether a new step may be proposed: the last one's
// configuration was applied, or it had moveRetryTicks to be.
func (c *Core) moveMayPropose(g *group) bool {
	m := &g.move
	return m.proposedConf != g.confState || m.proposedTick == 0 || c.ticks >= m.proposedTick+moveRetryTicks
}

// proposeMoveStep proposes one configuration change of g's move.
func (c *Core) proposeMoveStep(g *group, cc *raftpb.ConfChangeV2, what string) {
	g.move.proposedTick, g.move.proposedConf = c.ticks, g.confState
	c.markReady(g)
	if err := g.raw.ProposeConfChange(cc); err != nil {
		g.logs.log(slog.LevelWarn, "move: conf change not proposed", slog.String("step", what), slog.Any("err", err))
		return
	}
	c.stats.MoveSteps++
	g.logs.log(slog.LevelInfo, "move: "+what, slog.Any("target", g.target))
}

// learnersChange adds ids as learners.
func learnersChange(ids []NodeID) *raftpb.ConfChangeV2 {
	cc := &raftpb.ConfChangeV2{}
	for _, id := range ids {
		cc.Changes = append(cc.Changes, confChangeSingle(raftpb.ConfChangeAddLearnerNode, id))
	}
	return cc
}

// jointChange promotes the target's learners and removes every voter and
// learner outside the target, in one joint change left explicitly
// (moveInJoint), so a leader outside the target can hand the lead on first.
func jointChange(target []NodeID, voters, learners map[uint64]struct{}) *raftpb.ConfChangeV2 {
	cc := &raftpb.ConfChangeV2{Transition: raftpb.ConfChangeTransitionJointExplicit.Enum()}
	for _, id := range target {
		if _, ok := voters[uint64(id)]; !ok {
			cc.Changes = append(cc.Changes, confChangeSingle(raftpb.ConfChangeAddNode, id))
		}
	}
	var gone []uint64
	for id := range voters {
		gone = append(gone, id)
	}
	for id := range learners {
		gone = append(gone, id)
	}
	slices.Sort(gone) // map order must not reach the log
	for _, id := range gone {
		if !slices.Contains(target, NodeID(id)) {
			cc.Changes = append(cc.Changes, confChangeSingle(raftpb.ConfChangeRemoveNode, NodeID(id)))
		}
	}
	return cc
}

func confChangeSingle(t raftpb.ConfChangeType, id NodeID) *raftpb.ConfChangeSingle {
	return &raftpb.ConfChangeSingle{Type: t.Enum(), NodeId: ptr(uint64(id))}
}

// sameIDs tells whether the voter set holds exactly ids.
func sameIDs(voters map[uint64]struct{}, ids []NodeID) bool {
	if len(voters) != len(ids) {
		return false
	}
	for _, id := range ids {
		if _, ok := voters[uint64(id)]; !ok {
			return false
		}
	}
	return true
}

// completeMove proposes CompletePartitionMove once g's applied
// configuration is the target (one proposal in flight) and stays so: the
// leader first applies every entry its log held when it saw it, and has no
// conf change of its own pending, so a conf change proposed before (an
// AddLearnerNode of a move since cancelled) cannot land after the
// completion and leave a member the metadata no longer hosts (seed 4 of
// TestSimMoves with cancels did: a learner outside every replica set).
func (c *Core) completeMove(g *group, st raft.Status) {
	m := &g.move
	if m.completing || m.proposedConf == g.confState && m.proposedTick != 0 && c.ticks < m.proposedTick+moveRetryTicks {
		return
	}
	last, err := g.log.LastIndex()
	if err != nil {
		return
	}
	if pr, ok := st.Progress[uint64(c.cfg.ID)]; ok && pr.Next > 0 {
		last = max(last, pr.Next-1)
	}
	if m.completeAt == 0 || m.completeTerm != st.GetTerm() {
		m.completeAt, m.completeTerm = last+1, st.GetTerm()
		c.proposeAfterLeave(g)
		return
	}
	if last < m.completeAt { // the empty entry was dropped (a leadership transfer): again
		c.proposeAfterLeave(g)
		return
	}
	if g.appliedRaft < m.completeAt {
		return
	}
	if g.pipe.durableCommit < m.completeAt {
		// The completion lets the leavers delete their replicas, so this
		// leader must first know durably that the configuration without
		// them committed: restarted on a commit index short of it, it
		// would be back in the joint configuration, needing the deleted
		// leavers' votes (simulator seed 59: the leader restarted at
		// commit 10 with the leave at 11, one new replica wiped, and the
		// partition never elected again). A commit-only hard state is
		// written without a sync, so one is asked for here.
		if g.pipe.syncing == 0 && len(g.pipe.appends) == 0 && g.log.Dirty() {
			c.startSync(g)
		}
		return
	}
	target := make([]uint64, len(g.target))
	for i, id := range g.target {
		target[i] = uint64(id)
	}
	data, err := metadata.EncodeCompletePartitionMove(g.tp.Topic, g.topicID, g.tp.Partition, target)
	if err != nil {
		panic("node: encode complete move: " + err.Error()) // names were validated by the metadata group
	}
	g.move.completing = true
	c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(res metadata.Result, err error) {
		g.move.completing = false
		if err == nil && res.Err == nil {
			g.logs.log(slog.LevelInfo, "move: completed", slog.Any("replicas", target))
		}
	})
}

// proposeAfterLeave proposes an empty entry after the configuration that
// completes g's move, which completeMove waits to see committed (at
// completeAt). The completion lets the leavers delete their replicas, so
// a majority of the new configuration must know durably that it
// committed, not only this leader: a follower that acknowledged the leave
// but never heard it committed stays in the joint configuration, needing
// the leavers' votes, and when the leader is then lost for good the
// survivors, a majority of the new configuration, never elect (simulator
// seed 22 of the standard sample: node 5 restarted with the leave of
// [1 2 4] -> [1 2 5] in its log and commit short of it, leader 1 dead, node
// 4 decommissioned; partitions 1 and 3 never had a leader again). Every
// follower that acknowledges the empty entry got it with a commit index at
// or past the leave (the leader applied the leave before proposing it)
// and persisted that commit with it before acknowledging, so once it
// commits, a majority of the new configuration restarts past the leave.
func (c *Core) proposeAfterLeave(g *group) {
	c.markReady(g)
	if err := g.raw.Propose(nil); err != nil {
		g.logs.log(slog.LevelDebug, "move: entry after the leave not proposed", slog.Any("err", err))
	}
}

// MoveProgress is how far one replica a move adds has caught up.
type MoveProgress struct {
	Node       NodeID
	MatchIndex uint64
	LastIndex  uint64
	Voter      bool
}

// moveProgress is, on g's leader, the progress of each target node not in
// the metadata's replica set, in target order.
func (c *Core) moveProgress(g *group) []MoveProgress {
	if len(g.target) == 0 {
		return nil
	}
	st := g.raw.Status()
	last, err := g.log.LastIndex()
	if err != nil {
		last = st.GetCommit()
	}
	last = max(last, st.GetCommit())
	var out []MoveProgress
	for _, id := range g.target {
		if slices.Contains(g.current, id) {
			continue
		}
		p := MoveProgress{Node: id, LastIndex: last}
		if pr, ok := st.Progress[uint64(id)]; ok {
			p.MatchIndex = pr.Match
			_, p.Voter = st.Config.Voters[0][uint64(id)]
		}
		out = append(out, p)
	}
	return out
}

// deletedBefore reports whether dir holds a tombstone this node must
// respect: one it cannot read now, or one written at a metadata version at
// or above the applied one (a replay from an older checkpoint still places
// the replica here). A tombstone a crash cut short is not respected: its
// version unknown, the replica is rebuilt by probing (below), and a replay
// that reaches the delete stops it again. A replica a newer move placed
// here again starts afresh: it once voted in this group, so it votes only
// in terms above the highest term it may have voted in. The tombstone
// carries that floor (markDeleted), so the replica needs no peer to learn
// it (it starts catching up, below). Its entries need no rebuilding: every
// entry committed while it was away, or with its help before, is held by
// a majority of the configuration that adds it back, and it catches up as
// a learner before it votes in a commit. Without a floor (an older
// tombstone, or one of a replica that was itself still recovering) it
// recovers as a wiped replica does, probing its peers. Its rejoin file is
// durable before the tombstone goes. (Rejected: always probing. With a
// second replica of the group rebuilding at the same time, the two wait
// for each other's trusted answer and the group never elects a leader
// again: the moves simulator's seed 5.)
//
// It does not vote at once: its fresh log starts with the bootstrap
// configuration, which names it a voter when it was one of the bootstrap
// set, and until its peers' entries configure it out of that
// configuration it would campaign and vote in it. Two such nodes moved
// back together elected each other on a log of three entries and wrote
// over committed ones (the moves simulator's seed 16 on issue 21's
// branch: two entries of term 6 at index 4). So it starts catching up
// with its floor and the until untilOutOfBootstrap: done once an applied
// configuration past the bootstrap entries does not name it a voter (its
// removal or its re-adding as a learner applied; for a node outside the
// bootstrap set, the first entry past them).
func (c *Core) deletedBefore(dir string) bool {
	if !deletedHere(c.cfg, dir) {
		return false
	}
	data, err := readFile(c.cfg.Disk, dir+"/"+deletedName)
	if err != nil {
		return true // unreadable now: the next reconcile asks again
	}
	// A tombstone of another length is one a crash cut (created, its
	// bytes never written or synced): its version and floor are unknown,
	// and it is read as an old tombstone without a floor (probing). Read
	// as "deleted after the metadata this node has", it kept the replica
	// from ever being placed here again, and a move back never ended.
	torn := len(data) != 8 && len(data) != 16
	if !torn && binary.LittleEndian.Uint64(data) >= c.meta.meta.Version() {
		return true
	}
	if torn {
		c.log.log(slog.LevelWarn, "a replica's tombstone was cut short by a crash: the replica placed here again is rebuilt from its peers",
			slog.String("dir", dir), slog.Int("bytes", len(data)))
	}
	r := &rejoin{phase: rejoinProbing}
	if len(data) == 16 {
		if floorPlusOne := binary.LittleEndian.Uint64(data[8:]); floorPlusOne > 0 {
			r = &rejoin{phase: rejoinCatchingUp, floor: floorPlusOne - 1, until: untilOutOfBootstrap}
		}
	}
	if !c.bugWipedNodeVotes() {
		if err := c.saveRejoin(dir, r); err != nil {
			return true
		}
	}
	if err := c.cfg.Disk.Remove(dir + "/" + deletedName); err != nil {
		return true
	}
	return c.cfg.Disk.SyncDir(dir) != nil
}

// saneConfChangeV2 checks a ConfChangeV2 entry's data has the shape moves
// propose: voters and learners added or removed by nonzero id, or an empty
// change (leave a joint configuration).
func saneConfChangeV2(data []byte) bool {
	var cc raftpb.ConfChangeV2
	return proto.Unmarshal(data, &cc) == nil && len(cc.GetChanges()) <= 2*metadata.MoveReplicasMax && saneConfChanges(cc.GetChanges())
}

// saneConfState checks a snapshot's configuration: some voters, every id
// nonzero. Which ids depends on the moves the log went through, so they
// are not compared with the metadata's replicas.
func saneConfState(cs *raftpb.ConfState) bool {
	if len(cs.GetVoters()) == 0 {
		return false
	}
	for _, ids := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		if slices.Contains(ids, 0) {
			return false
		}
	}
	return true
}

// ReplicaConfig is a hosted replica's raft configuration as applied.
type ReplicaConfig struct {
	Voters, Learners []NodeID
	// VotersOutgoing is the old voters while in a joint configuration.
	VotersOutgoing []NodeID
}

// PartitionConfig returns the applied raft configuration of this node's
// replica of tp, false when it hosts none. It is the simulator's seam:
// simnet's move checks read it; nothing in a real process does.
func (c *Core) PartitionConfig(tp TopicPartition) (ReplicaConfig, bool) {
	g := c.byTP[tp]
	if g == nil || g.confState == nil {
		return ReplicaConfig{}, false
	}
	cs := g.confState
	conv := func(ids []uint64) []NodeID {
		out := make([]NodeID, len(ids))
		for i, id := range ids {
			out[i] = NodeID(id)
		}
		slices.Sort(out)
		return out
	}
	return ReplicaConfig{Voters: conv(cs.GetVoters()), Learners: conv(cs.GetLearners()),
		VotersOutgoing: conv(cs.GetVotersOutgoing())}, true
}

// confAfter is cs after the configuration change entry e (EntryConfChange
// or EntryConfChangeV2), computed as raft applies it: the compactor tracks
// the configuration as of its snapshot's index, which a move may have
// changed since (a snapshot labelled with a later configuration would make
// its installer apply the same change twice).
func confAfter(cs *raftpb.ConfState, e *raftpb.Entry) (*raftpb.ConfState, error) {
	var cc raftpb.ConfChangeI
	switch e.GetType() {
	case raftpb.EntryConfChange:
		var v1 raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &v1); err != nil {
			return nil, err
		}
		cc = &v1
	case raftpb.EntryConfChangeV2:
		var v2 raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &v2); err != nil {
			return nil, err
		}
		cc = &v2
	default:
		return cs, nil
	}
	cfg, trk, err := confchange.Restore(confchange.Changer{Tracker: tracker.MakeProgressTracker(1, 0), LastIndex: e.GetIndex()}, cs)
	if err != nil {
		return nil, err
	}
	chg := confchange.Changer{Tracker: tracker.MakeProgressTracker(1, 0), LastIndex: e.GetIndex()}
	chg.Tracker.Config, chg.Tracker.Progress = cfg, trk
	v2 := cc.AsV2()
	switch autoLeave, joint := v2.EnterJoint(); {
	case v2.LeaveJoint():
		cfg, trk, err = chg.LeaveJoint()
	case joint:
		cfg, trk, err = chg.EnterJoint(autoLeave, v2.GetChanges()...)
	default:
		cfg, trk, err = chg.Simple(v2.GetChanges()...)
	}
	if err != nil {
		return nil, err
	}
	t := tracker.MakeProgressTracker(1, 0)
	t.Config, t.Progress = cfg, trk
	return t.ConfState(), nil
}

// snapshotForLearner makes a snapshot sent to a node a move added after
// the snapshot's index name that node as a learner: raft refuses to
// install a snapshot whose configuration lacks the installer, and a Strand
// snapshot is a compaction point (nothing newer can be made without
// shipping the batches above it), so a learner added to a compacted log —
// or a voter it became that lost its disk since — would be sent the same
// snapshot forever. A node absent from the configuration at the snapshot's
// index entered it through an AddLearnerNode after it (moves add every
// node as a learner first), so the installer then applies that entry (a
// no-op for a learner) and every later change exactly as the others did.
// Only a node absent from the snapshot's configuration and present in the
// leader's now is added; any other message is returned as is.
func snapshotForLearner(g *group, m *raftpb.Message) *raftpb.Message {
	to := m.GetTo()
	cs := m.GetSnapshot().GetMetadata().GetConfState()
	if cs == nil || slices.Contains(cs.GetVoters(), to) || slices.Contains(cs.GetLearners(), to) ||
		slices.Contains(cs.GetVotersOutgoing(), to) || slices.Contains(cs.GetLearnersNext(), to) {
		return m
	}
	now := g.confState
	if now == nil || !slices.Contains(now.GetLearners(), to) && !slices.Contains(now.GetVoters(), to) &&
		!slices.Contains(now.GetVotersOutgoing(), to) {
		return m
	}
	out := proto.Clone(m).(*raftpb.Message)
	ocs := out.GetSnapshot().GetMetadata().GetConfState()
	ocs.Learners = append(ocs.Learners, to)
	slices.Sort(ocs.Learners)
	return out
}
