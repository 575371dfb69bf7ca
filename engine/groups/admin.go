package groups

import (
	"fmt"
	"slices"
)

// Expire removes a member the coordinator's clock found silent past its
// session timeout (or a static member away longer than that). It names the
// epoch the coordinator saw, so an expiry decided before the member's
// newer heartbeat was applied does nothing: reports whether it removed.
func (s *State) Expire(group, memberID string, epoch int32, nowMs int64) bool {
	g := s.group(group, false)
	if g == nil {
		return false
	}
	m := g.find(memberID)
	if m == nil || m.epoch != epoch {
		return false
	}
	g.remove(memberID, nowMs)
	return true
}

// DeleteGroup forgets a group without members and its offsets.
func (s *State) DeleteGroup(group string) error {
	g := s.group(group, false)
	switch {
	case g == nil:
		return ErrGroupNotFound
	case len(g.members) > 0:
		return fmt.Errorf("%w: %q has %d", ErrGroupNotEmpty, group, len(g.members))
	}
	s.deleteGroup(group)
	return nil
}

// ExpireOffsets forgets every group that has had no members for
// retentionMs as of nowMs (both the proposer's, carried in the command),
// offsets included, and returns their ids (a group with pending
// transactional offsets stays until their marker); in the other groups, it forgets
// producer fences without pending offsets (txnoffsets.go) as old.
func (s *State) ExpireOffsets(nowMs, retentionMs int64) []string {
	var gone []string
	for _, id := range s.names {
		g := s.groups[id]
		if len(g.members) == 0 && nowMs-g.emptySinceMs >= retentionMs && !g.hasPendingOffsets() {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		s.deleteGroup(id)
	}
	for _, id := range s.names {
		s.groups[id].expireFences(nowMs, retentionMs)
	}
	return gone
}

// GroupIDs lists the groups, sorted.
func (s *State) GroupIDs() []string { return slices.Clone(s.names) }

// Group states, as Describe reports them.
const (
	StateEmpty       = "empty"       // no members
	StateReconciling = "reconciling" // some member has not reached its target
	StateStable      = "stable"      // every member owns exactly its target
)

// GroupView is one group as Describe shows it.
type GroupView struct {
	ID           string
	State        string
	Epoch        int32
	TargetEpoch  int32
	EmptySinceMs int64
	Members      []MemberView
	Offsets      []CommittedOffset
}

// MemberView is one member as Describe shows it.
type MemberView struct {
	ID, InstanceID, Rack string
	Epoch                int32
	Subscriptions        []string
	Assigned             []TopicPartition
	Revoking             []TopicPartition
	Target               []TopicPartition
	LeftStatic           bool
	// Classic is what a classic member was told (nil: a KIP-848 member).
	Classic *ClassicView
}

// Describe returns a copy of the group, or false.
func (s *State) Describe(group string) (GroupView, bool) {
	g := s.group(group, false)
	if g == nil {
		return GroupView{}, false
	}
	v := GroupView{ID: g.id, State: StateStable, Epoch: g.epoch, TargetEpoch: g.targetEpoch, EmptySinceMs: g.emptySinceMs}
	if len(g.members) == 0 {
		v.State = StateEmpty
	}
	for _, m := range g.members {
		v.Members = append(v.Members, MemberView{
			ID: m.id, InstanceID: m.instanceID, Rack: m.rack, Epoch: m.epoch,
			Subscriptions: slices.Clone(m.subs), Assigned: slices.Clone(m.assigned),
			Revoking: slices.Clone(m.revoking), Target: slices.Clone(m.target), LeftStatic: m.leftStatic,
			Classic: m.classic.clone(),
		})
		if m.epoch != g.targetEpoch || len(m.revoking) > 0 || !slices.Equal(m.assigned, m.target) {
			v.State = StateReconciling
		}
	}
	v.Offsets = s.Fetch(group, nil)
	return v, true
}

// Check verifies the state's invariants and returns the first broken one:
// sorted members and partitions, no partition held (assigned or revoking)
// by two members, nothing both assigned and revoking, member epochs at
// most the target's, the target's at most the group's.
func (s *State) Check() error {
	if !slices.IsSorted(s.names) || len(s.names) != len(s.groups) {
		return fmt.Errorf("group names out of order or out of step")
	}
	for _, id := range s.names {
		g := s.groups[id]
		if g == nil || g.id != id {
			return fmt.Errorf("group %q missing", id)
		}
		if g.targetEpoch > g.epoch {
			return fmt.Errorf("group %q: target epoch %d above group epoch %d", id, g.targetEpoch, g.epoch)
		}
		holder := make(map[TopicPartition]string)
		for i, m := range g.members {
			if i > 0 && g.members[i-1].id >= m.id {
				return fmt.Errorf("group %q: members out of order", id)
			}
			if m.epoch > g.targetEpoch {
				return fmt.Errorf("group %q: member %q epoch %d above target epoch %d", id, m.id, m.epoch, g.targetEpoch)
			}
			if !slices.IsSortedFunc(m.assigned, compareTP) || !slices.IsSortedFunc(m.revoking, compareTP) || len(intersect(m.assigned, m.revoking)) > 0 {
				return fmt.Errorf("group %q: member %q assigned %v revoking %v", id, m.id, m.assigned, m.revoking)
			}
			for _, p := range append(slices.Clone(m.assigned), m.revoking...) {
				if other, ok := holder[p]; ok {
					return fmt.Errorf("group %q: %s/%d held by %q and %q", id, p.Topic, p.Partition, other, m.id)
				}
				holder[p] = m.id
			}
		}
	}
	return nil
}
