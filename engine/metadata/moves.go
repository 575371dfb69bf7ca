package metadata

import (
	"fmt"
	"slices"

	"github.com/strandlog/strand/proto/strandpb"
)

// Refusals of partition moves (R28).
var (
	// ErrMoveInProgress: the partition is already moving; a second move
	// waits for the first to complete.
	ErrMoveInProgress = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS, "metadata: a move of the partition is in progress")
	// ErrInvalidReplicaAssignment: a move target that is empty, repeats a
	// node, or names a node that is not registered (or is fenced and not
	// already a replica).
	ErrInvalidReplicaAssignment = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT, "metadata: invalid replica assignment")
	// ErrNoMoveInProgress: a completion for a partition with no move in
	// progress, or with another target (a late duplicate): nothing changes.
	ErrNoMoveInProgress = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: no such move in progress")
)

// MoveReplicasMax bounds a move target's length.
const MoveReplicasMax = 16

// MoveInProgress is a partition move in progress: the replica set the
// metadata still records, the target it moves to, and the difference.
// (Named apart from the planners' Move, a step an operator asks for.)
type MoveInProgress struct {
	Topic     string
	TopicID   uint64
	Partition int32
	// Replicas is the current replica list, Target the new one (ordered:
	// the first is the preferred leader once the move completes).
	Replicas []uint64
	Target   []uint64
}

// Adding is the nodes of the target not yet replicas, in target order.
func (m MoveInProgress) Adding() []uint64 { return without(m.Target, m.Replicas) }

// Removing is the replicas not in the target, in replica order.
func (m MoveInProgress) Removing() []uint64 { return without(m.Replicas, m.Target) }

// without is the ids of a not in b, in a's order.
func without(a, b []uint64) []uint64 {
	var out []uint64
	for _, id := range a {
		if !containsID(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// reassignPartition records a move of one partition to a new replica set.
// A target equal (as a set and in order) to the current list, or to the
// target of the move in progress, changes nothing and succeeds (a resend
// after a lost answer); any other valid target is recorded as in progress:
// the nodes of current ∪ target host the partition until the partition's
// leader completes the move (CompletePartitionMove).
func (s *State) reassignPartition(c *strandpb.MetadataReassignPartition) Result {
	t, p, err := s.movePartition(c.GetTopic(), c.GetTopicId(), c.GetPartition())
	if err != nil {
		return Result{Err: err}
	}
	target := c.GetTargetReplicas()
	if err := s.validateTarget(t.replicas[p], target); err != nil {
		return Result{Err: err}
	}
	if len(t.targets[p]) > 0 {
		if slices.Equal(target, t.targets[p]) {
			return Result{} // the same move again (a resend): it is in progress
		}
		if !c.GetRedirect() {
			return Result{Err: fmt.Errorf("%w: %s/%d: %v to %v", ErrMoveInProgress, t.name, p, t.replicas[p], t.targets[p])}
		}
		s.redirectMove(t, p, target)
		return Result{}
	}
	if slices.Equal(target, t.replicas[p]) {
		return Result{}
	}
	if len(t.bootstrap[p]) == 0 {
		t.bootstrap[p] = append([]uint64(nil), t.replicas[p]...)
	}
	t.targets[p] = append([]uint64(nil), target...)
	s.changed()
	return Result{}
}

// redirectMove points partition p's move in progress at target (its own
// replicas: a cancel). The nodes of the old target that neither the
// replicas nor the new target name may be in the raft configuration, so
// they keep hosting the partition (leaving) until the move completes.
func (s *State) redirectMove(t *topicState, p int32, target []uint64) {
	leaving := t.leaving[p]
	for _, id := range t.targets[p] {
		if !containsID(leaving, id) {
			leaving = append(leaving, id)
		}
	}
	var kept []uint64
	for _, id := range leaving {
		if !containsID(t.replicas[p], id) && !containsID(target, id) {
			kept = append(kept, id)
		}
	}
	t.leaving[p] = kept
	t.targets[p] = append([]uint64(nil), target...)
	s.changed()
}

// completePartitionMove makes a move's target the partition's replica
// list and clears the move. The leader that saw the target configuration
// applied proposes it; more than one may, so a completion that does not
// match the move in progress is refused and changes nothing.
func (s *State) completePartitionMove(c *strandpb.MetadataCompletePartitionMove) Result {
	t, p, err := s.movePartition(c.GetTopic(), c.GetTopicId(), c.GetPartition())
	if err != nil {
		return Result{Err: err}
	}
	if len(t.targets[p]) == 0 || !sameSet(t.targets[p], c.GetReplicas()) {
		return Result{Err: fmt.Errorf("%w: %s/%d to %v", ErrNoMoveInProgress, t.name, p, c.GetReplicas())}
	}
	t.replicas[p] = t.targets[p]
	t.targets[p], t.leaving[p] = nil, nil
	if l := t.leaders[p]; l.Node != 0 && !containsID(t.replicas[p], l.Node) {
		t.leaders[p] = Leader{} // the next report of a newer term names the new leader
	}
	s.changed()
	return Result{}
}

// movePartition finds the partition a move command names, by name and
// topic id.
func (s *State) movePartition(topic string, topicID uint64, p int32) (*topicState, int32, error) {
	t, ok := s.topics[topic]
	if !ok || topicID != 0 && t.id != topicID {
		return nil, 0, fmt.Errorf("%w: %q (id %d)", ErrUnknownTopic, topic, topicID)
	}
	if p < 0 || int(p) >= len(t.replicas) {
		return nil, 0, fmt.Errorf("%w: %q has no partition %d", ErrUnknownPartition, topic, p)
	}
	return t, p, nil
}

// validateTarget checks a move target: 1..MoveReplicasMax distinct
// registered nodes, none fenced unless already a replica.
func (s *State) validateTarget(current, target []uint64) error {
	if len(target) < 1 || len(target) > MoveReplicasMax {
		return fmt.Errorf("%w: %d replicas, want 1..%d", ErrInvalidReplicaAssignment, len(target), MoveReplicasMax)
	}
	for i, id := range target {
		if containsID(target[:i], id) {
			return fmt.Errorf("%w: node %d twice in %v", ErrInvalidReplicaAssignment, id, target)
		}
		n, ok := s.Node(id)
		if !ok {
			return fmt.Errorf("%w: node %d is not registered", ErrInvalidReplicaAssignment, id)
		}
		if n.Fenced && !containsID(current, id) {
			return fmt.Errorf("%w: node %d is fenced", ErrInvalidReplicaAssignment, id)
		}
	}
	return nil
}

// sameSet reports whether a and b hold the same ids (each list distinct).
func sameSet(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !containsID(b, id) {
			return false
		}
	}
	return true
}

// Moves returns every move in progress, sorted by topic then partition.
func (s *State) Moves() []MoveInProgress {
	var out []MoveInProgress
	for _, name := range s.topicNames {
		t := s.topics[name]
		for p, target := range t.targets {
			if len(target) > 0 {
				out = append(out, MoveInProgress{Topic: name, TopicID: t.id, Partition: int32(p),
					Replicas: append([]uint64(nil), t.replicas[p]...), Target: append([]uint64(nil), target...)})
			}
		}
	}
	return out
}

// MoveOf returns the move in progress of one partition, if any.
func (s *State) MoveOf(topic string, partition int32) (MoveInProgress, bool) {
	t, ok := s.topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.targets) || len(t.targets[partition]) == 0 {
		return MoveInProgress{}, false
	}
	return MoveInProgress{Topic: topic, TopicID: t.id, Partition: partition,
		Replicas: append([]uint64(nil), t.replicas[partition]...), Target: append([]uint64(nil), t.targets[partition]...)}, true
}

// EncodeReassignPartition moves partition p of topic (topicID 0: whatever
// incarnation is live) to target, in order. With redirect a move in
// progress is pointed at target instead of refused (target = the
// replicas: a cancel).
func EncodeReassignPartition(topic string, topicID uint64, p int32, target []uint64, redirect bool) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_ReassignPartition{
		ReassignPartition: &strandpb.MetadataReassignPartition{Topic: topic, TopicId: topicID, Partition: p,
			TargetReplicas: target, Redirect: redirect},
	}})
}

// EncodeCompletePartitionMove completes the move of partition p of topic
// incarnation topicID whose target is replicas.
func EncodeCompletePartitionMove(topic string, topicID uint64, p int32, replicas []uint64) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_CompletePartitionMove{
		CompletePartitionMove: &strandpb.MetadataCompletePartitionMove{Topic: topic, TopicId: topicID, Partition: p, Replicas: replicas},
	}})
}
