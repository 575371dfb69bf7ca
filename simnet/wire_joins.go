package simnet

import (
	"context"
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
// ADD, as `strand serve --join` does; every membership change and drain
// move is the clientlib call cmd/strand makes, AddNode,
// SetNodeDecommissioning, ActivateNode, RemoveNode, MovePartitions, run
// as a SimRun task: adminStep, sendDecomMoves) and the world opens it with
// Config.Join; the metadata leader then adds it as a learner and promotes
// it. One seed in decomOneIn decommissions nodes as `strand node
// decommission` does: NodeAdmin DECOMMISSION, the moves PlanDecommission
// draws (MovePartitions), then REMOVE. How is drawn (decomMode): one node
// after the joins (two in five of those seeds); two nodes after the joins,
// the second's DECOMMISSION once the first was removed (one in five) or
// while the first still drains (one in five: the operator of a Kafka or
// Redpanda cluster who decommissions a second broker before the first is
// empty; the drain then plans for both, and a partition listing both moves
// off one, then the other); or one node whose DECOMMISSION is sent right
// after the last spare's ADD, while that joiner is not yet a metadata
// voter (one in five). Five nodes and a replication factor of three: two
// decommissions leave three active nodes, the fewest the replicas and the
// metadata group's three voters need (startDecommission skips one that
// would leave fewer live active nodes; a node lost for good is no target
// of the drain, which redirects a move in progress onto one and cancels
// the latest decommission when a loss leaves too few). Each step draws a
// targeted crash: the joiner right after it registered, the metadata
// leader while the joiner is a learner (mid-change), the drained node
// right after DECOMMISSION (in one decommission in six kept down until
// its REMOVE is answered), before its REMOVE (kept down likewise) or once
// its moves were recorded. After the final heal awaitJoins requires the
// metadata group's configuration to be what the metadata state asks,
// every joined node registered and unfenced, every decommissioned node
// removed, listed by no partition and hosting nothing, and every partition
// a decommission moved settled on every live member where the metadata
// puts it (its hosts and raft voters exactly its replicas).
//
// Off in Standard: spares change every seed's trace and node count.

// The joins' draws.
const (
	joinVoters      = 3 // nodes in Config.Nodes; the rest are spares
	joinFracMin     = 10
	joinFracMax     = 50
	decomOneIn      = 2 // a seed decommissions nodes once in this many
	joinWatchEvery  = 5 * time.Millisecond
	joinWatchChecks = 400 // bounds the learner watch (2 s)
	joinPoll        = 50 * time.Millisecond
	// joinRunsMax bounds one admin step's runs of its clientlib call
	// (each retries up to clientlib's MaxRetries): about the 2000
	// attempts the step's raw requests were bounded by.
	joinRunsMax = 100
)

// joinPlan is the run's membership changes.
type joinPlan struct {
	client *wireClient
	// lib is client's clientlib Client: every membership change and
	// drain move goes through the admin call cmd/strand makes (AddNode,
	// SetNodeDecommissioning, ActivateNode, RemoveNode, MovePartitions).
	lib    *clientlib.Client
	spares []int // node indexes outside Config.Nodes, in join order
	ats    []int // operations issued before each join
	joined []uint64
	// caughtUp lists joined nodes seen with their metadata rejoin done
	// (joinFits).
	caughtUp []uint64
	waiting  bool // the next join waits (joinFits)
	// mode is how the run decommissions; decoms the nodes drawn for it, in
	// order (a node skipped because too few would remain is dropped);
	// draining those whose DECOMMISSION was answered and REMOVE not yet;
	// removed those whose REMOVE was answered, at removedAt.
	mode      decomMode
	decoms    []uint64
	draining  []uint64
	removed   []uint64
	removedAt []time.Duration
	// movesSent counts the decommission's MovePartitions answered; drained
	// lists every partition their requests named, answered or not
	// (checked settled at the end; decomMoved).
	movesSent int
	drained   []node.TopicPartition
	// heldDown lists drained nodes crashed and kept down until removed
	// (holdDown).
	heldDown []uint64
	// forced: a metadata leader removed a node before it caught up (cut
	// off through the whole grace): it keeps its stale replicas, as
	// documented, until wiped (node.Stats.RemovalsForced, which does not
	// say which node: no removed node's hosting is checked then).
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
		n := len(ww.w.nodes)
		first := 1 + uint64(c.rng.IntN(n)) // a node that joined or one of the first
		jp.decoms = []uint64{first}
		switch c.rng.IntN(5) {
		case 0, 1:
			jp.mode = decomOne
		case 2, 3:
			jp.mode = decomSeries
			if c.rng.IntN(2) == 0 {
				jp.mode = decomOverlap
			}
			second := 1 + uint64(c.rng.IntN(n-1))
			if second >= first {
				second++
			}
			jp.decoms = append(jp.decoms, second)
		default:
			jp.mode = decomDuringJoin
		}
	}
	return jp
}

// decomMode is how a run decommissions nodes (joinPlan.mode).
type decomMode int

// The modes.
const (
	decomNone       decomMode = iota
	decomOne                  // one node, after the joins
	decomSeries               // two, the second's DECOMMISSION once the first was removed
	decomOverlap              // two, the second's DECOMMISSION while the first drains
	decomDuringJoin           // one, its DECOMMISSION right after the last spare's ADD
)

// isRemoved reports whether id's REMOVE was answered.
func (jp *joinPlan) isRemoved(id uint64) bool { return slices.Contains(jp.removed, id) }

// isDecom reports whether id is drawn for decommission.
func (jp *joinPlan) isDecom(id uint64) bool { return slices.Contains(jp.decoms, id) }

// nextDecom is the drawn node whose DECOMMISSION is still to send (0:
// none).
func (jp *joinPlan) nextDecom() uint64 {
	if i := len(jp.draining) + len(jp.removed); i < len(jp.decoms) {
		return jp.decoms[i]
	}
	return 0
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
	ww.joins.lib = ww.adminLib(c)
	c.refresh()
	c.after(0, c.awaitJoin)
}

// awaitJoin waits for the next join's share of the budget, then registers
// the spare; after the last join it starts the decommission.
func (c *wireClient) awaitJoin() {
	w, jp := c.ww.w, c.ww.joins
	if len(jp.ats) == 0 {
		switch {
		case jp.nextDecom() != 0 && len(jp.draining) == 0:
			c.startDecommission()
		case len(jp.draining) > 0:
			c.drainDecom()
		default:
			c.finished = true
			c.ww.clientDone()
		}
		return
	}
	if w.work.issued < jp.ats[0] && !w.work.spent() { // in overtime, as when the budget ran out
		c.after(20*time.Millisecond, c.awaitJoin)
		return
	}
	if !jp.joinFits(w) {
		// An operator adds nodes one at a time while one is lost: the
		// join waits for the last joiner to catch up.
		if !jp.waiting {
			jp.waiting = true
			w.coverage.Inc("event/join-waits-for-joiner")
		}
		c.after(joinPoll, c.awaitJoin)
		return
	}
	jp.waiting = false
	n := w.nodes[jp.spares[len(jp.joined)]]
	req := &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_ADD, NodeId: uint64(n.id),
		Address: "n" + strconv.Itoa(int(n.id)), Rack: "r" + strconv.Itoa(n.index%2)}
	c.adminStep(req, nil, func(strandpb.ErrorCode) { c.onJoined(n) })
}

// joinFits reports whether one more node may register now. A joining
// node cannot tell a first join from a lost disk, so its metadata group
// rejoins: it needs trusted answers from ceil(m/2) of the m registered
// nodes, itself included in m (node/doc.go, "Disk loss"; node/rejoin.go's
// heardFromQuorums). Nodes lost for good and nodes still rejoining (the
// last joiner, a wiped node) cannot answer trusted, so with u of them
// the new joiner, and every joiner still catching up, waits forever
// unless u+1 <= m/2 after the join: node/doc.go's "at most a minority
// of a group lost state at once". Two joins at once while a node was
// lost for good broke it (seed 22: nodes 4 and 5 each waited for the
// other's answer). Observed caught-up joiners are remembered while they
// are down.
func (jp *joinPlan) joinFits(w *world) bool {
	registered, untrusted := 0, 0
	for _, n := range w.nodes {
		id := uint64(n.id)
		if n.spare && !slices.Contains(jp.joined, id) || slices.Contains(jp.removed, id) {
			continue
		}
		registered++
		rejoining := false
		if n.up {
			if st, ok := n.core.MetadataStatus(); ok && st.Rejoining {
				rejoining = true
			} else if ok && n.spare && !slices.Contains(jp.caughtUp, id) {
				jp.caughtUp = append(jp.caughtUp, id)
			}
		} else {
			rejoining = n.wiped || n.spare && !slices.Contains(jp.caughtUp, id)
		}
		if rejoining || w.goneForGood(id) {
			untrusted++
		}
	}
	return untrusted+1 <= (registered+1)/2
}

// adminStep runs req's clientlib call (nodeAdminCall) until it succeeds
// or fails with a code in accept, then runs done. A run that clientlib
// gave up on (retries spent, the cluster unreachable), one that may have
// been applied (each action is idempotent: asked again, it succeeds or
// says so) and a MEMBERSHIP_REFUSED (another change under way) are run
// again, as an operator reruns the command, up to joinRunsMax runs. A
// definite refusal fails the seed and ends the admin's work. done is told
// the code it ended with (NONE, or the accepted one).
func (c *wireClient) adminStep(req *strandpb.NodeAdminRequest, accept []strandpb.ErrorCode, done func(code strandpb.ErrorCode)) {
	jp := c.ww.joins
	c.attempts = 0
	var run func()
	run = func() {
		c.attempts++
		var err error
		c.ww.w.simRun(jp.lib, func(ctx context.Context) { err = nodeAdminCall(ctx, jp.lib, req) }, func() {
			code := errCode(err)
			switch {
			case err == nil || slices.Contains(accept, code):
				done(code)
			case c.attempts < joinRunsMax && (!definiteRefusal(err) || code == strandpb.ErrorCode_ERROR_CODE_MEMBERSHIP_REFUSED):
				c.after(wireBackoff.Delay(c.attempts, c.rng), run)
			default:
				c.ww.w.fail("node admin %v of node %d: %v (%d runs)", req.GetAction(), req.GetNodeId(), err, c.attempts)
				c.finished = true
				c.ww.clientDone()
			}
		})
	}
	run()
}

// nodeAdminCall is the clientlib call that sends req, the one strand node
// add / decommission / remove makes.
func nodeAdminCall(ctx context.Context, cl *clientlib.Client, req *strandpb.NodeAdminRequest) error {
	switch req.GetAction() {
	case strandpb.NodeAction_NODE_ACTION_ADD:
		return cl.AddNode(ctx, req.GetNodeId(), req.GetAddress(), req.GetRack())
	case strandpb.NodeAction_NODE_ACTION_DECOMMISSION:
		return cl.SetNodeDecommissioning(ctx, req.GetNodeId())
	case strandpb.NodeAction_NODE_ACTION_ACTIVATE:
		return cl.ActivateNode(ctx, req.GetNodeId())
	case strandpb.NodeAction_NODE_ACTION_REMOVE:
		return cl.RemoveNode(ctx, req.GetNodeId())
	}
	panic(fmt.Sprintf("simnet: no clientlib call for node action %v", req.GetAction()))
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
	if len(jp.ats) == 0 && jp.mode == decomDuringJoin {
		c.after(0, c.startDecommission) // the joiner not yet a voter, most likely not yet a learner
		return
	}
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

// startDecommission fences the next drawn node (DECOMMISSION) once enough
// active nodes would remain (more than joinVoters: the replication factor
// and the metadata group's three voters), then drains.
func (c *wireClient) startDecommission() {
	w, jp := c.ww.w, c.ww.joins
	id := jp.nextDecom()
	nodes, _ := w.newestMetadata()
	if len(nodes) == 0 {
		c.after(joinPoll, c.startDecommission) // no live node holds the metadata
		return
	}
	active := 0 // active nodes not gone for good
	for _, m := range nodes {
		if m.State == metadata.NodeActive && !w.goneForGood(m.ID) {
			active++
		}
	}
	if active <= max(joinVoters, w.opts.Replication) || w.nodes[id-1].spare && !slices.Contains(jp.joined, id) {
		// Too few nodes would remain (a joiner not registered yet): skipped.
		jp.decoms = slices.DeleteFunc(jp.decoms, func(d uint64) bool { return d == id })
		w.coverage.Inc("event/decommission-skipped")
		c.after(0, c.awaitJoin)
		return
	}
	req := &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_DECOMMISSION, NodeId: id}
	c.adminStep(req, nil, func(strandpb.ErrorCode) {
		w.coverage.Inc("event/node-decommissioning")
		switch {
		case len(jp.draining) > 0:
			w.coverage.Inc("event/decommission-overlap") // the first still decommissioning
		case len(jp.removed) > 0:
			w.coverage.Inc("event/decommission-series")
		}
		if jp.mode == decomDuringJoin && len(jp.joined) > 0 {
			if joiner := jp.joined[len(jp.joined)-1]; roleOf(w.newestMetaNode(), node.NodeID(joiner)) != node.MetaRoleVoter {
				w.coverage.Inc("event/decommission-during-join")
			}
		}
		jp.draining = append(jp.draining, id)
		if !w.work.healed && !w.probe.active {
			switch c.rng.IntN(6) {
			case 0, 1:
				c.crashForMove(w.nodes[id-1], "fault/decom-crash-node")
			case 2:
				// The operator decommissions a node that is down (Redpanda's
				// case of a broker that lost its disk): it misses its own
				// moves and its removal.
				c.holdDown(id, "fault/decom-down-until-removed")
			}
		}
		jp.started = w.now()
		c.drainDecom()
	})
}

// drainDecom moves every replica off the decommissioning nodes with the
// moves PlanDecommission draws (partitions listing one without a move in
// progress), one node's plan at a time, and removes a node once no
// partition lists it. In decomOverlap it first sends the second node's
// DECOMMISSION, once the first's moves were recorded (or at once when the
// first has nothing to move).
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
	overlapDue := jp.mode == decomOverlap && jp.nextDecom() != 0
	if overlapDue && jp.movesSent > 0 {
		c.startDecommission()
		return
	}
	var pn []metadata.PlanNode
	live := 0 // active nodes not gone for good, fenced or not
	for _, m := range nodes {
		gone := w.goneForGood(m.ID)
		pn = append(pn, metadata.PlanNode{ID: m.ID, Rack: m.Rack, Eligible: m.State == metadata.NodeActive && !m.Fenced && !gone})
		if m.State == metadata.NodeActive && !gone {
			live++
		}
	}
	for _, id := range jp.draining {
		parts, stranded, listed := decomParts(topics, id, w.goneForGood)
		switch {
		case !listed && overlapDue:
			c.startDecommission()
			return
		case !listed:
			c.removeDecom(id)
			return
		case len(parts) == 0:
			continue // its moves under way
		}
		moves, err := metadata.PlanDecommission(pn, parts, id)
		switch {
		case errors.Is(err, metadata.ErrNoTarget) && live < w.opts.Replication:
			// A node was lost for good since the decommission started:
			// the rest cannot take its replicas; the operator cancels
			// the latest decommission.
			c.cancelDecom(jp.draining[len(jp.draining)-1])
			return
		case errors.Is(err, metadata.ErrNoTarget):
			continue // no eligible target yet (a joiner not unfenced)
		case err != nil:
			w.fail("decommission plan of node %d: %v", id, err)
			c.finished = true
			c.ww.clientDone()
			return
		}
		for _, tp := range stranded {
			if !slices.ContainsFunc(moves, func(mv metadata.Move) bool { return mv.Topic == tp.Topic && mv.Partition == tp.Partition }) {
				// Listed only by the stranded target: moved back.
				i := slices.IndexFunc(parts, func(pp metadata.PlanPartition) bool { return pp.Topic == tp.Topic && pp.Partition == tp.Partition })
				moves = append(moves, metadata.Move{Topic: tp.Topic, Partition: tp.Partition, From: parts[i].Replicas, To: parts[i].Replicas})
			}
		}
		c.sendDecomMoves(id, moves, stranded)
		return
	}
	c.after(joinPoll, c.drainDecom)
}

// goneForGood reports whether node id is lost for good (damaged media,
// no rejoin): an operator sees it down and plans no move onto it.
func (w *world) goneForGood(id uint64) bool {
	if id < 1 || int(id) > len(w.nodes) || !w.nodes[id-1].dead {
		return false
	}
	return !w.nodes[id-1].spare || slices.Contains(w.wire.joins.joined, id) // a spare is dead until it joins
}

// decomParts lists the partitions of topics listing node id (as a replica
// or in a move's target) without a move in progress, or whose move in
// progress adds a node gone for good (stranded: the drain redirects it,
// as an operator would, or the decommission never ends); listed reports
// whether any partition lists id.
func decomParts(topics []metadata.Topic, id uint64, gone func(uint64) bool) (parts []metadata.PlanPartition,
	stranded []node.TopicPartition, listed bool) {
	for _, t := range topics {
		for p, reps := range t.Replicas {
			var target []uint64
			if p < len(t.Targets) {
				target = t.Targets[p]
			}
			in := slices.Contains(reps, id) || slices.Contains(target, id)
			listed = listed || in
			adding := slices.DeleteFunc(slices.Clone(target), func(r uint64) bool { return slices.Contains(reps, r) })
			switch {
			case !in:
			case target == nil:
			case slices.ContainsFunc(adding, gone):
				stranded = append(stranded, node.TopicPartition{Topic: t.Name, Partition: int32(p)})
			default:
				continue
			}
			if in {
				parts = append(parts, metadata.PlanPartition{Topic: t.Name, Partition: int32(p), Replicas: slices.Clone(reps)})
			}
		}
	}
	return parts, stranded, listed
}

// cancelDecom cancels node id's decommission (ACTIVATE: active and
// unfenced again) and drains on.
func (c *wireClient) cancelDecom(id uint64) {
	w, jp := c.ww.w, c.ww.joins
	req := &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_ACTIVATE, NodeId: id}
	c.adminStep(req, nil, func(strandpb.ErrorCode) {
		w.coverage.Inc("event/decommission-cancelled")
		jp.draining = slices.DeleteFunc(jp.draining, func(d uint64) bool { return d == id })
		jp.decoms = slices.DeleteFunc(jp.decoms, func(d uint64) bool { return d == id })
		c.after(0, c.awaitJoin)
	})
}

// removeDecom sends drained node id's REMOVE until answered. One time in
// four the node is first stopped, as Kafka's operator shuts a drained
// broker down before unregistering it, and stays down until the REMOVE is
// answered. A REMOVE refused MEMBERSHIP_REFUSED (the metadata leader's
// state still lists the node) sends the drain back to planning, as
// `strand node decommission` fails and its operator reruns it: the
// metadata that said the node was drained was behind the leader's (seed
// 345: the only live node, replaying its metadata log at 48 of 74, listed
// no partition on node 4; the REMOVE was then refused "still holds 1
// replicas" until the drain's grace ran out, no move planned for the
// partition).
func (c *wireClient) removeDecom(id uint64) {
	w, jp := c.ww.w, c.ww.joins
	if !w.work.healed && !w.probe.active && c.rng.IntN(4) == 0 {
		c.holdDown(id, "fault/decom-stop-before-remove")
	}
	req := &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_REMOVE, NodeId: id}
	accept := []strandpb.ErrorCode{strandpb.ErrorCode_ERROR_CODE_NODE_REMOVED, strandpb.ErrorCode_ERROR_CODE_MEMBERSHIP_REFUSED}
	c.adminStep(req, accept, func(code strandpb.ErrorCode) {
		if code == strandpb.ErrorCode_ERROR_CODE_MEMBERSHIP_REFUSED {
			w.coverage.Inc("event/decommission-remove-refused")
			c.after(joinPoll, c.drainDecom)
			return
		}
		if k := slices.Index(jp.heldDown, id); k >= 0 {
			jp.heldDown = slices.Delete(jp.heldDown, k, k+1)
			w.scheduleRestart(w.nodes[id-1]) // nothing if it came back (the final heal) or is gone for good
		}
		jp.draining = slices.DeleteFunc(jp.draining, func(d uint64) bool { return d == id })
		jp.removed, jp.removedAt = append(jp.removed, id), append(jp.removedAt, w.now())
		w.coverage.Inc("event/node-removed")
		if len(jp.removed) == 2 {
			w.coverage.Inc("event/decommission-two")
		}
		c.after(0, c.awaitJoin)
	})
}

// holdDown crashes drained node id and keeps it down (no restart
// scheduled) until its REMOVE is answered (removeDecom) or the final heal
// restarts it, when every other node is up: a node down across its own
// removal must learn of it when it returns (node.RemovalGraceElections;
// planted RemoveBeforeCaughtUp), and two held down with a third crashed
// would stall the metadata group the REMOVE needs.
func (c *wireClient) holdDown(id uint64, name string) {
	w, jp := c.ww.w, c.ww.joins
	n := w.nodes[id-1]
	for _, o := range w.nodes {
		if !o.up || o.dead {
			return
		}
	}
	w.coverage.Inc(name)
	w.stats.Crashes++
	w.crashNode(n, name)
	jp.heldDown = append(jp.heldDown, id)
}

// sendDecomMoves sends moves off node id in one clientlib MovePartitions
// (strand node decommission's; those of stranded partitions redirect the
// move in progress), then polls the drain again.
func (c *wireClient) sendDecomMoves(id uint64, moves []metadata.Move, stranded []node.TopicPartition) {
	w, jp := c.ww.w, c.ww.joins
	var req []clientlib.PartitionMove
	for _, mv := range moves {
		tp := node.TopicPartition{Topic: mv.Topic, Partition: mv.Partition}
		req = append(req, clientlib.PartitionMove{Topic: mv.Topic, Partition: mv.Partition, Replicas: mv.To,
			Redirect: slices.Contains(stranded, tp)})
		if slices.Contains(stranded, tp) {
			w.coverage.Inc("event/decom-move-redirected")
		}
		if !slices.Contains(jp.drained, tp) {
			jp.drained = append(jp.drained, tp)
		}
	}
	var err error
	c.ww.w.simRun(jp.lib, func(ctx context.Context) {
		var rs []clientlib.PartitionMoveResult
		rs, err = jp.lib.MovePartitions(ctx, req)
		for _, r := range rs {
			if err == nil {
				err = r.Err
			}
		}
	}, func() {
		switch {
		case err == nil || errCode(err) == strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS:
			// In progress: recorded by an earlier attempt; drainDecom
			// plans again for any partition still listing the node.
			w.coverage.Inc("event/decom-moves")
			jp.movesSent++
			if !w.work.healed && !w.probe.active && c.rng.IntN(3) == 0 {
				c.crashForMove(w.nodes[id-1], "fault/decom-crash-mid-moves")
			}
		default:
			// A move refused (its partition changed since the plan), or
			// clientlib gave up (an attempt may have recorded some): plan
			// again from fresher metadata, which shows what was recorded.
			w.coverage.Inc("event/decom-moves-refused")
		}
		c.after(joinPoll, c.drainDecom)
	})
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
		w.coverage.Add("check/decom-drained", int64(len(jp.drained)))
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
// voters; every joined node is registered, active and unfenced (a
// decommissioned one removed); every removed node is listed by no
// partition and, if live, hosts no partition; every partition a
// decommission moved is settled where the metadata puts it
// (unsettledDrain).
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
		case jp.isRemoved(id):
		case m.State != metadata.NodeActive || m.Fenced:
			return fmt.Sprintf("joined node %d is %v (fenced %v)", id, m.State, m.Fenced)
		}
	}
	for _, id := range jp.removed {
		if m := state[id]; m.State != metadata.NodeRemoved {
			return fmt.Sprintf("decommissioned node %d is %v", id, m.State)
		}
		for _, t := range topics {
			for p, reps := range t.Replicas {
				if slices.Contains(reps, id) {
					return fmt.Sprintf("removed node %d still a replica of %s/%d", id, t.Name, p)
				}
			}
		}
		if n := w.nodes[id-1]; n.up && !jp.forced {
			for _, st := range n.core.Status() {
				if st.TopicPartition != metaTopicPartition {
					return fmt.Sprintf("removed node %d still hosts %s/%d", id, st.Topic, st.Partition)
				}
			}
		}
	}
	if why := ww.unsettledDrain(topics); why != "" {
		return why
	}
	return ww.unsettledConf(nodes)
}

// unsettledDrain says which partition a decommission moved is not settled
// where the newest metadata (topics) puts it ("" when none): on every live
// node not removed, no move in progress, its hosts and its raft voters
// exactly its replicas (movedOn), none of them decommissioned. A partition
// whose replicas or target hold a node gone for good is skipped (stranded,
// as awaitMoves skips it), so is one whose topic was deleted.
func (ww *wireWorkload) unsettledDrain(topics []metadata.Topic) string {
	w, jp := ww.w, ww.joins
	gone := func(ids []uint64) bool {
		return slices.ContainsFunc(ids, func(id uint64) bool { return id >= 1 && int(id) <= len(w.nodes) && w.nodes[id-1].dead })
	}
	for _, tp := range jp.drained {
		i := slices.IndexFunc(topics, func(t metadata.Topic) bool { return t.Name == tp.Topic })
		if i < 0 || int(tp.Partition) >= len(topics[i].Replicas) {
			continue
		}
		t, p := topics[i], int(tp.Partition)
		reps := t.Replicas[p]
		if gone(reps) || p < len(t.Targets) && gone(t.Targets[p]) {
			continue
		}
		if k := slices.IndexFunc(reps, func(id uint64) bool { return jp.isRemoved(id) || slices.Contains(jp.draining, id) }); k >= 0 {
			return fmt.Sprintf("%s/%d drained, still lists decommissioned node %d", tp.Topic, tp.Partition, reps[k])
		}
		for _, n := range w.nodes {
			if !n.up || jp.isRemoved(uint64(n.id)) {
				continue // a removed node's metadata stays where it left
			}
			if why := movedOn(n, tp, reps); why != "" {
				return fmt.Sprintf("%s/%d drained to %v: node %d: %s", tp.Topic, tp.Partition, reps, n.id, why)
			}
		}
	}
	return ""
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
		if !n.up || ww.joins.isRemoved(uint64(n.id)) {
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
	k := slices.Index(jp.removed, id)
	if k < 0 || w.nodes[id-1].up {
		return false
	}
	return w.now() < jp.removedAt[k]+node.RemovalGraceElections*w.electionTimeout()+w.opts.LivenessBound
}

// owns reports whether c is the joins' administrator client (it sends as
// the operator when authorization is on: operator.go caller).
func (jp *joinPlan) owns(c *wireClient) bool { return jp != nil && c == jp.client }
