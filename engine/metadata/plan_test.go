package metadata

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// planCluster draws nodes (some not eligible, racks optional) and
// partitions whose replicas are distinct nodes of the cluster, placed
// unevenly (drawn, not by placement), so the planners have work to do.
func planCluster(t *rapid.T, racks bool) ([]PlanNode, []PlanPartition) {
	n := rapid.IntRange(1, 9).Draw(t, "nodes")
	nodes := make([]PlanNode, n)
	for i := range nodes {
		nodes[i] = PlanNode{ID: uint64(i + 1), Eligible: true}
		if racks {
			nodes[i].Rack = rapid.SampledFrom([]string{"", "a", "b", "c"}).Draw(t, "rack")
		}
	}
	rf := rapid.IntRange(1, n).Draw(t, "rf")
	count := rapid.IntRange(0, 40).Draw(t, "partitions")
	var parts []PlanPartition
	for p := range count {
		perm := rapid.Permutation(nodes).Draw(t, "perm")
		// Skew: half the time, start from the first nodes.
		if rapid.Bool().Draw(t, "skew") {
			perm = slices.Clone(nodes)
		}
		reps := make([]uint64, rf)
		for k := range rf {
			reps[k] = perm[k].ID
		}
		parts = append(parts, PlanPartition{Topic: fmt.Sprintf("t%d", p%3), Partition: int32(p), Replicas: reps})
	}
	return nodes, parts
}

// apply returns parts with moves applied, and checks each move's shape:
// same length, distinct nodes, From equal to the current list.
func applyMoves(t *rapid.T, parts []PlanPartition, moves []Move) []PlanPartition {
	out := make([]PlanPartition, len(parts))
	for i, p := range parts {
		out[i] = PlanPartition{Topic: p.Topic, Partition: p.Partition, Replicas: slices.Clone(p.Replicas)}
	}
	for _, m := range moves {
		i := slices.IndexFunc(out, func(p PlanPartition) bool { return p.Topic == m.Topic && p.Partition == m.Partition })
		if i < 0 || !slices.Equal(out[i].Replicas, m.From) {
			t.Fatalf("move %+v does not start from the partition's replicas", m)
		}
		if len(m.To) != len(m.From) || hasDup(m.To) {
			t.Fatalf("move %+v: replication factor changed or a node twice", m)
		}
		if slices.Equal(m.From, m.To) {
			t.Fatalf("move %+v changes nothing", m)
		}
		out[i].Replicas = slices.Clone(m.To)
	}
	return out
}

func hasDup(ids []uint64) bool {
	s := slices.Clone(ids)
	slices.Sort(s)
	return len(slices.Compact(s)) != len(ids)
}

// loads counts replicas and preferred leaderships per eligible node.
func loads(nodes []PlanNode, parts []PlanPartition) (replicas, leaders map[uint64]int) {
	replicas, leaders = map[uint64]int{}, map[uint64]int{}
	for _, n := range nodes {
		if n.Eligible {
			replicas[n.ID], leaders[n.ID] = 0, 0
		}
	}
	for _, p := range parts {
		for k, r := range p.Replicas {
			if _, ok := replicas[r]; ok {
				replicas[r]++
				if k == 0 {
					leaders[r]++
				}
			}
		}
	}
	return replicas, leaders
}

func span(c map[uint64]int) int {
	lo, hi, first := 0, 0, true
	for _, v := range c {
		if first || v < lo {
			lo = v
		}
		if first || v > hi {
			hi = v
		}
		first = false
	}
	return hi - lo
}

func planRacks(nodes []PlanNode, reps []uint64) int {
	seen := map[string]bool{}
	for _, r := range reps {
		k := fmt.Sprintf("n:%d", r)
		for _, n := range nodes {
			if n.ID == r && n.Rack != "" {
				k = "r:" + n.Rack
			}
		}
		seen[k] = true
	}
	return len(seen)
}

// TestPlanRebalanceProperties: every partition keeps its replication factor
// on distinct nodes, never loses a rack, moves only onto eligible nodes;
// without racks the replica counts end within one of each other, with at
// most sum(load - floor(avg)) replica changes; a balanced plan is a no-op.
func TestPlanRebalanceProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		racks := rapid.Bool().Draw(t, "racks")
		nodes, parts := planCluster(t, racks)
		moves := PlanRebalance(nodes, parts)
		after := applyMoves(t, parts, moves)
		changed := 0
		for i := range parts {
			if planRacks(nodes, after[i].Replicas) < planRacks(nodes, parts[i].Replicas) {
				t.Fatalf("%s/%d lost a rack: %v -> %v", parts[i].Topic, parts[i].Partition, parts[i].Replicas, after[i].Replicas)
			}
			for _, r := range after[i].Replicas {
				if !slices.Contains(parts[i].Replicas, r) {
					changed++
				}
			}
		}
		before, _ := loads(nodes, parts)
		rc, _ := loads(nodes, after)
		if !racks {
			if s := span(rc); s > 1 {
				t.Fatalf("replica spread %d after the plan: %v", s, rc)
			}
			total := 0
			for _, v := range before {
				total += v
			}
			floor := total / len(before)
			bound := 0
			for _, v := range before {
				bound += max(0, v-floor)
			}
			if changed > bound {
				t.Fatalf("%d replica changes, bound %d (loads %v)", changed, bound, before)
			}
		}
		if again := PlanRebalance(nodes, after); len(again) != 0 {
			t.Fatalf("a second plan still moves: %+v", again)
		}
	})
}

// TestPlanRebalanceLeaders: with every node eligible and no racks, preferred
// leaderships end within one of each other whenever replica sets allow it
// (here: every partition on every node, so any node can lead any).
func TestPlanRebalanceLeaders(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "nodes")
		var nodes []PlanNode
		var all []uint64
		for i := 1; i <= n; i++ {
			nodes = append(nodes, PlanNode{ID: uint64(i), Eligible: true})
			all = append(all, uint64(i))
		}
		var parts []PlanPartition
		for p := range rapid.IntRange(0, 30).Draw(t, "partitions") {
			parts = append(parts, PlanPartition{Topic: "t", Partition: int32(p), Replicas: slices.Clone(all)})
		}
		after := applyMoves(t, parts, PlanRebalance(nodes, parts))
		if _, lc := loads(nodes, after); span(lc) > 1 {
			t.Fatalf("leader spread %d: %v", span(lc), lc)
		}
	})
}

// TestPlanDecommissionProperties: after the plan the drained node holds
// nothing, every partition keeps its factor on distinct eligible nodes
// (or the node already there), racks are kept when a node in an unused
// rack exists, and only partitions listing the node move.
func TestPlanDecommissionProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, parts := planCluster(t, rapid.Bool().Draw(t, "racks"))
		drain := uint64(rapid.IntRange(1, len(nodes)).Draw(t, "drain"))
		nodes[drain-1].Eligible = false
		moves, err := PlanDecommission(nodes, parts, drain)
		if errors.Is(err, ErrNoTarget) {
			return // fewer eligible nodes than a partition needs
		}
		if err != nil {
			t.Fatal(err)
		}
		after := applyMoves(t, parts, moves)
		for i, p := range after {
			if slices.Contains(p.Replicas, drain) {
				t.Fatalf("%s/%d still on %d: %v", p.Topic, p.Partition, drain, p.Replicas)
			}
			if !slices.Contains(parts[i].Replicas, drain) && !slices.Equal(parts[i].Replicas, p.Replicas) {
				t.Fatalf("%s/%d moved without holding %d", p.Topic, p.Partition, drain)
			}
			for k, r := range p.Replicas {
				if r != parts[i].Replicas[k] && !nodes[r-1].Eligible {
					t.Fatalf("%s/%d moved onto ineligible %d", p.Topic, p.Partition, r)
				}
			}
		}
	})
}

// TestPlanDecommissionRackAware: draining a node in rack a moves its
// replica to the other node of rack a, not to the emptier rack b node
// that would put two replicas in b.
func TestPlanDecommissionRackAware(t *testing.T) {
	nodes := []PlanNode{{ID: 1, Rack: "a"}, {ID: 2, Rack: "b", Eligible: true}, {ID: 3, Rack: "a", Eligible: true},
		{ID: 4, Rack: "b", Eligible: true}}
	parts := []PlanPartition{{Topic: "t", Partition: 0, Replicas: []uint64{1, 2}}, {Topic: "t", Partition: 1, Replicas: []uint64{3, 2}}}
	moves, err := PlanDecommission(nodes, parts, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) != 1 || !slices.Equal(moves[0].To, []uint64{3, 2}) {
		t.Fatalf("moves %+v, want t/0 -> [3 2]", moves)
	}
	if _, err := PlanDecommission(nodes[:2], parts[:1], 1); !errors.Is(err, ErrNoTarget) {
		t.Fatalf("no spare node: err %v, want ErrNoTarget", err)
	}
}

// TestSetNodeState walks a node through decommissioning to removed: the
// removal is refused while it holds a replica and for an active node; a
// removed node cannot register again; a decommissioning node's
// re-registration leaves it fenced.
func TestSetNodeState(t *testing.T) {
	s := New()
	apply := func(data []byte, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		return s.Apply(s.AppliedIndex()+1, data).Err
	}
	for id := uint64(1); id <= 2; id++ {
		if err := apply(EncodeRegisterNode(id, fmt.Sprintf("h:%d", id), "")); err != nil {
			t.Fatal(err)
		}
	}
	if err := apply(EncodeCreateTopic("t", 1, 2, nil)); err != nil {
		t.Fatal(err)
	}
	if err := apply(EncodeSetNodeState(2, NodeRemoved)); !errors.Is(err, ErrMembershipRefused) {
		t.Fatalf("remove active node: %v", err)
	}
	if err := apply(EncodeSetNodeState(2, NodeDecommissioning)); err != nil {
		t.Fatal(err)
	}
	if err := apply(EncodeRegisterNode(2, "h:2", "")); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Node(2); !n.Fenced || n.State != NodeDecommissioning {
		t.Fatalf("after re-register: %+v", n)
	}
	if err := apply(EncodeSetNodeState(2, NodeRemoved)); !errors.Is(err, ErrMembershipRefused) {
		t.Fatalf("remove node holding a replica: %v", err)
	}
	if err := apply(EncodeDeleteTopic("t")); err != nil {
		t.Fatal(err)
	}
	if err := apply(EncodeSetNodeState(2, NodeRemoved)); err != nil {
		t.Fatal(err)
	}
	if err := apply(EncodeRegisterNode(2, "h:2", "")); !errors.Is(err, ErrNodeRemoved) {
		t.Fatalf("re-register removed node: %v", err)
	}
	if _, err := Restore(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
}

// TestPreregisterNode: an operator's pre-registration of a new node
// registers it fenced (no placement before it runs); of a registered node
// changes nothing; the node's own registration unfences it; a removed
// node's pre-registration is refused.
func TestPreregisterNode(t *testing.T) {
	s := New()
	apply := func(data []byte, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		return s.Apply(s.AppliedIndex()+1, data).Err
	}
	if err := apply(EncodePreregisterNode(4, "h:4", "r")); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Node(4); !n.Fenced || n.Address != "h:4" {
		t.Fatalf("pre-registered: %+v", n)
	}
	if err := apply(EncodeRegisterNode(4, "h:4", "r")); err != nil {
		t.Fatal(err)
	}
	v := s.Version()
	if err := apply(EncodePreregisterNode(4, "other:4", "x")); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Node(4); n.Fenced || n.Address != "h:4" || s.Version() != v {
		t.Fatalf("pre-registering a running node changed it: %+v", n)
	}
	if err := apply(EncodeSetNodeState(4, NodeDecommissioning)); err != nil {
		t.Fatal(err)
	}
	if err := apply(EncodeSetNodeState(4, NodeRemoved)); err != nil {
		t.Fatal(err)
	}
	if err := apply(EncodePreregisterNode(4, "h:4", "r")); !errors.Is(err, ErrNodeRemoved) {
		t.Fatalf("pre-register removed: %v", err)
	}
}
