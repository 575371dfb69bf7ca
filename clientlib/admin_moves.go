package clientlib

import (
	"context"
	"fmt"

	"github.com/strandlog/strand/proto/strandpb"
)

// Errors of partition moves, for errors.Is.
var (
	// ErrReassignmentInProgress: the partition is already moving; wait for
	// that move to finish.
	ErrReassignmentInProgress = &Error{Code: strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS}
	// ErrInvalidReplicaAssignment: the new replica list is empty, repeats a
	// node, or names a node that is not registered or is fenced.
	ErrInvalidReplicaAssignment = &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT}
)

// PartitionMove asks to move one partition to a new replica list (ordered:
// the first is the preferred leader).
type PartitionMove struct {
	Topic     string
	Partition int32
	Replicas  []uint64
	// Redirect points a move in progress at Replicas instead of failing
	// with ErrReassignmentInProgress; Replicas = the partition's current
	// replicas cancels the move.
	Redirect bool
	// AllowReplicationChange lets Replicas have another length than the
	// partition's current replica list; without it the cluster refuses
	// such a move (ErrInvalidReplicaAssignment) so a typo cannot
	// silently drop the replication factor.
	AllowReplicationChange bool
}

// PartitionMoveResult is the outcome of one PartitionMove: Err nil when the
// metadata group recorded the move (or the partition already had those
// replicas); Replicas and Target as the metadata group then had them
// (Target nil: no move in progress, the partition is on Replicas).
type PartitionMoveResult struct {
	Topic     string
	Partition int32
	Replicas  []uint64
	Target    []uint64
	Err       error
}

// MovePartitions starts moving each partition to its new replicas and
// returns once the metadata group recorded every move: the partitions'
// leaders then add the new replicas as raft learners, switch the voters in
// one joint configuration change once the learners caught up, and remove
// the old replicas (follow with DescribePartitionLogs or Metadata). Asking
// again for the move in progress succeeds (so a resend after a lost answer
// is safe); another move of a partition already moving is
// ErrReassignmentInProgress. A move refused with a retriable error (the
// metadata leader changing hands, a timeout) is resent, alone with the
// others so refused, as the request is for any other admin call. Errors
// are per move; the call fails as a whole only when no answer came.
func (c *Client) MovePartitions(ctx context.Context, moves []PartitionMove) ([]PartitionMoveResult, error) {
	out := make([]PartitionMoveResult, len(moves))
	pending := make([]int, len(moves)) // indexes of moves without a final answer
	answered := false                  // some answer came
	for i := range moves {
		pending[i] = i
	}
	unsure := false // an attempt naming the pending moves may have been applied
	attempts := 0
	err := c.withRetriesUnsure(ctx, &unsure, func() error {
		attempts++
		answers, err := c.sendMoves(ctx, moves, pending, &unsure)
		if err != nil {
			return err
		}
		answered = true
		var retry error
		var left []int
		for k, a := range answers {
			i := pending[k]
			m := moves[i]
			out[i] = PartitionMoveResult{Topic: m.Topic, Partition: m.Partition, Replicas: a.GetReplicas(),
				Target: a.GetTargetReplicas(), Err: errorFromWire(a.GetError())}
			if IsRetriable(out[i].Err) {
				left = append(left, i)
				retry = out[i].Err
				continue
			}
			// Every earlier attempt named this move: one may have
			// recorded it (then a refusal such as "another move in
			// progress" may be that very move's).
			out[i].Err = maybeApplied(out[i].Err, unsure, attempts)
		}
		pending = left
		return retry
	})
	if err != nil {
		if !answered {
			return nil, err
		}
		for _, i := range pending {
			out[i] = PartitionMoveResult{Topic: moves[i].Topic, Partition: moves[i].Partition, Err: err}
		}
	}
	return out, nil
}

// sendMoves sends the moves at indexes pending in one request to the
// metadata leader and returns one answer per index.
func (c *Client) sendMoves(ctx context.Context, moves []PartitionMove, pending []int, unsure *bool) ([]*strandpb.MovePartitionsResponse_Move, error) {
	req := &strandpb.MovePartitionsRequest{TimeoutMs: int32(c.cfg.requestTimeout.Milliseconds())}
	for _, i := range pending {
		m := moves[i]
		req.Moves = append(req.Moves, &strandpb.MovePartitionsRequest_Move{Topic: m.Topic, Partition: m.Partition,
			Replicas: m.Replicas, Redirect: m.Redirect, AllowReplicationChange: m.AllowReplicationChange})
	}
	resp, err := c.controllerRequest(ctx, &strandpb.Request{Body: &strandpb.Request_MovePartitions{MovePartitions: req}}, unsure)
	if err == nil {
		err = errorFromWire(resp.GetError())
	}
	if err != nil {
		return nil, err
	}
	answers := resp.GetMovePartitions().GetMoves()
	if len(answers) != len(pending) {
		return nil, &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			Message: fmt.Sprintf("%d answers for %d moves", len(answers), len(pending))}
	}
	return answers, nil
}

// MoveProgress is how far one replica a move adds has caught up, as the
// partition's leader sees it.
type MoveProgress struct {
	Node       uint64
	MatchIndex uint64 // the replica's raft match index
	LastIndex  uint64 // the leader's last raft index
	Voter      bool   // already promoted from learner
}

// PercentDone is the replica's match index as a percentage of the leader's
// last index (100 once it is a voter).
func (p MoveProgress) PercentDone() float64 {
	if p.Voter || p.LastIndex == 0 {
		return 100
	}
	return 100 * float64(min(p.MatchIndex, p.LastIndex)) / float64(p.LastIndex)
}

// moveProgressFromWire converts a DescribePartitions answer's progress.
func moveProgressFromWire(ps []*strandpb.MoveProgress) []MoveProgress {
	var out []MoveProgress
	for _, p := range ps {
		out = append(out, MoveProgress{Node: p.GetNodeId(), MatchIndex: p.GetMatchIndex(), LastIndex: p.GetLastIndex(), Voter: p.GetVoter()})
	}
	return out
}
