package metadata

import (
	"slices"
	"testing"
)

// A topic a caller gets is its own: writing into or appending to one
// partition's replica or target list changes neither another partition's
// lists nor the state (export shares one backing array between them).
func TestTopicCopyIsIndependent(t *testing.T) {
	a := newApplier(t)
	a.nodes(4)
	a.ok(EncodeCreateTopic("orders", 3, 3, nil))
	before, _ := a.s.Topic("orders")
	a.ok(EncodeReassignPartition("orders", before.ID, 1, []uint64{4, 2, 3}, false))
	got, _ := a.s.Topic("orders")
	if len(got.Targets[1]) == 0 {
		t.Fatalf("no target after a reassignment: %+v", got)
	}
	want, _ := a.s.Topic("orders")
	for p := range got.Replicas {
		got.Replicas[p] = append(got.Replicas[p], 99)
		got.Replicas[p][0] = 98
		if len(got.Targets[p]) > 0 {
			got.Targets[p] = append(got.Targets[p], 97)
			got.Targets[p][0] = 96
		}
	}
	for p := range want.Replicas {
		if slices.Contains(want.Replicas[p], 98) || slices.Contains(want.Replicas[p], 99) ||
			slices.Contains(want.Targets[p], 96) || slices.Contains(want.Targets[p], 97) {
			t.Fatalf("partition %d of another copy changed: replicas %v targets %v", p, want.Replicas[p], want.Targets[p])
		}
	}
	again, _ := a.s.Topic("orders")
	for p := range again.Replicas {
		if !slices.Equal(again.Replicas[p], want.Replicas[p]) || !slices.Equal(again.Targets[p], want.Targets[p]) {
			t.Fatalf("partition %d of the state changed: replicas %v targets %v, want %v %v",
				p, again.Replicas[p], again.Targets[p], want.Replicas[p], want.Targets[p])
		}
		if want.Targets[p] != nil && len(want.Targets[p]) == 0 {
			t.Fatalf("partition %d: an empty target list is not nil", p)
		}
	}
	// Within one copy: an append to partition 0's list must not write
	// over partition 1's.
	c, _ := a.s.Topic("orders")
	p1 := slices.Clone(c.Replicas[1])
	_ = append(c.Replicas[0], 77)
	if !slices.Equal(c.Replicas[1], p1) {
		t.Fatalf("an append to partition 0's replicas wrote over partition 1's: %v, was %v", c.Replicas[1], p1)
	}
}
