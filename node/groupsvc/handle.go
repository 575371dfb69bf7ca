package groupsvc

import (
	"slices"
	"strings"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// Host is what the coordinator's request handlers need of the node.
type Host interface {
	// CoordinatorOf is group's coordinator on this node and the replica
	// it writes and reads through, or the error to answer (the id
	// invalid, __strand_offsets not created yet, the partition led
	// elsewhere). It may ask the metadata group to create
	// __strand_offsets.
	CoordinatorOf(group string) (*Coordinator, Replica, error)
	// Error is err on the wire as the group requests answer it.
	Error(err error) *strandpb.Error
	// Metadata is the node's applied metadata; nil before its metadata
	// group opens.
	Metadata() *metadata.State
	// StampTopicIDs gives every offset of a commit the id its topic has
	// in the applied metadata, or refuses it (UNKNOWN_TOPIC_ID).
	StampTopicIDs(req *strandpb.OffsetCommitRequest) (*strandpb.OffsetCommitRequest, error)
	// Ticks is the node's tick count: the members' leader-local timers.
	Ticks() uint64
	// LedCoordinators are the replicas of every __strand_offsets
	// partition this node leads, in the node's group order, each with its
	// coordinator.
	LedCoordinators() []Replica
}

// Replica is the node's replica of one coordinator's partition, which it
// leads.
type Replica interface {
	// Propose appends cmd to the partition at acks=all and calls done once
	// with its outcome, once the coordinator read it back (or with the
	// error that kept it from applying: a timeout or a lost leadership
	// may still apply).
	Propose(cmd *strandpb.GroupCommand, done func(Applied))
	// Read calls serve with the coordinator's state once a read index of
	// the partition is applied and read back, or fail; both run as the
	// node's completions, so they may propose or answer.
	Read(serve func(*groups.State), fail func(*strandpb.Error))
}

// Service serves the group requests on a node, over its Host. The node
// builds one per request from its configuration.
type Service struct {
	Host Host
	// HeartbeatIntervalMs and SessionTimeoutMs are what members are told.
	HeartbeatIntervalMs, SessionTimeoutMs int32
	// PartitionsMax bounds the partitions and topics one request names.
	PartitionsMax int
	// ErrInvalidRequest is the node's INVALID_REQUEST sentinel: its
	// error table is the node's (issue 22: one error table).
	ErrInvalidRequest error
}

// GroupHeartbeat applies one KIP-848 heartbeat on the group's coordinator
// (this node, or NOT_COORDINATOR) and calls done once, after the command is
// applied, with the member's epoch and assignment. The subscribed topics'
// partition counts are resolved here, from this node's applied metadata.
func (s Service) GroupHeartbeat(req *strandpb.ConsumerGroupHeartbeatRequest, done func(*strandpb.ConsumerGroupHeartbeatResponse, *strandpb.Error)) {
	h := s.Host
	co, r, err := h.CoordinatorOf(req.GetGroup())
	if err != nil {
		done(nil, h.Error(err))
		return
	}
	key := LiveKey(req.GetGroup(), req.GetMemberId())
	done = co.TrackHeartbeat(key, done)
	hbCmd := &strandpb.GroupHeartbeatCommand{Request: req, Topics: s.subscribedTopics(req.GetSubscriptions())}
	cmd := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Heartbeat{Heartbeat: hbCmd}}
	answer := func(res Applied) {
		if res.Err != nil {
			done(nil, h.Error(res.Err))
			return
		}
		if res.HB.MemberEpoch < 0 {
			delete(co.Live, key)
		} else {
			co.Live[key] = h.Ticks()
		}
		done(&strandpb.ConsumerGroupHeartbeatResponse{
			MemberId: req.GetMemberId(), MemberEpoch: res.HB.MemberEpoch, Assigned: PartitionsToWire(res.HB.Assigned),
			HeartbeatIntervalMs: s.HeartbeatIntervalMs, SessionTimeoutMs: s.SessionTimeoutMs,
			Rejoin: res.HB.Rejoin, Generation: res.HB.Generation, Protocol: res.HB.Protocol,
		}, nil)
	}
	switch req.GetClassic().GetStep() {
	case strandpb.ClassicStep_CLASSIC_STEP_HEARTBEAT:
		s.classicHeartbeat(co, r, hbCmd, cmd, answer, func(e *strandpb.Error) { done(nil, e) })
		return
	case strandpb.ClassicStep_CLASSIC_STEP_NONE:
	default:
		r.Propose(cmd, answer)
		return
	}
	if req.GetMemberEpoch() <= 0 {
		r.Propose(cmd, answer)
		return
	}
	// A member in its epoch: read the state linearizably first; a heartbeat
	// that would change nothing is answered from it without a log write
	// (most heartbeats of a stable group), anything else is proposed — so
	// is one racing an expiry of its member proposed and not yet applied,
	// which then applies before it.
	r.Read(func(st *groups.State) {
		if res, unchanged := st.HeartbeatUnchanged(HeartbeatFromWire(hbCmd, 0)); unchanged && !co.InFlight[key] {
			answer(Applied{HB: res})
			return
		}
		r.Propose(cmd, answer)
	}, func(e *strandpb.Error) { done(nil, e) })
}

// classicHeartbeat serves a classic member's Heartbeat: it names no
// topics, so its member's subscriptions are read from the state (after a
// linearizable read) and resolved here; a heartbeat that would change
// nothing is answered from the state, anything else is proposed (and
// applied against the state the log then holds).
func (s Service) classicHeartbeat(co *Coordinator, r Replica, hbCmd *strandpb.GroupHeartbeatCommand, cmd *strandpb.GroupCommand,
	answer func(Applied), fail func(*strandpb.Error)) {
	req := hbCmd.GetRequest()
	r.Read(func(st *groups.State) {
		hbCmd.Topics = s.subscribedTopics(st.Subscriptions(req.GetGroup(), req.GetMemberId()))
		expiring := co.InFlight[LiveKey(req.GetGroup(), req.GetMemberId())] // as in GroupHeartbeat
		if res, unchanged := st.ClassicHeartbeatUnchanged(HeartbeatFromWire(hbCmd, 0)); unchanged && !expiring {
			answer(Applied{HB: res})
			return
		}
		r.Propose(cmd, answer)
	}, fail)
}

// subscribedTopics resolves subscribed topic names to their partition
// counts (and racks) from this node's applied metadata; unknown ones and
// the coordinators' own topic are left out.
func (s Service) subscribedTopics(names []string) []*strandpb.GroupTopicInfo {
	meta := s.Host.Metadata()
	var topics []*strandpb.GroupTopicInfo
	subs := slices.Compact(slices.Sorted(slices.Values(names)))
	for _, name := range subs[:min(len(subs), s.PartitionsMax)] {
		if t, ok := meta.Topic(name); ok && name != OffsetsTopic {
			topics = append(topics, groupTopicInfo(meta, t))
		}
	}
	return topics
}

// groupTopicInfo is t's partition count and, per partition, its replicas'
// racks as registered (for rack-aware assignment; none when no node of the
// topic registered a rack).
func groupTopicInfo(meta *metadata.State, t metadata.Topic) *strandpb.GroupTopicInfo {
	info := &strandpb.GroupTopicInfo{Name: t.Name, Partitions: t.Partitions()}
	known := false
	for _, replicas := range t.Replicas {
		var racks []string
		for _, id := range replicas {
			if n, ok := meta.Node(id); ok && n.Rack != "" {
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

// OffsetCommit commits offsets on the group's coordinator; done runs once
// the command applied (nil: committed).
func (s Service) OffsetCommit(req *strandpb.OffsetCommitRequest, done func(*strandpb.Error)) {
	h := s.Host
	_, r, err := h.CoordinatorOf(req.GetGroup())
	if err != nil {
		done(h.Error(err))
		return
	}
	if len(req.GetOffsets()) > s.PartitionsMax {
		done(h.Error(s.ErrInvalidRequest))
		return
	}
	req, err = h.StampTopicIDs(req)
	if err != nil {
		done(h.Error(err))
		return
	}
	cmd := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_Commit{Commit: req}}
	r.Propose(cmd, func(res Applied) {
		if res.Err != nil {
			done(h.Error(res.Err))
			return
		}
		done(nil)
	})
}

// OffsetFetch reads committed offsets on the group's coordinator after a
// ReadIndex, so it sees every commit acknowledged before it began; with
// require_stable it also lists the partitions with pending transactional
// offsets (KIP-447).
func (s Service) OffsetFetch(req *strandpb.OffsetFetchRequest, done func(*strandpb.OffsetFetchResponse, *strandpb.Error)) {
	s.readGroups(req.GetGroup(), func(st *groups.State) {
		var ps []groups.TopicPartition
		for _, tp := range req.GetPartitions() {
			for _, p := range tp.GetPartitions() {
				ps = append(ps, groups.TopicPartition{Topic: tp.GetTopic(), Partition: p})
			}
		}
		resp := &strandpb.OffsetFetchResponse{Offsets: OffsetsToWire(s.currentOffsets(st.Fetch(req.GetGroup(), ps)))}
		if req.GetRequireStable() {
			resp.Unstable = PartitionsToWire(st.Unstable(req.GetGroup(), ps))
		}
		done(resp, nil)
	}, func(e *strandpb.Error) { done(nil, e) })
}

// currentOffsets leaves out committed offsets recorded for another id
// than their topic's current one (a deleted topic, re-created or not):
// Kafka removes a deleted topic's offsets, and a group reading its
// namesake starts where its reset policy says. The coordinator's sweep
// removes them for good once the topic is gone.
func (s Service) currentOffsets(in []groups.CommittedOffset) []groups.CommittedOffset {
	meta := s.Host.Metadata()
	if meta == nil {
		return in
	}
	out := in[:0]
	for _, o := range in {
		if len(o.TopicID) > 0 {
			u, ok := meta.TopicUUID(o.Partition.Topic)
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
func (s Service) readGroups(group string, serve func(*groups.State), fail func(*strandpb.Error)) {
	_, r, err := s.Host.CoordinatorOf(group)
	if err != nil {
		fail(s.Host.Error(err))
		return
	}
	r.Read(serve, fail)
}

// ListGroups lists the groups of every __strand_offsets partition this
// node leads (a client asks every node and merges), sorted by id.
func (s Service) ListGroups(answer func(*strandpb.Response)) {
	resp := &strandpb.ListGroupsResponse{}
	reps := s.Host.LedCoordinators()
	pending := len(reps)
	finish := func() {
		if pending--; pending <= 0 {
			slices.SortFunc(resp.Groups, func(a, b *strandpb.ListGroupsResponse_Group) int { return strings.Compare(a.GetGroup(), b.GetGroup()) })
			answer(&strandpb.Response{Body: &strandpb.Response_ListGroups{ListGroups: resp}})
		}
	}
	if pending == 0 {
		pending = 1
		finish()
		return
	}
	for _, r := range reps {
		r.Read(func(st *groups.State) {
			for _, id := range st.GroupIDs() {
				v, _ := st.Describe(id)
				resp.Groups = append(resp.Groups, &strandpb.ListGroupsResponse_Group{Group: id, State: v.State, Members: int32(len(v.Members))})
			}
			finish()
		}, func(*strandpb.Error) { finish() })
	}
}

// DescribeGroups describes each group on its coordinator (this node).
func (s Service) DescribeGroups(req *strandpb.DescribeGroupsRequest, answer func(*strandpb.Response)) {
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
		s.readGroups(id, func(st *groups.State) {
			v, ok := st.Describe(id)
			if !ok {
				out[i] = &strandpb.DescribeGroupsResponse_Group{Group: id, Error: s.Host.Error(groups.ErrGroupNotFound)}
			} else {
				out[i] = GroupToWire(v)
			}
			finish()
		}, func(e *strandpb.Error) {
			out[i] = &strandpb.DescribeGroupsResponse_Group{Group: id, Error: e}
			finish()
		})
	}
}

// DeleteGroups deletes each empty group on its coordinator.
func (s Service) DeleteGroups(req *strandpb.DeleteGroupsRequest, answer func(*strandpb.Response)) {
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
		_, r, err := s.Host.CoordinatorOf(id)
		if err != nil {
			finish(i, s.Host.Error(err))
			continue
		}
		r.Propose(&strandpb.GroupCommand{Body: &strandpb.GroupCommand_DeleteGroup{DeleteGroup: id}}, func(res Applied) {
			var e *strandpb.Error
			if res.Err != nil {
				e = s.Host.Error(res.Err)
			}
			finish(i, e)
		})
	}
}

// OffsetDelete forgets committed offsets on the group's coordinator
// (Kafka's OffsetDelete), answering once the command applied: per
// partition nil or GROUP_SUBSCRIBED_TO_TOPIC.
func (s Service) OffsetDelete(req *strandpb.OffsetDeleteRequest, answer func(*strandpb.Response)) {
	h := s.Host
	fail := func(err error) { answer(&strandpb.Response{Error: h.Error(err)}) }
	ps := PartitionsFromWire(req.GetPartitions())
	if len(ps) > s.PartitionsMax {
		fail(s.ErrInvalidRequest)
		return
	}
	_, r, err := h.CoordinatorOf(req.GetGroup())
	if err != nil {
		fail(err)
		return
	}
	cmd := &strandpb.GroupCommand{Body: &strandpb.GroupCommand_DeleteOffsets{DeleteOffsets: req}}
	r.Propose(cmd, func(res Applied) {
		if res.Err != nil {
			fail(res.Err)
			return
		}
		out := &strandpb.OffsetDeleteResponse{}
		for i, p := range ps {
			r := &strandpb.OffsetDeleteResponse_Result{Topic: p.Topic, Partition: p.Partition}
			if i < len(res.Deleted) && res.Deleted[i] != nil {
				r.Error = h.Error(res.Deleted[i])
			}
			out.Results = append(out.Results, r)
		}
		answer(&strandpb.Response{Body: &strandpb.Response_OffsetDelete{OffsetDelete: out}})
	})
}
