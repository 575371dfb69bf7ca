package groups

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// classicMember drives one classic member's steps against a state.
type classicMember struct {
	id         string
	generation int32
	given      []TopicPartition
	seq        uint64
}

func (c *classicMember) step(t *testing.T, s *State, st ClassicStep, owned []TopicPartition) HeartbeatResult {
	t.Helper()
	c.seq++
	r, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: c.id, Seq: c.seq, Subscriptions: []string{"t"}, Owned: owned,
		Topics: []TopicInfo{topicT}, Classic: Classic{Step: st, Generation: c.generation, Protocol: "range", ClientID: "cl-" + c.id}})
	if err != nil {
		t.Fatalf("%s step %d: %v", c.id, st, err)
	}
	return r
}

// join joins, reporting what it was given as owned, and syncs.
func (c *classicMember) join(t *testing.T, s *State) {
	t.Helper()
	c.generation = c.step(t, s, ClassicJoin, c.given).Generation
	r := c.step(t, s, ClassicSync, nil)
	if r.Rejoin {
		t.Fatalf("%s: sync right after its join asks to rejoin", c.id)
	}
	c.given = r.Assigned
}

// settleClassic heartbeats every member, rejoining those told to, until a
// round in which no one is (bounded).
func settleClassic(t *testing.T, s *State, ms ...*classicMember) {
	t.Helper()
	for range 20 {
		quiet := true
		for _, m := range ms {
			if m.step(t, s, ClassicHeartbeat, nil).Rejoin {
				quiet = false
				m.join(t, s)
			}
		}
		if quiet {
			return
		}
	}
	t.Fatal("classic members did not settle in 20 rounds")
}

// A classic group's state is replicated: restored from a snapshot (as a new
// coordinator does), its members heartbeat and commit in their generation
// without a rejoin, and DescribeGroups still knows their protocol and
// client id.
func TestClassicGroupRestoresFromSnapshot(t *testing.T) {
	s := New()
	a, b := &classicMember{id: "a"}, &classicMember{id: "b"}
	a.join(t, s)
	b.join(t, s)
	settleClassic(t, s, a, b)
	if len(a.given) != 2 || len(b.given) != 2 {
		t.Fatalf("settled with a=%v b=%v", a.given, b.given)
	}
	r, err := Restore(s.Snapshot(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*classicMember{a, b} {
		if got := m.step(t, r, ClassicHeartbeat, nil); got.Rejoin || got.Generation != m.generation {
			t.Fatalf("%s after restore: %+v, want generation %d and no rejoin", m.id, got, m.generation)
		}
	}
	err = r.Commit(Commit{Group: "g", MemberID: "a", MemberEpoch: a.generation, ClassicGeneration: true,
		Offsets: []OffsetCommit{{Partition: a.given[0], Offset: 5}}})
	if err != nil {
		t.Fatalf("commit in generation %d after restore: %v", a.generation, err)
	}
	v, _ := r.Describe("g")
	if c := v.Members[0].Classic; c == nil || c.Protocol != "range" || c.ClientID != "cl-a" || !c.Synced {
		t.Fatalf("a's classic view after restore: %+v", c)
	}
}

// A snapshot written before classic members were replicated (no classic
// field) restores: the member is a plain one, and a classic client's next
// heartbeat or sync is asked to rejoin, which works.
func TestClassicOldSnapshotRestores(t *testing.T) {
	s := New()
	a := &classicMember{id: "a"}
	a.join(t, s)
	snap := s.Snapshot(1)
	for _, g := range snap.GetGroups() {
		for _, m := range g.GetMembers() {
			m.Classic = nil
		}
	}
	r, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !a.step(t, r, ClassicHeartbeat, nil).Rejoin || !a.step(t, r, ClassicSync, nil).Rejoin {
		t.Fatal("a member without a classic view was not asked to rejoin")
	}
	a.join(t, r)
	if !slices.Equal(a.given, tps("t", 0, 1, 2, 3)) {
		t.Fatalf("rejoined with %v", a.given)
	}
}

// A classic heartbeat of a member told to give partitions up answers
// Rejoin until its rejoin reports them gone; sync and heartbeat in another
// generation are fenced or asked to rejoin, and an unknown member is
// UNKNOWN_MEMBER_ID.
func TestClassicRejoinAndFencing(t *testing.T) {
	s := New()
	a := &classicMember{id: "a"}
	a.join(t, s)
	b := &classicMember{id: "b"}
	b.join(t, s)
	if !a.step(t, s, ClassicHeartbeat, nil).Rejoin {
		t.Fatal("a not asked to rejoin after b joined")
	}
	old := a.generation
	a.generation = old + 5
	if _, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: "a", Seq: 100, Classic: Classic{Step: ClassicSync, Generation: old + 5}}); err != ErrFencedMemberEpoch {
		t.Fatalf("sync in generation %d: %v, want fenced", old+5, err)
	}
	if !a.step(t, s, ClassicHeartbeat, nil).Rejoin {
		t.Fatal("heartbeat in another generation not asked to rejoin")
	}
	a.generation = old
	if _, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: "zz", Seq: 1, Classic: Classic{Step: ClassicHeartbeat}}); err != ErrUnknownMember {
		t.Fatalf("unknown member's heartbeat: %v", err)
	}
	settleClassic(t, s, a, b)
	if len(intersect(a.given, b.given)) > 0 || len(a.given)+len(b.given) != 4 {
		t.Fatalf("settled with a=%v b=%v", a.given, b.given)
	}
}

// FuzzRestoreSnapshot decodes arbitrary bytes as a snapshot (what a new
// coordinator reads from its log) and restores it: never a panic, and a
// restored state passes Check and snapshots to itself.
func FuzzRestoreSnapshot(f *testing.F) {
	s := New()
	for i, st := range []ClassicStep{ClassicJoin, ClassicSync} {
		_, _ = s.Heartbeat(Heartbeat{Group: "g", MemberID: "a", Seq: uint64(i + 1), Subscriptions: []string{"t"},
			Topics: []TopicInfo{topicT}, Classic: Classic{Step: st, Generation: 1, Protocol: "range"}})
	}
	seed, _ := proto.Marshal(s.Snapshot(3))
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var snap strandpb.GroupsSnapshot
		if proto.Unmarshal(data, &snap) != nil {
			return
		}
		r, err := Restore(&snap)
		if err != nil {
			return
		}
		if err := r.Check(); err != nil {
			t.Fatalf("restored state: %v", err)
		}
		again, err := Restore(r.Snapshot(snap.GetAsOf()))
		if err != nil || !proto.Equal(again.Snapshot(0), r.Snapshot(0)) {
			t.Fatalf("a restored state's snapshot does not restore to it: %v", err)
		}
	})
}
