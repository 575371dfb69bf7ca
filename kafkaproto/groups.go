package kafkaproto

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// The consumer-group APIs are translations onto the group coordinator the
// native protocol uses (node.Core's FindCoordinator, ConsumerGroupHeartbeat,
// OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups
// requests, submitted through the Backend like every other request). The
// classic membership protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup) is mapped onto the same KIP-848 coordinator in classic.go.

// call submits req and waits for its answer (nil: the connection closed).
// Used where one Kafka request needs a second Strand request after the
// first answered; the first submit keeps the connection's order. It runs
// in an answer's wait (on the writer), so it does not touch c.calls.
func (c *conn) call(req *strandpb.Request) *strandpb.Response {
	return c.wait(c.send(req))
}

// findCoordinator names the group's coordinator — the leader of the
// group's __strand_offsets partition — or (key type 1) the transactional
// id's — the leader of its __strand_transactions partition — by its Kafka
// listener. v4+ asks for many keys at once.
func (c *conn) findCoordinator(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.FindCoordinatorRequest)
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	calls := make([]*call, len(keys))
	for i, k := range keys {
		switch {
		case r.CoordinatorType == 0:
			calls[i] = c.submit(&strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{Group: k}}})
		case r.CoordinatorType == 1 && k != "":
			calls[i] = c.submit(&strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{TransactionalId: k}}})
		}
	}
	meta := c.submit(&strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: []string{"\x00"}}}})
	return func() kmsg.Response {
		m := c.wait(meta)
		if m == nil {
			return nil
		}
		out := kmsg.NewPtrFindCoordinatorResponse()
		out.SetVersion(r.Version)
		for i, k := range keys {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key, co.NodeID = k, -1
			if r.CoordinatorType == 1 && k == "" {
				msg := "an empty transactional id has no coordinator"
				co.ErrorCode, co.ErrorMessage = kerr.InvalidRequest.Code, &msg
			} else if r.CoordinatorType > 1 || r.CoordinatorType < 0 {
				msg := "Strand has no coordinator of key type " + strconv.Itoa(int(r.CoordinatorType))
				co.ErrorCode, co.ErrorMessage = kerr.UnsupportedVersion.Code, &msg
			} else if resp := c.wait(calls[i]); resp == nil {
				return nil
			} else if e := resp.GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
				co.ErrorCode, co.ErrorMessage = kafkaCode(e), message(e)
			} else {
				coordinatorAddress(&co, resp.GetFindCoordinator().GetNodeId(), m.GetMetadata())
			}
			out.Coordinators = append(out.Coordinators, co)
		}
		if r.Version < 4 && len(out.Coordinators) == 1 {
			co := out.Coordinators[0]
			out.ErrorCode, out.ErrorMessage, out.NodeID, out.Host, out.Port = co.ErrorCode, co.ErrorMessage, co.NodeID, co.Host, co.Port
			out.Coordinators = nil
		}
		return out
	}
}

// coordinatorAddress fills co with node id's Kafka listener, or
// COORDINATOR_NOT_AVAILABLE (retriable) when this node does not know it
// (yet): a coordinator without a Kafka listener cannot be reached.
func coordinatorAddress(co *kmsg.FindCoordinatorResponseCoordinator, id uint64, m *strandpb.MetadataResponse) {
	for _, n := range m.GetNodes() {
		if n.GetId() != id {
			continue
		}
		if host, port, ok := splitHostPort(n.GetKafkaAddress()); ok {
			co.NodeID, co.Host, co.Port = int32(id), host, port
			return
		}
	}
	msg := "the coordinator has no known Kafka listener"
	co.ErrorCode, co.ErrorMessage = kerr.CoordinatorNotAvailable.Code, &msg
}

// offsetCommit commits through the coordinator. A classic member's
// generation is translated to its member epoch by the coordinator
// (classic_generation: engine/groups' classicEpoch); a commit without member id (generation
// -1: a simple consumer, kadm's CommitOffsets) needs an empty group, as on
// Strand. The engine's epoch errors are answered as the classic protocol's
// ILLEGAL_GENERATION, which makes the member rejoin.
func (c *conn) offsetCommit(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.OffsetCommitRequest)
	classic := !c.s.classic.isKIP848(r.Group, r.MemberID)
	// Checked and submitted before the next request on this connection is
	// read, so a pipelined OffsetFetch sees the commit, as in Kafka.
	local, resolved, ok := c.commitChecks(r)
	if !ok {
		return func() kmsg.Response { return nil }
	}
	sreq := &strandpb.OffsetCommitRequest{Group: r.Group, MemberId: r.MemberID, MemberEpoch: r.Generation, ClassicGeneration: classic}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			key := tp{t.Topic, p.Partition}
			if _, refused := local[key]; refused {
				continue
			}
			off := p.Offset
			if o, ok := resolved[key]; ok {
				off = o
			}
			sreq.Offsets = append(sreq.Offsets, &strandpb.OffsetCommitPartition{Topic: t.Topic, Partition: p.Partition, Offset: off, Metadata: deref(p.Metadata)})
		}
	}
	var k *call
	if len(sreq.Offsets) > 0 {
		k = c.submit(&strandpb.Request{Body: &strandpb.Request_OffsetCommit{OffsetCommit: sreq}})
	}
	return func() kmsg.Response {
		var code int16
		if k != nil {
			resp := c.wait(k)
			if resp == nil {
				return nil
			}
			code = classicCode(resp.GetError())
			if c.s.classic.isKIP848(r.Group, r.MemberID) {
				code = kafkaCode(resp.GetError())
			}
		}
		out := kmsg.NewPtrOffsetCommitResponse()
		out.SetVersion(r.Version)
		for _, t := range r.Topics {
			ot := kmsg.NewOffsetCommitResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewOffsetCommitResponseTopicPartition()
				op.Partition, op.ErrorCode = p.Partition, code
				if lc, refused := local[tp{t.Topic, p.Partition}]; refused {
					op.ErrorCode = lc
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
}

// commitChecks answers what Kafka's coordinator answers before it stores
// a commit: UNKNOWN_TOPIC_OR_PARTITION for a partition that does not
// exist (local, by partition). Kafka stores a commit of -1 or -2 as given;
// Strand's groups keep only real positions, so such a commit is resolved
// here to the position it names when it is applied — -2 the partition's
// log start, -1 its end — which is what KafkaJS (whose resetOffsets
// commits them) reads those values as (resolved). ok is false when the
// connection closed.
func (c *conn) commitChecks(r *kmsg.OffsetCommitRequest) (local map[tp]int16, resolved map[tp]int64, ok bool) {
	local, resolved = map[tp]int16{}, map[tp]int64{}
	mreq := &strandpb.MetadataRequest{}
	for _, t := range r.Topics {
		mreq.Topics = append(mreq.Topics, t.Topic)
	}
	if len(mreq.Topics) == 0 {
		return local, resolved, true
	}
	m := c.call(&strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: mreq}})
	if m == nil {
		return nil, nil, false
	}
	parts := map[string]int{}
	for _, t := range m.GetMetadata().GetTopics() {
		if t.GetError().GetCode() == strandpb.ErrorCode_ERROR_CODE_NONE {
			parts[t.GetName()] = len(t.GetPartitions())
		}
	}
	lreq := &strandpb.ListOffsetsRequest{}
	for _, t := range r.Topics {
		n, known := parts[t.Topic]
		for _, p := range t.Partitions {
			switch {
			case m.GetError() != nil:
			case !known || p.Partition < 0 || int(p.Partition) >= n:
				local[tp{t.Topic, p.Partition}] = kerr.UnknownTopicOrPartition.Code
			case p.Offset == -1 || p.Offset == -2:
				lreq.Partitions = append(lreq.Partitions, &strandpb.ListOffsetsRequest_Partition{
					Topic: t.Topic, Partition: p.Partition, TimestampMs: p.Offset})
			}
		}
	}
	if len(lreq.Partitions) == 0 {
		return local, resolved, true
	}
	l := c.call(&strandpb.Request{Body: &strandpb.Request_ListOffsets{ListOffsets: lreq}})
	if l == nil {
		return nil, nil, false
	}
	missing := kafkaCode(l.GetError())
	if missing == 0 {
		missing = kerr.UnknownServerError.Code
	}
	for _, want := range lreq.Partitions {
		local[tp{want.GetTopic(), want.GetPartition()}] = missing
	}
	for _, a := range l.GetListOffsets().GetPartitions() {
		key := tp{a.GetTopic(), a.GetPartition()}
		if code := kafkaCode(partErr(l, a.GetError())); code != 0 {
			local[key] = code
			continue
		}
		delete(local, key)
		resolved[key] = a.GetOffset()
	}
	return local, resolved, true
}

// classicCode is kafkaCode for the classic group APIs, whose clients know
// generations, not member epochs: a fenced or stale epoch is
// ILLEGAL_GENERATION (rejoin), a late heartbeat resend
// REBALANCE_IN_PROGRESS (rejoin, always safe).
func classicCode(e *strandpb.Error) int16 {
	switch e.GetCode() {
	case strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH, strandpb.ErrorCode_ERROR_CODE_STALE_MEMBER_EPOCH:
		return kerr.IllegalGeneration.Code
	case strandpb.ErrorCode_ERROR_CODE_STALE_HEARTBEAT:
		return kerr.RebalanceInProgress.Code
	}
	return kafkaCode(e)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// offsetFetch reads committed offsets, one Strand OffsetFetch per group
// (v8+ asks for many groups at once; each goes to its coordinator's
// state). A partition without a commit answers offset -1, as Kafka does.
func (c *conn) offsetFetch(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.OffsetFetchRequest)
	groups := r.Groups
	if r.Version < 8 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = r.Group
		for _, t := range r.Topics {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = t.Topic, t.Partitions
			g.Topics = append(g.Topics, gt)
		}
		if r.Topics == nil {
			g.Topics = nil
		}
		groups = []kmsg.OffsetFetchRequestGroup{g}
	}
	calls := make([]*call, len(groups))
	for i, g := range groups {
		sreq := &strandpb.OffsetFetchRequest{Group: g.Group, RequireStable: r.RequireStable}
		for _, t := range g.Topics {
			sreq.Partitions = append(sreq.Partitions, &strandpb.GroupTopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
		}
		calls[i] = c.submit(&strandpb.Request{Body: &strandpb.Request_OffsetFetch{OffsetFetch: sreq}})
	}
	return func() kmsg.Response {
		out := kmsg.NewPtrOffsetFetchResponse()
		out.SetVersion(r.Version)
		for i, g := range groups {
			resp := c.wait(calls[i])
			if resp == nil {
				return nil
			}
			og := offsetFetchGroup(g, resp)
			if r.RequireStable && og.ErrorCode == 0 {
				markUnstable(&og, resp.GetOffsetFetch().GetUnstable(), len(g.Topics) == 0) // txn_offsets.go
			}
			out.Groups = append(out.Groups, og)
		}
		if r.Version < 8 {
			og := out.Groups[0]
			out.ErrorCode, out.Groups = og.ErrorCode, nil
			for _, t := range og.Topics {
				ot := kmsg.NewOffsetFetchResponseTopic()
				ot.Topic = t.Topic
				for _, p := range t.Partitions {
					op := kmsg.NewOffsetFetchResponseTopicPartition()
					op.Partition, op.Offset, op.LeaderEpoch, op.Metadata, op.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					ot.Partitions = append(ot.Partitions, op)
				}
				out.Topics = append(out.Topics, ot)
			}
		}
		return out
	}
}

// offsetFetchGroup is one group's answer: the asked partitions (-1 where
// nothing is committed), or every committed one when none were asked.
func offsetFetchGroup(g kmsg.OffsetFetchRequestGroup, resp *strandpb.Response) kmsg.OffsetFetchResponseGroup {
	og := kmsg.NewOffsetFetchResponseGroup()
	og.Group = g.Group
	if e := resp.GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
		og.ErrorCode = kafkaCode(e)
		return og
	}
	type key struct {
		topic string
		part  int32
	}
	got := map[key]*strandpb.GroupCommittedOffset{}
	for _, o := range resp.GetOffsetFetch().GetOffsets() {
		got[key{o.GetTopic(), o.GetPartition()}] = o
	}
	add := func(topic string, part int32, o *strandpb.GroupCommittedOffset) {
		if len(og.Topics) == 0 || og.Topics[len(og.Topics)-1].Topic != topic {
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic = topic
			og.Topics = append(og.Topics, t)
		}
		p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = part, -1, -1
		if o != nil {
			md := o.GetMetadata()
			p.Offset, p.Metadata = o.GetOffset(), &md
		}
		t := &og.Topics[len(og.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	if len(g.Topics) == 0 {
		for _, o := range resp.GetOffsetFetch().GetOffsets() {
			add(o.GetTopic(), o.GetPartition(), o)
		}
		return og
	}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, p, got[key{t.Topic, p}])
		}
	}
	return og
}

// kafkaStates maps the coordinator's group states to Kafka's classic
// names (as Kafka 4's coordinator describes a consumer group to classic
// clients).
var kafkaStates = map[string]string{"empty": "Empty", "stable": "Stable", "assigning": "CompletingRebalance", "reconciling": "CompletingRebalance"}

func kafkaState(s string) string {
	if k, ok := kafkaStates[s]; ok {
		return k
	}
	return "Unknown"
}

// listGroups lists the groups this node coordinates (Kafka clients ask
// every broker and merge, as Strand's client does). v4 filters by state,
// v5 by type (every Strand group is a "consumer" group).
func (c *conn) listGroups(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.ListGroupsRequest)
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_ListGroups{ListGroups: &strandpb.ListGroupsRequest{}}})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		out := kmsg.NewPtrListGroupsResponse()
		out.SetVersion(r.Version)
		out.ErrorCode = kafkaCode(resp.GetError())
		for _, g := range resp.GetListGroups().GetGroups() {
			state := kafkaState(g.GetState())
			if len(r.StatesFilter) > 0 && !slices.ContainsFunc(r.StatesFilter, func(s string) bool { return equalFold(s, state) }) {
				continue
			}
			if len(r.TypesFilter) > 0 && !slices.ContainsFunc(r.TypesFilter, func(s string) bool { return equalFold(s, "consumer") }) {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.GetGroup(), "consumer", state, "consumer"
			out.Groups = append(out.Groups, lg)
		}
		return out
	}
}

// equalFold compares ASCII case-insensitively (Kafka's filters are).
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// describeGroups describes groups on their coordinator: members with
// their subscriptions and current assignments encoded as the consumer
// protocol's metadata and assignment (what kadm and the Kafka tools
// decode). A missing group is state "Dead" (v0-5; Kafka's classic answer).
func (c *conn) describeGroups(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.DescribeGroupsRequest)
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_DescribeGroups{DescribeGroups: &strandpb.DescribeGroupsRequest{Groups: r.Groups}}})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		out := kmsg.NewPtrDescribeGroupsResponse()
		out.SetVersion(r.Version)
		got := resp.GetDescribeGroups().GetGroups()
		for i, name := range r.Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.State, dg.AuthorizedOperations = name, "Dead", -2147483648
			var g *strandpb.DescribeGroupsResponse_Group
			if i < len(got) {
				g = got[i]
			}
			switch e := g.GetError(); {
			case g == nil:
				dg.ErrorCode = kafkaCode(resp.GetError())
			case e.GetCode() == strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND:
			case e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE:
				dg.ErrorCode = kafkaCode(e)
			default:
				describedGroup(&dg, g)
			}
			out.Groups = append(out.Groups, dg)
		}
		return out
	}
}

// describedGroup fills dg from the coordinator's view of g. Client id,
// host and the protocol name are the classic members' (replicated with
// them); the protocol is the server assignor's when no member joined
// through the classic protocol.
func describedGroup(dg *kmsg.DescribeGroupsResponseGroup, g *strandpb.DescribeGroupsResponse_Group) {
	dg.State, dg.ProtocolType, dg.Protocol = kafkaState(g.GetState()), "consumer", "uniform"
	for _, m := range g.GetMembers() {
		if p := m.GetClassic().GetProtocol(); p != "" {
			dg.Protocol = p
			break
		}
	}
	for _, m := range g.GetMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.GetMemberId()
		if cm := m.GetClassic(); cm != nil {
			dm.ClientID, dm.ClientHost = cm.GetClientId(), cm.GetHost()
		}
		if id := m.GetInstanceId(); id != "" {
			dm.InstanceID = &id
		}
		md := kmsg.NewConsumerMemberMetadata()
		md.Topics = m.GetSubscriptions()
		dm.ProtocolMetadata = md.AppendTo(nil)
		dm.MemberAssignment = encodeAssignment(m.GetAssigned())
		dg.Members = append(dg.Members, dm)
	}
}

// encodeAssignment is a ConsumerProtocolAssignment (v0) of ps.
func encodeAssignment(ps []*strandpb.GroupTopicPartitions) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	for _, tp := range ps {
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = tp.GetTopic(), tp.GetPartitions()
		a.Topics = append(a.Topics, t)
	}
	return a.AppendTo(nil)
}

// deleteGroups deletes empty groups on their coordinators.
func (c *conn) deleteGroups(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.DeleteGroupsRequest)
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_DeleteGroups{DeleteGroups: &strandpb.DeleteGroupsRequest{Groups: r.Groups}}})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		out := kmsg.NewPtrDeleteGroupsResponse()
		out.SetVersion(r.Version)
		got := resp.GetDeleteGroups().GetResults()
		for i, name := range r.Groups {
			dg := kmsg.NewDeleteGroupsResponseGroup()
			dg.Group = name
			e := resp.GetError()
			if i < len(got) {
				e = got[i].GetError()
			}
			dg.ErrorCode, dg.ErrorMessage = kafkaCode(e), message(e)
			out.Groups = append(out.Groups, dg)
		}
		return out
	}
}
