package groups

import "slices"

// computeTarget recomputes every member's share of the target assignment:
// uniform (with equal subscriptions, counts differ by at most one) and
// sticky (a partition keeps its previous target owner unless balance needs
// it to move). Deterministic: members in id order, partitions in
// (topic, number) order, ties to the lowest member index.
//
// Three passes: (1) keep each previous target partition with its owner if
// the owner still subscribes; (2) give each unowned partition to the
// least-loaded eligible member in a rack holding one of its replicas while
// that member is under the quota ceil(partitions/members), else to the
// least-loaded eligible member; (3) while some partition's owner is a
// most-loaded member with at least two more than an eligible member, move
// it there (to a rack-local one among the least loaded when there is one).
// Racks only break ties of balance: with equal subscriptions counts still
// differ by at most one. Every move lowers
// the sum of squared counts, so pass 3 ends; it moves only what balance
// needs. Rejected: range and round-robin assignors (not sticky: one join
// reshuffles everything), an optimal min-cost flow (far more code for the
// heterogeneous-subscription case only).
func (g *group) computeTarget() {
	parts := g.partitions()
	n := len(g.members)
	owner := make(map[TopicPartition]int, len(parts))
	counts := make([]int, n)
	for i, m := range g.members {
		for _, p := range m.target {
			if _, taken := owner[p]; !taken && g.exists(p) && m.subscribes(p.Topic) {
				owner[p] = i
				counts[i]++
			}
		}
	}
	quota := 0
	if n > 0 {
		quota = (len(parts) + n - 1) / n
	}
	for _, p := range parts {
		if _, ok := owner[p]; ok {
			continue
		}
		b := g.leastLoadedLocal(p, counts, quota)
		if b < 0 {
			b = g.leastLoaded(p.Topic, counts)
		}
		if b >= 0 {
			owner[p] = b
			counts[b]++
		}
	}
	// Pass 3. Each pass over the partitions moves at least one or ends the loop;
	// len(parts)*n+1 passes bound it (the sum of squares falls each move).
	for pass := 0; pass <= len(parts)*n; pass++ {
		moved := false
		for _, p := range parts {
			a, ok := owner[p]
			if !ok {
				continue
			}
			// Only from a most-loaded member: taking from one at quota
			// would have to be refilled from another, a needless move.
			b := g.leastLoaded(p.Topic, counts)
			if b >= 0 {
				if local := g.leastLoadedLocal(p, counts, counts[b]+1); local >= 0 {
					b = local // as little loaded, and in a rack holding a replica
				}
			}
			if b >= 0 && counts[a] > counts[b]+1 && counts[a] == g.mostLoaded(p.Topic, counts) {
				owner[p] = b
				counts[a]--
				counts[b]++
				moved = true
			}
		}
		if !moved {
			break
		}
	}
	for _, m := range g.members {
		m.target = m.target[:0:0]
	}
	for _, p := range parts {
		if i, ok := owner[p]; ok {
			g.members[i].target = append(g.members[i].target, p)
		}
	}
}

// partitions lists every partition of the topics some member subscribes
// to, sorted.
func (g *group) partitions() []TopicPartition {
	var out []TopicPartition
	for _, t := range g.topics {
		if !g.subscribed(t.Name) {
			continue
		}
		for p := int32(0); p < t.Partitions; p++ {
			out = append(out, TopicPartition{Topic: t.Name, Partition: p})
		}
	}
	return out
}

// subscribed reports whether any member subscribes to topic.
func (g *group) subscribed(topic string) bool {
	for _, m := range g.members {
		if m.subscribes(topic) {
			return true
		}
	}
	return false
}

// exists reports whether p is a partition of a known topic.
func (g *group) exists(p TopicPartition) bool {
	i, ok := slices.BinarySearchFunc(g.topics, p.Topic, func(x TopicInfo, n string) int { return cmpString(x.Name, n) })
	return ok && p.Partition >= 0 && p.Partition < g.topics[i].Partitions
}

// subscribes reports whether m subscribes to topic.
func (m *member) subscribes(topic string) bool {
	_, ok := slices.BinarySearch(m.subs, topic)
	return ok
}

// leastLoaded is the index of the member subscribing to topic with the
// fewest partitions (lowest index on ties), or -1.
func (g *group) leastLoaded(topic string, counts []int) int {
	best := -1
	for i, m := range g.members {
		if m.subscribes(topic) && (best < 0 || counts[i] < counts[best]) {
			best = i
		}
	}
	return best
}

// leastLoadedLocal is the member subscribing to p's topic, in a rack
// holding a replica of p, with the fewest partitions, provided it has
// fewer than limit (lowest index on ties); -1 when none.
func (g *group) leastLoadedLocal(p TopicPartition, counts []int, limit int) int {
	best := -1
	for i, m := range g.members {
		if counts[i] < limit && m.subscribes(p.Topic) && g.rackLocal(p, m.rack) && (best < 0 || counts[i] < counts[best]) {
			best = i
		}
	}
	return best
}

// mostLoaded is the highest count among members subscribing to topic.
func (g *group) mostLoaded(topic string, counts []int) int {
	most := 0
	for i, m := range g.members {
		if m.subscribes(topic) {
			most = max(most, counts[i])
		}
	}
	return most
}
