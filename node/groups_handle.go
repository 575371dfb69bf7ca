package node

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
)

// handleGroupRequest serves the consumer-group requests (FindCoordinator,
// ConsumerGroupHeartbeat, OffsetCommit, TxnOffsetCommit, OffsetFetch, ListGroups,
// DescribeGroups, DeleteGroups, OffsetDelete); false when req is none of them. Writes are
// answered once their command is applied and read back by the coordinator;
// reads after a ReadIndex on the group's partition, so both are
// linearizable.
func (c *Core) handleGroupRequest(req *strandpb.Request, answer func(*strandpb.Response)) bool {
	svc := c.groupService()
	switch body := req.GetBody().(type) {
	case *strandpb.Request_FindCoordinator:
		c.handleFindCoordinator(body.FindCoordinator, answer)
	case *strandpb.Request_GroupHeartbeat:
		func() {
			defer c.flush()
			svc.GroupHeartbeat(body.GroupHeartbeat, func(r *strandpb.ConsumerGroupHeartbeatResponse, e *strandpb.Error) {
				answer(&strandpb.Response{Error: e, Body: &strandpb.Response_GroupHeartbeat{GroupHeartbeat: r}})
			})
		}()
	case *strandpb.Request_OffsetCommit:
		func() {
			defer c.flush()
			svc.OffsetCommit(body.OffsetCommit, func(e *strandpb.Error) {
				answer(&strandpb.Response{Error: e, Body: &strandpb.Response_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitResponse{}}})
			})
		}()
	case *strandpb.Request_TxnOffsetCommit:
		c.txnOffsetCommit(body.TxnOffsetCommit, func(e *strandpb.Error) {
			answer(&strandpb.Response{Error: e, Body: &strandpb.Response_TxnOffsetCommit{TxnOffsetCommit: &strandpb.TxnOffsetCommitResponse{}}})
		})
	case *strandpb.Request_OffsetFetch:
		func() {
			defer c.flush()
			svc.OffsetFetch(body.OffsetFetch, func(r *strandpb.OffsetFetchResponse, e *strandpb.Error) {
				answer(&strandpb.Response{Error: e, Body: &strandpb.Response_OffsetFetch{OffsetFetch: r}})
			})
		}()
	case *strandpb.Request_ListGroups:
		svc.ListGroups(answer)
	case *strandpb.Request_DescribeGroups:
		if c.checkCount(len(body.DescribeGroups.GetGroups()), answer) {
			svc.DescribeGroups(body.DescribeGroups, answer)
		}
	case *strandpb.Request_DeleteGroups:
		if c.checkCount(len(body.DeleteGroups.GetGroups()), answer) {
			svc.DeleteGroups(body.DeleteGroups, answer)
		}
	case *strandpb.Request_OffsetDelete:
		svc.OffsetDelete(body.OffsetDelete, answer)
	default:
		return false
	}
	return true
}

// groupService is package groupsvc's request handling over this node.
func (c *Core) groupService() groupsvc.Service {
	cfg := c.groupsConfig()
	return groupsvc.Service{
		Host: groupHost{c}, HeartbeatIntervalMs: int32(cfg.HeartbeatInterval.Milliseconds()),
		SessionTimeoutMs: int32(cfg.SessionTimeout.Milliseconds()), PartitionsMax: handlePartitionsMax,
		ErrInvalidRequest: ErrInvalidRequest,
	}
}

// groupHost is groupsvc.Host over the Core.
type groupHost struct{ c *Core }

func (h groupHost) CoordinatorOf(group string) (*groupsvc.Coordinator, groupsvc.Replica, error) {
	g, co, err := h.c.coordinatorOf(group)
	if err != nil {
		return nil, nil, err
	}
	return co, coordReplica{h.c, g, co}, nil
}

func (h groupHost) Error(err error) *strandpb.Error { return h.c.groupError(err) }

func (h groupHost) Metadata() *metadata.State {
	if h.c.meta == nil {
		return nil
	}
	return h.c.meta.meta
}

func (h groupHost) StampTopicIDs(req *strandpb.OffsetCommitRequest) (*strandpb.OffsetCommitRequest, error) {
	return h.c.stampTopicIDs(req)
}

func (h groupHost) Ticks() uint64 { return h.c.ticks }

// coordReplica is groupsvc.Replica: a coordinator's replica g, which this
// node leads.
type coordReplica struct {
	c  *Core
	g  *group
	co *groupsvc.Coordinator
}

func (r coordReplica) Propose(cmd *strandpb.GroupCommand, done func(groupsvc.Applied)) {
	r.c.proposeGroup(r.g, r.co, cmd, done)
}

func (r coordReplica) Read(serve func(*groups.State), fail func(*strandpb.Error)) {
	r.c.readCoordinator(r.g, r.co, serve, fail)
}

// handleFindCoordinator names the leader of the group's partition of
// __strand_offsets, creating the topic on first use.
func (c *Core) handleFindCoordinator(req *strandpb.FindCoordinatorRequest, answer func(*strandpb.Response)) {
	if req.GetTransactionalId() != "" {
		c.handleFindTxnCoordinator(req, answer) // txn_handle.go
		return
	}
	fail := func(err error) { answer(&strandpb.Response{Error: c.groupError(err)}) }
	if g := req.GetGroup(); g == "" || len(g) > groups.NameMax {
		fail(ErrInvalidRequest)
		return
	}
	t, ok := c.offsetsTopic()
	if !ok {
		fail(ErrCoordinatorNotAvailable)
		return
	}
	p := GroupPartition(req.GetGroup(), t.Partitions())
	lead := c.coordinatorLeader(t, p)
	if lead == 0 {
		fail(ErrCoordinatorNotAvailable)
		return
	}
	answer(&strandpb.Response{Body: &strandpb.Response_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorResponse{
		NodeId: uint64(lead), Address: c.peerAddress(lead), Partition: p,
	}}})
}

// coordinatorLeader is the node FindCoordinator names for partition p of
// the internal topic t (a group's or a transactional id's): the partition's
// leader (partitionLeader), or none (0: COORDINATOR_NOT_AVAILABLE, which a
// client asks another node after) on a node removed from the cluster. Its
// metadata stopped where the group that dropped it left it, so the leader
// it knows is stale for good, and a client that asked it was sent to the
// old coordinator (NOT_COORDINATOR) on every lookup: simnet seed 351, a
// group member whose seeds answered were both removed nodes, was given no
// partition for 12 s after the heal while the coordinator had moved.
func (c *Core) coordinatorLeader(t metadata.Topic, p int32) NodeID {
	if c.selfRemoved() {
		return 0
	}
	lead, _ := c.partitionLeader(t, p)
	return lead
}

// stampTopicIDs gives every offset of a commit the id its topic has in
// this node's applied metadata, and refuses (ErrUnknownTopicID) a commit
// naming another id than that, or an id of a topic that no longer
// exists: its offsets were read from a deleted topic and must not apply to
// a namesake. A coordinator whose metadata lags a re-create refuses the
// new id until it applied it (the committer retries).
func (c *Core) stampTopicIDs(req *strandpb.OffsetCommitRequest) (*strandpb.OffsetCommitRequest, error) {
	if c.meta == nil {
		return req, nil
	}
	out := proto.Clone(req).(*strandpb.OffsetCommitRequest)
	for _, o := range out.GetOffsets() {
		u, ok := c.meta.meta.TopicUUID(o.GetTopic())
		switch {
		case len(o.GetTopicId()) == 0:
			o.TopicId = u.Bytes() // nil when no topic has the name
		case !ok || !bytes.Equal(u.Bytes(), o.GetTopicId()):
			return nil, fmt.Errorf("%w: offsets of topic %q id %x do not apply: the topic was deleted (or re-created, id %s)",
				ErrUnknownTopicID, o.GetTopic(), o.GetTopicId(), u)
		}
	}
	return out, nil
}

// readCoordinator is readGroups for a known replica and coordinator. serve
// and fail run as completions (at the end of the public call that served
// the read), so they may propose or answer like any callback.
func (c *Core) readCoordinator(g *group, co *groupsvc.Coordinator, serve func(*groups.State), fail func(*strandpb.Error)) {
	c.readPartition(g.tp, func(g *group) {
		c.completions = append(c.completions, func() {
			if c.coord.coords[g.tp] != co {
				fail(c.groupError(ErrNotCoordinator))
				return
			}
			if err := c.catchUp(g, co); err != nil {
				fail(c.groupError(err))
				return
			}
			serve(co.State)
		})
	}, func(err error, _ NodeID) {
		c.completions = append(c.completions, func() { fail(c.groupError(err)) })
	})
}

// LedCoordinators lists the coordinators of every __strand_offsets replica
// this node leads, in group order (groupsvc.Host).
func (h groupHost) LedCoordinators() []groupsvc.Replica {
	var out []groupsvc.Replica
	for _, g := range h.c.groups {
		if g.tp.Topic != OffsetsTopic || g.part == nil {
			continue
		}
		if co, err := h.c.coordinatorFor(g); err == nil {
			out = append(out, coordReplica{h.c, g, co})
		}
	}
	return out
}
