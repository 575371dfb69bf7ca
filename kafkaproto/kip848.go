package kafkaproto

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// KIP-848's ConsumerGroupHeartbeat maps one to one onto Strand's
// coordinator, whose engine is KIP-848's. Three differences are bridged
// here:
//   - Kafka names topics by id in owned partitions and assignments; Strand
//     by name: both directions go through this node's metadata.
//   - Kafka sends the subscription and owned partitions only when they
//     changed (null: as before); Strand's heartbeat carries them every
//     time: the last ones are remembered per member (kip848State), and
//     where this node has none (the coordinator moved) taken from the
//     coordinator's description of the member (owned = assigned and
//     revoking: claiming too much only delays a hand-over, never doubles
//     an owner).
//   - Kafka's v0 lets the coordinator choose the member id on join;
//     Strand's engine expects the client to: the Kafka layer chooses it.
//     Kafka has no heartbeat sequence numbers: the Kafka layer numbers them
//     (classicState.nextSeq).
// Regex subscriptions are refused (Strand's coordinator has none).

// kip848Member is what a KIP-848 member last sent.
type kip848Member struct {
	subs  []string
	owned []*strandpb.GroupTopicPartitions
}

// consumerGroupHeartbeat serves KIP-848's heartbeat.
func (c *conn) consumerGroupHeartbeat(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.ConsumerGroupHeartbeatRequest)
	out := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	out.SetVersion(r.Version)
	if r.SubscribedTopicRegex != nil && *r.SubscribedTopicRegex != "" {
		msg := "Strand's group coordinator does not resolve regex subscriptions: subscribe to topic names"
		out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, &msg
		return ready(out)
	}
	member := r.MemberID
	if member == "" {
		member = newMemberID()
	}
	meta := c.submit(&strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	return func() kmsg.Response {
		m := c.wait(meta)
		if m == nil {
			return nil
		}
		byID, byName := topicIDs(m.GetMetadata())
		rec, ok := c.s.classic.getKIP848(r.Group, member)
		if r.MemberEpoch <= 0 {
			rec = kip848Member{} // a join or leave: nothing carries over
		} else if !ok && (r.SubscribedTopicNames == nil || r.Topics == nil) {
			if rec, ok = c.describedKIP848(r.Group, member); !ok {
				return nil
			}
		}
		if r.SubscribedTopicNames != nil {
			rec.subs = slices.Clone(r.SubscribedTopicNames)
		}
		if r.Topics != nil {
			rec.owned = nil
			for _, t := range r.Topics {
				if name, ok := byID[t.TopicID]; ok {
					rec.owned = append(rec.owned, &strandpb.GroupTopicPartitions{Topic: name, Partitions: t.Partitions})
				}
			}
		}
		resp := c.call(&strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatRequest{
			Group: r.Group, MemberId: member, InstanceId: deref(r.InstanceID), Rack: deref(r.RackID), MemberEpoch: r.MemberEpoch,
			Seq: c.s.classic.nextSeq(), Subscriptions: rec.subs, Owned: rec.owned,
		}}})
		if resp == nil {
			return nil
		}
		if e := resp.GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
			out.ErrorCode, out.ErrorMessage = kafkaCode(e), message(e)
			return out
		}
		hb := resp.GetGroupHeartbeat()
		out.MemberID, out.MemberEpoch, out.HeartbeatIntervalMillis = &member, hb.GetMemberEpoch(), hb.GetHeartbeatIntervalMs()
		if hb.GetMemberEpoch() < 0 {
			c.s.classic.dropKIP848(r.Group, member)
			return out
		}
		c.s.classic.putKIP848(r.Group, member, rec)
		out.Assignment = heartbeatAssignment(hb.GetAssigned(), byName)
		return out
	}
}

// heartbeatAssignment is assigned named by topic ids.
func heartbeatAssignment(assigned []*strandpb.GroupTopicPartitions, byName map[string][16]byte) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	for _, tp := range assigned {
		id, ok := byName[tp.GetTopic()]
		if !ok {
			continue // deleted since: the next heartbeat's assignment drops it
		}
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID, t.Partitions = id, tp.GetPartitions()
		a.Topics = append(a.Topics, t)
	}
	return &a
}

// describedKIP848 is the coordinator's record of member as a kip848Member
// (false: the connection closed).
func (c *conn) describedKIP848(group, member string) (kip848Member, bool) {
	resp := c.call(&strandpb.Request{Body: &strandpb.Request_DescribeGroups{DescribeGroups: &strandpb.DescribeGroupsRequest{Groups: []string{group}}}})
	if resp == nil {
		return kip848Member{}, false
	}
	for _, g := range resp.GetDescribeGroups().GetGroups() {
		for _, m := range g.GetMembers() {
			if m.GetMemberId() == member {
				return kip848Member{subs: m.GetSubscriptions(), owned: unionParts(m.GetAssigned(), m.GetRevoking())}, true
			}
		}
	}
	return kip848Member{}, true
}

// topicIDs indexes the metadata's topics by id and by name.
func topicIDs(m *strandpb.MetadataResponse) (map[[16]byte]string, map[string][16]byte) {
	byID, byName := map[[16]byte]string{}, map[string][16]byte{}
	for _, t := range m.GetTopics() {
		var id [16]byte
		copy(id[:], t.GetTopicId())
		byID[id], byName[t.GetName()] = t.GetName(), id
	}
	return byID, byName
}

// consumerGroupDescribe describes groups in KIP-848's terms.
func (c *conn) consumerGroupDescribe(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.ConsumerGroupDescribeRequest)
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_DescribeGroups{DescribeGroups: &strandpb.DescribeGroupsRequest{Groups: r.Groups}}})
	meta := c.submit(&strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
	return func() kmsg.Response {
		resp, m := c.wait(k), c.wait(meta)
		if resp == nil || m == nil {
			return nil
		}
		_, byName := topicIDs(m.GetMetadata())
		out := kmsg.NewPtrConsumerGroupDescribeResponse()
		out.SetVersion(r.Version)
		got := resp.GetDescribeGroups().GetGroups()
		for i, name := range r.Groups {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.AuthorizedOperations = name, -2147483648
			e := resp.GetError()
			if i < len(got) {
				e = got[i].GetError()
			}
			if e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
				dg.ErrorCode, dg.ErrorMessage = kafkaCode(e), message(e)
				out.Groups = append(out.Groups, dg)
				continue
			}
			g := got[i]
			dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = kafka848State(g.GetState()), g.GetEpoch(), g.GetTargetEpoch(), "uniform"
			for _, gm := range g.GetMembers() {
				dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				dm.MemberID, dm.MemberEpoch, dm.SubscribedTopics = gm.GetMemberId(), gm.GetMemberEpoch(), gm.GetSubscriptions()
				if s := gm.GetInstanceId(); s != "" {
					dm.InstanceID = &s
				}
				if s := gm.GetRack(); s != "" {
					dm.RackID = &s
				}
				dm.Assignment, dm.TargetAssignment = wireAssignment(gm.GetAssigned(), byName), wireAssignment(gm.GetTarget(), byName)
				dg.Members = append(dg.Members, dm)
			}
			out.Groups = append(out.Groups, dg)
		}
		return out
	}
}

// kafka848State is KIP-848's name of a coordinator state.
func kafka848State(s string) string {
	switch s {
	case "empty":
		return "Empty"
	case "stable":
		return "Stable"
	case "reconciling":
		return "Reconciling"
	}
	return "Unknown"
}

// wireAssignment is ps as KIP-848's Assignment (topic ids and names).
func wireAssignment(ps []*strandpb.GroupTopicPartitions, byName map[string][16]byte) kmsg.Assignment {
	a := kmsg.NewAssignment()
	for _, tp := range ps {
		t := kmsg.NewAssignmentTopicPartition()
		t.TopicID, t.Topic, t.Partitions = byName[tp.GetTopic()], tp.GetTopic(), tp.GetPartitions()
		a.TopicPartitions = append(a.TopicPartitions, t)
	}
	return a
}
