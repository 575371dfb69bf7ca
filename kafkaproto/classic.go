package kafkaproto

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/proto/strandpb"
)

// The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
// is served the way Kafka 4's coordinator serves classic members of a
// consumer group: the server computes the assignment (Strand's KIP-848
// coordinator), so there is no rebalance barrier and no client-side
// leader. Each request is one request to the coordinator, whose state
// holds what every classic member was told (engine/groups, classic.go:
// generation, assignment given, partitions held, synced, protocol, client
// id and host), replicated with the member:
//
//   - JoinGroup is a classic join step: a KIP-848 heartbeat at the
//     member's current epoch (0 for a new member), with the subscription
//     and owned partitions decoded from the consumer protocol's metadata.
//     The answer's generation is the member epoch; the leader is nobody,
//     so no member computes an assignment.
//   - SyncGroup answers the assignment the join recorded (any assignment a
//     client sends is ignored), encoded as a ConsumerProtocolAssignment.
//   - Heartbeat is a KIP-848 heartbeat reporting as owned what the member
//     was given plus what it held when it joined (a cooperative member
//     revokes after SyncGroup). It answers REBALANCE_IN_PROGRESS — rejoin —
//     when the member's epoch or assignment moved, or the member still
//     holds something it must give up. The member's rejoin reports what it
//     really owns, which is how the coordinator learns a revocation
//     finished.
//   - LeaveGroup is a leave heartbeat (epoch -1).
//
// Nothing of a classic member lives on the answering node, so a
// coordinator fail-over keeps its generation and membership: the new
// coordinator answers its next Heartbeat and OffsetCommit as the old one
// would have. Kafka's own join/sync wait (requests parked until the
// rebalance completes) does not exist here: every answer is immediate.

// classicState is the Kafka layer's soft state: the source of heartbeat
// sequence numbers, and KIP-848 members' last subscription and owned
// partitions (for their heartbeats' null fields; rebuilt from the
// coordinator when missing).
type classicState struct {
	mu     sync.Mutex
	seq    uint64
	clock  func() uint64 // nanoseconds: sequence numbers start above it
	kip848 map[string]kip848Member
}

func newClassicState() *classicState {
	return &classicState{kip848: map[string]kip848Member{}, clock: func() uint64 { return uint64(time.Now().UnixNano()) }}
}

// classicMembersMax bounds the KIP-848 records.
const classicMembersMax = 100000

func memberKey(group, member string) string { return group + "\x00" + member }

// nextSeq is a heartbeat sequence number above every one this process
// gave and, after a restart or on another node, above those given before
// (wall-clock nanoseconds; a node whose clock is behind the previous
// coordinator's answers REBALANCE_IN_PROGRESS until it caught up).
func (s *classicState) nextSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = max(s.seq+1, s.clock())
	return s.seq
}

func (s *classicState) getKIP848(group, member string) (kip848Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.kip848[memberKey(group, member)]
	return m, ok
}

// putKIP848 remembers a KIP-848 member's last subscription and owned
// partitions; beyond classicMembersMax the records are dropped (their
// members' next null fields are read from the coordinator).
func (s *classicState) putKIP848(group, member string, m kip848Member) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.kip848) >= classicMembersMax {
		clear(s.kip848)
	}
	s.kip848[memberKey(group, member)] = m
}

func (s *classicState) dropKIP848(group, member string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.kip848, memberKey(group, member))
}

// isKIP848 says whether member speaks KIP-848 here (its commits get
// KIP-848's epoch errors, not the classic ILLEGAL_GENERATION).
func (s *classicState) isKIP848(group, member string) bool {
	_, ok := s.getKIP848(group, member)
	return ok
}

// newMemberID is a member id for a client that has none (Kafka's
// coordinator chooses it; Strand's engine expects the client to).
func newMemberID() string {
	var b [16]byte
	rand.Read(b[:])
	return "kafka-" + hex.EncodeToString(b[:])
}

// heartbeat sends one KIP-848 heartbeat (a leave) for a classic member.
func (c *conn) heartbeat(group, member string, epoch int32) *strandpb.Response {
	return c.call(&strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatRequest{
		Group: group, MemberId: member, MemberEpoch: epoch, Seq: c.s.classic.nextSeq(),
	}}})
}

// submitClassic submits one classic step for member.
func (c *conn) submitClassic(hb *strandpb.ConsumerGroupHeartbeatRequest, step *strandpb.ClassicGroupStep) *call {
	hb.Seq, hb.Classic = c.s.classic.nextSeq(), step
	return c.submit(&strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: hb}})
}

// clipName bounds a name the coordinator keeps (client id, host) to what it
// accepts.
func clipName(s string) string { return s[:min(len(s), groups.NameMax)] }

// joinGroup joins or rejoins a classic member (see the comment above).
func (c *conn) joinGroup(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.JoinGroupRequest)
	out := kmsg.NewPtrJoinGroupResponse()
	out.SetVersion(r.Version)
	out.Generation, out.MemberID = -1, r.MemberID
	proto, md, ok := classicProtocol(r)
	if !ok {
		out.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return ready(out)
	}
	member := r.MemberID
	if member == "" {
		member = newMemberID()
	}
	hb := &strandpb.ConsumerGroupHeartbeatRequest{Group: r.Group, MemberId: member, InstanceId: deref(r.InstanceID), Rack: deref(md.Rack),
		Subscriptions: slices.Clone(md.Topics)}
	for _, o := range md.OwnedPartitions {
		hb.Owned = append(hb.Owned, &strandpb.GroupTopicPartitions{Topic: o.Topic, Partitions: o.Partitions})
	}
	k := c.submitClassic(hb, &strandpb.ClassicGroupStep{Step: strandpb.ClassicStep_CLASSIC_STEP_JOIN, Protocol: proto,
		ClientId: clipName(c.clientID), Host: clipName(c.clientHost)})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		if e := resp.GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
			out.ErrorCode = classicCode(e)
			return out
		}
		a := resp.GetGroupHeartbeat()
		pt, name := "consumer", a.GetProtocol()
		out.Generation, out.MemberID, out.Protocol, out.LeaderID, out.ProtocolType = a.GetGeneration(), member, &name, "", &pt
		return out
	}
}

// classicProtocol is the first protocol of a consumer JoinGroup whose
// metadata reads as a consumer subscription.
func classicProtocol(r *kmsg.JoinGroupRequest) (string, kmsg.ConsumerMemberMetadata, bool) {
	if r.ProtocolType != "consumer" {
		return "", kmsg.ConsumerMemberMetadata{}, false
	}
	for _, p := range r.Protocols {
		if md, ok := readMemberMetadata(p.Metadata); ok {
			return p.Name, md, true
		}
	}
	return "", kmsg.ConsumerMemberMetadata{}, false
}

// syncGroup answers the assignment the member's join got.
func (c *conn) syncGroup(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.SyncGroupRequest)
	k := c.submitClassic(&strandpb.ConsumerGroupHeartbeatRequest{Group: r.Group, MemberId: r.MemberID},
		&strandpb.ClassicGroupStep{Step: strandpb.ClassicStep_CLASSIC_STEP_SYNC, Generation: r.Generation})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		out := kmsg.NewPtrSyncGroupResponse()
		out.SetVersion(r.Version)
		a := resp.GetGroupHeartbeat()
		switch e := resp.GetError(); {
		case e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE:
			out.ErrorCode = classicCode(e)
		case a.GetRejoin():
			out.ErrorCode = kerr.RebalanceInProgress.Code // not joined in this generation (or before a restore that lacks it)
		default:
			pt, proto := "consumer", a.GetProtocol()
			out.ProtocolType, out.Protocol = &pt, &proto
			out.MemberAssignment = encodeAssignment(a.GetAssigned())
		}
		return out
	}
}

// heartbeatGroup keeps a classic member alive and tells it to rejoin when
// anything about its assignment moved.
func (c *conn) heartbeatGroup(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.HeartbeatRequest)
	k := c.submitClassic(&strandpb.ConsumerGroupHeartbeatRequest{Group: r.Group, MemberId: r.MemberID},
		&strandpb.ClassicGroupStep{Step: strandpb.ClassicStep_CLASSIC_STEP_HEARTBEAT, Generation: r.Generation})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		out := kmsg.NewPtrHeartbeatResponse()
		out.SetVersion(r.Version)
		switch e := resp.GetError(); {
		case e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE:
			out.ErrorCode = classicCode(e)
		case resp.GetGroupHeartbeat().GetRejoin():
			out.ErrorCode = kerr.RebalanceInProgress.Code
		}
		return out
	}
}

// leaveGroup leaves for good (v3+: each listed member; one named only by
// instance id is looked up).
func (c *conn) leaveGroup(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.LeaveGroupRequest)
	members := r.Members
	if r.Version < 3 {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = r.MemberID
		members = []kmsg.LeaveGroupRequestMember{lm}
	}
	return func() kmsg.Response {
		out := kmsg.NewPtrLeaveGroupResponse()
		out.SetVersion(r.Version)
		for _, lm := range members {
			id := lm.MemberID
			if id == "" && lm.InstanceID != nil {
				id = c.memberOfInstance(r.Group, *lm.InstanceID)
			}
			resp := c.heartbeat(r.Group, id, -1)
			if resp == nil {
				return nil
			}
			code := classicCode(resp.GetError())
			if r.Version < 3 {
				out.ErrorCode = code
				continue
			}
			om := kmsg.NewLeaveGroupResponseMember()
			om.MemberID, om.InstanceID, om.ErrorCode = id, lm.InstanceID, code
			out.Members = append(out.Members, om)
		}
		return out
	}
}

// memberOfInstance finds the member id of a static member ("" if none).
func (c *conn) memberOfInstance(group, instance string) string {
	resp := c.call(&strandpb.Request{Body: &strandpb.Request_DescribeGroups{DescribeGroups: &strandpb.DescribeGroupsRequest{Groups: []string{group}}}})
	for _, g := range resp.GetDescribeGroups().GetGroups() {
		for _, m := range g.GetMembers() {
			if m.GetInstanceId() == instance {
				return m.GetMemberId()
			}
		}
	}
	return fmt.Sprintf("unknown-instance-%s", instance)
}

// unionParts is a ∪ b, grouped by topic in first-seen order.
func unionParts(a, b []*strandpb.GroupTopicPartitions) []*strandpb.GroupTopicPartitions {
	var out []*strandpb.GroupTopicPartitions
	idx := map[string]int{}
	seen := map[string]bool{}
	for _, tp := range slices.Concat(a, b) {
		i, ok := idx[tp.GetTopic()]
		if !ok {
			i = len(out)
			idx[tp.GetTopic()] = i
			out = append(out, &strandpb.GroupTopicPartitions{Topic: tp.GetTopic()})
		}
		for _, p := range tp.GetPartitions() {
			k := fmt.Sprintf("%s\x00%d", tp.GetTopic(), p)
			if !seen[k] {
				seen[k] = true
				out[i].Partitions = append(out[i].Partitions, p)
			}
		}
	}
	return out
}

// readMemberMetadata reads a consumer protocol subscription the way the
// clients in the wild write it. Kafka keeps member metadata opaque and
// only the assignor reads it; Strand's coordinator assigns, so it needs
// the subscribed topics and uses the owned partitions, generation and rack
// when they are there. Each version only appends fields, so metadata that
// declares a version but stops short of its fields (segmentio/kafka-go
// declares v1 and sends no owned partitions) is read at the highest version
// its bytes hold; a version past 3 is read as 3, and bytes after the
// fields read are ignored. It fails only when not even the topic list
// (v0) can be read.
func readMemberMetadata(b []byte) (kmsg.ConsumerMemberMetadata, bool) {
	md := kmsg.NewConsumerMemberMetadata()
	if len(b) < 2 {
		return md, false
	}
	declared := int16(b[0])<<8 | int16(b[1])
	buf := slices.Clone(b)
	for v := min(max(declared, 0), 3); v >= 0; v-- {
		buf[0], buf[1] = byte(v>>8), byte(v)
		md = kmsg.NewConsumerMemberMetadata()
		if md.ReadFrom(buf) == nil {
			md.Version = declared
			return md, true
		}
	}
	return md, false
}
