package server

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicClient speaks the classic group protocol by hand for one member.
type classicClient struct {
	t      *testing.T
	ctx    context.Context
	cl     *kgo.Client
	member string
	gen    int32
}

// join joins owning owned partitions of "t"; it returns the error code.
func (c *classicClient) join(owned ...int32) int16 {
	c.t.Helper()
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 1, []string{"t"}
	if len(owned) > 0 {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = "t", owned
		md.OwnedPartitions = append(md.OwnedPartitions, op)
	}
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.ProtocolType = "g", c.member, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "cooperative-sticky", md.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	resp, err := req.RequestWith(c.ctx, c.cl)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.ErrorCode == 0 {
		if resp.LeaderID == resp.MemberID || resp.Protocol == nil || *resp.Protocol != "cooperative-sticky" {
			c.t.Fatalf("join answered leader %q (member %q), protocol %v: nobody leads, the client's protocol is chosen", resp.LeaderID, resp.MemberID, resp.Protocol)
		}
		c.member, c.gen = resp.MemberID, resp.Generation
	}
	return resp.ErrorCode
}

// sync returns the partitions of "t" the member is given.
func (c *classicClient) sync() []int32 {
	c.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = "g", c.member, c.gen
	resp, err := req.RequestWith(c.ctx, c.cl)
	if err != nil || resp.ErrorCode != 0 {
		c.t.Fatalf("sync: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	a := kmsg.NewConsumerMemberAssignment()
	if err := a.ReadFrom(resp.MemberAssignment); err != nil {
		c.t.Fatal(err)
	}
	var ps []int32
	for _, tp := range a.Topics {
		ps = append(ps, tp.Partitions...)
	}
	slices.Sort(ps)
	return ps
}

// heartbeat returns the Heartbeat's error code.
func (c *classicClient) heartbeat() int16 {
	c.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = "g", c.member, c.gen
	resp, err := req.RequestWith(c.ctx, c.cl)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.ErrorCode
}

// The classic protocol over the coordinator, by hand: a member joining
// alone gets both partitions of "t" (nobody is leader; SyncGroup answers
// the server's assignment); a second member's join makes the first's
// Heartbeat answer REBALANCE_IN_PROGRESS; the first's rejoin gives it one
// partition, but the second gets nothing until the first rejoins without
// the revoked one (Heartbeat keeps asking it to rejoin meanwhile); then
// the second's Heartbeat asks it to rejoin and it gets the other
// partition. No partition is ever given to both. Commits carry the
// generation; OffsetFetch v8 reads two groups at once; FindCoordinator v4
// answers batched keys with this node's Kafka listener; DescribeGroups
// names the members; DeleteGroups refuses the non-empty group and deletes
// it once both left.
func TestKafkaClassicGroupHandOver(t *testing.T) {
	rt := startKafkaServer(t)
	addr := rt.KafkaAddr().String()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	for ctx.Err() == nil { // the metadata group elects its leader first
		created, err := adm.CreateTopic(ctx, 2, 1, nil, "t")
		if err == nil && created.Err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
	findCoordinators(ctx, t, cl, addr)
	a := &classicClient{t: t, ctx: ctx, cl: cl}
	b := &classicClient{t: t, ctx: ctx, cl: cl}
	if code := a.join(); code != 0 {
		t.Fatalf("a's join: %v", kerr.ErrorForCode(code))
	}
	if got := a.sync(); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("a alone was given %v, want [0 1]", got)
	}
	if code := a.heartbeat(); code != 0 {
		t.Fatalf("a's heartbeat in a stable group: %v", kerr.ErrorForCode(code))
	}
	commitAndFetch(ctx, t, cl, a)
	if code := b.join(); code != 0 {
		t.Fatalf("b's join: %v", kerr.ErrorForCode(code))
	}
	if got := b.sync(); len(got) != 0 {
		t.Fatalf("b was given %v while a still owns both", got)
	}
	if code := a.heartbeat(); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("a's heartbeat after b joined: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	a.join(0, 1)
	kept := a.sync()
	if len(kept) != 1 {
		t.Fatalf("a's rejoin owning both gave %v, want one partition", kept)
	}
	if code := a.heartbeat(); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("a's heartbeat before it rejoined without the revoked partition: %v", kerr.ErrorForCode(code))
	}
	if code := b.heartbeat(); code != 0 {
		t.Fatalf("b's heartbeat while a still holds the partition: %v, want none (nothing for it yet)", kerr.ErrorForCode(code))
	}
	a.join(kept...) // revocation done
	if got := a.sync(); !slices.Equal(got, kept) {
		t.Fatalf("a after revoking: %v, want %v", got, kept)
	}
	if code := b.heartbeat(); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("b's heartbeat after a revoked: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	b.join()
	if got := b.sync(); len(got) != 1 || got[0] == kept[0] {
		t.Fatalf("b got %v, a keeps %v", got, kept)
	}
	describeAndDelete(ctx, t, cl, adm, a, b)
}

// findCoordinators asks FindCoordinator v4 for two groups at once.
func findCoordinators(ctx context.Context, t *testing.T, cl *kgo.Client, addr string) {
	t.Helper()
	for ctx.Err() == nil { // __strand_offsets is created on first use: retriable until it has leaders
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{"g", "h"}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Coordinators) == 2 && resp.Coordinators[0].ErrorCode == 0 && resp.Coordinators[1].ErrorCode == 0 {
			for _, co := range resp.Coordinators {
				if got := net.JoinHostPort(co.Host, strconv.Itoa(int(co.Port))); co.NodeID != 1 || got != addr {
					t.Fatalf("coordinator of %s: node %d at %s, want node 1 at %s", co.Key, co.NodeID, got, addr)
				}
			}
			return
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
	t.Fatal(ctx.Err())
}

// commitAndFetch commits offset 5 of t/0 as member m, then reads groups
// g and "none" with one OffsetFetch v8.
func commitAndFetch(ctx context.Context, t *testing.T, cl *kgo.Client, m *classicClient) {
	t.Helper()
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.MemberID, oc.Generation = "g", m.member, m.gen
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Partition, op.Offset = 0, 5
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	cr, err := oc.RequestWith(ctx, cl)
	if err != nil || cr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v %+v", err, cr)
	}
	oc.Generation = m.gen + 7
	if cr, err = oc.RequestWith(ctx, cl); err != nil || cr.Topics[0].Partitions[0].ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("commit with a wrong generation: %v %+v, want ILLEGAL_GENERATION", err, cr)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(8)
	for _, g := range []string{"g", "none"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		rg.Topics = append(rg.Topics, rt)
		of.Groups = append(of.Groups, rg)
	}
	var fr *kmsg.OffsetFetchResponse
	for ctx.Err() == nil { // "none"'s __strand_offsets partition may still be electing (NOT_COORDINATOR, retriable)
		if fr, err = of.RequestWith(ctx, cl.Broker(1)); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(fr.Groups, func(g kmsg.OffsetFetchResponseGroup) bool { return kerr.IsRetriable(kerr.ErrorForCode(g.ErrorCode)) }) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
	var got []int64
	for _, g := range fr.Groups {
		if g.ErrorCode != 0 || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
			t.Fatalf("OffsetFetch v8 group %s: %+v", g.Group, g)
		}
		got = append(got, g.Topics[0].Partitions[0].Offset)
	}
	if !slices.Equal(got, []int64{5, -1}) {
		t.Fatalf("OffsetFetch v8 read %v, want [5 -1] (g committed 5; none has nothing)", got)
	}
}

// describeAndDelete checks kadm's view of the two-member group, that it
// cannot be deleted while they are in it, and can once both left.
func describeAndDelete(ctx context.Context, t *testing.T, cl *kgo.Client, adm *kadm.Client, ms ...*classicClient) {
	t.Helper()
	described, err := adm.DescribeGroups(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if g := described["g"]; g.Err != nil || len(g.Members) != len(ms) || g.Protocol != "cooperative-sticky" {
		t.Fatalf("DescribeGroups: %+v", g)
	}
	if _, err := adm.DeleteGroup(ctx, "g"); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("deleting the group with members: %v, want NON_EMPTY_GROUP", err)
	}
	for _, m := range ms {
		lg := kmsg.NewPtrLeaveGroupRequest()
		lg.Group, lg.MemberID = "g", m.member
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.member
		lg.Members = append(lg.Members, lm)
		resp, err := lg.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 || (len(resp.Members) > 0 && resp.Members[0].ErrorCode != 0) {
			t.Fatalf("leave: %v %+v", err, resp)
		}
	}
	if deleted, err := adm.DeleteGroup(ctx, "g"); err != nil || deleted.Err != nil {
		t.Fatalf("deleting the empty group: %v %v", err, deleted.Err)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || slices.Contains(listed.Groups(), "g") {
		t.Fatalf("ListGroups after the delete: %v %v", listed.Groups(), err)
	}
}
