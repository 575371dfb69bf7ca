//go:build simbugs

package groups

import "testing"

// TestBugAssignBeforeRevoke shows the planted bug hands a partition to its
// new owner while the old owner still holds it (the property TestModel and
// the simulator check).
func TestBugAssignBeforeRevoke(t *testing.T) {
	SetBugs(true, false)
	defer SetBugs(false, false)
	s := New()
	hb := func(id string, owned []TopicPartition) []TopicPartition {
		r, err := s.Heartbeat(Heartbeat{Group: "g", MemberID: id, Seq: 1, Subscriptions: []string{"t"}, Owned: owned, Topics: []TopicInfo{topicT}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Assigned
	}
	a := hb("a", nil) // a owns all four
	b := hb("b", nil) // b joins before a has heard of any revocation
	if len(intersect(a, b)) == 0 {
		t.Fatalf("bug not effective: a %v b %v", a, b)
	}
	if s.Check() == nil {
		t.Fatal("Check misses the double holder")
	}
}

// TestBugCommitSkipsEpoch shows the planted bug lets a stale epoch commit.
func TestBugCommitSkipsEpoch(t *testing.T) {
	SetBugs(false, true)
	defer SetBugs(false, false)
	s := New()
	a := &client{id: "a"}
	a.beat(t, s, topicT)
	if err := s.Commit(Commit{Group: "g", MemberID: "a", MemberEpoch: a.epoch - 1}); err != nil {
		t.Fatalf("bug not effective: %v", err)
	}
}

// TestBugClassicForgotten shows the planted bug: a state restored from a
// snapshot has lost its classic members (what a new coordinator restores
// on fail-over), so their next heartbeat is UNKNOWN_MEMBER_ID.
func TestBugClassicForgotten(t *testing.T) {
	SetClassicBug(true)
	defer SetClassicBug(false)
	s := New()
	a := &classicMember{id: "a"}
	a.join(t, s)
	r, err := Restore(s.Snapshot(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Heartbeat(Heartbeat{Group: "g", MemberID: "a", Seq: 9, Classic: Classic{Step: ClassicHeartbeat, Generation: a.generation}}); err != ErrUnknownMember {
		t.Fatalf("bug not effective: heartbeat after restore: %v", err)
	}
}

// TestBugOffsetsOnAbort shows the planted bug makes an aborted
// transaction's pending offsets the group's committed ones (the property
// TestTxnOffsetsAbortAndStaleProducer and simnet's session members
// check).
func TestBugOffsetsOnAbort(t *testing.T) {
	SetTxnOffsetsBug(true)
	defer SetTxnOffsetsBug(false)
	s := New()
	if err := s.TxnCommit(txnCommit(7, 3, 42)); err != nil {
		t.Fatal(err)
	}
	if err := s.TxnMarker(TxnMarker{Group: "g", ProducerID: 7, ProducerEpoch: 4, Commit: false}); err != nil {
		t.Fatal(err)
	}
	if got := fetched(s); got != 42 {
		t.Fatalf("with the bug the abort marker left offset %d; want 42 committed", got)
	}
}
