package metadata

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// ErrNoTarget: a decommission plan found no eligible node outside a
// partition's replica set to take the drained node's replica.
var ErrNoTarget = errors.New("metadata: no eligible node to take a replica")

// PlanNode is a node as the move planners see it.
type PlanNode struct {
	ID   uint64
	Rack string // empty: its own failure domain
	// Eligible nodes may receive replicas and preferred leaderships:
	// registered, active and unfenced.
	Eligible bool
}

// PlanPartition is one partition's ordered replica list (first: the
// preferred leader).
type PlanPartition struct {
	Topic     string
	Partition int32
	Replicas  []uint64
}

// Move changes one partition's replica list from From to To (same length,
// distinct nodes; To[0] is the new preferred leader).
type Move struct {
	Topic     string
	Partition int32
	From, To  []uint64
}

// planState is the working copy a planner changes: replica lists and the
// per-node replica and preferred-leader counts.
type planState struct {
	nodes    []PlanNode // sorted by id
	index    map[uint64]int
	parts    []PlanPartition // replicas copied
	replicas []int           // by node index
	leaders  []int
}

func newPlanState(nodes []PlanNode, parts []PlanPartition) *planState {
	ps := &planState{nodes: slices.Clone(nodes), index: make(map[uint64]int, len(nodes))}
	slices.SortFunc(ps.nodes, func(a, b PlanNode) int { return cmp.Compare(a.ID, b.ID) })
	for i, n := range ps.nodes {
		ps.index[n.ID] = i
	}
	ps.replicas = make([]int, len(ps.nodes))
	ps.leaders = make([]int, len(ps.nodes))
	ps.parts = make([]PlanPartition, len(parts))
	for i, p := range parts {
		ps.parts[i] = PlanPartition{Topic: p.Topic, Partition: p.Partition, Replicas: slices.Clone(p.Replicas)}
	}
	slices.SortFunc(ps.parts, func(a, b PlanPartition) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	for _, p := range ps.parts {
		for k, r := range p.Replicas {
			if i, ok := ps.index[r]; ok {
				ps.replicas[i]++
				if k == 0 {
					ps.leaders[i]++
				}
			}
		}
	}
	return ps
}

// rackOf is node id's failure domain: its rack, or itself when it has none
// (or is unknown), as placement counts racks.
func (ps *planState) rackOf(id uint64) string {
	if i, ok := ps.index[id]; ok && ps.nodes[i].Rack != "" {
		return "r:" + ps.nodes[i].Rack
	}
	return fmt.Sprintf("n:%d", id)
}

// racks counts the distinct failure domains of replicas.
func (ps *planState) racks(replicas []uint64) int {
	seen := make([]string, 0, len(replicas))
	for _, r := range replicas {
		if k := ps.rackOf(r); !slices.Contains(seen, k) {
			seen = append(seen, k)
		}
	}
	return len(seen)
}

// replace puts node to in from's place in partition p.
func (ps *planState) replace(p int, from, to uint64) {
	reps := ps.parts[p].Replicas
	k := slices.Index(reps, from)
	reps[k] = to
	if i, ok := ps.index[from]; ok {
		ps.replicas[i]--
		if k == 0 {
			ps.leaders[i]--
		}
	}
	j := ps.index[to]
	ps.replicas[j]++
	if k == 0 {
		ps.leaders[j]++
	}
}

// moves lists the partitions whose replica list differs from before, in
// (topic, partition) order.
func (ps *planState) moves(before []PlanPartition) []Move {
	old := newPlanState(nil, before).parts
	var out []Move
	for i, p := range ps.parts {
		if !slices.Equal(old[i].Replicas, p.Replicas) {
			out = append(out, Move{Topic: p.Topic, Partition: p.Partition, From: old[i].Replicas, To: slices.Clone(p.Replicas)})
		}
	}
	return out
}

// PlanDecommission plans moving every replica off node drain: in each
// partition that lists it, drain's place (so its preferred leadership
// too) goes to the eligible node not already in the partition whose rack
// the other replicas use least, then with the fewest replicas, then the
// fewest preferred leaderships, then the lowest id. A partition no node
// can take is ErrNoTarget (nothing is planned).
func PlanDecommission(nodes []PlanNode, parts []PlanPartition, drain uint64) ([]Move, error) {
	ps := newPlanState(nodes, parts)
	for p := range ps.parts {
		reps := ps.parts[p].Replicas
		if !slices.Contains(reps, drain) {
			continue
		}
		best := -1
		var bestKey [4]int
		for i, n := range ps.nodes {
			if !n.Eligible || n.ID == drain || slices.Contains(reps, n.ID) {
				continue
			}
			rackUse := 0
			for _, r := range reps {
				if r != drain && ps.rackOf(r) == ps.rackOf(n.ID) {
					rackUse++
				}
			}
			key := [4]int{rackUse, ps.replicas[i], ps.leaders[i], i}
			if best < 0 || slices.Compare(key[:], bestKey[:]) < 0 {
				best, bestKey = i, key
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("%w: %s/%d (replicas %v)", ErrNoTarget, ps.parts[p].Topic, ps.parts[p].Partition, reps)
		}
		ps.replace(p, drain, ps.nodes[best].ID)
	}
	return ps.moves(parts), nil
}

// PlanRebalance plans an even spread over the eligible nodes: replicas
// move one at a time from a most-loaded to a least-loaded eligible node
// (loads differing by two or more), taking the first partition, in
// (topic, partition) order, that lists the source but not the target and
// whose distinct racks the move does not reduce, until replica counts
// differ by at most one or no such move remains; then preferred
// leaderships are evened the same way by reordering a partition's
// replicas (no data moves), and a partition whose preferred leader is not
// eligible gets its least-leading eligible replica first. Replicas on
// nodes that are not eligible stay (decommission moves them). Each step
// lowers the sum of squared loads, so the loops end; each is bounded by
// the replica count anyway.
func PlanRebalance(nodes []PlanNode, parts []PlanPartition) []Move {
	ps := newPlanState(nodes, parts)
	steps := 0
	for _, p := range ps.parts {
		steps += len(p.Replicas)
	}
	for range steps {
		if !ps.moveOneReplica() {
			break
		}
	}
	ps.leadersOffIneligible()
	for range steps {
		if !ps.moveOneLeadership() {
			break
		}
	}
	return ps.moves(parts)
}

// byLoad is the eligible node indexes sorted by count descending (ties:
// lower id first).
func (ps *planState) byLoad(count []int) []int {
	var out []int
	for i, n := range ps.nodes {
		if n.Eligible {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(count[b], count[a]) })
	return out
}

// moveOneReplica makes the first allowed move from a more loaded to a
// less loaded node (difference two or more); false when none exists.
func (ps *planState) moveOneReplica() bool {
	order := ps.byLoad(ps.replicas)
	for _, src := range order {
		for k := len(order) - 1; k >= 0; k-- {
			dst := order[k]
			if ps.replicas[src]-ps.replicas[dst] < 2 {
				break
			}
			if ps.tryMove(src, dst) {
				return true
			}
		}
	}
	return false
}

// tryMove moves one replica of the first partition that allows it from
// node index src to dst.
func (ps *planState) tryMove(src, dst int) bool {
	from, to := ps.nodes[src].ID, ps.nodes[dst].ID
	for p := range ps.parts {
		reps := ps.parts[p].Replicas
		if !slices.Contains(reps, from) || slices.Contains(reps, to) {
			continue
		}
		after := slices.Clone(reps)
		after[slices.Index(after, from)] = to
		if ps.racks(after) < ps.racks(reps) {
			continue
		}
		ps.replace(p, from, to)
		return true
	}
	return false
}

// leadersOffIneligible puts an eligible replica first in every partition
// whose first replica is not eligible (the one with the fewest preferred
// leaderships, then the lowest id).
func (ps *planState) leadersOffIneligible() {
	for p := range ps.parts {
		reps := ps.parts[p].Replicas
		if len(reps) == 0 || ps.eligible(reps[0]) {
			continue
		}
		best := -1
		for k, r := range reps {
			if !ps.eligible(r) {
				continue
			}
			if best < 0 || ps.leaders[ps.index[r]] < ps.leaders[ps.index[reps[best]]] {
				best = k
			}
		}
		if best > 0 {
			ps.swapFirst(p, best)
		}
	}
}

// moveOneLeadership hands one preferred leadership from a node leading two
// or more partitions more than another to that node, in the first
// partition listing both; false when none exists.
func (ps *planState) moveOneLeadership() bool {
	order := ps.byLoad(ps.leaders)
	for _, src := range order {
		for k := len(order) - 1; k >= 0; k-- {
			dst := order[k]
			if ps.leaders[src]-ps.leaders[dst] < 2 {
				break
			}
			for p := range ps.parts {
				reps := ps.parts[p].Replicas
				if len(reps) > 0 && reps[0] == ps.nodes[src].ID {
					if k := slices.Index(reps, ps.nodes[dst].ID); k > 0 {
						ps.swapFirst(p, k)
						return true
					}
				}
			}
		}
	}
	return false
}

// eligible tells whether id is a known eligible node.
func (ps *planState) eligible(id uint64) bool {
	i, ok := ps.index[id]
	return ok && ps.nodes[i].Eligible
}

// swapFirst makes replica k of partition p its preferred leader.
func (ps *planState) swapFirst(p, k int) {
	reps := ps.parts[p].Replicas
	if i, ok := ps.index[reps[0]]; ok {
		ps.leaders[i]--
	}
	ps.leaders[ps.index[reps[k]]]++
	reps[0], reps[k] = reps[k], reps[0]
}

// PlanInput turns the applied state into the planners' inputs: every
// registered node (eligible when active and unfenced) and every partition.
func (s *State) PlanInput() ([]PlanNode, []PlanPartition) {
	var nodes []PlanNode
	for _, n := range s.nodes {
		nodes = append(nodes, PlanNode{ID: n.ID, Rack: n.Rack, Eligible: n.State == NodeActive && !n.Fenced})
	}
	var parts []PlanPartition
	for _, name := range s.topicNames {
		for p, reps := range s.topics[name].replicas {
			parts = append(parts, PlanPartition{Topic: name, Partition: int32(p), Replicas: slices.Clone(reps)})
		}
	}
	return nodes, parts
}
