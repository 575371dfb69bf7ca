package groups

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// tps builds partitions of one topic.
func tps(topic string, parts ...int32) []TopicPartition {
	out := make([]TopicPartition, len(parts))
	for i, p := range parts {
		out[i] = TopicPartition{Topic: topic, Partition: p}
	}
	return out
}

// client is a test member that follows the protocol: it owns exactly what
// the last answer assigned.
type client struct {
	id, instance string
	epoch        int32
	seq          uint64
	owned        []TopicPartition
}

func (c *client) beat(t *testing.T, s *State, topics ...TopicInfo) (HeartbeatResult, error) {
	t.Helper()
	c.seq++
	subs := make([]string, len(topics))
	for i, tp := range topics {
		subs[i] = tp.Name
	}
	r, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: c.id, InstanceID: c.instance, MemberEpoch: c.epoch, Seq: c.seq,
		Subscriptions: subs, Owned: c.owned, Topics: topics})
	if err == nil {
		c.epoch, c.owned = r.MemberEpoch, r.Assigned
	}
	if e := s.Check(); e != nil {
		t.Fatal(e)
	}
	return r, err
}

var topicT = TopicInfo{Name: "t", Partitions: 4}

// TestJoinThenIncrementalHandOver shows KIP-848's order: a second member
// gets the first member's partitions only after the first reported them
// revoked, and the first keeps fetching the rest throughout.
func TestJoinThenIncrementalHandOver(t *testing.T) {
	s := New()
	a, b := &client{id: "a"}, &client{id: "b"}
	if _, err := a.beat(t, s, topicT); err != nil || !slices.Equal(a.owned, tps("t", 0, 1, 2, 3)) || a.epoch != 1 {
		t.Fatalf("a alone: owned %v epoch %d err %v", a.owned, a.epoch, err)
	}
	b.beat(t, s, topicT)
	if len(b.owned) != 0 {
		t.Fatalf("b got %v before a revoked", b.owned)
	}
	a.beat(t, s, topicT) // told to keep two, revoke two; epoch unchanged
	if len(a.owned) != 2 || a.epoch != 1 {
		t.Fatalf("a asked to keep %v epoch %d", a.owned, a.epoch)
	}
	kept := a.owned
	b.beat(t, s, topicT)
	if len(b.owned) != 0 {
		t.Fatalf("b got %v while a had not reported the revocation", b.owned)
	}
	a.beat(t, s, topicT) // reports owned {0,1}: revocation done, epoch 2
	if a.epoch != 2 {
		t.Fatalf("a epoch %d after revoking, want 2", a.epoch)
	}
	b.beat(t, s, topicT)
	if !slices.Equal(b.owned, minus(tps("t", 0, 1, 2, 3), kept)) || b.epoch != 2 {
		t.Fatalf("b owned %v epoch %d, want what a gave up, at 2", b.owned, b.epoch)
	}
	v, _ := s.Describe("g")
	if v.State != StateStable {
		t.Fatalf("state %s, want stable", v.State)
	}
	// Stable: a's next heartbeat changes nothing and needs no log write;
	// one reporting less than it owns does.
	hb := Heartbeat{Group: "g", MemberID: "a", MemberEpoch: a.epoch, Seq: a.seq + 1, Subscriptions: []string{"t"},
		Owned: a.owned, Topics: []TopicInfo{topicT}}
	if r, ok := s.HeartbeatUnchanged(hb); !ok || r.MemberEpoch != a.epoch || !slices.Equal(r.Assigned, a.owned) {
		t.Fatalf("stable heartbeat: %+v %v", r, ok)
	}
	hb.Owned = a.owned[:1]
	if _, ok := s.HeartbeatUnchanged(hb); ok {
		t.Fatal("a heartbeat owning less than assigned counted as unchanged")
	}
}

// TestEpochFencing shows the epoch rules: a heartbeat from the future or a
// non-previous past is fenced; a commit from an older epoch is stale, from
// a newer one fenced; an unknown member is told so.
func TestEpochFencing(t *testing.T) {
	s := New()
	a, b := &client{id: "a"}, &client{id: "b"}
	a.beat(t, s, topicT)
	b.beat(t, s, topicT)
	a.beat(t, s, topicT)
	a.beat(t, s, topicT) // a at epoch 2
	if _, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: "a", MemberEpoch: 3, Seq: 100}); !errors.Is(err, ErrFencedMemberEpoch) {
		t.Fatalf("future epoch: %v", err)
	}
	if _, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: "a", MemberEpoch: 1, Seq: 99, Owned: tps("t", 0, 1, 2, 3)}); !errors.Is(err, ErrFencedMemberEpoch) {
		t.Fatalf("previous epoch owning more than assigned: %v", err)
	}
	if _, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: "a", MemberEpoch: 1, Seq: 101, Owned: a.owned}); err != nil {
		t.Fatalf("previous epoch with a subset of assigned (a lost answer): %v", err)
	}
	if err := s.Commit(Commit{Group: "g", MemberID: "a", MemberEpoch: 1, Offsets: []OffsetCommit{{Partition: TopicPartition{"t", 0}, Offset: 5}}}); !errors.Is(err, ErrStaleMemberEpoch) {
		t.Fatalf("old-epoch commit: %v", err)
	}
	if err := s.Commit(Commit{Group: "g", MemberID: "a", MemberEpoch: 9, Offsets: []OffsetCommit{{Partition: TopicPartition{"t", 0}, Offset: 5}}}); !errors.Is(err, ErrFencedMemberEpoch) {
		t.Fatalf("future-epoch commit: %v", err)
	}
	if err := s.Commit(Commit{Group: "g", MemberID: "zz", MemberEpoch: 2}); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("unknown member commit: %v", err)
	}
	if got := s.Fetch("g", nil); len(got) != 0 {
		t.Fatalf("refused commits landed: %v", got)
	}
	if err := s.Commit(Commit{Group: "g", MemberID: "a", MemberEpoch: 2, Offsets: []OffsetCommit{{Partition: TopicPartition{"t", 0}, Offset: 5, Metadata: "m"}}, NowMs: 7}); err != nil {
		t.Fatal(err)
	}
	want := []CommittedOffset{{Partition: TopicPartition{"t", 0}, Committed: Committed{Offset: 5, Metadata: "m", CommitMs: 7}}}
	if got := s.Fetch("g", nil); !slices.Equal(got, want) {
		t.Fatalf("fetch %v, want %v", got, want)
	}
}

// TestStaleHeartbeatCannotAcknowledgeRevocation shows why heartbeats carry
// a sequence: a late duplicate of an older heartbeat (owning nothing yet)
// must not count as the revocation the member has not done.
func TestStaleHeartbeatCannotAcknowledgeRevocation(t *testing.T) {
	s := New()
	a, b := &client{id: "a"}, &client{id: "b"}
	a.beat(t, s, topicT)
	old := Heartbeat{Group: "g", MemberID: "a", MemberEpoch: 1, Seq: a.seq + 1, Subscriptions: []string{"t"}, Topics: []TopicInfo{topicT}}
	a.seq++
	if _, err := s.Heartbeat(old); err != nil {
		t.Fatal(err)
	}
	b.beat(t, s, topicT)
	a.beat(t, s, topicT) // a asked to revoke 2, 3
	if _, err := s.Heartbeat(old); !errors.Is(err, ErrStaleHeartbeat) {
		t.Fatalf("late duplicate: %v", err)
	}
	b.beat(t, s, topicT)
	if len(b.owned) != 0 {
		t.Fatalf("b got %v from a duplicate", b.owned)
	}
}

// TestStaticMemberRestart shows static membership: the restarted instance,
// under a new member id, gets the same partitions and epoch back with no
// group epoch change, and the old member id is gone (its commits fail).
func TestStaticMemberRestart(t *testing.T) {
	s := New()
	a, b := &client{id: "a1", instance: "ia"}, &client{id: "b"}
	a.beat(t, s, topicT)
	b.beat(t, s, topicT)
	a.beat(t, s, topicT)
	a.beat(t, s, topicT)
	b.beat(t, s, topicT)
	before, _ := s.Describe("g")
	owned := a.owned
	a2 := &client{id: "a2", instance: "ia"}
	a2.beat(t, s, topicT)
	if !slices.Equal(a2.owned, owned) || a2.epoch != a.epoch {
		t.Fatalf("restarted instance got %v at %d, want %v at %d", a2.owned, a2.epoch, owned, a.epoch)
	}
	after, _ := s.Describe("g")
	if after.Epoch != before.Epoch || len(after.Members) != 2 {
		t.Fatalf("group epoch %d → %d, members %d", before.Epoch, after.Epoch, len(after.Members))
	}
	if err := s.Commit(Commit{Group: "g", MemberID: "a1", MemberEpoch: a.epoch}); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("old instance commit: %v", err)
	}
	// A static leave keeps the assignment; the coordinator's expiry ends it.
	a2.seq++
	if _, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: "a2", InstanceID: "ia", MemberEpoch: EpochLeaveStatic, Seq: a2.seq}); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Describe("g"); len(v.Members) != 2 || !v.Members[0].LeftStatic {
		t.Fatalf("after a static leave: %+v", v.Members)
	}
	if !s.Expire("g", "a2", a2.epoch, 0) {
		t.Fatal("expire of the away static member did nothing")
	}
	b.beat(t, s, topicT)
	b.beat(t, s, topicT)
	if len(b.owned) != 4 {
		t.Fatalf("b owns %v after a's expiry", b.owned)
	}
}

// TestExpireNamesTheEpoch shows that an expiry decided before a newer
// heartbeat was applied does nothing.
func TestExpireNamesTheEpoch(t *testing.T) {
	s := New()
	a, b := &client{id: "a"}, &client{id: "b"}
	a.beat(t, s, topicT)
	b.beat(t, s, topicT)
	a.beat(t, s, topicT)
	a.beat(t, s, topicT)
	if s.Expire("g", "a", 1, 0) {
		t.Fatal("expiry of a's old epoch removed it")
	}
	if !s.Expire("g", "a", 2, 0) {
		t.Fatal("expiry at a's epoch did nothing")
	}
}

// TestStickyJoin shows the assignor moves only what balance needs: an
// eleventh member joining ten over 100 partitions takes 9, nothing else moves.
func TestStickyJoin(t *testing.T) {
	s := New()
	big := TopicInfo{Name: "t", Partitions: 100}
	var cs []*client
	for i := range 10 {
		cs = append(cs, &client{id: fmt.Sprintf("m%02d", i)})
	}
	settle := func() {
		for range 10 {
			for _, c := range cs {
				if _, err := c.beat(t, s, big); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	settle()
	before := make(map[string][]TopicPartition)
	for _, c := range cs {
		before[c.id] = c.owned
		if len(c.owned) != 10 {
			t.Fatalf("%s owns %d, want 10", c.id, len(c.owned))
		}
	}
	cs = append(cs, &client{id: "m10"})
	settle()
	moved := 0
	for _, c := range cs[:10] {
		moved += len(minus(before[c.id], c.owned))
		if len(minus(c.owned, before[c.id])) != 0 {
			t.Fatalf("%s gained %v", c.id, minus(c.owned, before[c.id]))
		}
	}
	if moved != 9 || len(cs[10].owned) != 9 {
		t.Fatalf("moved %d, newcomer owns %d; want 9 and 9", moved, len(cs[10].owned))
	}
	if v, _ := s.Describe("g"); v.State != StateStable {
		t.Fatalf("state %s", v.State)
	}
}

// TestSimpleCommitAndDeletes shows commits without a member (an operator's
// reset) need an empty group, DeleteGroup likewise, DeleteTopic drops the
// topic's offsets, and ExpireOffsets forgets groups empty for the retention.
func TestSimpleCommitAndDeletes(t *testing.T) {
	s := New()
	off := func(topic string, o int64) []OffsetCommit {
		return []OffsetCommit{{Partition: TopicPartition{topic, 0}, Offset: o}}
	}
	if err := s.Commit(Commit{Group: "g", Offsets: append(off("t", 3), off("u", 4)...), NowMs: 100}); err != nil {
		t.Fatal(err)
	}
	a := &client{id: "a"}
	a.beat(t, s, topicT)
	if err := s.Commit(Commit{Group: "g", Offsets: off("t", 9)}); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("reset with a member: %v", err)
	}
	if err := s.DeleteGroup("g"); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("delete with a member: %v", err)
	}
	a.seq++
	if _, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: "a", MemberEpoch: EpochLeave, Seq: a.seq, NowMs: 200}); err != nil {
		t.Fatal(err)
	}
	s.DeleteTopic("u")
	if got := s.Fetch("g", nil); len(got) != 1 || got[0].Partition.Topic != "t" {
		t.Fatalf("after deleting u: %v", got)
	}
	if got := s.ExpireOffsets(299, 100); len(got) != 0 {
		t.Fatalf("expired early: %v", got)
	}
	if got := s.ExpireOffsets(300, 100); !slices.Equal(got, []string{"g"}) {
		t.Fatalf("expired %v, want [g]", got)
	}
	if err := s.DeleteGroup("g"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("delete of an expired group: %v", err)
	}
}

// TestRackAware shows racks break ties of balance: with partitions 0-1
// replicated in rack r1 and 2-3 in r2, the members of r1 and r2 get their
// rack's partitions; balance still comes first (a third member in r1 takes
// some anyway, counts differing by at most one).
func TestRackAware(t *testing.T) {
	s := New()
	topic := TopicInfo{Name: "t", Partitions: 4, Racks: [][]string{{"r1"}, {"r1"}, {"r2"}, {"r2"}}}
	beat := func(id, rack string, epoch int32, seq uint64, owned []TopicPartition) HeartbeatResult {
		r, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: id, Rack: rack, MemberEpoch: epoch, Seq: seq,
			Subscriptions: []string{"t"}, Owned: owned, Topics: []TopicInfo{topic}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Both join before either heartbeats again: the first target has both.
	beat("a", "r2", 0, 1, nil)
	beat("b", "r1", 0, 1, nil)
	v, _ := s.Describe("g")
	want := map[string][]TopicPartition{"a": tps("t", 2, 3), "b": tps("t", 0, 1)}
	for _, m := range v.Members {
		if !slices.Equal(m.Target, want[m.ID]) {
			t.Fatalf("%s (%s) target %v, want %v", m.ID, m.Rack, m.Target, want[m.ID])
		}
	}
	beat("c", "r1", 0, 1, nil)
	v, _ = s.Describe("g")
	lo, hi := 4, 0
	for _, m := range v.Members {
		lo, hi = min(lo, len(m.Target)), max(hi, len(m.Target))
	}
	if hi-lo > 1 {
		t.Fatalf("unbalanced with racks: %+v", v.Members)
	}
}

// TestDeleteOffsets shows Kafka's OffsetDelete rules: with a member
// subscribed to t, t's offsets are kept (ErrGroupSubscribedToTopic for
// each) while u's are deleted in the same call; a partition with nothing
// committed deletes fine; once the member leaves, t's go too; a missing
// group is ErrGroupNotFound.
func TestDeleteOffsets(t *testing.T) {
	s := New()
	offs := []OffsetCommit{{Partition: TopicPartition{"t", 0}, Offset: 3}, {Partition: TopicPartition{"u", 0}, Offset: 4},
		{Partition: TopicPartition{"u", 1}, Offset: 5}}
	if err := s.Commit(Commit{Group: "g", Offsets: offs, NowMs: 100}); err != nil {
		t.Fatal(err)
	}
	a := &client{id: "a"}
	a.beat(t, s, topicT)
	res, err := s.DeleteOffsets("g", []TopicPartition{{"t", 0}, {"u", 0}, {"u", 7}})
	if err != nil || len(res) != 3 || !errors.Is(res[0], ErrGroupSubscribedToTopic) || res[1] != nil || res[2] != nil {
		t.Fatalf("delete with t subscribed: %v, %v", res, err)
	}
	if got := s.Fetch("g", nil); len(got) != 2 || got[0].Partition != (TopicPartition{"t", 0}) || got[1].Partition != (TopicPartition{"u", 1}) {
		t.Fatalf("offsets after the delete: %v", got)
	}
	a.seq++
	if _, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: "a", MemberEpoch: EpochLeave, Seq: a.seq, NowMs: 200}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.DeleteOffsets("g", tps("t", 0)); err != nil || res[0] != nil {
		t.Fatalf("delete after the member left: %v, %v", res, err)
	}
	if got := s.Fetch("g", tps("t", 0)); len(got) != 0 {
		t.Fatalf("t/0 still committed: %v", got)
	}
	if _, err := s.DeleteOffsets("nope", tps("t", 0)); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("missing group: %v", err)
	}
}
