package metadata

import (
	"slices"
	"testing"
)

// movesFixture is 5 nodes and topic t with 2 partitions of 3 replicas.
func movesFixture(t *testing.T) (*applier, Topic) {
	a := newApplier(t)
	a.nodes(5)
	a.ok(EncodeCreateTopic("t", 2, 3, nil))
	topic, _ := a.s.Topic("t")
	return a, topic
}

// TestReassignPartitionRecordsMove shows a move recorded as in progress:
// hosted by current ∪ target, bootstrap kept, survives a snapshot, and
// completion makes the target the replica list and clears the move.
func TestReassignPartitionRecordsMove(t *testing.T) {
	a, topic := movesFixture(t)
	cur := topic.Replicas[0]
	// Keep two replicas, replace the preferred leader by a new node.
	target := append([]uint64(nil), cur[1:]...)
	for id := uint64(1); len(target) < 3; id++ {
		if !containsID(cur, id) {
			target = append(target, id)
		}
	}
	v := a.s.Version()
	a.ok(EncodeReassignPartition("t", topic.ID, 0, target, false))
	if a.s.Version() != v+1 {
		t.Fatalf("version %d after a move, want %d", a.s.Version(), v+1)
	}
	mv, ok := a.s.MoveOf("t", 0)
	if !ok || !slices.Equal(mv.Target, target) || !slices.Equal(mv.Replicas, cur) {
		t.Fatalf("move %+v %v, want %v to %v", mv, ok, cur, target)
	}
	if !slices.Equal(mv.Adding(), target[2:]) || !slices.Equal(mv.Removing(), cur[:1]) {
		t.Fatalf("adding %v removing %v, want %v and %v", mv.Adding(), mv.Removing(), target[2:], cur[:1])
	}
	for id := uint64(1); id <= 5; id++ {
		hosted := false
		for _, ref := range a.s.HostedPartitions(id) {
			if ref.Topic == "t" && ref.Partition == 0 {
				hosted = true
				if !slices.Equal(ref.Bootstrap, cur) {
					t.Fatalf("node %d bootstrap %v, want %v", id, ref.Bootstrap, cur)
				}
			}
		}
		if want := containsID(cur, id) || containsID(target, id); hosted != want {
			t.Fatalf("node %d hosts p0: %v, want %v", id, hosted, want)
		}
	}
	restored, err := Restore(a.s.Snapshot())
	if err != nil || restored.Digest() != a.s.Digest() {
		t.Fatalf("restore: %v (digests %x, %x)", err, restored.Digest(), a.s.Digest())
	}
	wantErr(t, a.do(EncodeReassignPartition("t", topic.ID, 0, cur, false)), ErrMoveInProgress)
	v = a.s.Version()
	a.ok(EncodeReassignPartition("t", topic.ID, 0, target, false)) // a resend of the same move
	if a.s.Version() != v {
		t.Fatal("a resend of the move in progress changed the state")
	}
	wantErr(t, a.do(EncodeCompletePartitionMove("t", topic.ID, 0, cur)), ErrNoMoveInProgress)
	a.ok(EncodeCompletePartitionMove("t", topic.ID, 0, target))
	if got, _ := a.s.Assignment("t", 0); !slices.Equal(got, target) {
		t.Fatalf("replicas %v after completion, want %v", got, target)
	}
	if _, ok := a.s.MoveOf("t", 0); ok || len(a.s.Moves()) != 0 {
		t.Fatal("move still in progress after completion")
	}
	wantErr(t, a.do(EncodeCompletePartitionMove("t", topic.ID, 0, target)), ErrNoMoveInProgress)
	for _, ref := range a.s.HostedPartitions(target[0]) {
		if ref.Topic == "t" && ref.Partition == 0 && !slices.Equal(ref.Bootstrap, cur) {
			t.Fatalf("bootstrap %v after completion, want %v", ref.Bootstrap, cur)
		}
	}
}

// TestReassignPartitionRefusals shows each invalid move refused with its
// error and nothing changed.
func TestReassignPartitionRefusals(t *testing.T) {
	a, topic := movesFixture(t)
	a.ok(EncodeSetNodeFenced(5, true))
	cur := topic.Replicas[1]
	cases := []struct {
		name   string
		topic  string
		id     uint64
		p      int32
		target []uint64
		want   error
	}{
		{"empty target", "t", topic.ID, 1, nil, ErrInvalidReplicaAssignment},
		{"duplicate", "t", topic.ID, 1, []uint64{1, 1, 2}, ErrInvalidReplicaAssignment},
		{"unknown node", "t", topic.ID, 1, []uint64{1, 2, 9}, ErrInvalidReplicaAssignment},
		{"unknown topic", "nope", 0, 0, []uint64{1, 2, 3}, ErrUnknownTopic},
		{"old incarnation", "t", topic.ID + 7, 0, []uint64{1, 2, 3}, ErrUnknownTopic},
		{"unknown partition", "t", topic.ID, 2, []uint64{1, 2, 3}, ErrUnknownPartition},
	}
	if !containsID(cur, 5) {
		cases = append(cases, struct {
			name   string
			topic  string
			id     uint64
			p      int32
			target []uint64
			want   error
		}{"fenced node", "t", topic.ID, 1, append([]uint64{5}, cur[1:]...), ErrInvalidReplicaAssignment})
	}
	for _, tc := range cases {
		v := a.s.Version()
		r := a.do(EncodeReassignPartition(tc.topic, tc.id, tc.p, tc.target, false))
		wantErr(t, r, tc.want)
		if a.s.Version() != v || len(a.s.Moves()) != 0 {
			t.Fatalf("%s: refused move changed the state", tc.name)
		}
	}
	v := a.s.Version()
	a.ok(EncodeReassignPartition("t", topic.ID, 1, cur, false))
	if a.s.Version() != v || len(a.s.Moves()) != 0 {
		t.Fatal("a move to the current replicas recorded something")
	}
}

// TestDeleteTopicDropsMove shows a deleted topic's move gone with it.
func TestDeleteTopicDropsMove(t *testing.T) {
	a, topic := movesFixture(t)
	target := []uint64{1, 2, 3}
	if slices.Equal(topic.Replicas[0], target) {
		target = []uint64{3, 4, 5}
	}
	a.ok(EncodeReassignPartition("t", topic.ID, 0, target, false))
	a.ok(EncodeDeleteTopic("t"))
	if len(a.s.Moves()) != 0 {
		t.Fatal("move of a deleted topic still listed")
	}
}

// A redirect points a move in progress at a new target; the old target's
// nodes named by neither keep hosting (leaving) until completion; a
// redirect to the replicas cancels the move, and its completion clears it.
func TestRedirectAndCancelMove(t *testing.T) {
	a, topic := movesFixture(t)
	cur := topic.Replicas[0]
	var outside []uint64
	for id := uint64(1); id <= 5; id++ {
		if !containsID(cur, id) {
			outside = append(outside, id)
		}
	}
	first := append([]uint64{outside[0]}, cur[1:]...)
	a.ok(EncodeReassignPartition("t", topic.ID, 0, first, false))
	second := append([]uint64{outside[1]}, cur[1:]...)
	a.ok(EncodeReassignPartition("t", topic.ID, 0, second, true))
	hosts := func(id uint64) bool {
		for _, ref := range a.s.HostedPartitions(id) {
			if ref.Topic == "t" && ref.Partition == 0 {
				return true
			}
		}
		return false
	}
	if !hosts(outside[0]) || !hosts(outside[1]) || !hosts(cur[0]) {
		t.Fatalf("after the redirect, nodes %d, %d, %d must all host p0", outside[0], outside[1], cur[0])
	}
	a.ok(EncodeReassignPartition("t", topic.ID, 0, cur, true)) // cancel
	mv, ok := a.s.MoveOf("t", 0)
	if !ok || !slices.Equal(mv.Target, cur) {
		t.Fatalf("cancel: move %+v %v, want target %v", mv, ok, cur)
	}
	restored, err := Restore(a.s.Snapshot())
	if err != nil || restored.Digest() != a.s.Digest() {
		t.Fatalf("restore: %v", err)
	}
	a.ok(EncodeCompletePartitionMove("t", topic.ID, 0, cur))
	if hosts(outside[0]) || hosts(outside[1]) || len(a.s.Moves()) != 0 {
		t.Fatal("after the cancelled move completed, the leaving nodes still host p0")
	}
}

// A leader reported from a move's target stays recorded when a redirect
// (or a cancel) leaves its node outside the replicas and the new target
// (leaving: it may still lead until the move completes), and the state
// still restores from its snapshot. Restore refused it before ("leader 1
// in term 4"): a node could not reload its own metadata checkpoint (the
// moves simulator's seeds 34 and 55).
func TestRedirectedMoveLeaderRestores(t *testing.T) {
	a, topic := movesFixture(t)
	cur := topic.Replicas[0]
	var outside []uint64
	for id := uint64(1); id <= 5; id++ {
		if !containsID(cur, id) {
			outside = append(outside, id)
		}
	}
	first := append([]uint64{outside[0]}, cur[1:]...)
	a.ok(EncodeReassignPartition("t", topic.ID, 0, first, false))
	a.ok(EncodeReportLeaders([]LeaderReport{{Topic: "t", TopicID: topic.ID, Partition: 0, Leader: Leader{Node: outside[0], Term: 7}}}))
	for _, target := range [][]uint64{append([]uint64{outside[1]}, cur[1:]...), cur} { // a redirect, then a cancel
		a.ok(EncodeReassignPartition("t", topic.ID, 0, target, true))
		if l, _ := a.s.Leader("t", 0); l.Node != outside[0] || l.Term != 7 {
			t.Fatalf("leader after the redirect to %v: %+v, want node %d in term 7", target, l, outside[0])
		}
		restored, err := Restore(a.s.Snapshot())
		if err != nil {
			t.Fatalf("restore after the redirect to %v: %v", target, err)
		}
		if restored.Digest() != a.s.Digest() {
			t.Fatalf("restored digest %016x, original %016x", restored.Digest(), a.s.Digest())
		}
	}
}
