package node

import (
	"cmp"
	"slices"

	"github.com/strandlog/strand/proto/strandpb"
)

// What a majority of the voters' compacted prefixes hold bounds every
// replica's raft-log trim (issue 24; doc.go, "Retention"). A compacted
// prefix is state a raft snapshot does not carry: a follower that installs
// a raft snapshot past its own prefix holds neither the prefix nor the raft
// log below it until it installs a peer's prefix. Were the raft log trimmed
// up to one replica's prefix alone, the records below it could live on that
// replica only (the others snapshot-installed), and losing its disk would
// lose them (the simulator's seed 230, last avoided by the install hold).
// So, as raft lets an entry count as safe only once a majority stores it,
// a replica drops raft entries only below the end a majority of the
// voters' prefixes hold:
//
//   - Reporting (at each retention check, on the loop): every replica of a
//     compacted partition sends each other voter a PrefixHeld with its
//     prefix's generation and end (0 while stuck, damaged or installing:
//     nothing it may count), batched per peer into one frame a check.
//   - Keeping (on the loop, at receipt): each replica keeps its voters'
//     last reports, each for heldReportTicks (a peer that stopped reporting
//     counts as holding nothing).
//   - Bounding: heldQuorumEnd is the majority-th largest end over the
//     voters (its own end for itself), and maybeCompact trims no raft
//     entry whose batches do not lie wholly below it (besides
//     prefixTrimBound's own-prefix and record bounds). A raft snapshot can
//     then only be cut, and sent, below what a majority holds in prefixes:
//     every record stays on a majority of the voters (prefix or raft log),
//     so a single disk replacement loses none.
//
// A generation switch needs no bound: a replica's next generation covers
// every record its current one did (it is cut from it and the raft log past
// its end, which the trim keeps), so a switch never shrinks what it holds.
// Reports are not ordered or fenced: a late one counts for its lifetime
// only, and only a replica that lost its prefix since (a disk replaced,
// damage) could be counted wrongly, which is the single loss allowed.
// Rejected: keeping every generation until every voter holds it (a voter
// down for days would hold every replica's disk at its whole history;
// Kafka and Redpanda tie safety to the ISR or a raft majority, never to
// every replica); shipping the prefix in raft's MsgSnap (engine/compact's
// doc: every snapshot would carry the live set); replicating the reports
// through the raft log (a follower's report would need the leader to
// propose it, and every report an entry on every replica's disk).

// heldReport is one voter's last PrefixHeld: end, received at tick at.
type heldReport struct {
	id  NodeID
	end int64
	at  uint64
}

// heldOut is one PrefixHeld waiting for the end of the retention tick.
type heldOut struct {
	to  NodeID
	msg *strandpb.PrefixHeld
}

// heldReportTicks is how long a voter's report counts: it reports at every
// retention check, so a few checks and a request timeout cover a late or
// dropped frame.
func (c *Core) heldReportTicks() uint64 {
	return uint64(c.cfg.RequestTimeoutTicks) + 4*uint64(c.cfg.RetentionCheckTicks)
}

// ownHeldEnd is the end of g's prefix this replica may count as held: 0
// while it is stuck, damaged, installing or holds no generation.
func (c *Core) ownHeldEnd(g *group) int64 {
	p := &g.pass
	if p.stuck != "" || p.damaged || p.install != nil || p.store == nil || p.store.Generation() == 0 {
		return 0
	}
	return p.store.End()
}

// reportHeld queues g's PrefixHeld for every other voter, outgoing ones
// of a joint configuration included (sent by flushHeld at the end of the
// retention tick).
func (c *Core) reportHeld(g *group) {
	if g.confState == nil {
		return
	}
	var gen uint64
	if g.pass.store != nil {
		gen = g.pass.store.Generation()
	}
	end := c.ownHeldEnd(g)
	in, out := g.confState.GetVoters(), g.confState.GetVotersOutgoing()
	for i, id := range slices.Concat(in, out) {
		if NodeID(id) == c.cfg.ID || (i >= len(in) && slices.Contains(in, id)) {
			continue
		}
		c.heldOut = append(c.heldOut, heldOut{to: NodeID(id), msg: &strandpb.PrefixHeld{
			Topic: wireTopic(g.tp.Topic, g.topicID), Partition: g.tp.Partition, Generation: gen, End: end}})
	}
}

// flushHeld sends the queued PrefixHeld reports, one frame per peer, in
// peer order.
func (c *Core) flushHeld() {
	if len(c.heldOut) == 0 {
		return
	}
	slices.SortStableFunc(c.heldOut, func(a, b heldOut) int { return cmp.Compare(a.to, b.to) })
	for i := 0; i < len(c.heldOut); {
		j := i
		f := &strandpb.RaftFrame{FromNode: uint64(c.cfg.ID)}
		for ; j < len(c.heldOut) && c.heldOut[j].to == c.heldOut[i].to && j-i < prefixFramesMax; j++ {
			f.PrefixHeld = append(f.PrefixHeld, c.heldOut[j].msg)
		}
		c.sendPrefixFrame(c.heldOut[i].to, f)
		i = j
	}
	clear(c.heldOut)
	c.heldOut = c.heldOut[:0]
}

// takeHeld keeps a voter's report.
func (c *Core) takeHeld(from NodeID, h *strandpb.PrefixHeld) {
	g := c.routeMessage(h.GetTopic(), h.GetPartition())
	if g == nil || h.GetTopic() == metaTopic || g.confState == nil ||
		(!slices.Contains(g.confState.GetVoters(), uint64(from)) && !slices.Contains(g.confState.GetVotersOutgoing(), uint64(from))) {
		return
	}
	r := heldReport{id: from, end: max(h.GetEnd(), 0), at: c.ticks}
	at, found := slices.BinarySearchFunc(g.pass.held, from, func(r heldReport, id NodeID) int { return cmp.Compare(r.id, id) })
	if found {
		g.pass.held[at] = r
		return
	}
	g.pass.held = slices.Insert(g.pass.held, at, r)
}

// heldQuorumEnd is the end a majority of g's voters' prefixes hold: the
// majority-th largest of the voters' ends (this replica's own, the others'
// reports younger than heldReportTicks, 0 for none); in a joint
// configuration (a move), the lesser of the two majorities'.
func (c *Core) heldQuorumEnd(g *group) int64 {
	if c.bugHeldUnbounded() { // planted-bug hook (-tags simbugs)
		return c.ownHeldEnd(g)
	}
	if g.confState == nil || len(g.confState.GetVoters()) == 0 {
		return 0
	}
	end := c.majorityEnd(g, g.confState.GetVoters())
	if out := g.confState.GetVotersOutgoing(); len(out) > 0 {
		end = min(end, c.majorityEnd(g, out))
	}
	return end
}

// majorityEnd is the majority-th largest prefix end of voters.
func (c *Core) majorityEnd(g *group, voters []uint64) int64 {
	ends := make([]int64, 0, len(voters))
	for _, id := range voters {
		if NodeID(id) == c.cfg.ID {
			ends = append(ends, c.ownHeldEnd(g))
			continue
		}
		var end int64
		if at, found := slices.BinarySearchFunc(g.pass.held, NodeID(id), func(r heldReport, id NodeID) int { return cmp.Compare(r.id, id) }); found {
			if r := g.pass.held[at]; c.ticks < r.at+c.heldReportTicks() {
				end = r.end
			}
		}
		ends = append(ends, end)
	}
	slices.SortFunc(ends, func(a, b int64) int { return cmp.Compare(b, a) })
	return ends[len(ends)/2]
}

// RaftLogHolding is what the simulator's durability check reads of a
// replica's raft log: the first offset it holds and the group's voter
// count.
type RaftLogHolding struct {
	From   int64
	Voters int
}

// RaftLogHolding reports what this node's replica of tp holds in its raft
// log (false: not hosted, or no raft log or engine yet). Read only.
func (c *Core) RaftLogHolding(tp TopicPartition) (RaftLogHolding, bool) {
	g := c.byTP[tp]
	if g == nil || g.part == nil || g.log == nil || g.confState == nil {
		return RaftLogHolding{}, false
	}
	from, ok := c.firstInRaftLog(g)
	return RaftLogHolding{From: from, Voters: len(g.confState.GetVoters())}, ok
}
