package node

import (
	"fmt"
	"slices"
)

// Which groups Process asks for a Ready.
//
// raft's HasReady compares the soft and hard state and looks at the
// unstable log, messages and reads: a few hundred nanoseconds, which polled
// for every hosted group in every round of every Process call was the
// largest cost of an idle node with thousands of replicas (28 % of its CPU
// with 2,000). A group can only become ready through a call into its
// RawNode, so the core marks a group whenever it calls one (Step, Propose,
// ReadIndex), keeps every group that had a Ready marked for the next round
// (Advance may leave more to do: committed entries beyond one Ready's
// budget, its own acknowledgements, reads), and marks every group on the
// ticks that tick raft, on Open and when reconcile changes the hosted set.
// A round polls only the marked groups, in group order.
//
// Any new call into a group's RawNode must be followed by markReady (a
// missed mark would delay that group until the next raft tick marks all).
// Rejected: a full scan every round (the cost above); raft's own Node
// with its channels (a goroutine per group).

// readyMarks is the core's set of groups to poll.
type readyMarks struct {
	all        bool     // poll every group
	marked     []*group // marked since the last poll, each once (group.readyMarked)
	candidates []*group // reused by readyCandidates
}

// markReady adds g to the groups the next round polls.
func (c *Core) markReady(g *group) {
	if g.readyMarked || c.ready.all {
		return
	}
	g.readyMarked = true
	c.ready.marked = append(c.ready.marked, g)
}

// markAllReady makes the next round poll every group.
func (c *Core) markAllReady() {
	c.ready.all = true
}

// readyCandidates returns the groups to poll in this round, in group order
// (the metadata group first, then by topic and partition), and clears the
// marks. The slice is only valid until the next call.
func (c *Core) readyCandidates() (out []*group) {
	r := &c.ready
	defer func() { c.stats.ReadyPolls += uint64(len(out)) }()
	for _, g := range r.marked {
		g.readyMarked = false
	}
	if r.all || len(r.marked) >= len(c.groups) {
		r.all = false
		clear(r.marked)
		r.marked = r.marked[:0]
		return c.groups
	}
	r.candidates = append(r.candidates[:0], r.marked...)
	clear(r.marked)
	r.marked = r.marked[:0]
	slices.SortFunc(r.candidates, func(a, b *group) int {
		switch {
		case a.sm.policy().control: // the control plane first
			return -1
		case b.sm.policy().control:
			return 1
		}
		return compareTP(a.tp, b.tp)
	})
	return r.candidates
}

// checkNoneReady panics when a group is ready after a round found none
// among the marked ones: a call into a RawNode without markReady. O(groups),
// so only with the invariants build tag.
func (c *Core) checkNoneReady() {
	if !invariantsEnabled {
		return
	}
	for _, g := range c.groups {
		if g.raw.HasReady() {
			panic(fmt.Sprintf("node: %s/%d has a Ready that no mark announced (a RawNode call without markReady)",
				g.tp.Topic, g.tp.Partition))
		}
	}
}
