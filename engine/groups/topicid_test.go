package groups

import (
	"slices"
	"testing"
)

// A committed offset keeps the id of the topic it was committed for,
// through Fetch and a snapshot's round trip: the coordinator compares it
// with the topic's current id, so a deleted topic's offsets never apply
// to a namesake (issue 19, item 5).
func TestCommittedOffsetKeepsTopicID(t *testing.T) {
	s := New()
	id := string([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	if err := s.Commit(Commit{Group: "g", Offsets: []OffsetCommit{{Partition: TopicPartition{"t", 0}, Offset: 5, TopicID: id}}, NowMs: 7}); err != nil {
		t.Fatal(err)
	}
	want := []CommittedOffset{{Partition: TopicPartition{"t", 0}, Committed: Committed{Offset: 5, CommitMs: 7, TopicID: id}}}
	if got := s.Fetch("g", nil); !slices.Equal(got, want) {
		t.Fatalf("fetch %v, want %v", got, want)
	}
	r, err := Restore(s.Snapshot(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Fetch("g", nil); !slices.Equal(got, want) {
		t.Fatalf("after a snapshot: %v, want %v", got, want)
	}
	long := []OffsetCommit{{Partition: TopicPartition{"t", 0}, Offset: 1, TopicID: id + "x"}}
	if err := s.Commit(Commit{Group: "g", Offsets: long}); err == nil {
		t.Fatal("a 17-byte topic id was accepted")
	}
}
