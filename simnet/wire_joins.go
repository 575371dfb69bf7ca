package simnet

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// Node membership changes during a run (Options.Joins).
//
// The cluster starts with joinVoters nodes in Config.Nodes; the others are
// spares, down and unknown to it. Once a drawn share of the operations was
// issued, an admin client pre-registers a spare over the wire (NodeAdmin
// ADD, as `strand serve --join` does) and the world opens it with
// Config.Join; the metadata leader then adds it as a learner and promotes
// it. After the joins, one seed in decomOneIn decommissions a node as
// `strand node decommission` does: NodeAdmin DECOMMISSION, the moves
// PlanDecommission draws (MovePartitions), then REMOVE. Each step draws a
// targeted crash: the joiner right after it registered, the metadata
// leader while the joiner is a learner (mid-change), the drained node
// right after DECOMMISSION or once its moves were recorded. After the
// final heal checkJoins requires the metadata group's configuration to be
// what the metadata state asks, every joined node registered and
// unfenced, and a decommissioned node removed and hosting nothing.
//
// Off in Standard: spares change every seed's trace and node count.

// The joins' draws.
const (
	joinVoters      = 3 // nodes in Config.Nodes; the rest are spares
	joinFracMin     = 10
	joinFracMax     = 50
	decomOneIn      = 2 // a seed decommissions a node once in this many
	joinWatchEvery  = 5 * time.Millisecond
	joinWatchChecks = 400 // bounds the learner watch (2 s)
	joinPoll        = 50 * time.Millisecond
	joinAttemptsMax = 2000 // bounds one admin step's retries
)

// joinPlan is the run's membership changes.
type joinPlan struct {
	client *wireClient
	spares []int // node indexes outside Config.Nodes, in join order
	ats    []int // operations issued before each join
	joined []uint64
	// decom is the node drawn for decommission (0: none); removed: its
	// REMOVE was answered.
	decom   uint64
	removed bool
	// removedAt is when the REMOVE was acknowledged.
	removedAt time.Duration
	// forced: a metadata leader removed decom before it caught up (cut
	// off through the whole grace): it keeps its stale replicas, as
	// documented, until wiped (node.Stats.RemovalsForced).
	forced  bool
	started time.Duration // the current admin step's first attempt
	// settled: the end-of-run check ran, from settleStart.
	settled     bool
	settleStart time.Duration
}

// newJoinPlan draws the run's joins, or nil without Options.Joins. It
// keeps the spares out of Config.Nodes and down until they join.
func newJoinPlan(ww *wireWorkload) *joinPlan {
	o := ww.w.opts
	if !o.Joins || len(ww.w.nodes) <= joinVoters {
		return nil
	}
	c := newWireClient(ww, 0, 0)
	c.rng = newStream(o.Seed, streamWorkload+0xad10)
	jp := &joinPlan{client: c}
	for _, n := range ww.w.nodes[joinVoters:] {
		n.spare, n.dead = true, true // dead until it joins: nothing restarts it
		jp.spares = append(jp.spares, n.index)
		jp.ats = append(jp.ats, o.Ops*(joinFracMin+c.rng.IntN(joinFracMax-joinFracMin+1))/100)
	}
	slices.Sort(jp.ats)
	if c.rng.IntN(decomOneIn) == 0 {
		jp.decom = 1 + uint64(c.rng.IntN(len(ww.w.nodes))) // a node that joined or one of the first
	}
	return jp
}

// configureJoin gives a node's config the first joinVoters nodes; a
// spare's gets Join and, as serve --join takes them, itself and every node
// the newest metadata registered (not removed) when it opens.
func (ww *wireWorkload) configureJoin(cfg *node.Config) {
	if ww.joins == nil {
		return
	}
	cfg.Nodes = ww.peers[:joinVoters:joinVoters]
	if int(cfg.ID) <= joinVoters {
		return
	}
	cfg.Join = true
	ids := []uint64{uint64(cfg.ID)}
	nodes, _ := ww.w.newestMetadata()
	for _, m := range nodes {
		if m.State != metadata.NodeRemoved && m.ID >= 1 && int(m.ID) <= len(ww.peers) {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 1 {
		ids = append(ids, 1, 2, 3) // no live node to ask: the first nodes
	}
	slices.Sort(ids)
	cfg.Nodes = nil
	for _, id := range slices.Compact(ids) {
		cfg.Nodes = append(cfg.Nodes, ww.peers[id-1])
	}
}

// metaVoter reports whether live node n may vote in the metadata group: a
// voter of the configuration the newest metadata applied (always true
// without Options.Joins, where the group runs over every node).
func (w *world) metaVoter(n *simNode) bool {
	if w.wire.joins == nil {
		return true
	}
	return roleOf(w.newestMetaNode(), n.id) == node.MetaRoleVoter
}

// metaVoters is the metadata group's voter count as the newest metadata
// applied it (every node without Options.Joins).
func (w *world) metaVoters() int {
	if w.wire.joins == nil {
		return len(w.nodes)
	}
	newest, voters := w.newestMetaNode(), 0
	for _, n := range w.nodes {
		if roleOf(newest, n.id) == node.MetaRoleVoter {
			voters++
		}
	}
	return voters
}

// newestMetaNode is the live node that applied the most of the metadata
// log (nil: none).
func (w *world) newestMetaNode() *simNode {
	var best *simNode
	var bestIndex uint64
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		if st, ok := n.core.MetadataStatus(); ok && (best == nil || st.AppliedIndex > bestIndex) {
			best, bestIndex = n, st.AppliedIndex
		}
	}
	return best
}

// startJoins starts the joining admin once the topics exist.
func (ww *wireWorkload) startJoins() {
	if ww.joins == nil {
		return
	}
	ww.active++
	c := ww.joins.client
	c.refresh()
	c.after(0, c.awaitJoin)
}

// awaitJoin waits for the next join's share of the budget, then registers
// the spare; after the last join it starts the decommission.
func (c *wireClient) awaitJoin() {
	w, jp := c.ww.w, c.ww.joins
	if len(jp.ats) == 0 {
		if jp.decom != 0 && !jp.removed {
			c.startDecommission()
			return
		}
		c.finished = true
		c.ww.clientDone()
		return
	}
	if w.work.issued < jp.ats[0] && !w.work.spent() { // in overtime, as when the budget ran out
		c.after(20*time.Millisecond, c.awaitJoin)
		return
	}
	n := w.nodes[jp.spares[len(jp.joined)]]
	req := &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_ADD, NodeId: uint64(n.id),
		Address: "n" + strconv.Itoa(int(n.id)), Rack: "r" + strconv.Itoa(n.index%2)}
	c.adminStep(req, nil, func() { c.onJoined(n) })
}

// adminStep sends req until it is answered without error (or refused
// retriably: retried, except by the codes in accept), then runs done.
// A definite refusal fails the seed and ends the admin's work.
func (c *wireClient) adminStep(req *strandpb.NodeAdminRequest, accept []strandpb.ErrorCode, done func()) {
	c.ww.joins.started = c.ww.w.now()
	c.attempts, c.maybeDone = 0, false
	var attempt func(target int)
	attempt = func(target int) {
		c.attempts++
		req.TimeoutMs = int32(c.ww.w.opts.ClientTimeout / time.Millisecond)
		c.ww.call(c, target, &strandpb.Request{Body: &strandpb.Request_NodeAdmin{NodeAdmin: req}},
			func(resp *strandpb.Response, err error) {
				if err == nil {
					err = wireErr(resp.GetError())
				}
				a := clientlib.ClassifyErr(err)
				code := errCode(err)
				switch {
				case err == nil || slices.Contains(accept, code):
					done()
				case c.attempts < joinAttemptsMax && (a.Retriable || code == strandpb.ErrorCode_ERROR_CODE_MEMBERSHIP_REFUSED):
					c.maybeDone = c.maybeDone || a.MaybeWritten
					next := c.adminRetryTarget(target, err)
					c.after(wireBackoff.Delay(c.attempts, c.rng), func() { attempt(next) })
				default:
					c.ww.w.fail("node admin %v of node %d: %v (%d attempts)", req.GetAction(), req.GetNodeId(), err, c.attempts)
					c.finished = true
					c.ww.clientDone()
				}
			})
	}
	attempt(c.randomNode())
}

// adminRetryTarget is the node a node-admin request that failed
// retriably at target is sent to next: controllerTarget's, except that a
// node that answered it knows no controller while the stale cache names
// it is skipped too (a decommissioned node no longer in the metadata
// group: seed 160 retried its REMOVE there for 50 s).
func (c *wireClient) adminRetryTarget(target int, err error) int {
	next := c.controllerTarget(err)
	if errCode(err) == strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER && next == target {
		next = c.randomNode()
	}
	return next
}

// onJoined opens a registered spare with Config.Join and draws the join's
// targeted fault.
func (c *wireClient) onJoined(n *simNode) {
	w, jp := c.ww.w, c.ww.joins
	jp.joined = append(jp.joined, uint64(n.id))
	jp.ats = jp.ats[1:]
	w.coverage.Inc("event/node-joined")
	n.dead = false
	w.startNode(n)
	if !w.work.healed && !w.probe.active {
		switch c.rng.IntN(3) {
		case 0:
			c.crashForMove(n, "fault/join-crash-joiner")
		case 1:
			c.watchLearner(n.id, 0)
		}
	}
	c.refresh()
	c.after(0, c.awaitJoin)
}

// metaLeader is the index of the live node leading the metadata group in
// the highest term (-1: none).
func (w *world) metaLeader() int {
	best, term := -1, uint64(0)
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		if st, ok := n.core.MetadataStatus(); ok && st.IsLeader && (best < 0 || st.Term > term) {
			best, term = n.index, st.Term
		}
	}
	return best
}

// roleOf is node id's role in live node n's applied metadata configuration.
func roleOf(n *simNode, id node.NodeID) node.MetaRole {
	if n == nil {
		return node.MetaRoleNone
	}
	if mc, ok := n.core.(interface {
		MetadataRole(node.NodeID) node.MetaRole
	}); ok {
		return mc.MetadataRole(id)
	}
	return node.MetaRoleNone
}

// watchLearner crashes the metadata leader once it applied joiner id as a
// learner: the promotion is then due (bounded: it may be promoted first).
func (c *wireClient) watchLearner(id node.NodeID, checks int) {
	w := c.ww.w
	if checks >= joinWatchChecks || w.work.healed || w.probe.active {
		return
	}
	if i := w.metaLeader(); i >= 0 && roleOf(w.nodes[i], id) == node.MetaRoleLearner {
		c.crashForMove(w.nodes[i], "fault/join-crash-meta-leader")
		return
	}
	c.after(joinWatchEvery, func() { c.watchLearner(id, checks+1) })
}

// newestMetadata is the metadata state of the live node that applied the
// most of the metadata log.
func (w *world) newestMetadata() ([]metadata.Node, []metadata.Topic) {
	var nodes []metadata.Node
	var topics []metadata.Topic
	var bestIndex uint64
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		mc, ok := n.core.(interface {
			MetadataNodes() ([]metadata.Node, []metadata.Topic)
		})
		st, sok := n.core.MetadataStatus()
		if !ok || !sok || st.AppliedIndex < bestIndex {
			continue
		}
		nodes, topics = mc.MetadataNodes()
		bestIndex = st.AppliedIndex
	}
	return nodes, topics
}

// startDecommission fences the drawn node (DECOMMISSION) once enough
// active nodes would remain, then drains it.
func (c *wireClient) startDecommission() {
	w, jp := c.ww.w, c.ww.joins
	nodes, _ := w.newestMetadata()
	active := 0
	for _, m := range nodes {
		if m.State == metadata.NodeActive {
			active++
		}
	}
	if active <= joinVoters || w.nodes[jp.decom-1].spare && !slices.Contains(jp.joined, jp.decom) {
		jp.decom = 0 // too few nodes would remain (a joiner not registered yet)
		c.after(0, c.awaitJoin)
		return
	}
	req := &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_DECOMMISSION, NodeId: jp.decom}
	c.adminStep(req, nil, func() {
		w.coverage.Inc("event/node-decommissioning")
		if !w.work.healed && !w.probe.active && c.rng.IntN(3) == 0 {
			c.crashForMove(w.nodes[jp.decom-1], "fault/decom-crash-node")
		}
		jp.started = w.now()
		c.drainDecom()
	})
}

// drainDecom moves every replica off the decommissioned node with the
// moves PlanDecommission draws (partitions listing it without a move in
// progress), then removes it once no partition lists it.
func (c *wireClient) drainDecom() {
	w, jp := c.ww.w, c.ww.joins
	nodes, topics := w.newestMetadata()
	if len(nodes) == 0 {
		// No live node holds the metadata (every one down or still
		// opening): nothing says the node was drained (seed 56 sent
		// REMOVE on this and retried it until the time limit).
		c.after(joinPoll, c.drainDecom)
		return
	}
	var parts []metadata.PlanPartition
	listed := false
	for _, t := range topics {
		for p, reps := range t.Replicas {
			in := slices.Contains(reps, jp.decom) || p < len(t.Targets) && slices.Contains(t.Targets[p], jp.decom)
			listed = listed || in
			if in && (p >= len(t.Targets) || t.Targets[p] == nil) {
				parts = append(parts, metadata.PlanPartition{Topic: t.Name, Partition: int32(p), Replicas: slices.Clone(reps)})
			}
		}
	}
	if !listed {
		req := &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_REMOVE, NodeId: jp.decom}
		c.adminStep(req, []strandpb.ErrorCode{strandpb.ErrorCode_ERROR_CODE_NODE_REMOVED}, func() {
			jp.removed, jp.removedAt = true, w.now()
			w.coverage.Inc("event/node-removed")
			c.after(0, c.awaitJoin)
		})
		return
	}
	var pn []metadata.PlanNode
	for _, m := range nodes {
		pn = append(pn, metadata.PlanNode{ID: m.ID, Rack: m.Rack, Eligible: m.State == metadata.NodeActive && !m.Fenced})
	}
	moves, err := metadata.PlanDecommission(pn, parts, jp.decom)
	if len(parts) == 0 || errors.Is(err, metadata.ErrNoTarget) {
		c.after(joinPoll, c.drainDecom) // moves under way, or no eligible target yet (a joiner not unfenced)
		return
	}
	if err != nil {
		w.fail("decommission plan of node %d: %v", jp.decom, err)
		c.finished = true
		c.ww.clientDone()
		return
	}
	c.sendDecomMoves(moves)
}

// sendDecomMoves sends one MovePartitions of moves until answered, then
// polls the drain again.
func (c *wireClient) sendDecomMoves(moves []metadata.Move) {
	w, jp := c.ww.w, c.ww.joins
	req := &strandpb.MovePartitionsRequest{TimeoutMs: int32(w.opts.ClientTimeout / time.Millisecond)}
	for _, mv := range moves {
		req.Moves = append(req.Moves, &strandpb.MovePartitionsRequest_Move{Topic: mv.Topic, Partition: mv.Partition, Replicas: mv.To})
	}
	c.attempts = 0
	var attempt func(target int)
	attempt = func(target int) {
		c.attempts++
		c.ww.call(c, target, &strandpb.Request{Body: &strandpb.Request_MovePartitions{MovePartitions: req}},
			func(resp *strandpb.Response, err error) {
				if err == nil {
					err = wireErr(resp.GetError())
				}
				for _, m := range resp.GetMovePartitions().GetMoves() {
					if e := wireErr(m.GetError()); e != nil && err == nil {
						err = e
					}
				}
				a := clientlib.ClassifyErr(err)
				switch {
				case err == nil || errCode(err) == strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS:
					// In progress: recorded by an earlier attempt; drainDecom
					// plans again for any partition still listing the node.
					w.coverage.Inc("event/decom-moves")
					if !w.work.healed && !w.probe.active && c.rng.IntN(3) == 0 {
						c.crashForMove(w.nodes[jp.decom-1], "fault/decom-crash-mid-moves")
					}
					c.after(joinPoll, c.drainDecom)
				case a.Retriable && c.attempts < joinAttemptsMax:
					next := c.adminRetryTarget(target, err)
					c.after(wireBackoff.Delay(c.attempts, c.rng), func() { attempt(next) })
				default:
					// A move refused (its partition changed since the
					// plan): plan again from fresher metadata.
					w.coverage.Inc("event/decom-moves-refused")
					c.after(joinPoll, c.drainDecom)
				}
			})
	}
	attempt(c.randomNode())
}

// awaitJoins holds the end of the run (after awaitMoves) until the
// membership settled as checkJoins requires, failing the seed when it has
// not within LivenessBound. It reports whether it took over; it then calls
// cont once done.
func (ww *wireWorkload) awaitJoins(cont func()) bool {
	jp := ww.joins
	if jp == nil || jp.settled {
		return false
	}
	w := ww.w
	if jp.settleStart == 0 {
		jp.settleStart = w.now()
	}
	why := ww.unsettledMembership()
	switch {
	case why == "":
		jp.settled = true
		w.coverage.Inc("check/membership-settled")
		cont()
	case w.now() > jp.settleStart+w.opts.LivenessBound:
		jp.settled = true
		w.fail("liveness: %s %v after the final heal", why, w.opts.LivenessBound)
		cont()
	default:
		jp.client.after(joinPoll, func() { ww.awaitJoins(cont) })
	}
	return true
}

// unsettledMembership says what the membership lacks ("" when settled):
// on every live node still a member, the metadata configuration holds
// exactly the registered nodes not removed, with min(5, active) active
// voters; every joined node is registered, active and unfenced (the
// decommissioned one removed); a removed node is listed by no partition
// and, if live, hosts no partition.
func (ww *wireWorkload) unsettledMembership() string {
	w, jp := ww.w, ww.joins
	nodes, topics := w.newestMetadata()
	state := map[uint64]metadata.Node{} // lookup only
	for _, m := range nodes {
		state[m.ID] = m
	}
	for _, id := range jp.joined {
		m, ok := state[id]
		switch {
		case !ok:
			return fmt.Sprintf("joined node %d not registered", id)
		case id == jp.decom && jp.removed:
		case m.State != metadata.NodeActive || m.Fenced:
			return fmt.Sprintf("joined node %d is %v (fenced %v)", id, m.State, m.Fenced)
		}
	}
	if jp.removed {
		if m := state[jp.decom]; m.State != metadata.NodeRemoved {
			return fmt.Sprintf("decommissioned node %d is %v", jp.decom, m.State)
		}
		for _, t := range topics {
			for p, reps := range t.Replicas {
				if slices.Contains(reps, jp.decom) {
					return fmt.Sprintf("removed node %d still a replica of %s/%d", jp.decom, t.Name, p)
				}
			}
		}
		if n := w.nodes[jp.decom-1]; n.up && !jp.forced {
			for _, st := range n.core.Status() {
				if st.TopicPartition != metaTopicPartition {
					return fmt.Sprintf("removed node %d still hosts %s/%d", jp.decom, st.Topic, st.Partition)
				}
			}
		}
	}
	return ww.unsettledConf(nodes)
}

// unsettledConf checks every live member's applied metadata configuration
// against the registered nodes.
func (ww *wireWorkload) unsettledConf(nodes []metadata.Node) string {
	w := ww.w
	active := 0
	for _, m := range nodes {
		if m.State == metadata.NodeActive {
			active++
		}
	}
	for _, n := range w.nodes {
		if !n.up || n.id == node.NodeID(ww.joins.decom) && ww.joins.removed {
			continue
		}
		voters := 0
		for _, m := range nodes {
			role := roleOf(n, node.NodeID(m.ID))
			switch {
			case m.State == metadata.NodeRemoved && role != node.MetaRoleNone && ww.inRemovalGrace(m.ID):
				w.coverage.Inc("check/membership-removal-grace")
			case m.State == metadata.NodeRemoved && role != node.MetaRoleNone:
				return fmt.Sprintf("node %d: removed node %d still a metadata %v", n.id, m.ID, role)
			case m.State != metadata.NodeRemoved && role == node.MetaRoleNone:
				return fmt.Sprintf("node %d: registered node %d not in the metadata group", n.id, m.ID)
			case m.State == metadata.NodeActive && role == node.MetaRoleVoter:
				voters++
			}
		}
		if voters != min(5, active) {
			return fmt.Sprintf("node %d: %d active metadata voters, want %d", n.id, voters, min(5, active))
		}
	}
	return ""
}

// inRemovalGrace reports whether removed node id may still be in the
// metadata group: the metadata leader keeps a removed node that has not
// caught up (down, perhaps for good) in the group for
// node.RemovalGraceElections election timeouts so it learns of its removal
// (node/members.go removalDue), a learner or, when it was never demoted (a
// decommissioning voter is demoted only while three active voters remain
// without it), a voter. Seed 22 in overtime: the decommissioned node's media
// was damaged for good, it was removed 2 s after the time limit and was
// still a learner 10 s after the final heal, 14 s into its 30 s grace; after
// a trace shift (the group consumer's fresh-lease rule) it was removed at
// 62.2 s still a voter and was one 13 s later. Such a seed does not check
// that the removal ends after the grace (the drain does not wait 30 s for
// it).
func (ww *wireWorkload) inRemovalGrace(id uint64) bool {
	jp, w := ww.joins, ww.w
	if !jp.removed || id != jp.decom || w.nodes[id-1].up {
		return false
	}
	return w.now() < jp.removedAt+node.RemovalGraceElections*w.electionTimeout()+w.opts.LivenessBound
}

// owns reports whether c is the joins' administrator client (it sends as
// the operator when authorization is on: operator.go caller).
func (jp *joinPlan) owns(c *wireClient) bool { return jp != nil && c == jp.client }
