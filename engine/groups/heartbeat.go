package groups

import (
	"fmt"
	"slices"
)

// Heartbeat is KIP-848's one membership request: join (epoch 0), stay
// (the epoch the coordinator last gave), leave (-1) or leave for a restart
// (-2, static members). It carries what the member owns, so the coordinator
// learns of revocations from it.
type Heartbeat struct {
	Group    string
	MemberID string // chosen by the client, stable across its rejoins
	// InstanceID makes the member static: a join with a known instance id
	// takes over the old member's assignment without a rebalance.
	InstanceID  string
	Rack        string
	MemberEpoch int32
	// Seq grows with every heartbeat a client process sends; a heartbeat
	// not newer than the last applied one is refused (a resend that
	// arrives late must not acknowledge a revocation not yet done).
	Seq           uint64
	Subscriptions []string
	Owned         []TopicPartition
	// Topics are the subscribed topics' partition counts as the proposer's
	// metadata saw them (a topic missing here does not exist).
	Topics []TopicInfo
	NowMs  int64
	// Classic, when its Step is set, makes this a classic member's
	// JoinGroup, SyncGroup or Heartbeat (classic.go); MemberEpoch is then
	// ignored.
	Classic Classic
}

// HeartbeatResult is what the member is told: its epoch and the partitions
// it may own now (a subset of its target until revocations complete).
type HeartbeatResult struct {
	MemberEpoch int32
	Assigned    []TopicPartition
	// Classic steps only: Rejoin asks the member to join again
	// (REBALANCE_IN_PROGRESS); Generation and Protocol are its view's.
	Rejoin     bool
	Generation int32
	Protocol   string
}

// Heartbeat applies one heartbeat.
func (s *State) Heartbeat(hb Heartbeat) (HeartbeatResult, error) {
	if err := validHeartbeat(hb); err != nil {
		return HeartbeatResult{}, err
	}
	if hb.Classic.Step != ClassicNone {
		return s.classic(hb)
	}
	switch hb.MemberEpoch {
	case EpochLeave:
		return s.leave(hb)
	case EpochLeaveStatic:
		return s.leaveStatic(hb)
	case EpochJoin:
		return s.join(hb)
	}
	g := s.group(hb.Group, false)
	if g == nil {
		return HeartbeatResult{}, ErrUnknownMember
	}
	m := g.find(hb.MemberID)
	if m == nil {
		return HeartbeatResult{}, ErrUnknownMember
	}
	if hb.Seq <= m.lastSeq {
		return HeartbeatResult{}, ErrStaleHeartbeat
	}
	owned := normalise(hb.Owned)
	switch {
	case m.leftStatic, hb.MemberEpoch > m.epoch:
		return HeartbeatResult{}, ErrFencedMemberEpoch
	case hb.MemberEpoch < m.epoch:
		// A lost answer: the member still speaks the epoch before its last
		// one, and owns nothing it was not given.
		if hb.MemberEpoch != m.prevEpoch || len(minus(owned, m.assigned)) > 0 {
			return HeartbeatResult{}, ErrFencedMemberEpoch
		}
	}
	m.lastSeq = hb.Seq
	g.update(m, hb)
	g.reconcile(m, owned)
	return m.result(), nil
}

// validHeartbeat checks a heartbeat's shape.
func validHeartbeat(hb Heartbeat) error {
	if !validName(hb.Group, false) || !validName(hb.MemberID, false) || !validName(hb.InstanceID, true) ||
		!validName(hb.Rack, true) || hb.MemberEpoch < EpochLeaveStatic {
		return fmt.Errorf("%w: heartbeat names or epoch", ErrInvalid)
	}
	if hb.MemberEpoch == EpochLeaveStatic && hb.InstanceID == "" {
		return fmt.Errorf("%w: a static leave needs an instance id", ErrInvalid)
	}
	total := int64(0)
	for _, t := range hb.Topics {
		if !validName(t.Name, false) || t.Partitions < 0 {
			return fmt.Errorf("%w: topic %q", ErrInvalid, t.Name)
		}
		total += int64(t.Partitions)
	}
	for _, t := range hb.Subscriptions {
		if !validName(t, false) {
			return fmt.Errorf("%w: subscription %q", ErrInvalid, t)
		}
	}
	if total > PartitionsMax || len(hb.Owned) > PartitionsMax || len(hb.Subscriptions) > PartitionsMax {
		return fmt.Errorf("%w: too many partitions", ErrInvalid)
	}
	return nil
}

// result is the member's answer.
func (m *member) result() HeartbeatResult {
	return HeartbeatResult{MemberEpoch: m.epoch, Assigned: slices.Clone(m.assigned)}
}

// leave removes a member for good.
func (s *State) leave(hb Heartbeat) (HeartbeatResult, error) {
	g := s.group(hb.Group, false)
	if g == nil || g.find(hb.MemberID) == nil {
		return HeartbeatResult{}, ErrUnknownMember
	}
	g.remove(hb.MemberID, hb.NowMs)
	return HeartbeatResult{MemberEpoch: EpochLeave}, nil
}

// leaveStatic keeps a static member's assignment for its restart.
func (s *State) leaveStatic(hb Heartbeat) (HeartbeatResult, error) {
	g := s.group(hb.Group, false)
	if g == nil {
		return HeartbeatResult{}, ErrUnknownMember
	}
	m := g.find(hb.MemberID)
	if m == nil || m.instanceID != hb.InstanceID {
		return HeartbeatResult{}, ErrUnknownMember
	}
	m.leftStatic = true
	return HeartbeatResult{MemberEpoch: EpochLeaveStatic}, nil
}

// join admits a member that owns nothing. A member id already present is
// the same client starting over (it was fenced, or lost everything): its
// old record goes, freeing what it held. A known instance id is a static
// member's restart: the new member id takes the old one's place, epoch
// and assignment, and the group epoch does not move.
func (s *State) join(hb Heartbeat) (HeartbeatResult, error) {
	g := s.group(hb.Group, true)
	var lastSeq uint64
	if old := g.find(hb.MemberID); old != nil {
		if hb.Seq <= old.lastSeq {
			return HeartbeatResult{}, ErrStaleHeartbeat
		}
		lastSeq = old.lastSeq
		if old.instanceID == "" || old.instanceID != hb.InstanceID {
			g.remove(old.id, hb.NowMs)
		}
	}
	if m := g.byInstance(hb.InstanceID); m != nil {
		// The restarted instance owns nothing yet: whatever the old one was
		// revoking is given up now (reconcile sees Owned empty).
		i, _ := g.memberIndex(m.id)
		g.members = slices.Delete(g.members, i, i+1)
		m.id, m.leftStatic = hb.MemberID, false
		m.lastSeq = max(lastSeq, hb.Seq)
		g.insert(m)
		g.update(m, hb)
		g.reconcile(m, nil)
		return m.result(), nil
	}
	if len(g.members) >= MembersMax {
		return HeartbeatResult{}, fmt.Errorf("%w: group %q has %d members", ErrInvalid, g.id, MembersMax)
	}
	m := &member{id: hb.MemberID, instanceID: hb.InstanceID, lastSeq: max(lastSeq, hb.Seq)}
	g.insert(m)
	if !g.update(m, hb) {
		g.bump()
	}
	g.reconcile(m, nil)
	return m.result(), nil
}

// update takes a heartbeat's subscriptions, rack and topic partition counts;
// a change that alters the assignment bumps the group epoch (and reports so).
func (g *group) update(m *member, hb Heartbeat) bool {
	changed := false
	subs := slices.Compact(slices.Sorted(slices.Values(hb.Subscriptions)))
	if !slices.Equal(subs, m.subs) {
		m.subs, changed = subs, true
	}
	if m.rack != hb.Rack {
		m.rack, changed = hb.Rack, true
	}
	for _, t := range hb.Topics {
		i, found := slices.BinarySearchFunc(g.topics, t.Name, func(x TopicInfo, n string) int { return cmpString(x.Name, n) })
		switch {
		case !found:
			g.topics = slices.Insert(g.topics, i, cloneTopic(t))
			changed = true
		case !equalTopic(g.topics[i], t):
			g.topics[i] = cloneTopic(t)
			changed = true
		}
	}
	if changed {
		g.bump()
	}
	return changed
}

// cloneTopic copies t, its rack lists normalised (sorted, distinct) and
// dropped unless there is one per partition.
func cloneTopic(t TopicInfo) TopicInfo {
	out := TopicInfo{Name: t.Name, Partitions: t.Partitions}
	if len(t.Racks) != int(t.Partitions) {
		return out
	}
	out.Racks = make([][]string, len(t.Racks))
	for i, rs := range t.Racks {
		out.Racks[i] = slices.Compact(slices.Sorted(slices.Values(rs)))
	}
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// reconcile moves m one step toward its target, KIP-848 style:
//  1. partitions it was asked to revoke stay its own until a heartbeat
//     reports it no longer owns them;
//  2. then, if the target moved on, it is asked to revoke what the new
//     target takes away, and only with nothing left to revoke does its
//     epoch advance to the target's;
//  3. at the target epoch it gets each target partition no other member
//     holds; the rest follow in later heartbeats, as their owners revoke.
func (g *group) reconcile(m *member, owned []TopicPartition) {
	if len(m.revoking) > 0 {
		if len(intersect(owned, m.revoking)) > 0 {
			return
		}
		m.revoking = nil
	}
	if m.epoch != g.targetEpoch {
		if revoke := minus(m.assigned, m.target); len(revoke) > 0 && !bugAssignBeforeRevoke {
			m.assigned = intersect(m.assigned, m.target)
			m.revoking = revoke
			return
		}
		if bugAssignBeforeRevoke {
			m.assigned = intersect(m.assigned, m.target)
		}
		m.prevEpoch, m.epoch = m.epoch, g.targetEpoch
	}
	var add []TopicPartition
	for _, p := range m.target {
		if !contains(m.assigned, p) && !contains(m.revoking, p) && (bugAssignBeforeRevoke || !g.heldByOther(p, m)) {
			add = append(add, p)
		}
	}
	if len(add) > 0 {
		m.assigned = SortPartitions(append(m.assigned, add...))
	}
}

// HeartbeatUnchanged reports whether hb would change nothing but the
// member's heartbeat sequence — a member in the target epoch, owning
// exactly its target, nothing to revoke, the same subscriptions, rack and
// topic partition counts — and if so the answer Heartbeat would give. The
// coordinator answers such a heartbeat from its (linearizably read) state
// without writing it to the log. Skipping the sequence update is safe: a
// later heartbeat accepted by sequence is newer than every logged one, and
// only logged heartbeats change what a member owns.
func (s *State) HeartbeatUnchanged(hb Heartbeat) (HeartbeatResult, bool) {
	if hb.MemberEpoch <= 0 || hb.Classic.Step != ClassicNone || validHeartbeat(hb) != nil {
		return HeartbeatResult{}, false
	}
	g := s.group(hb.Group, false)
	if g == nil {
		return HeartbeatResult{}, false
	}
	m := g.find(hb.MemberID)
	switch {
	case m == nil, m.leftStatic, hb.Seq <= m.lastSeq, hb.MemberEpoch != m.epoch, m.epoch != g.targetEpoch,
		len(m.revoking) > 0, m.rack != hb.Rack, !slices.Equal(m.assigned, m.target),
		!slices.Equal(normalise(hb.Owned), m.assigned),
		!slices.Equal(slices.Compact(slices.Sorted(slices.Values(hb.Subscriptions))), m.subs):
		return HeartbeatResult{}, false
	}
	for _, t := range hb.Topics {
		i, ok := slices.BinarySearchFunc(g.topics, t.Name, func(x TopicInfo, n string) int { return cmpString(x.Name, n) })
		if !ok || !equalTopic(g.topics[i], cloneTopic(t)) {
			return HeartbeatResult{}, false
		}
	}
	return m.result(), true
}
