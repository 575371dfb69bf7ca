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

	"github.com/strandlog/strand/proto/strandpb"
)

// The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
// is served the way Kafka 4's coordinator serves classic members of a
// consumer group: the server computes the assignment (Strand's KIP-848
// coordinator), so there is no rebalance barrier and no client-side
// leader.
//
//   - JoinGroup is a KIP-848 heartbeat: the member's epoch (read from the
//     coordinator with DescribeGroups; 0 for a new member), its
//     subscription and owned partitions decoded from the consumer
//     protocol's metadata. The answer's generation is the member epoch;
//     the leader is nobody, so no member computes an assignment.
//   - SyncGroup answers the assignment the join got (any assignment a
//     client sends is ignored), encoded as a ConsumerProtocolAssignment.
//   - Heartbeat is a KIP-848 heartbeat reporting as owned what the member
//     was given plus what it held when it joined (it may still hold those
//     until it rejoins: a cooperative member revokes after SyncGroup). It
//     answers REBALANCE_IN_PROGRESS — rejoin — when the member's epoch or
//     assignment moved, or the member still holds something it must give
//     up. The member's rejoin reports what it really owns, which is how the
//     coordinator learns a revocation finished.
//   - LeaveGroup is a leave heartbeat (epoch -1).
//
// What a member was told is kept here, in the Kafka layer of the node
// that told it (classicState); a member whose record is missing (its
// coordinator moved, the node restarted) is asked to rejoin, which is
// always safe: the rejoin carries its owned partitions.

// classicMember is what the Kafka layer told one classic member.
type classicMember struct {
	// epoch is the member's epoch on the coordinator, as last answered;
	// generation is the one its last JoinGroup answered, which the client
	// keeps using until it rejoins (epoch moves past it when a heartbeat
	// only adds partitions).
	epoch      int32
	generation int32
	subs       []string
	instance   string
	rack       string
	// clientID and host are the member's, as DescribeGroups reports them.
	clientID, host string
	// given is the assignment answered at SyncGroup; held is given plus
	// what the member owned when it joined (until its next join).
	given, held []*strandpb.GroupTopicPartitions
	synced      bool
	rejoin      bool
	touched     time.Time
}

// commitEpoch is the coordinator epoch to commit with for a classic
// member's generation. A member told to rejoin because a heartbeat moved
// its epoch keeps its generation until it rejoins, and commits with it
// (an eager member commits everything it consumed as it revokes):
// Kafka accepts a commit of the current generation while the group
// prepares a rebalance, and so does Strand. It is safe: the epoch moves
// without a rejoin only when the member gained partitions, and a
// partition the member still holds is given to no one else until it
// reports it no longer owns it, which only its rejoin does.
func (s *classicState) commitEpoch(group, member string, generation int32) int32 {
	m, ok := s.get(group, member)
	if ok && m.synced && generation == m.generation {
		return m.epoch
	}
	return generation
}

// classicMembersMax bounds the records; beyond it records untouched for
// classicIdle are dropped (their members, if alive, rejoin).
const (
	classicMembersMax = 100000
	classicIdle       = 10 * time.Minute
)

// classicState is the Kafka layer's record of classic members, and the
// source of heartbeat sequence numbers.
type classicState struct {
	mu        sync.Mutex
	seq       uint64
	members   map[string]*classicMember
	protocols map[string]string // group -> the protocol name last answered
	kip848    map[string]kip848Member
}

func newClassicState() *classicState {
	return &classicState{members: map[string]*classicMember{}, protocols: map[string]string{}, kip848: map[string]kip848Member{}}
}

func memberKey(group, member string) string { return group + "\x00" + member }

// nextSeq is a heartbeat sequence number above every one this process
// gave and, after a restart or on another node, above those given before
// (wall-clock nanoseconds; a node whose clock is behind the previous
// coordinator's answers REBALANCE_IN_PROGRESS until it caught up).
func (s *classicState) nextSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = max(s.seq+1, uint64(time.Now().UnixNano()))
	return s.seq
}

func (s *classicState) get(group, member string) (classicMember, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.members[memberKey(group, member)]
	if !ok {
		return classicMember{}, false
	}
	return *m, true
}

func (s *classicState) put(group, member string, m classicMember) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	m.touched = now
	if len(s.members) >= classicMembersMax {
		for k, old := range s.members {
			if now.Sub(old.touched) > classicIdle {
				delete(s.members, k)
			}
		}
	}
	if len(s.protocols) >= classicMembersMax {
		clear(s.protocols)
	}
	s.members[memberKey(group, member)] = &m
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

func (s *classicState) drop(group, member string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.members, memberKey(group, member))
}

func (s *classicState) setProtocol(group, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.protocols[group] = name
}

// protocol is the protocol name to describe group with: the one last
// answered to its members here, else the server assignor's.
func (s *classicState) protocol(group string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.protocols[group]; ok {
		return p
	}
	return "uniform"
}

// newMemberID is a member id for a client that has none (Kafka's
// coordinator chooses it; Strand's engine expects the client to).
func newMemberID() string {
	var b [16]byte
	rand.Read(b[:])
	return "kafka-" + hex.EncodeToString(b[:])
}

// memberEpoch reads member's epoch from the coordinator (0: not a member,
// or left for a restart). The error answer is returned as is.
func (c *conn) memberEpoch(group, member string) (int32, *strandpb.Error, bool) {
	resp := c.call(&strandpb.Request{Body: &strandpb.Request_DescribeGroups{DescribeGroups: &strandpb.DescribeGroupsRequest{Groups: []string{group}}}})
	if resp == nil {
		return 0, nil, false
	}
	if e := resp.GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
		return 0, e, true
	}
	for _, g := range resp.GetDescribeGroups().GetGroups() {
		if e := g.GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE && e.GetCode() != strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND {
			return 0, e, true
		}
		for _, m := range g.GetMembers() {
			if m.GetMemberId() == member && !m.GetLeftStatic() {
				return m.GetMemberEpoch(), nil, true
			}
		}
	}
	return 0, nil, true
}

// heartbeat sends one KIP-848 heartbeat for a classic member.
func (c *conn) heartbeat(group, member string, epoch int32, m classicMember, owned []*strandpb.GroupTopicPartitions) *strandpb.Response {
	return c.call(&strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatRequest{
		Group: group, MemberId: member, InstanceId: m.instance, Rack: m.rack, MemberEpoch: epoch,
		Seq: c.s.classic.nextSeq(), Subscriptions: m.subs, Owned: owned,
	}}})
}

// joinGroup joins or rejoins a classic member (see the comment above).
func (c *conn) joinGroup(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.JoinGroupRequest)
	out := kmsg.NewPtrJoinGroupResponse()
	out.SetVersion(r.Version)
	out.Generation, out.MemberID = -1, r.MemberID
	if r.ProtocolType != "consumer" {
		out.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return ready(out)
	}
	var proto string
	var md kmsg.ConsumerMemberMetadata
	for _, p := range r.Protocols {
		var ok bool
		if md, ok = readMemberMetadata(p.Metadata); ok {
			proto = p.Name
			break
		}
	}
	if proto == "" {
		out.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return ready(out)
	}
	member := r.MemberID
	if member == "" {
		member = newMemberID()
	}
	m := classicMember{subs: slices.Clone(md.Topics), instance: deref(r.InstanceID), rack: deref(md.Rack),
		clientID: c.clientID, host: c.clientHost}
	var owned []*strandpb.GroupTopicPartitions
	for _, o := range md.OwnedPartitions {
		owned = append(owned, &strandpb.GroupTopicPartitions{Topic: o.Topic, Partitions: o.Partitions})
	}
	return func() kmsg.Response {
		var resp *strandpb.Response
		for range 2 { // once more when the epoch moved between the read and the heartbeat
			epoch, e, ok := c.memberEpoch(r.Group, member)
			if !ok {
				return nil
			}
			if e != nil {
				out.ErrorCode = kafkaCode(e)
				return out
			}
			if resp = c.heartbeat(r.Group, member, epoch, m, owned); resp == nil {
				return nil
			}
			if resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH {
				break
			}
		}
		if e := resp.GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
			out.ErrorCode = classicCode(e)
			return out
		}
		hb := resp.GetGroupHeartbeat()
		m.epoch, m.given, m.held = hb.GetMemberEpoch(), hb.GetAssigned(), unionParts(owned, hb.GetAssigned())
		m.generation = m.epoch
		c.s.classic.put(r.Group, member, m)
		c.s.classic.setProtocol(r.Group, proto)
		out.Generation, out.MemberID, out.Protocol, out.LeaderID = m.epoch, member, &proto, ""
		pt := "consumer"
		out.ProtocolType = &pt
		return out
	}
}

// syncGroup answers the assignment the member's join got.
func (c *conn) syncGroup(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.SyncGroupRequest)
	out := kmsg.NewPtrSyncGroupResponse()
	out.SetVersion(r.Version)
	m, ok := c.s.classic.get(r.Group, r.MemberID)
	switch {
	case !ok:
		out.ErrorCode = kerr.RebalanceInProgress.Code // joined elsewhere, or this node restarted: rejoin
	case m.generation != r.Generation:
		out.ErrorCode = kerr.IllegalGeneration.Code
	default:
		m.synced = true
		c.s.classic.put(r.Group, r.MemberID, m)
		pt, proto := "consumer", c.s.classic.protocol(r.Group)
		out.ProtocolType, out.Protocol = &pt, &proto
		out.MemberAssignment = encodeAssignment(m.given)
	}
	return ready(out)
}

// heartbeatGroup keeps a classic member alive and tells it to rejoin when
// anything about its assignment moved.
func (c *conn) heartbeatGroup(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.HeartbeatRequest)
	out := kmsg.NewPtrHeartbeatResponse()
	out.SetVersion(r.Version)
	m, ok := c.s.classic.get(r.Group, r.MemberID)
	if !ok || !m.synced || m.generation != r.Generation {
		out.ErrorCode = kerr.RebalanceInProgress.Code
		return ready(out)
	}
	return func() kmsg.Response {
		resp := c.heartbeat(r.Group, r.MemberID, m.epoch, m, m.held)
		if resp == nil {
			return nil
		}
		if e := resp.GetError(); e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
			out.ErrorCode = classicCode(e)
			return out
		}
		hb := resp.GetGroupHeartbeat()
		moved := hb.GetMemberEpoch() != r.Generation || !sameParts(hb.GetAssigned(), m.given) || !sameParts(m.held, m.given)
		if moved {
			m.epoch, m.rejoin = hb.GetMemberEpoch(), true
			c.s.classic.put(r.Group, r.MemberID, m)
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
			resp := c.heartbeat(r.Group, id, -1, classicMember{}, nil)
			if resp == nil {
				return nil
			}
			c.s.classic.drop(r.Group, id)
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

// flatParts flattens and sorts topic partitions.
func flatParts(ps []*strandpb.GroupTopicPartitions) []string {
	var out []string
	for _, tp := range ps {
		for _, p := range tp.GetPartitions() {
			out = append(out, fmt.Sprintf("%s\x00%d", tp.GetTopic(), p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sameParts(a, b []*strandpb.GroupTopicPartitions) bool {
	return slices.Equal(flatParts(a), flatParts(b))
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
