package node

import (
	"bytes"
	"fmt"
	"slices"

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
	switch body := req.GetBody().(type) {
	case *strandpb.Request_FindCoordinator:
		c.handleFindCoordinator(body.FindCoordinator, answer)
	case *strandpb.Request_GroupHeartbeat:
		c.groupHeartbeat(body.GroupHeartbeat, func(r *strandpb.ConsumerGroupHeartbeatResponse, e *strandpb.Error) {
			answer(&strandpb.Response{Error: e, Body: &strandpb.Response_GroupHeartbeat{GroupHeartbeat: r}})
		})
	case *strandpb.Request_OffsetCommit:
		c.offsetCommit(body.OffsetCommit, func(e *strandpb.Error) {
			answer(&strandpb.Response{Error: e, Body: &strandpb.Response_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitResponse{}}})
		})
	case *strandpb.Request_TxnOffsetCommit:
		c.txnOffsetCommit(body.TxnOffsetCommit, func(e *strandpb.Error) {
			answer(&strandpb.Response{Error: e, Body: &strandpb.Response_TxnOffsetCommit{TxnOffsetCommit: &strandpb.TxnOffsetCommitResponse{}}})
		})
	case *strandpb.Request_OffsetFetch:
		c.offsetFetch(body.OffsetFetch, func(r *strandpb.OffsetFetchResponse, e *strandpb.Error) {
			answer(&strandpb.Response{Error: e, Body: &strandpb.Response_OffsetFetch{OffsetFetch: r}})
		})
	case *strandpb.Request_ListGroups:
		c.handleListGroups(answer)
	case *strandpb.Request_DescribeGroups:
		c.handleDescribeGroups(body.DescribeGroups, answer)
	case *strandpb.Request_DeleteGroups:
		c.handleDeleteGroups(body.DeleteGroups, answer)
	case *strandpb.Request_OffsetDelete:
		c.handleOffsetDelete(body.OffsetDelete, answer)
	default:
		return false
	}
	return true
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

// groupHeartbeat applies one KIP-848 heartbeat on the group's coordinator
// (this node, or NOT_COORDINATOR) and calls done once, after the command is
// applied, with the member's epoch and assignment. The subscribed topics'
// partition counts are resolved here, from this node's applied metadata.
// HandleAs calls it for native requests and for Kafka's, which kafkaproto
// translates.
func (c *Core) groupHeartbeat(req *strandpb.ConsumerGroupHeartbeatRequest, done func(*strandpb.ConsumerGroupHeartbeatResponse, *strandpb.Error)) {
	defer c.flush()
	g, co, err := c.coordinatorOf(req.GetGroup())
	if err != nil {
		done(nil, c.groupError(err))
		return
	}
	key := groupsvc.LiveKey(req.GetGroup(), req.GetMemberId())
	done = co.TrackHeartbeat(key, done)
	hbCmd := &strandpb.GroupHeartbeatCommand{Request: req, Topics: c.subscribedTopics(req.GetSubscriptions())}
	cmd := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Heartbeat{Heartbeat: hbCmd}}
	cfg := c.groupsConfig()
	answer := func(res groupsvc.Applied) {
		if res.Err != nil {
			done(nil, c.groupError(res.Err))
			return
		}
		if res.HB.MemberEpoch < 0 {
			delete(co.Live, key)
		} else {
			co.Live[key] = c.ticks
		}
		done(&strandpb.ConsumerGroupHeartbeatResponse{
			MemberId: req.GetMemberId(), MemberEpoch: res.HB.MemberEpoch, Assigned: groupsvc.PartitionsToWire(res.HB.Assigned),
			HeartbeatIntervalMs: int32(cfg.HeartbeatInterval.Milliseconds()), SessionTimeoutMs: int32(cfg.SessionTimeout.Milliseconds()),
			Rejoin: res.HB.Rejoin, Generation: res.HB.Generation, Protocol: res.HB.Protocol,
		}, nil)
	}
	switch req.GetClassic().GetStep() {
	case strandpb.ClassicStep_CLASSIC_STEP_HEARTBEAT:
		c.classicHeartbeat(g, co, hbCmd, cmd, answer, func(e *strandpb.Error) { done(nil, e) })
		return
	case strandpb.ClassicStep_CLASSIC_STEP_NONE:
	default:
		c.proposeGroup(g, co, cmd, answer)
		return
	}
	if req.GetMemberEpoch() <= 0 {
		c.proposeGroup(g, co, cmd, answer)
		return
	}
	// A member in its epoch: read the state linearizably first; a heartbeat
	// that would change nothing is answered from it without a log write
	// (most heartbeats of a stable group), anything else is proposed — so
	// is one racing an expiry of its member proposed and not yet applied,
	// which then applies before it.
	c.readCoordinator(g, co, func(s *groups.State) {
		if r, unchanged := s.HeartbeatUnchanged(groupsvc.HeartbeatFromWire(hbCmd, 0)); unchanged && !co.InFlight[key] {
			answer(groupsvc.Applied{HB: r})
			return
		}
		c.proposeGroup(g, co, cmd, answer)
	}, func(e *strandpb.Error) { done(nil, e) })
}

// classicHeartbeat serves a classic member's Heartbeat: it names no
// topics, so its member's subscriptions are read from the state (after a
// linearizable read) and resolved here; a heartbeat that would change
// nothing is answered from the state, anything else is proposed (and
// applied against the state the log then holds).
func (c *Core) classicHeartbeat(g *group, co *groupsvc.Coordinator, hbCmd *strandpb.GroupHeartbeatCommand, cmd *strandpb.GroupCommand,
	answer func(groupsvc.Applied), fail func(*strandpb.Error)) {
	req := hbCmd.GetRequest()
	c.readCoordinator(g, co, func(s *groups.State) {
		hbCmd.Topics = c.subscribedTopics(s.Subscriptions(req.GetGroup(), req.GetMemberId()))
		expiring := co.InFlight[groupsvc.LiveKey(req.GetGroup(), req.GetMemberId())] // as in groupHeartbeat
		if r, unchanged := s.ClassicHeartbeatUnchanged(groupsvc.HeartbeatFromWire(hbCmd, 0)); unchanged && !expiring {
			answer(groupsvc.Applied{HB: r})
			return
		}
		c.proposeGroup(g, co, cmd, answer)
	}, fail)
}

// subscribedTopics resolves subscribed topic names to their partition
// counts (and racks) from this node's applied metadata; unknown ones and
// the coordinators' own topic are left out.
func (c *Core) subscribedTopics(names []string) []*strandpb.GroupTopicInfo {
	var topics []*strandpb.GroupTopicInfo
	subs := slices.Compact(slices.Sorted(slices.Values(names)))
	for _, name := range subs[:min(len(subs), handlePartitionsMax)] {
		if t, ok := c.meta.meta.Topic(name); ok && name != OffsetsTopic {
			topics = append(topics, c.groupTopicInfo(t))
		}
	}
	return topics
}

// groupTopicInfo is t's partition count and, per partition, its replicas'
// racks as registered (for rack-aware assignment; none when no node of the
// topic registered a rack).
func (c *Core) groupTopicInfo(t metadata.Topic) *strandpb.GroupTopicInfo {
	info := &strandpb.GroupTopicInfo{Name: t.Name, Partitions: t.Partitions()}
	known := false
	for _, replicas := range t.Replicas {
		var racks []string
		for _, id := range replicas {
			if n, ok := c.meta.meta.Node(id); ok && n.Rack != "" {
				racks = append(racks, n.Rack)
				known = true
			}
		}
		info.PartitionRacks = append(info.PartitionRacks, &strandpb.GroupPartitionRacks{Racks: slices.Compact(slices.Sorted(slices.Values(racks)))})
	}
	if !known {
		info.PartitionRacks = nil
	}
	return info
}

// offsetCommit commits offsets on the group's coordinator; done runs once
// the command applied (nil: committed).
func (c *Core) offsetCommit(req *strandpb.OffsetCommitRequest, done func(*strandpb.Error)) {
	defer c.flush()
	g, co, err := c.coordinatorOf(req.GetGroup())
	if err != nil {
		done(c.groupError(err))
		return
	}
	if len(req.GetOffsets()) > handlePartitionsMax {
		done(c.groupError(ErrInvalidRequest))
		return
	}
	req, err = c.stampTopicIDs(req)
	if err != nil {
		done(c.groupError(err))
		return
	}
	cmd := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Commit{Commit: req}}
	c.proposeGroup(g, co, cmd, func(res groupsvc.Applied) {
		if res.Err != nil {
			done(c.groupError(res.Err))
			return
		}
		done(nil)
	})
}

// offsetFetch reads committed offsets on the group's coordinator after a
// ReadIndex, so it sees every commit acknowledged before it began; with
// require_stable it also lists the partitions with pending transactional
// offsets (KIP-447).
func (c *Core) offsetFetch(req *strandpb.OffsetFetchRequest, done func(*strandpb.OffsetFetchResponse, *strandpb.Error)) {
	defer c.flush()
	c.readGroups(req.GetGroup(), func(s *groups.State) {
		var ps []groups.TopicPartition
		for _, tp := range req.GetPartitions() {
			for _, p := range tp.GetPartitions() {
				ps = append(ps, groups.TopicPartition{Topic: tp.GetTopic(), Partition: p})
			}
		}
		resp := &strandpb.OffsetFetchResponse{Offsets: groupsvc.OffsetsToWire(c.currentOffsets(s.Fetch(req.GetGroup(), ps)))}
		if req.GetRequireStable() {
			resp.Unstable = groupsvc.PartitionsToWire(s.Unstable(req.GetGroup(), ps))
		}
		done(resp, nil)
	}, func(e *strandpb.Error) { done(nil, e) })
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

// currentOffsets leaves out committed offsets recorded for another id
// than their topic's current one (a deleted topic, re-created or not):
// Kafka removes a deleted topic's offsets, and a group reading its
// namesake starts where its reset policy says. The coordinator's sweep
// removes them for good once the topic is gone.
func (c *Core) currentOffsets(in []groups.CommittedOffset) []groups.CommittedOffset {
	if c.meta == nil {
		return in
	}
	out := in[:0]
	for _, o := range in {
		if len(o.TopicID) > 0 {
			u, ok := c.meta.meta.TopicUUID(o.Partition.Topic)
			if !ok || string(u.Bytes()) != o.TopicID {
				continue
			}
		}
		out = append(out, o)
	}
	return out
}

// readGroups runs serve with the coordinator's state of group once a read
// index of its partition is applied and read back, or fail.
func (c *Core) readGroups(group string, serve func(*groups.State), fail func(*strandpb.Error)) {
	g, co, err := c.coordinatorOf(group)
	if err != nil {
		fail(c.groupError(err))
		return
	}
	c.readCoordinator(g, co, serve, fail)
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

// handleListGroups lists the groups of every __strand_offsets partition this
// node leads (a client asks every node and merges).
func (c *Core) handleListGroups(answer func(*strandpb.Response)) {
	resp := &strandpb.ListGroupsResponse{}
	var reps []*group
	var cos []*groupsvc.Coordinator
	for _, g := range c.groups {
		if g.tp.Topic != OffsetsTopic || g.part == nil {
			continue
		}
		if co, err := c.coordinatorFor(g); err == nil {
			reps, cos = append(reps, g), append(cos, co)
		}
	}
	pending := len(reps)
	finish := func() {
		if pending--; pending <= 0 {
			slices.SortFunc(resp.Groups, func(a, b *strandpb.ListGroupsResponse_Group) int { return cmpStr(a.GetGroup(), b.GetGroup()) })
			answer(&strandpb.Response{Body: &strandpb.Response_ListGroups{ListGroups: resp}})
		}
	}
	if pending == 0 {
		pending = 1
		finish()
		return
	}
	for i, g := range reps {
		c.readCoordinator(g, cos[i], func(s *groups.State) {
			for _, id := range s.GroupIDs() {
				v, _ := s.Describe(id)
				resp.Groups = append(resp.Groups, &strandpb.ListGroupsResponse_Group{Group: id, State: v.State, Members: int32(len(v.Members))})
			}
			finish()
		}, func(*strandpb.Error) { finish() })
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// handleDescribeGroups describes each group on its coordinator (this node).
func (c *Core) handleDescribeGroups(req *strandpb.DescribeGroupsRequest, answer func(*strandpb.Response)) {
	if !c.checkCount(len(req.GetGroups()), answer) {
		return
	}
	ids := req.GetGroups()
	out := make([]*strandpb.DescribeGroupsResponse_Group, len(ids))
	pending := len(ids)
	finish := func() {
		if pending--; pending <= 0 {
			answer(&strandpb.Response{Body: &strandpb.Response_DescribeGroups{DescribeGroups: &strandpb.DescribeGroupsResponse{Groups: out}}})
		}
	}
	if pending == 0 {
		pending = 1
		finish()
		return
	}
	for i, id := range ids {
		c.readGroups(id, func(s *groups.State) {
			v, ok := s.Describe(id)
			if !ok {
				out[i] = &strandpb.DescribeGroupsResponse_Group{Group: id, Error: c.groupError(groups.ErrGroupNotFound)}
			} else {
				out[i] = groupsvc.GroupToWire(v)
			}
			finish()
		}, func(e *strandpb.Error) {
			out[i] = &strandpb.DescribeGroupsResponse_Group{Group: id, Error: e}
			finish()
		})
	}
}

// handleDeleteGroups deletes each empty group on its coordinator.
func (c *Core) handleDeleteGroups(req *strandpb.DeleteGroupsRequest, answer func(*strandpb.Response)) {
	if !c.checkCount(len(req.GetGroups()), answer) {
		return
	}
	ids := req.GetGroups()
	out := make([]*strandpb.DeleteGroupsResponse_Result, len(ids))
	pending := len(ids)
	finish := func(i int, e *strandpb.Error) {
		out[i] = &strandpb.DeleteGroupsResponse_Result{Group: ids[i], Error: e}
		if pending--; pending == 0 {
			answer(&strandpb.Response{Body: &strandpb.Response_DeleteGroups{DeleteGroups: &strandpb.DeleteGroupsResponse{Results: out}}})
		}
	}
	if pending == 0 {
		answer(&strandpb.Response{Body: &strandpb.Response_DeleteGroups{DeleteGroups: &strandpb.DeleteGroupsResponse{}}})
		return
	}
	for i, id := range ids {
		g, co, err := c.coordinatorOf(id)
		if err != nil {
			finish(i, c.groupError(err))
			continue
		}
		c.proposeGroup(g, co, &strandpb.GroupCommand{Body: &strandpb.GroupCommand_DeleteGroup{DeleteGroup: id}}, func(res groupsvc.Applied) {
			var e *strandpb.Error
			if res.Err != nil {
				e = c.groupError(res.Err)
			}
			finish(i, e)
		})
	}
}

// handleOffsetDelete forgets committed offsets on the group's coordinator
// (Kafka's OffsetDelete), answering once the command applied: per
// partition nil or GROUP_SUBSCRIBED_TO_TOPIC.
func (c *Core) handleOffsetDelete(req *strandpb.OffsetDeleteRequest, answer func(*strandpb.Response)) {
	fail := func(err error) { answer(&strandpb.Response{Error: c.groupError(err)}) }
	ps := groupsvc.PartitionsFromWire(req.GetPartitions())
	if len(ps) > handlePartitionsMax {
		fail(ErrInvalidRequest)
		return
	}
	g, co, err := c.coordinatorOf(req.GetGroup())
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_DeleteOffsets{DeleteOffsets: req}}
	c.proposeGroup(g, co, cmd, func(res groupsvc.Applied) {
		if res.Err != nil {
			fail(res.Err)
			return
		}
		out := &strandpb.OffsetDeleteResponse{}
		for i, p := range ps {
			r := &strandpb.OffsetDeleteResponse_Result{Topic: p.Topic, Partition: p.Partition}
			if i < len(res.Deleted) && res.Deleted[i] != nil {
				r.Error = c.groupError(res.Deleted[i])
			}
			out.Results = append(out.Results, r)
		}
		answer(&strandpb.Response{Body: &strandpb.Response_OffsetDelete{OffsetDelete: out}})
	})
}
