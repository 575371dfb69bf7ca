package node

import (
	"fmt"
	"slices"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// handleMovePartitions starts each partition move through the metadata
// group, one ReassignPartition command per move, answered once applied
// here: the move is then recorded and the partition's leader drives it
// (moves.go). Refused before proposing: a bad topic name, a partition
// named twice, an empty or repeating replica list, and a replica list
// whose length differs from the partition's current one unless the move
// sets allow_replication_change (a dropped replica would silently lose
// redundancy). The metadata group refuses the rest (unknown nodes, a move
// in progress).
func (c *Core) handleMovePartitions(req *strandpb.MovePartitionsRequest, answer func(*strandpb.Response)) {
	if !c.adminPreflight(answer) || !c.checkCount(len(req.GetMoves()), answer) {
		return
	}
	moves := req.GetMoves()
	out := make([]*strandpb.MovePartitionsResponse_Move, len(moves))
	pending := len(moves)
	finish := func() {
		answer(&strandpb.Response{Body: &strandpb.Response_MovePartitions{MovePartitions: &strandpb.MovePartitionsResponse{Moves: out}}})
	}
	if pending == 0 {
		finish()
		return
	}
	done := func(i int, e *strandpb.Error) {
		m := moves[i]
		o := &strandpb.MovePartitionsResponse_Move{Topic: m.GetTopic(), Partition: m.GetPartition(), Error: e}
		if e == nil {
			if mv, ok := c.meta.meta.MoveOf(m.GetTopic(), m.GetPartition()); ok {
				o.Replicas, o.TargetReplicas = mv.Replicas, mv.Target
			} else if r, err := c.meta.meta.Assignment(m.GetTopic(), m.GetPartition()); err == nil {
				o.Replicas = r // already there, or already completed
			}
		}
		out[i] = o
		if pending--; pending == 0 {
			finish()
		}
	}
	timeout := c.msToTicks(req.GetTimeoutMs(), uint64(c.cfg.RequestTimeoutTicks))
	seen := map[TopicPartition]bool{} // lookup only
	for i, m := range moves {
		data, e := moveCommand(m, seen)
		if e == nil {
			e = c.checkMoveKeepsReplicas(m)
		}
		if e != nil {
			c.completions = append(c.completions, func() { done(i, e) })
			continue
		}
		c.proposeMeta(data, timeout, func(res metadata.Result, err error) {
			if err != nil {
				done(i, c.wireError(err, 0, nil))
				return
			}
			done(i, metaError(res.Err))
		})
	}
}

// moveCommand encodes one move, or refuses it before proposing.
func moveCommand(m *strandpb.MovePartitionsRequest_Move, seen map[TopicPartition]bool) ([]byte, *strandpb.Error) {
	tp := TopicPartition{Topic: m.GetTopic(), Partition: m.GetPartition()}
	if err := metadata.ValidateTopicName(tp.Topic); err != nil {
		return nil, &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: err.Error()}
	}
	if seen[tp] {
		return nil, &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			Message: fmt.Sprintf("node: %s/%d named twice in one request", tp.Topic, tp.Partition)}
	}
	seen[tp] = true
	replicas := m.GetReplicas()
	bad := len(replicas) == 0 || len(replicas) > metadata.MoveReplicasMax || slices.Contains(replicas, 0)
	for i, id := range replicas {
		bad = bad || slices.Contains(replicas[:i], id)
	}
	if bad {
		return nil, &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT,
			Message: fmt.Sprintf("node: replicas %v: give 1..%d distinct node ids", replicas, metadata.MoveReplicasMax)}
	}
	data, err := metadata.EncodeReassignPartition(tp.Topic, 0, tp.Partition, replicas, m.GetRedirect())
	return data, metaError(err)
}

// checkMoveKeepsReplicas refuses a move that changes the number of
// replicas of its partition unless the request allows it. A partition the
// metadata does not know is left to the metadata group to refuse.
func (c *Core) checkMoveKeepsReplicas(m *strandpb.MovePartitionsRequest_Move) *strandpb.Error {
	if m.GetAllowReplicationChange() {
		return nil
	}
	current, err := c.meta.meta.Assignment(m.GetTopic(), m.GetPartition())
	if err != nil || len(current) == len(m.GetReplicas()) {
		return nil
	}
	return &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT,
		Message: fmt.Sprintf("node: %s/%d has %d replicas, the move names %d: that changes its replication factor; "+
			"name %d replicas, or allow the change explicitly (strand partition move --allow-rf-change)",
			m.GetTopic(), m.GetPartition(), len(current), len(m.GetReplicas()), len(current))}
}

// idsUint64 converts node ids for the wire (nil for none).
func idsUint64(ids []NodeID) []uint64 {
	if len(ids) == 0 {
		return nil
	}
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = uint64(id)
	}
	return out
}

// wireMoveProgress converts a move's progress for the wire.
func wireMoveProgress(ps []MoveProgress) []*strandpb.MoveProgress {
	var out []*strandpb.MoveProgress
	for _, p := range ps {
		out = append(out, &strandpb.MoveProgress{NodeId: uint64(p.Node), MatchIndex: p.MatchIndex, LastIndex: p.LastIndex, Voter: p.Voter})
	}
	return out
}
