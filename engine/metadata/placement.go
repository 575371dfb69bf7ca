package metadata

import "sort"

// Placement: load-aware greedy, deterministic, rack-aware.
//
// Every partition of a new topic is placed in turn on the eligible nodes
// (registered, unfenced), using the leader and replica counts of all
// partitions already placed, this topic's earlier ones included:
//
//  1. The preferred leader is the node with the fewest preferred
//     leaderships; ties go to fewer replicas, then to the less loaded rack
//     (replicas per node of the rack), then to a rotation that starts at
//     (topic id + partition) mod n, so different topics start on different
//     nodes.
//  2. Each follower in turn is the node, not yet chosen, whose rack holds
//     the fewest replicas of this partition so far (so racks differ while
//     there are racks left, R8); ties go to fewer replicas, then to more
//     leaderships (a node that already leads more should carry the
//     followers, keeping the nodes that still need leaderships light), then
//     to the less loaded rack, then to a rotation shifted per round of n
//     partitions, as in Kafka's assignment, to vary follower sets.
//
// Nodes without a rack count as one rack each, so with no racks known the
// rack terms are ties and this is plain rack-unaware placement.
//
// Spread guarantee, on a fixed set of eligible nodes, over any sequence of
// topic creations:
//   - preferred-leader counts differ by at most 1 between nodes (rule 1
//     always takes a node at the minimum);
//   - replica counts differ by at most 1 when every topic has the same
//     replication factor and either no racks are known or the racks have
//     equal node counts and rf <= racks (checked by a rapid property test).
// With mixed replication factors no online rule can keep both within 1: 3
// nodes, leaders (1,0,1) and replicas (2,2,1) force an rf=1 partition to
// break one of them. Leaders win, because a leader carries its partition's
// produce and fetch load; replica counts may then drift by a few. Deleting
// topics, adding or unfencing nodes leaves the old assignment alone; new
// partitions go to the least loaded nodes first and close the gap over
// time (partition moves are left out).

// placeNode is one eligible node during placement.
type placeNode struct {
	id       uint64
	rack     int
	leaders  int64
	replicas int64
}

// placer holds the loads while one topic's partitions are placed.
type placer struct {
	nodes    []placeNode
	rackSize []int64
	rackLoad []int64
	rackUsed []int32 // replicas of the current partition per rack
	taken    []bool  // nodes chosen for the current partition
}

// eligibleNodes returns the registered, unfenced nodes, sorted by id.
func (s *State) eligibleNodes() []Node {
	var out []Node
	for _, n := range s.nodes {
		if !n.Fenced {
			out = append(out, n)
		}
	}
	return out
}

// newPlacer counts the leaders and replicas each eligible node holds.
func (s *State) newPlacer(eligible []Node) *placer {
	pl := &placer{nodes: make([]placeNode, len(eligible)), taken: make([]bool, len(eligible))}
	rackIndex := map[string]int{} // lookup only; indexes follow node order
	for i, n := range eligible {
		r, ok := rackIndex[n.Rack]
		if !ok || n.Rack == "" {
			r = len(pl.rackSize)
			pl.rackSize = append(pl.rackSize, 0)
			if n.Rack != "" {
				rackIndex[n.Rack] = r
			}
		}
		pl.rackSize[r]++
		pl.nodes[i] = placeNode{id: n.ID, rack: r}
	}
	pl.rackLoad = make([]int64, len(pl.rackSize))
	pl.rackUsed = make([]int32, len(pl.rackSize))
	for _, name := range s.topicNames {
		for _, replicas := range s.topics[name].replicas {
			for j, id := range replicas {
				i := sort.Search(len(eligible), func(i int) bool { return eligible[i].ID >= id })
				if i == len(eligible) || eligible[i].ID != id {
					continue // a fenced node: not a candidate
				}
				pl.nodes[i].replicas++
				pl.rackLoad[pl.nodes[i].rack]++
				if j == 0 {
					pl.nodes[i].leaders++
				}
			}
		}
	}
	return pl
}

// place returns the replica lists of count new partitions of a topic,
// numbered from first (0 for a new topic; the current count when
// partitions are added, so the rotation continues where the topic's
// placement stopped). eligible holds at least rf nodes.
func (s *State) place(eligible []Node, topicID uint64, first, count, rf int32) [][]uint64 {
	if int(rf) > len(eligible) || rf < 1 {
		panic("metadata: place with fewer nodes than the replication factor")
	}
	pl := s.newPlacer(eligible)
	n := uint64(len(eligible))
	out := make([][]uint64, count)
	chosen := make([]int, 0, rf)
	for k := range uint64(count) {
		p := uint64(first) + k
		chosen = chosen[:0]
		leader := pl.pick(int((topicID+p)%n), pl.leaderBetter)
		chosen = append(chosen, pl.take(leader))
		followerStart := int((uint64(leader) + 1 + (topicID+p/n)%n) % n)
		for j := int32(1); j < rf; j++ {
			chosen = append(chosen, pl.take(pl.pick(followerStart, pl.followerBetter)))
		}
		out[k] = pl.commit(chosen)
	}
	return out
}

// take marks node i chosen for the current partition.
func (pl *placer) take(i int) int {
	pl.taken[i] = true
	pl.rackUsed[pl.nodes[i].rack]++
	return i
}

// commit records the current partition's replicas (chosen[0] leads) in the
// loads and returns their ids.
func (pl *placer) commit(chosen []int) []uint64 {
	ids := make([]uint64, len(chosen))
	for j, i := range chosen {
		node := &pl.nodes[i]
		ids[j] = node.id
		node.replicas++
		pl.rackLoad[node.rack]++
		pl.rackUsed[node.rack] = 0
		pl.taken[i] = false
	}
	pl.nodes[chosen[0]].leaders++
	return ids
}

// pick returns the untaken node that better ranks first; rotation
// distances from start break every tie, so the choice is unique.
func (pl *placer) pick(start int, better func(a, b int) int) int {
	n := len(pl.nodes)
	best := -1
	for k := 0; k < n; k++ {
		i := (start + k) % n
		if pl.taken[i] {
			continue
		}
		if best < 0 || better(i, best) < 0 {
			best = i
		}
	}
	if best < 0 {
		panic("metadata: no node left to place a replica on")
	}
	return best
}

// leaderBetter orders candidates for preferred leader: negative when a
// ranks before b, 0 when tied (the earlier in rotation order stays).
func (pl *placer) leaderBetter(a, b int) int {
	na, nb := &pl.nodes[a], &pl.nodes[b]
	if c := cmpInt64(na.leaders, nb.leaders); c != 0 {
		return c
	}
	if c := cmpInt64(na.replicas, nb.replicas); c != 0 {
		return c
	}
	return pl.rackLoadCmp(na.rack, nb.rack)
}

// followerBetter orders candidates for the next follower.
func (pl *placer) followerBetter(a, b int) int {
	na, nb := &pl.nodes[a], &pl.nodes[b]
	if c := cmpInt64(int64(pl.rackUsed[na.rack]), int64(pl.rackUsed[nb.rack])); c != 0 {
		return c
	}
	if c := cmpInt64(na.replicas, nb.replicas); c != 0 {
		return c
	}
	if c := cmpInt64(nb.leaders, na.leaders); c != 0 {
		return c
	}
	return pl.rackLoadCmp(na.rack, nb.rack)
}

// rackLoadCmp compares replicas per node of two racks without division.
func (pl *placer) rackLoadCmp(a, b int) int {
	return cmpInt64(pl.rackLoad[a]*pl.rackSize[b], pl.rackLoad[b]*pl.rackSize[a])
}

// cmpInt64 is -1, 0 or +1 as a is below, equal to or above b.
func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
