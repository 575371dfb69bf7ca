package kafkaproto

import (
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/proto/strandpb"
)

// groupsBackend serves the group requests the classic adapter sends from
// a real engine/groups.State (topic "t" has 2 partitions), answering the
// engine's errors with the codes the node gives them.
type groupsBackend struct {
	mu    sync.Mutex
	state *groups.State
	nowMs int64
}

// groupsBackendError is err on the wire, by the code its engine/groups
// sentinel carries, as the node sends it.
func groupsBackendError(err error) *strandpb.Error {
	if err == nil {
		return nil
	}
	return &strandpb.Error{Code: strandpb.CodeOf(err), Message: err.Error()}
}

func (b *groupsBackend) Submit(_ <-chan struct{}, req *strandpb.Request, reply func(*strandpb.Response)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nowMs++
	resp := &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	switch body := req.GetBody().(type) {
	case *strandpb.Request_GroupHeartbeat:
		hb := body.GroupHeartbeat
		in := groups.Heartbeat{Group: hb.GetGroup(), MemberID: hb.GetMemberId(), MemberEpoch: hb.GetMemberEpoch(), Seq: hb.GetSeq(),
			Subscriptions: hb.GetSubscriptions(), Topics: []groups.TopicInfo{{Name: "t", Partitions: 2}}, NowMs: b.nowMs,
			Classic: groups.ClassicFromWire(hb.GetClassic())}
		for _, o := range hb.GetOwned() {
			for _, p := range o.GetPartitions() {
				in.Owned = append(in.Owned, groups.TopicPartition{Topic: o.GetTopic(), Partition: p})
			}
		}
		res, err := b.state.Heartbeat(in)
		out := &strandpb.ConsumerGroupHeartbeatResponse{MemberId: hb.GetMemberId(), MemberEpoch: res.MemberEpoch,
			Rejoin: res.Rejoin, Generation: res.Generation, Protocol: res.Protocol}
		for _, p := range res.Assigned {
			out.Assigned = append(out.Assigned, &strandpb.GroupTopicPartitions{Topic: p.Topic, Partitions: []int32{p.Partition}})
		}
		resp.Error, resp.Body = groupsBackendError(err), &strandpb.Response_GroupHeartbeat{GroupHeartbeat: out}
	case *strandpb.Request_DescribeGroups:
		out := &strandpb.DescribeGroupsResponse{}
		for _, id := range body.DescribeGroups.GetGroups() {
			g := &strandpb.DescribeGroupsResponse_Group{Group: id}
			v, _ := b.state.Describe(id)
			for _, m := range v.Members {
				g.Members = append(g.Members, &strandpb.GroupMember{MemberId: m.ID, MemberEpoch: m.Epoch, LeftStatic: m.LeftStatic,
					Classic: groups.ClassicToWire(m.Classic)})
			}
			out.Groups = append(out.Groups, g)
		}
		resp.Body = &strandpb.Response_DescribeGroups{DescribeGroups: out}
	case *strandpb.Request_OffsetCommit:
		oc := body.OffsetCommit
		c := groups.Commit{Group: oc.GetGroup(), MemberID: oc.GetMemberId(), MemberEpoch: oc.GetMemberEpoch(), NowMs: b.nowMs,
			ClassicGeneration: oc.GetClassicGeneration()}
		for _, o := range oc.GetOffsets() {
			c.Offsets = append(c.Offsets, groups.OffsetCommit{Partition: groups.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}, Offset: o.GetOffset()})
		}
		resp.Error = groupsBackendError(b.state.Commit(c))
		resp.Body = &strandpb.Response_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitResponse{}}
	default:
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "not a group request"}
	}
	reply(resp)
	return nil
}

// committed is the group's committed offset of t/p (-1: none).
func (b *groupsBackend) committed(group string, p int32) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.state.Fetch(group, []groups.TopicPartition{{Topic: "t", Partition: p}}) {
		return c.Committed.Offset
	}
	return -1
}

// classicClient is one classic member speaking non-flexible versions
// (JoinGroup v5, SyncGroup v3, Heartbeat v3, OffsetCommit v7, LeaveGroup
// v3) over its own connection.
type classicClient struct {
	t          *testing.T
	c          *rawConn
	corr       int32
	member     string
	generation int32
	given      []int32
}

func (cc *classicClient) roundTrip(req kmsg.Request, version int16) kmsg.Response {
	cc.t.Helper()
	cc.corr++
	req.SetVersion(version)
	cc.c.send(req.Key(), version, cc.corr, false, req.AppendTo(nil))
	corr, body, err := cc.c.recv()
	if err != nil || corr != cc.corr {
		cc.t.Fatalf("key %d: corr %d, %v", req.Key(), corr, err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		cc.t.Fatalf("key %d answer: %v", req.Key(), err)
	}
	return resp
}

// join joins (or rejoins, reporting what it was given as owned) and syncs.
func (cc *classicClient) join() {
	cc.t.Helper()
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 1, []string{"t"}
	if cc.given != nil {
		md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: cc.given}}
	}
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Group, jr.MemberID, jr.ProtocolType, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = "g", cc.member, "consumer", 30000, 30000
	jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: md.AppendTo(nil)}}
	j := cc.roundTrip(jr, 5).(*kmsg.JoinGroupResponse)
	if j.ErrorCode != 0 {
		cc.t.Fatalf("join: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	cc.member, cc.generation = j.MemberID, j.Generation
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = "g", cc.member, cc.generation
	s := cc.roundTrip(sr, 3).(*kmsg.SyncGroupResponse)
	if s.ErrorCode != 0 {
		cc.t.Fatalf("sync: %v", kerr.ErrorForCode(s.ErrorCode))
	}
	a := kmsg.NewConsumerMemberAssignment()
	if err := a.ReadFrom(s.MemberAssignment); err != nil {
		cc.t.Fatal(err)
	}
	cc.given = []int32{}
	for _, tp := range a.Topics {
		cc.given = append(cc.given, tp.Partitions...)
	}
}

func (cc *classicClient) heartbeat() int16 {
	cc.t.Helper()
	hr := kmsg.NewPtrHeartbeatRequest()
	hr.Group, hr.MemberID, hr.Generation = "g", cc.member, cc.generation
	return cc.roundTrip(hr, 3).(*kmsg.HeartbeatResponse).ErrorCode
}

func (cc *classicClient) commit(generation int32, p int32, offset int64) int16 {
	cc.t.Helper()
	or := kmsg.NewPtrOffsetCommitRequest()
	or.Group, or.MemberID, or.Generation = "g", cc.member, generation
	or.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: p, Offset: offset}}}}
	return cc.roundTrip(or, 7).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func (cc *classicClient) leave() {
	cc.t.Helper()
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Group, lr.Members = "g", []kmsg.LeaveGroupRequestMember{{MemberID: cc.member}}
	if code := cc.roundTrip(lr, 3).(*kmsg.LeaveGroupResponse).ErrorCode; code != 0 {
		cc.t.Fatalf("leave: %v", kerr.ErrorForCode(code))
	}
}

// settle heartbeats every member, rejoining those told to, until a round
// in which every heartbeat is answered without error (bounded).
func settle(t *testing.T, members ...*classicClient) {
	t.Helper()
	for range 20 {
		quiet := true
		for _, m := range members {
			if code := m.heartbeat(); code == kerr.RebalanceInProgress.Code {
				quiet = false
				m.join()
			} else if code != 0 {
				t.Fatalf("member %s heartbeat: %v", m.member, kerr.ErrorForCode(code))
			}
		}
		if quiet {
			return
		}
	}
	t.Fatal("the group did not settle in 20 rounds")
}

// A classic member told to rejoin because another member left (its
// heartbeat moved its coordinator epoch: it only gains partitions) still
// commits with the generation of its last join, as Kafka accepts a commit
// of the current generation while a rebalance is prepared: an eager
// member commits everything it consumed in its revoke callback, and a
// refused commit there is lost work (the partition's next owner reads it
// again). A generation older than its last join, or the old one once it
// rejoined, is still ILLEGAL_GENERATION.
func TestClassicCommitDuringRebalance(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	be := &groupsBackend{state: groups.New()}
	s := Serve(ln, Config{Backend: be, NodeID: 1, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(s.Close)
	a, b := &classicClient{t: t, c: dialRaw(t, s)}, &classicClient{t: t, c: dialRaw(t, s)}
	a.join()
	b.join()
	settle(t, a, b)
	if len(a.given) != 1 || len(b.given) != 1 {
		t.Fatalf("settled with a=%v b=%v, want one partition each", a.given, b.given)
	}
	old := a.generation
	if code := a.commit(old, a.given[0], 10); code != 0 {
		t.Fatalf("commit in a stable group: %v", kerr.ErrorForCode(code))
	}
	b.leave()
	if code := a.heartbeat(); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("a's heartbeat after b left: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	if code := a.commit(old, a.given[0], 20); code != 0 {
		t.Fatalf("commit of generation %d while told to rejoin: %v, want accepted", old, kerr.ErrorForCode(code))
	}
	if got := be.committed("g", a.given[0]); got != 20 {
		t.Fatalf("committed %d, want 20", got)
	}
	if code := a.commit(old-1, a.given[0], 30); code != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of generation %d (older than the last join's %d): %v, want ILLEGAL_GENERATION", old-1, old, kerr.ErrorForCode(code))
	}
	a.join()
	if a.generation == old {
		t.Fatalf("rejoin kept generation %d", old)
	}
	if code := a.commit(old, 0, 40); code != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of generation %d after rejoining at %d: %v, want ILLEGAL_GENERATION", old, a.generation, kerr.ErrorForCode(code))
	}
	if code := a.commit(a.generation, 1, 50); code != 0 || be.committed("g", 1) != 50 {
		t.Fatalf("commit at the new generation: %v", kerr.ErrorForCode(code))
	}
}

// A classic group survives a coordinator fail-over: members that joined
// and synced through one node keep heartbeating, committing and syncing
// through another (a second Server on the same coordinator state, as a
// new coordinator restores it from the log) in the same generation,
// without a rejoin. Before the classic state was replicated, the second
// node knew nothing of them and answered REBALANCE_IN_PROGRESS.
func TestClassicGroupSurvivesFailover(t *testing.T) {
	be := &groupsBackend{state: groups.New()}
	serve := func() *Server {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := Serve(ln, Config{Backend: be, NodeID: 1, Logger: slog.New(slog.DiscardHandler)})
		t.Cleanup(s.Close)
		return s
	}
	first := serve()
	a, b := &classicClient{t: t, c: dialRaw(t, first)}, &classicClient{t: t, c: dialRaw(t, first)}
	a.join()
	b.join()
	settle(t, a, b)
	gen := a.generation
	restored, err := groups.Restore(be.state.Snapshot(0))
	if err != nil {
		t.Fatal(err)
	}
	be.mu.Lock()
	be.state = restored
	be.mu.Unlock()
	second := serve()
	a.c, b.c = dialRaw(t, second), dialRaw(t, second)
	for _, m := range []*classicClient{a, b} {
		if code := m.heartbeat(); code != 0 {
			t.Fatalf("member %s's heartbeat on the new coordinator: %v, want none", m.member, kerr.ErrorForCode(code))
		}
	}
	if code := a.commit(gen, a.given[0], 7); code != 0 || be.committed("g", a.given[0]) != 7 {
		t.Fatalf("commit in generation %d on the new coordinator: %v", gen, kerr.ErrorForCode(code))
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation = "g", b.member, b.generation
	if s := b.roundTrip(sr, 3).(*kmsg.SyncGroupResponse); s.ErrorCode != 0 {
		t.Fatalf("sync resent to the new coordinator: %v", kerr.ErrorForCode(s.ErrorCode))
	}
}

// Subscription metadata is read as the clients in the wild write it: each
// version v0-v3, a v1 that stops after the user data (segmentio/kafka-go),
// trailing bytes and a version past 3; only metadata without a readable
// topic list is refused.
func TestReadMemberMetadataLayouts(t *testing.T) {
	full := func(v int16) []byte {
		md := kmsg.NewConsumerMemberMetadata()
		md.Version, md.Topics, md.UserData = v, []string{"a", "b"}, []byte("ud")
		md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "a", Partitions: []int32{1}}}
		md.Generation, md.Rack = 7, kmsg.StringPtr("r1")
		return md.AppendTo(nil)
	}
	v0 := full(0)
	kafkaGo := slices.Clone(v0)
	kafkaGo[1] = 1 // declares v1, sends the v0 fields only
	future := append(full(3), 0, 0, 0, 9)
	future[1] = 5
	for name, tc := range map[string]struct {
		b     []byte
		owned int
		rack  string
	}{
		"v0": {v0, 0, ""}, "v1": {full(1), 1, ""}, "v2": {full(2), 1, ""}, "v3": {full(3), 1, "r1"},
		"v1 without owned partitions": {kafkaGo, 0, ""}, "v0 with trailing bytes": {append(slices.Clone(v0), 1, 2, 3), 0, ""},
		"v5": {future, 1, "r1"},
	} {
		md, ok := readMemberMetadata(tc.b)
		if !ok || !slices.Equal(md.Topics, []string{"a", "b"}) || len(md.OwnedPartitions) != tc.owned || deref(md.Rack) != tc.rack {
			t.Errorf("%s: ok %v, topics %v, owned %v, rack %q", name, ok, md.Topics, md.OwnedPartitions, deref(md.Rack))
		}
	}
	for _, b := range [][]byte{nil, {0}, {0, 0, 0, 0, 0, 9}} {
		if _, ok := readMemberMetadata(b); ok {
			t.Errorf("metadata %v read, want refused (no topic list)", b)
		}
	}
}
