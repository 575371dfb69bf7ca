package node

import (
	"errors"
	"log/slog"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// Membership of the metadata group (doc.go, "The metadata group").
//
// The metadata group starts over Config.Nodes, bootstrapped as voters. A
// node joins by being registered (NodeAdmin ADD, sent to any member by
// `strand node add` or `strand serve --join`) and then opening with
// Config.Join: its metadata log starts empty and is never bootstrapped.
// The metadata leader alone changes the group's raft configuration, one
// single-change ConfChangeV2 at a time, on Tick: a registered active node
// outside the configuration is added as a learner; a learner whose match
// reached the commit index is promoted while the group has fewer than
// metaVotersMax active voters (the rest stay observers, as KRaft brokers);
// a decommissioning voter is demoted once enough active voters (at least
// three) remain; a removed node leaves. A change that concerns the leader itself first
// transfers the leadership. The configuration lives in the metadata raft
// log (never compacted) and its checkpoints, so every restart comes back
// in the same membership.

// metaVotersMax is the most voters the leader promotes learners up to.
const metaVotersMax = 5

// joinFile marks a node that joined a running cluster: its metadata log is
// never bootstrapped, even when found empty after a crash (a bootstrap
// would make it the single voter of a cluster of its own).
const joinFile = metaDir + "/joined"

// joining reports whether this node joins (or joined) a running cluster,
// making Config.Join durable first.
func (c *Core) joining() (bool, error) {
	// Listed first: Disk.Open creates what it opens.
	names, err := c.cfg.Disk.List(metaDir)
	if err != nil {
		return false, err
	}
	if slices.Contains(names, joinFile[len(metaDir)+1:]) {
		return true, nil // written before the metadata log, so never torn away from it
	}
	if !c.cfg.Join {
		return false, nil
	}
	if err := writeFile(c.cfg.Disk, joinFile, []byte("joined\n")); err != nil {
		return false, err
	}
	return true, c.cfg.Disk.SyncDir(metaDir)
}

// refreshMetaReplicas sets the metadata group's peers (whom it sends to
// and takes messages from): Config.Nodes and every member of its raft
// configuration, voters and learners, both sides of a joint one.
func (c *Core) refreshMetaReplicas(cs *raftpb.ConfState) {
	var ids []NodeID
	for _, p := range c.cfg.Nodes {
		ids = append(ids, p.ID)
	}
	for _, set := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		for _, id := range set {
			ids = append(ids, NodeID(id))
		}
	}
	slices.Sort(ids)
	c.meta.replicas = slices.Compact(ids)
}

// metaConfApplied runs after the metadata group applied a configuration
// change: the peers follow it, the leader may take the next step at once.
func (c *Core) metaConfApplied(cc raftpb.ConfChangeI) {
	c.refreshMetaReplicas(c.meta.confState)
	c.membershipAfter = 0
	level := slog.LevelInfo
	if _, v1 := cc.AsV1(); v1 {
		level = slog.LevelDebug // the bootstrap's voters, applied on every fresh start
	}
	v2 := cc.AsV2()
	for _, ch := range v2.GetChanges() {
		c.log.log(level, "metadata group configuration applied", slog.String("group", "metadata"),
			slog.String("change", ch.GetType().String()), slog.Uint64("member", ch.GetNodeId()),
			slog.Any("voters", c.meta.confState.GetVoters()), slog.Any("learners", c.meta.confState.GetLearners()))
	}
}

// saneMetaConfChange checks a metadata-group configuration change a peer
// sent before raft sees it: a ConfChange adding a voter (the bootstrap's)
// or a ConfChangeV2 of add, add-learner and remove changes of non-zero
// nodes. The leader proposed it against its configuration.
func saneMetaConfChange(e *raftpb.Entry) bool {
	switch e.GetType() {
	case raftpb.EntryConfChange:
		return saneBootstrapConfChange(e.GetData())
	case raftpb.EntryConfChangeV2:
		var cc raftpb.ConfChangeV2
		return proto.Unmarshal(e.GetData(), &cc) == nil && len(cc.GetChanges()) > 0 && saneConfChanges(cc.GetChanges())
	}
	return false
}

// saneBootstrapConfChange checks a ConfChange entry's data is what a
// group's bootstrap writes: a nonzero node added as a voter.
func saneBootstrapConfChange(data []byte) bool {
	var cc raftpb.ConfChange
	return proto.Unmarshal(data, &cc) == nil && cc.GetType() == raftpb.ConfChangeAddNode && cc.GetNodeId() != 0
}

// saneConfChanges checks each change adds a voter or a learner, or
// removes a node, by a nonzero id: the only changes Strand proposes.
func saneConfChanges(changes []*raftpb.ConfChangeSingle) bool {
	for _, ch := range changes {
		switch ch.GetType() {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode, raftpb.ConfChangeRemoveNode:
		default:
			return false
		}
		if ch.GetNodeId() == 0 {
			return false
		}
	}
	return true
}

// maybeChangeMembership runs on Tick: the metadata leader proposes the
// next step towards the membership the metadata state asks for (at most
// one proposal per request timeout, and none while a joint configuration
// is being left).
func (c *Core) maybeChangeMembership() {
	g := c.meta
	if g == nil || c.closed || c.ticks < c.membershipAfter {
		return
	}
	if _, _, leading := g.leadership(); !leading {
		return
	}
	st := g.raw.Status()
	if len(st.Config.Voters[1]) > 0 {
		return // joint: raft leaves it by itself (Transition Auto)
	}
	step, ok := c.nextMembershipStep(st)
	if !ok {
		return
	}
	c.membershipAfter = c.ticks + uint64(c.cfg.RequestTimeoutTicks)
	attrs := []slog.Attr{slog.String("group", "metadata"), slog.Uint64("member", uint64(step.id)), slog.String("why", step.why)}
	c.markReady(g.group)
	if step.transferTo != 0 {
		c.log.log(slog.LevelInfo, "metadata leader hands off leadership before its own membership change",
			append(attrs, slog.Uint64("to", uint64(step.transferTo)))...)
		g.raw.TransferLeader(uint64(step.transferTo))
		return
	}
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: step.change.Enum(), NodeId: proto.Uint64(uint64(step.id))}}}
	if err := g.raw.ProposeConfChange(cc); err != nil {
		c.log.log(slog.LevelWarn, "metadata membership change not proposed", append(attrs, slog.Any("err", err))...)
		return
	}
	c.log.log(slog.LevelInfo, "metadata membership change proposed", append(attrs, slog.String("change", step.change.String()))...)
}

// membershipStep is one configuration change the leader wants, or a
// leadership transfer that must come first.
type membershipStep struct {
	id         NodeID
	change     raftpb.ConfChangeType
	transferTo NodeID
	why        string
}

// nextMembershipStep picks the next change, in priority order: remove a
// removed node; add a registered active node as a learner; promote a
// caught-up active learner while active voters are fewer than
// min(metaVotersMax, active members); demote a decommissioning voter once
// that many active voters, and at least three, remain without it.
func (c *Core) nextMembershipStep(st raft.Status) (membershipStep, bool) {
	voters := setIDs(st.Config.Voters[0])
	learners := setIDs(st.Config.Learners)
	nodes := c.meta.meta.Nodes()
	state := func(id NodeID) (metadata.NodeState, bool) {
		i := slices.IndexFunc(nodes, func(n metadata.Node) bool { return n.ID == uint64(id) })
		if i < 0 {
			return metadata.NodeActive, false
		}
		return nodes[i].State, true
	}
	active := func(ids []NodeID) (out []NodeID) {
		for _, id := range ids {
			if s, _ := state(id); s == metadata.NodeActive {
				out = append(out, id)
			}
		}
		return out
	}
	for _, id := range append(slices.Clone(voters), learners...) {
		if s, _ := state(id); s == metadata.NodeRemoved && (len(voters) > 1 || !slices.Contains(voters, id)) &&
			c.removalDue(st, id) {
			return c.selfFirst(st, membershipStep{id: id, change: raftpb.ConfChangeRemoveNode, why: "node removed"}, voters)
		}
	}
	for _, n := range nodes {
		id := NodeID(n.ID)
		if n.State == metadata.NodeActive && !slices.Contains(voters, id) && !slices.Contains(learners, id) {
			return membershipStep{id: id, change: raftpb.ConfChangeAddLearnerNode, why: "registered node joins as a learner"}, true
		}
	}
	activeVoters := active(voters)
	target := min(metaVotersMax, len(activeVoters)+len(active(learners)))
	if len(activeVoters) < target {
		for _, id := range active(learners) {
			if pr, ok := st.Progress[uint64(id)]; ok && pr.Match >= st.GetCommit() {
				return membershipStep{id: id, change: raftpb.ConfChangeAddNode, why: "caught-up learner promoted to voter"}, true
			}
		}
	}
	for _, id := range voters {
		// Demoting while fewer than three active voters would remain
		// would cut the group's fault tolerance for the whole drain.
		if s, _ := state(id); s == metadata.NodeDecommissioning && len(activeVoters) >= max(target, 3) {
			return c.selfFirst(st, membershipStep{id: id, change: raftpb.ConfChangeAddLearnerNode, why: "decommissioning voter demoted"}, voters)
		}
	}
	return membershipStep{}, false
}

// removalGraceElections bounds, in election timeouts (1 s in strand
// serve), how long the leader keeps a removed node in the metadata group
// waiting for it to catch up.
const removalGraceElections = 30

// RemovalGraceElections is removalGraceElections for the simulator's
// membership check: a removed node that is down stays a metadata learner
// up to that many election timeouts.
const RemovalGraceElections = removalGraceElections

// removalDue says whether removed node id may leave the metadata group's
// configuration now: once its log holds everything committed (so it has
// the entries that moved its replicas away and removed it, and learns
// their commit from the change that removes it), or once it failed to
// catch up for removalGraceElections election timeouts (a node that is gone
// for good must not hold the removal up forever). Removed at once, a node
// that was down through its decommission came back knowing only the
// metadata it had applied before: it never heard that its replicas moved,
// kept their data and kept believing it hosts them (found by
// TestOperateClusterUnderKill, cmd/strand).
func (c *Core) removalDue(st raft.Status, id NodeID) bool {
	if pr, ok := st.Progress[uint64(id)]; id == c.cfg.ID || (ok && pr.Match >= st.GetCommit()) || c.bugRemoveBeforeCaughtUp() {
		delete(c.removalSeen, id)
		return true
	}
	if c.removalSeen == nil {
		c.removalSeen = make(map[NodeID]uint64)
	}
	since, ok := c.removalSeen[id]
	if !ok {
		c.removalSeen[id] = c.ticks
		c.log.log(slog.LevelInfo, "removed node has not caught up: it stays in the metadata group a while to learn it was removed",
			slog.String("group", "metadata"), slog.Uint64("member", uint64(id)))
		return false
	}
	if c.ticks-since < removalGraceElections*uint64(c.cfg.ElectionTicks*c.cfg.TicksPerRaftTick) {
		return false
	}
	delete(c.removalSeen, id)
	c.stats.RemovalsForced++
	c.log.log(slog.LevelWarn, "removed node did not catch up in time: removing it from the metadata group anyway; "+
		"if it comes back, wipe its data directory", slog.String("group", "metadata"), slog.Uint64("member", uint64(id)))
	return true
}

// selfFirst turns a step that demotes or removes the leader itself into a
// transfer of leadership to the most caught-up other voter (none: no step).
func (c *Core) selfFirst(st raft.Status, step membershipStep, voters []NodeID) (membershipStep, bool) {
	if step.id != c.cfg.ID {
		return step, true
	}
	best, match := NodeID(0), uint64(0)
	for _, id := range voters {
		if pr, ok := st.Progress[uint64(id)]; id != c.cfg.ID && ok && (best == 0 || pr.Match > match) {
			best, match = id, pr.Match
		}
	}
	step.transferTo = best
	return step, best != 0
}

// setIDs returns a set's ids in order (map order never leaks).
func setIDs[V any](set map[uint64]V) []NodeID {
	out := make([]NodeID, 0, len(set))
	for id := range set {
		out = append(out, NodeID(id))
	}
	slices.Sort(out)
	return out
}

// MetaRole is a node's role in the metadata group as this node applied its
// configuration.
type MetaRole int

// The roles.
const (
	MetaRoleNone MetaRole = iota
	MetaRoleVoter
	MetaRoleLearner
)

// MetadataRole returns node id's role in the metadata group's applied
// configuration. Outside this package only the simulator calls it (simnet's
// join checks): it is the simulator's seam.
func (c *Core) MetadataRole(id NodeID) MetaRole {
	if c.meta == nil || c.meta.confState == nil {
		return MetaRoleNone
	}
	cs := c.meta.confState
	switch {
	case slices.Contains(cs.GetVoters(), uint64(id)) || slices.Contains(cs.GetVotersOutgoing(), uint64(id)):
		return MetaRoleVoter
	case slices.Contains(cs.GetLearners(), uint64(id)) || slices.Contains(cs.GetLearnersNext(), uint64(id)):
		return MetaRoleLearner
	}
	return MetaRoleNone
}

// handleNodeAdmin proposes one membership change (register, decommission,
// activate, remove) through the metadata group.
func (c *Core) handleNodeAdmin(req *strandpb.NodeAdminRequest, answer func(*strandpb.Response)) {
	if !c.adminPreflight(answer) {
		return
	}
	id := req.GetNodeId()
	var data []byte
	var err error
	switch req.GetAction() {
	case strandpb.NodeAction_NODE_ACTION_ADD:
		data, err = metadata.EncodePreregisterNode(id, req.GetAddress(), req.GetRack())
	case strandpb.NodeAction_NODE_ACTION_DECOMMISSION:
		data, err = metadata.EncodeSetNodeState(id, metadata.NodeDecommissioning)
	case strandpb.NodeAction_NODE_ACTION_REMOVE:
		data, err = metadata.EncodeSetNodeState(id, metadata.NodeRemoved)
	case strandpb.NodeAction_NODE_ACTION_ACTIVATE:
		data, err = metadata.EncodeSetNodeState(id, metadata.NodeActive)
	default:
		err = errors.New("node: node admin: no action")
	}
	if err != nil {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, err.Error()))
		return
	}
	attrs := []slog.Attr{slog.String("action", req.GetAction().String()), slog.Uint64("member", id)}
	if req.GetAddress() != "" {
		attrs = append(attrs, slog.String("address", req.GetAddress()))
	}
	timeout := c.msToTicks(req.GetTimeoutMs(), uint64(c.cfg.RequestTimeoutTicks))
	c.proposeMeta(data, timeout, func(res metadata.Result, err error) {
		var e *strandpb.Error
		switch {
		case err != nil:
			e = c.wireError(err, 0, nil)
		case res.Err != nil:
			e = metaError(res.Err)
		}
		if e != nil {
			c.log.log(slog.LevelWarn, "membership change refused", append(attrs, slog.String("err", e.GetMessage()))...)
			answer(&strandpb.Response{Error: e})
			return
		}
		c.log.log(slog.LevelInfo, "membership change applied", attrs...)
		answer(&strandpb.Response{Body: &strandpb.Response_NodeAdmin{NodeAdmin: &strandpb.NodeAdminResponse{}}})
	})
}

// handleClusterMembers answers every registered node's membership as this
// node applied it, with each node's liveness as this node sees it (the
// client asks the metadata leader).
func (c *Core) handleClusterMembers(answer func(*strandpb.Response)) {
	resp := &strandpb.ClusterMembersResponse{AnsweredBy: uint64(c.cfg.ID)}
	lead, _ := c.metaLeader()
	resp.MetadataLeader = uint64(lead)
	nodes, topics := c.MetadataNodes()
	var progress map[uint64]uint64 // the leader's view of each member's match; lookup only
	var commit uint64
	if _, _, leading := c.meta.leadership(); leading {
		st := c.meta.raw.Status()
		progress, commit = map[uint64]uint64{}, st.GetCommit()
		for id, pr := range st.Progress {
			progress[id] = pr.Match
		}
	}
	replicas, leaders := map[uint64]int32{}, map[uint64]int32{} // lookup only
	for _, t := range topics {
		for _, reps := range t.Replicas {
			for k, r := range reps {
				replicas[r]++
				if k == 0 {
					leaders[r]++
				}
			}
		}
	}
	for _, n := range nodes {
		m := &strandpb.ClusterMembersResponse_Member{Id: n.ID, Address: n.Address, Rack: n.Rack, Fenced: n.Fenced,
			Replicas: replicas[n.ID], PreferredLeaders: leaders[n.ID]}
		switch c.MetadataRole(NodeID(n.ID)) {
		case MetaRoleVoter:
			m.Role = strandpb.MetadataRole_METADATA_ROLE_VOTER
		case MetaRoleLearner:
			m.Role = strandpb.MetadataRole_METADATA_ROLE_LEARNER
		}
		switch {
		case n.State == metadata.NodeRemoved:
			m.State = strandpb.MemberState_MEMBER_STATE_REMOVED
		case n.State == metadata.NodeDecommissioning:
			m.State = strandpb.MemberState_MEMBER_STATE_DECOMMISSIONING
		case m.Role == strandpb.MetadataRole_METADATA_ROLE_NONE || n.Fenced ||
			progress != nil && m.Role == strandpb.MetadataRole_METADATA_ROLE_LEARNER && progress[n.ID] < commit:
			// Not in the metadata group yet, in it but not yet registered
			// by itself (a pre-registration stays fenced), or (as the
			// leader sees it) a learner still catching up.
			m.State = strandpb.MemberState_MEMBER_STATE_JOINING
		default:
			m.State = strandpb.MemberState_MEMBER_STATE_ACTIVE
		}
		c.fillMemberLiveness(m)
		resp.Members = append(resp.Members, m)
	}
	answer(&strandpb.Response{Body: &strandpb.Response_ClusterMembers{ClusterMembers: resp}})
}

// handleElectLeaders asks every partition this node leads to hand its
// leadership to its preferred replica (the metadata's first) when that
// replica is a voter whose log matches the leader's last index.
func (c *Core) handleElectLeaders(answer func(*strandpb.Response)) {
	resp := &strandpb.ElectLeadersResponse{}
	for _, g := range c.partitionGroups() {
		if _, _, leading := g.leadership(); !leading || c.meta == nil {
			continue
		}
		t, ok := c.meta.meta.Topic(g.tp.Topic)
		if !ok || t.ID != g.topicID || int(g.tp.Partition) >= len(t.Replicas) || len(t.Replicas[g.tp.Partition]) == 0 {
			continue
		}
		want := NodeID(t.Replicas[g.tp.Partition][0])
		if want == c.cfg.ID {
			continue
		}
		st := g.raw.Status()
		if pr, ok := st.Progress[uint64(want)]; !ok || pr.IsLearner || pr.Match < st.GetCommit() || c.peerCannotWrite(want) {
			// Lagging, or its disk is full or stalled: it would refuse
			// produce and hand the leadership straight back (diskfull.go).
			resp.SkippedLagging++
			continue
		}
		c.touch(g)
		g.raw.TransferLeader(uint64(want))
		g.logs.log(slog.LevelInfo, "leadership transfer to the preferred replica", slog.Uint64("to", uint64(want)))
		resp.Transfers = append(resp.Transfers, &strandpb.ElectLeadersResponse_Transfer{
			Topic: g.tp.Topic, Partition: g.tp.Partition, From: uint64(c.cfg.ID), To: uint64(want)})
	}
	answer(&strandpb.Response{Body: &strandpb.Response_ElectLeaders{ElectLeaders: resp}})
}

// clusterSize is the number of nodes a replication factor may reach:
// Config.Nodes, or the registered active nodes when more have joined.
func (c *Core) clusterSize() int {
	n := 0
	if c.meta != nil {
		for _, node := range c.meta.meta.Nodes() {
			if node.State == metadata.NodeActive {
				n++
			}
		}
	}
	return max(n, len(c.cfg.Nodes))
}

// String names the role as `strand cluster` prints it.
func (r MetaRole) String() string {
	switch r {
	case MetaRoleVoter:
		return "voter"
	case MetaRoleLearner:
		return "learner"
	}
	return "none"
}
