package metadata

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// spread returns max-min of preferred-leader and replica counts over the
// unfenced nodes.
func spread(s *State) (leaders, replicas int64) {
	eligible := s.eligibleNodes()
	lc := map[uint64]int64{}
	rc := map[uint64]int64{}
	for _, t := range s.Topics() {
		for _, r := range t.Replicas {
			lc[r[0]]++
			for _, id := range r {
				rc[id]++
			}
		}
	}
	span := func(c map[uint64]int64) int64 {
		lo, hi := int64(-1), int64(0)
		for _, n := range eligible {
			v := c[n.ID]
			if lo < 0 || v < lo {
				lo = v
			}
			if v > hi {
				hi = v
			}
		}
		return hi - lo
	}
	return span(lc), span(rc)
}

// rackOf maps a node to its failure domain, a rackless node being its own.
func rackOf(n Node) string {
	if n.Rack == "" {
		return fmt.Sprintf("node-%d", n.ID)
	}
	return "rack-" + n.Rack
}

// checkRacks fails unless every partition of t spans min(rf, racks)
// distinct racks (R8).
func checkRacks(t *rapid.T, s *State, topic Topic) {
	racks := map[string]bool{}
	byID := map[uint64]string{}
	for _, n := range s.eligibleNodes() {
		racks[rackOf(n)] = true
		byID[n.ID] = rackOf(n)
	}
	want := min(int(topic.ReplicationFactor), len(racks))
	for p, replicas := range topic.Replicas {
		seen := map[string]bool{}
		for _, id := range replicas {
			seen[byID[id]] = true
		}
		if len(seen) != want {
			t.Fatalf("topic %s partition %d: replicas %v on %d racks, want %d", topic.Name, p, replicas, len(seen), want)
		}
	}
}

// placementCase draws nodes (with equal racks or none) and applies topic
// creations, checking the spread after each one.
func placementCase(t *rapid.T, racked, mixedRF bool) {
	a := newApplier(t)
	rackCount, perRack := rapid.IntRange(1, 4).Draw(t, "racks"), rapid.IntRange(1, 4).Draw(t, "perRack")
	n := rackCount * perRack
	if !racked {
		n = rapid.IntRange(1, 12).Draw(t, "nodes")
	}
	// Node ids are spread and registered in a random order: neither may matter.
	ids := rapid.Permutation(func() []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = uint64(3*i + 5)
		}
		return out
	}()).Draw(t, "order")
	for i, id := range ids {
		rack := ""
		if racked {
			rack = fmt.Sprint(i % rackCount)
		}
		a.ok(EncodeRegisterNode(id, "h:1", rack))
	}
	rfMax := min(n, 5)
	if racked {
		rfMax = min(rfMax, rackCount)
	}
	rf := int32(rapid.IntRange(1, rfMax).Draw(t, "rf"))
	topics := rapid.IntRange(1, 25).Draw(t, "topics")
	for i := 0; i < topics; i++ {
		topicRF := rf
		if mixedRF {
			topicRF = int32(rapid.IntRange(1, rfMax).Draw(t, "topicRF"))
		}
		partitions := int32(rapid.IntRange(1, 40).Draw(t, "partitions"))
		r := a.ok(EncodeCreateTopic(fmt.Sprintf("t%03d", i), partitions, topicRF, nil))
		checkRacks(t, a.s, *r.Topic)
		leaders, replicas := spread(a.s)
		if leaders > 1 {
			t.Fatalf("after topic %d: preferred leader counts differ by %d", i, leaders)
		}
		if !mixedRF && replicas > 1 {
			t.Fatalf("after topic %d: replica counts differ by %d", i, replicas)
		}
	}
}

// TestPlacementSpreadNoRacks shows that with one replication factor and no
// racks, leader and replica counts per node differ by at most 1 after every
// creation, whatever the partition counts.
func TestPlacementSpreadNoRacks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { placementCase(t, false, false) })
}

// TestPlacementSpreadEqualRacks shows the same bound with equal-sized
// racks and rf <= racks, every partition's replicas on distinct racks.
func TestPlacementSpreadEqualRacks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { placementCase(t, true, false) })
}

// TestPlacementMixedRF shows that with mixed replication factors leader
// counts still differ by at most 1 and racks stay distinct.
func TestPlacementMixedRF(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { placementCase(t, rapid.Bool().Draw(t, "racked"), true) })
}

// TestPlacementUnevenRacks shows replicas land on distinct racks whenever
// there are enough, with uneven racks and rackless nodes mixed in.
func TestPlacementUnevenRacks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := newApplier(t)
		n := rapid.IntRange(1, 10).Draw(t, "nodes")
		for id := uint64(1); id <= uint64(n); id++ {
			a.ok(EncodeRegisterNode(id, "h:1", rapid.SampledFrom([]string{"", "a", "b", "c"}).Draw(t, "rack")))
		}
		for i := 0; i < 5; i++ {
			rf := int32(rapid.IntRange(1, n).Draw(t, "rf"))
			r := a.ok(EncodeCreateTopic(fmt.Sprint("t", i), int32(rapid.IntRange(1, 20).Draw(t, "p")), rf, nil))
			checkRacks(t, a.s, *r.Topic)
		}
	})
}

// TestPlacementTopicsStartApart shows single-partition topics take turns
// leading: n topics on n nodes get n different preferred leaders.
func TestPlacementTopicsStartApart(t *testing.T) {
	a := newApplier(t)
	a.nodes(5)
	seen := map[uint64]bool{}
	for i := 0; i < 5; i++ {
		r := a.ok(EncodeCreateTopic(fmt.Sprint("t", i), 1, 3, nil))
		seen[r.Topic.Replicas[0][0]] = true
	}
	if len(seen) != 5 {
		t.Fatalf("5 one-partition topics led by %d nodes", len(seen))
	}
}

// TestPlacementFillsNewNode shows a node added later gets the next
// partitions' leaderships until it catches up.
func TestPlacementFillsNewNode(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	a.ok(EncodeCreateTopic("old", 6, 3, nil))
	a.ok(EncodeRegisterNode(4, "h:4", ""))
	r := a.ok(EncodeCreateTopic("new", 2, 1, nil))
	for p, replicas := range r.Topic.Replicas {
		if replicas[0] != 4 {
			t.Fatalf("partition %d led by %d, want the new node 4", p, replicas[0])
		}
	}
}

// TestPlacementFollowerSetsVary shows followers of one leader are not
// always the same nodes (Kafka's shift), so a node's loss spreads load.
func TestPlacementFollowerSetsVary(t *testing.T) {
	a := newApplier(t)
	a.nodes(6)
	r := a.ok(EncodeCreateTopic("t", 60, 3, nil))
	sets := map[uint64]map[string]bool{}
	for _, replicas := range r.Topic.Replicas {
		if sets[replicas[0]] == nil {
			sets[replicas[0]] = map[string]bool{}
		}
		sets[replicas[0]][fmt.Sprint(replicas[1:])] = true
	}
	for leader, s := range sets {
		if len(s) < 2 {
			t.Fatalf("leader %d always has the same followers %v", leader, s)
		}
	}
}
