package simnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
)

// Partition moves during a run (Options.Moves).
//
// A third admin client moves partitions of the main topic while the
// clients work: movesPerRun times, once a drawn share of the operations
// was issued, it picks a partition, keeps all but one or two of the
// replicas its metadata lists and adds nodes outside them, and sends
// MovePartitions through clientlib's call (libMove), retries and all. Each recorded
// move draws a targeted fault: a crash of the partition's leader at once
// (mid-change), of its leader once a node shows the joint configuration,
// or of a node the move adds. The history checks then prove that no
// acknowledged record was lost across the moves; after a liveness heal
// every move must have finished (checkMoves): the metadata holds the
// target with no move in progress, the replicas hosted are exactly the
// metadata's, and the leader's raft voters are the same set.
//
// Needs more nodes than the replication factor (TestSimMoves runs 5, so a
// move may replace two replicas).
// Off in Standard: the moves change every seed's trace and node count,
// and seed-bound tests rest on single seeds (see wire_partitions.go).

// The moves' draws, from the mover's own stream.
const (
	movesPerRun     = 3
	moveFracMin     = 10
	moveFracMax     = 60
	moveCancelOneIn = 4 // a recorded move is cancelled (redirected back) once in this many
	moveWatchEvery  = 5 * time.Millisecond
	moveWatchChecks = 400 // bounds the joint-configuration watch (2 s)
	// moveBalanceEvery and moveBalanceChecks pace and bound the wait for a
	// move to settle before the leaders are balanced (10 s).
	moveBalanceEvery  = 50 * time.Millisecond
	moveBalanceChecks = 200
	moveBalanceTries  = 3
	// offsetsMoveOneIn: with the group workload, a move picks the group's
	// __strand_offsets partition once in this many.
	offsetsMoveOneIn = 2
)

// movePlan is the run's partition moves.
type movePlan struct {
	client *wireClient
	ats    []int     // operations issued before each move
	moves  []simMove // recorded moves, in order
	// current is the move being asked.
	current simMove
	// settled: the end-of-run check ran (awaitMoves), from settleStart.
	settled     bool
	settleStart time.Duration
	// maybe are moves clientlib gave up on after an attempt that may
	// have recorded them (checked only if the metadata shows them).
	maybe []simMove
	// canceller sends the cancels, one at a time (cancelling: the index in
	// moves of the move it cancels, -1: none).
	canceller  *wireClient
	cancelling int
	// lib and cancelLib are the mover's and the canceller's clientlib
	// Clients: every MovePartitions goes through clientlib's call, as
	// strand partition move (--cancel) sends it (libMove).
	lib, cancelLib *clientlib.Client
}

// startCancel cancels moves[i] after d, unless a cancel is under way.
func (mp *movePlan) startCancel(i int, d time.Duration) {
	if mp.cancelling >= 0 {
		return
	}
	mp.cancelling = i
	c := mp.canceller
	c.ww.active++ // the run waits for the cancel's answer
	c.after(d, func() {
		mv := mp.moves[mp.cancelling]
		c.ww.libMove(mp.cancelLib, mv.group, mv.from, true, c.onCancel)
	})
}

// libMove runs clientlib's MovePartitions of group g's partition to
// replicas (redirect: a move in progress pointed there instead, a cancel
// when replicas are where it started) as a task of cl, with clientlib's
// retries, then done with the move's outcome as clientlib reports it:
// nil (recorded), an error that may have written (an answer lost, at
// some attempt: clientlib.MaybeWritten or a code that may have written),
// or a definite refusal.
func (ww *wireWorkload) libMove(cl *clientlib.Client, g int, replicas []uint64, redirect bool, done func(error)) {
	tp := ww.moveTP(g)
	var err error
	ww.w.simRun(cl, func(ctx context.Context) {
		var rs []clientlib.PartitionMoveResult
		rs, err = cl.MovePartitions(ctx, []clientlib.PartitionMove{{Topic: tp.Topic, Partition: tp.Partition, Replicas: replicas,
			Redirect: redirect}})
		switch {
		case err != nil:
		case len(rs) != 1:
			err = fmt.Errorf("move partitions answered %d moves", len(rs))
		default:
			err = rs[0].Err
		}
	}, func() { done(err) })
}

// maybeApplied reports whether a clientlib call's error leaves its change
// possibly made: an answer lost at some attempt, or a code that may have
// written, or retries given up on a leader or controller change.
func maybeApplied(err error) bool {
	a := clientlib.ClassifyErr(err)
	return err != nil && (a.MaybeWritten || a.RefreshMetadata || clientlib.MaybeWritten(err))
}

// definiteRefusal reports whether err is the cluster's definite refusal
// of a clientlib call: a *clientlib.Error of a code that is not
// retriable, after no attempt that may have applied the call. (Retries
// given up, an unreachable cluster: no refusal; nor an authentication a
// node refused because its metadata lacks the user yet: the request never
// reached it, and the call is run again, as an operator reruns it.)
func definiteRefusal(err error) bool {
	var e *clientlib.Error
	return errors.As(err, &e) && !clientlib.Classify(e.Code).Retriable && !maybeApplied(err) &&
		e.Code != strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED
}

// onCancel handles the cancel's outcome: done, refused (a finding), or
// given up by clientlib (maybe applied).
func (c *wireClient) onCancel(err error) {
	w, mp := c.ww.w, c.ww.moves
	mv := &mp.moves[mp.cancelling]
	switch {
	case err == nil:
		mv.cancel = cancelDone
		w.coverage.Inc("event/partition-move-cancelled")
	case c.ww.membershipRefusal(err):
		// The decommission fenced a node the cancel moves back to, or
		// moved the partition itself: the move stands, unless an earlier
		// attempt applied the cancel.
		w.coverage.Inc("event/partition-move-refused-membership")
		mv.cancel = cancelNone
		if maybeApplied(err) {
			mv.cancel = cancelMaybe
		}
	case definiteRefusal(err):
		w.fail("cancel of the move of %s to %v refused: %v", w.incarnations.label(mv.group), mv.target, err)
		mv.cancel = cancelMaybe
	default:
		mv.cancel = cancelNone
		if maybeApplied(err) {
			mv.cancel = cancelMaybe
		}
	}
	mp.cancelling = -1
	c.ww.clientDone()
}

// simMove is one move the mover asked for.
type simMove struct {
	group  int
	target []uint64
	// from is the replicas when the move was drawn; cancel says whether a
	// cancel (a redirect back to from) was applied (cancelDone) or may
	// have been (cancelMaybe): the move must end at from, or at either.
	from   []uint64
	cancel uint8
}

// States of simMove.cancel.
const (
	cancelNone uint8 = iota
	cancelDone
	cancelMaybe
)

// newMovePlan draws the run's moves, or nil without Options.Moves.
func newMovePlan(ww *wireWorkload) *movePlan {
	o := ww.w.opts
	if !o.Moves || len(ww.w.nodes) <= o.Replication {
		return nil
	}
	c := newWireClient(ww, 0, 0)
	c.rng = newStream(o.Seed, streamWorkload+0xad02)
	at := make([]int, movesPerRun)
	for i := range at {
		at[i] = o.Ops * (moveFracMin + c.rng.IntN(moveFracMax-moveFracMin+1)) / 100
	}
	slices.Sort(at)
	cc := newWireClient(ww, 0, 0)
	cc.rng = newStream(o.Seed, streamWorkload+0xad03)
	return &movePlan{client: c, ats: at, canceller: cc, cancelling: -1}
}

// startMoves starts the mover once the topics exist.
func (ww *wireWorkload) startMoves() {
	if ww.moves == nil {
		return
	}
	ww.active++
	mp := ww.moves
	c := mp.client
	mp.lib, mp.cancelLib = ww.adminLib(c), ww.adminLib(mp.canceller)
	c.refresh()
	c.after(0, c.awaitMove)
}

// awaitMove waits for the next move's share of the budget, then asks it.
func (c *wireClient) awaitMove() {
	w, mp := c.ww.w, c.ww.moves
	if len(mp.ats) == 0 || w.work.overtime || w.work.issued >= w.opts.Ops && len(mp.moves) > 0 {
		// Done, or the clients issued everything: a move drawn now would
		// only keep the run going (its workload is over). Past the time
		// limit (overtime.go) not even a first move is asked.
		c.finished = true
		c.ww.clientDone()
		return
	}
	if w.work.issued < mp.ats[0] && !w.work.spent() {
		c.after(20*time.Millisecond, c.awaitMove)
		return
	}
	mv, ok := c.drawMove()
	if !ok {
		c.refresh()
		c.after(20*time.Millisecond, c.awaitMove)
		return
	}
	mp.current = mv
	c.ww.libMove(mp.lib, mv.group, mv.target, false, c.onMove)
}

// drawMove picks a partition of the main topic not moved yet in this run
// and a target: its replicas as the client's metadata lists them, one or
// two replaced by other nodes, in a drawn order. With the group workload
// one move in offsetsMoveOneIn picks the group's __strand_offsets
// partition instead: its coordinator moves while members rebalance.
func (c *wireClient) drawMove() (simMove, bool) {
	main := c.ww.topics[0]
	p, g := 0, 0
	var current []uint64
	moving := false
	if c.ww.libGroup != nil && c.rng.IntN(offsetsMoveOneIn) == 0 {
		// The internal topic, as the operator's admin view shows it (the
		// clients' metadata cache holds the scenario's topics only).
		p = int(node.GroupPartition(groupID, int32(groupOffsetsPartitions(c.ww.w.opts))))
		g = c.ww.w.opts.Partitions + 1 + p
		if t, ok := c.ww.w.newestTopic(node.OffsetsTopic); ok && p < len(t.Replicas) {
			current, moving = t.Replicas[p], p < len(t.Targets) && t.Targets[p] != nil
		}
	} else {
		p = c.rng.IntN(main.partitions)
		g = main.first + p
		if info := c.cache.Topic(main.name); info != nil && p < len(info.Partitions) {
			current, moving = info.Partitions[p].Replicas, info.Partitions[p].TargetReplicas != nil
		}
	}
	if len(current) == 0 || moving || slices.ContainsFunc(c.ww.moves.moves, func(m simMove) bool { return m.group == g }) ||
		slices.ContainsFunc(c.ww.moves.maybe, func(m simMove) bool { return m.group == g }) {
		return simMove{}, false
	}
	var outside []uint64
	registered := c.ww.w.eligibleNodes()
	for _, n := range c.ww.w.nodes {
		if !slices.Contains(current, uint64(n.id)) && slices.Contains(registered, uint64(n.id)) {
			outside = append(outside, uint64(n.id))
		}
	}
	if len(outside) == 0 {
		return simMove{}, false
	}
	replace := 1 + c.rng.IntN(min(2, len(outside), len(current)))
	target := slices.Clone(current)
	c.rng.Shuffle(len(outside), func(i, j int) { outside[i], outside[j] = outside[j], outside[i] })
	if l := c.ww.w.leaderOf(g); g > c.ww.w.opts.Partitions && l >= 0 && slices.Contains(current, uint64(c.ww.w.nodes[l].id)) {
		// The coordinator's partition moves off the coordinator, as a
		// drained node's would: members must follow it mid-rebalance. As
		// in a decommission's plan of a balanced cluster
		// (metadata.PlanDecommission: the added node takes the drained
		// one's place, and a leader is its partition's preferred
		// replica), the added node becomes the preferred replica: once
		// the leaders are balanced (balanceAfterMove) the coordinator
		// runs on a replica new to the partition.
		drained := slices.Index(current, uint64(c.ww.w.nodes[l].id))
		target[drained] = outside[0]
		if replace == 2 {
			other := (drained + 1 + c.rng.IntN(len(target)-1)) % len(target)
			target[other] = outside[1]
		}
		target[0], target[drained] = target[drained], target[0]
		return simMove{group: g, target: target, from: slices.Clone(current)}, true
	}
	c.rng.Shuffle(len(target), func(i, j int) { target[i], target[j] = target[j], target[i] })
	copy(target[len(target)-replace:], outside[:replace])
	c.rng.Shuffle(len(target), func(i, j int) { target[i], target[j] = target[j], target[i] })
	return simMove{group: g, target: target, from: slices.Clone(current)}, true
}

// moveTP is the partition of group g: one of the scenario's topics, or
// a __strand_offsets partition (groups Partitions+1 on, as the checks
// number them).
func (ww *wireWorkload) moveTP(g int) node.TopicPartition {
	if g < len(ww.tps) {
		return ww.tps[g]
	}
	return node.TopicPartition{Topic: node.OffsetsTopic, Partition: int32(g - ww.w.opts.Partitions - 1)}
}

// onMove handles the outcome of the current move's MovePartitions.
// REASSIGNMENT_IN_PROGRESS is success only after an attempt that may
// have recorded the move (the mover never moves a partition twice).
func (c *wireClient) onMove(err error) {
	w, mp := c.ww.w, c.ww.moves
	inProgress := errCode(err) == strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS
	switch {
	case err == nil:
	case inProgress && maybeApplied(err):
	case c.ww.membershipRefusal(err) && !maybeApplied(err):
		// A joiner not unfenced yet, a node fenced by a decommission, or
		// the decommission's own move of the partition: the operator
		// picks again (not a finding).
		w.coverage.Inc("event/partition-move-refused-membership")
		mp.ats = mp.ats[1:]
		c.refresh()
		c.after(0, c.awaitMove)
		return
	case definiteRefusal(err):
		w.fail("move of %s to %v refused: %v", w.incarnations.label(mp.current.group), mp.current.target, err)
		mp.ats = mp.ats[1:]
		c.after(0, c.awaitMove)
		return
	default:
		// Given up (clientlib's retries spent, the cluster unreachable),
		// as a producer gives up an operation: an attempt may still
		// have recorded it.
		if maybeApplied(err) {
			mp.maybe = append(mp.maybe, mp.current)
		}
		w.coverage.Inc("event/partition-move-abandoned")
		mp.ats = mp.ats[1:]
		c.after(0, c.awaitMove)
		return
	}
	w.coverage.Inc("event/partition-move")
	if mp.current.group > w.opts.Partitions {
		w.coverage.Inc("event/partition-move-offsets") // the group coordinator's partition
	}
	mp.moves = append(mp.moves, mp.current)
	mp.ats = mp.ats[1:]
	if c.rng.IntN(moveCancelOneIn) == 0 {
		mp.startCancel(len(mp.moves)-1, time.Duration(c.rng.Int64N(int64(200*time.Millisecond))))
	}
	c.moveFault(mp.current)
	c.balanceAfterMove(mp.current, 0, 0)
	c.refresh()
	c.after(0, c.awaitMove)
}

// balanceAfterMove waits (bounded) until the newest metadata shows mv's
// partition settled, then balances the leaders as an operator does after a
// reassignment (`strand cluster leaders --balance`, run again while the
// preferred replica lagged; Kafka's controller does it on its own,
// auto.leader.rebalance.enable): every live node is asked to hand each
// partition it leads to its preferred replica, the first of its replicas,
// up to moveBalanceTries times a second apart until the moved partition's
// preferred replica leads it. A move's preferred replica is often a node
// the move added: a leader, and a group coordinator, then start on a
// replica new to the partition while clients and group members work. None
// after a liveness heal or during the probe.
func (c *wireClient) balanceAfterMove(mv simMove, checks, tries int) {
	w := c.ww.w
	if checks >= moveBalanceChecks || tries >= moveBalanceTries || w.work.healed || w.probe.active {
		return
	}
	tp := c.ww.moveTP(mv.group)
	t, ok := w.newestTopic(tp.Topic)
	p := int(tp.Partition)
	if !ok || p >= len(t.Replicas) || p < len(t.Targets) && t.Targets[p] != nil ||
		!sameIDSet(t.Replicas[p], mv.target) && !sameIDSet(t.Replicas[p], mv.from) {
		c.after(moveBalanceEvery, func() { c.balanceAfterMove(mv, checks+1, tries) })
		return
	}
	if l := w.leaderOf(mv.group); l >= 0 && uint64(w.nodes[l].id) == t.Replicas[p][0] {
		return // balanced
	}
	w.coverage.Inc("event/leaders-balanced")
	for _, n := range w.nodes {
		if n.up {
			req := &strandpb.Request{Body: &strandpb.Request_ElectLeaders{ElectLeaders: &strandpb.ElectLeadersRequest{}}}
			c.ww.call(c, n.index, req, func(*strandpb.Response, error) {})
		}
	}
	c.after(time.Second, func() { c.balanceAfterMove(mv, checks+1, tries+1) })
}

// moveFault draws the targeted fault of a recorded move (none after a
// liveness heal, none while the probe runs, and none while a disk stall
// runs).
func (c *wireClient) moveFault(mv simMove) {
	w := c.ww.w
	if w.work.healed || w.probe.active {
		return
	}
	draw := c.rng.IntN(4)
	if w.planner.stallActive() {
		return // no fault begins during a disk stall (diskstall.go)
	}
	if mv.group > w.opts.Partitions && draw < 2 {
		// Not the coordinator's node: its crash would turn the hand-off
		// into a plain failover, which the group runs test already.
		draw = 2
	}
	switch draw {
	case 0:
		if i := w.leaderOf(mv.group); i >= 0 {
			c.crashForMove(w.nodes[i], "fault/move-crash-leader")
		}
	case 1:
		c.watchJoint(mv, 0)
	case 2:
		for _, id := range mv.target {
			if n := w.nodes[id-1]; !slices.Contains(c.currentReplicas(mv.group), id) && n.up {
				c.crashForMove(n, "fault/move-crash-added")
				break
			}
		}
	}
}

// watchJoint crashes the group's leader once a live node shows it in a
// joint configuration (bounded: the move may finish in between).
func (c *wireClient) watchJoint(mv simMove, checks int) {
	w := c.ww.w
	if checks >= moveWatchChecks || w.work.healed || w.probe.active {
		return
	}
	i := w.leaderOf(mv.group)
	if i >= 0 {
		if pc, ok := w.nodes[i].core.(interface {
			PartitionConfig(node.TopicPartition) (node.ReplicaConfig, bool)
		}); ok {
			if cfg, ok := pc.PartitionConfig(c.ww.moveTP(mv.group)); ok && len(cfg.VotersOutgoing) > 0 {
				c.crashForMove(w.nodes[i], "fault/move-crash-joint")
				return
			}
		}
	}
	c.after(moveWatchEvery, func() { c.watchJoint(mv, checks+1) })
}

// crashForMove crashes n (a power loss) and schedules its restart.
func (c *wireClient) crashForMove(n *simNode, name string) {
	w := c.ww.w
	if !n.up {
		return
	}
	w.coverage.Inc(name)
	w.stats.Crashes++
	w.crashNode(n, name)
	w.scheduleRestart(n)
}

// currentReplicas is group g's replica list as the newest metadata state
// among the live nodes records it.
func (c *wireClient) currentReplicas(g int) []uint64 {
	tp := c.ww.moveTP(g)
	t, _ := c.ww.w.newestTopic(tp.Topic)
	p := int(tp.Partition)
	if p < len(t.Replicas) {
		return t.Replicas[p]
	}
	return nil
}

// replicaConfig is node n's applied raft configuration of partition g,
// false for the metadata group or when n hosts no replica of it.
func (w *world) replicaConfig(n *simNode, g int) (node.ReplicaConfig, bool) {
	if g >= w.opts.Partitions || g >= len(w.wire.tps) {
		return node.ReplicaConfig{}, false
	}
	pc, ok := n.core.(interface {
		PartitionConfig(node.TopicPartition) (node.ReplicaConfig, bool)
	})
	if !ok {
		return node.ReplicaConfig{}, false
	}
	return pc.PartitionConfig(w.wire.tps[g])
}

// votesIn reports whether live node n's replica of partition group g is a
// voter of its own applied raft configuration (true for the metadata
// group and when it cannot tell).
func (w *world) votesIn(n *simNode, g int) bool {
	if g == w.opts.Partitions {
		return w.metaVoter(n) // wire_joins.go
	}
	cfg, ok := w.replicaConfig(n, g)
	return !ok || slices.Contains(cfg.Voters, n.id) || slices.Contains(cfg.VotersOutgoing, n.id)
}

// registeredNodes lists the nodes the newest metadata state among the live
// nodes registered: an operator moves replicas only to nodes that joined
// (a move to another is refused: INVALID_REPLICA_ASSIGNMENT).
func (w *world) registeredNodes() []uint64 {
	var ids []uint64
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
		nodes, _ := mc.MetadataNodes()
		ids, bestIndex = ids[:0], st.AppliedIndex
		for _, m := range nodes {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// eligibleNodes lists the nodes a move may add as the newest metadata
// state among the live nodes records them: active and unfenced (a joiner
// is fenced until it caught up, a decommissioned node for good; a move to
// either is refused). Every registered node without Options.Joins.
func (w *world) eligibleNodes() []uint64 {
	if w.wire.joins == nil {
		return w.registeredNodes()
	}
	nodes, _ := w.newestMetadata()
	var ids []uint64
	for _, m := range nodes {
		if m.State == metadata.NodeActive && !m.Fenced {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// membershipRefusal reports whether err refused a move only because the
// membership changed under the mover (Options.Joins): a node of the
// target fenced (a joiner still catching up, the decommissioned node) or
// the partition already moving (the
// decommission's move). Without joins neither can happen.
func (ww *wireWorkload) membershipRefusal(err error) bool {
	if ww.joins == nil {
		return false
	}
	switch errCode(err) {
	case strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT:
		return strings.Contains(err.Error(), "is fenced") // metadata.State.validateTarget
	case strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS:
		return len(ww.joins.decoms) > 0
	}
	return false
}

// newestTopic is topic name in the metadata state of the live node that
// applied the most of the metadata log.
func (w *world) newestTopic(name string) (metadata.Topic, bool) {
	var best metadata.Topic
	var bestIndex uint64
	found := false
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
		_, topics := mc.MetadataNodes()
		for _, t := range topics {
			if t.Name == name {
				best, bestIndex, found = t, st.AppliedIndex, true
			}
		}
	}
	return best, found
}

// awaitMoves holds the end of the run (the drain's last step, after the
// final heal) until every recorded move finished on every live node, and
// fails the seed when one has not within LivenessBound: every move
// finishes once faults stop, the nodes hosting a moved partition are
// exactly its replicas and its raft voters are the same set. It reports
// whether it took over; it then calls cont once done.
func (ww *wireWorkload) awaitMoves(cont func()) bool {
	mp := ww.moves
	if mp == nil || mp.settled || len(mp.moves)+len(mp.maybe) == 0 {
		return false
	}
	w := ww.w
	if mp.settleStart == 0 {
		mp.settleStart = w.now()
		mp.moves = append(mp.moves, ww.recordedMaybe()...)
		ww.rollBackStranded(0)
	}
	why := ww.unfinishedMove()
	switch {
	case why == "":
		mp.settled = true
		for _, mv := range mp.moves {
			if ww.stranded(mv) {
				w.coverage.Inc("event/move-stranded")
			} else {
				w.coverage.Inc("check/move-finished")
			}
		}
		cont()
	case w.now() > mp.settleStart+w.opts.LivenessBound:
		mp.settled = true
		w.fail("liveness: %s %v after the final heal", why, w.opts.LivenessBound)
		cont()
	default:
		mp.client.after(50*time.Millisecond, func() { ww.awaitMoves(cont) })
	}
	return true
}

// rollBackStranded cancels, one after the other from moves[i], every move
// whose target holds a node gone for good, once faults stopped: an operator
// moves the partition back where it was (a redirect to the replicas it
// started from), and awaitMoves then expects it there — the move "rolls
// back". Not counted among the active clients: the drain is already under
// way.
func (ww *wireWorkload) rollBackStranded(i int) {
	mp := ww.moves
	for ; i < len(mp.moves); i++ {
		mv := mp.moves[i]
		if mv.cancel == cancelNone && ww.stranded(mv) && ww.viable(mv.from, mv.target) {
			break
		}
	}
	if i >= len(mp.moves) {
		return
	}
	ww.libMove(mp.cancelLib, mp.moves[i].group, mp.moves[i].from, true, func(err error) {
		mv := &mp.moves[i]
		switch {
		case err == nil:
			mv.cancel = cancelDone
			ww.w.coverage.Inc("event/partition-move-rolled-back")
		case ww.membershipRefusal(err):
			ww.w.coverage.Inc("event/partition-move-refused-membership") // as onCancel
			if maybeApplied(err) {
				mv.cancel = cancelMaybe // an earlier attempt may have applied it
			}
		case !definiteRefusal(err) && !maybeApplied(err) && mp.canceller.attempts < createRunsMax:
			mp.canceller.attempts++ // given up, nothing applied: run again
			mp.canceller.after(wireBackoff.Delay(mp.canceller.attempts, mp.canceller.rng), func() { ww.rollBackStranded(i) })
			return
		default:
			ww.w.fail("roll back of the move of %s to %v: %v", ww.w.incarnations.label(mv.group), mv.target, err)
		}
		mp.canceller.attempts = 0
		ww.rollBackStranded(i + 1)
	})
}

// viable reports whether a move can reach set from other: every node it
// adds (in set, not in other) is alive, so it can catch up as a learner,
// and a majority of set is alive.
func (ww *wireWorkload) viable(set, other []uint64) bool {
	dead := 0
	for _, id := range set {
		if ww.w.nodes[id-1].dead {
			dead++
			if !slices.Contains(other, id) {
				return false
			}
		}
	}
	return dead < len(set)/2+1
}

// recordedMaybe is the given-up moves the newest metadata shows recorded
// (in progress to their target, or done).
func (ww *wireWorkload) recordedMaybe() []simMove {
	var out []simMove
	for _, mv := range ww.moves.maybe {
		t, ok := ww.w.newestTopic(ww.moveTP(mv.group).Topic)
		p := int(ww.moveTP(mv.group).Partition)
		if ok && p < len(t.Replicas) && (sameIDSet(t.Targets[p], mv.target) || sameIDSet(t.Replicas[p], mv.target)) {
			out = append(out, mv)
		}
	}
	return out
}

// final is where a move must end: back at from once cancelled.
func (mv simMove) final() []uint64 {
	if mv.cancel != cancelNone {
		return mv.from
	}
	return mv.target
}

// stranded reports whether a move cannot reach where it must end: a node
// it adds is gone for good (damaged media without rejoin: it never catches
// up), or so is a majority of the set. rollBackStranded cancels such moves
// once faults stopped; a cancel that cannot finish either stays stranded.
func (ww *wireWorkload) stranded(mv simMove) bool {
	if mv.cancel != cancelNone {
		return !ww.viable(mv.from, mv.target)
	}
	return !ww.viable(mv.target, mv.from)
}

// unfinishedMove says which recorded move some live node does not show
// finished ("" when none).
func (ww *wireWorkload) unfinishedMove() string {
	w := ww.w
	for _, mv := range ww.moves.moves {
		if ww.stranded(mv) {
			continue
		}
		tp := ww.moveTP(mv.group)
		for _, n := range w.nodes {
			if !n.up || ww.removedNode(n) {
				continue // a removed node's metadata stays where it left
			}
			if ww.decomMoved(mv) {
				// The decommission moved it on from where the move ended:
				// it must be settled where the metadata puts it.
				if why := movedOn(n, tp, replicasOn(n, tp)); why != "" {
					return fmt.Sprintf("move of %s to %v, then the decommission's: node %d: %s",
						w.incarnations.label(mv.group), mv.target, n.id, why)
				}
				continue
			}
			why := movedOn(n, tp, mv.final())
			if why != "" && mv.cancel == cancelMaybe {
				why = movedOn(n, tp, mv.target) // the cancel may not have applied
			}
			if why != "" {
				return fmt.Sprintf("move of %s to %v (cancel %d, from %v): node %d: %s", w.incarnations.label(mv.group),
					mv.target, mv.cancel, mv.from, n.id, why)
			}
		}
	}
	return ""
}

// decomMoved reports whether the run's decommissions may have moved mv's
// partition on: a node drawn for decommission is in a set the move may
// end at, or a drain's MovePartitions named the partition. A drain retries
// its request as planned (a TIMEOUT is no refusal: the first attempt may
// have applied), so an entry planned before the operator's move finished
// may apply after it and move the partition on to the drain's set, which
// no longer names the drained node (seed 21 of the standard sample).
func (ww *wireWorkload) decomMoved(mv simMove) bool {
	jp := ww.joins
	if jp == nil {
		return false
	}
	return slices.ContainsFunc(mv.target, jp.isDecom) || slices.ContainsFunc(mv.from, jp.isDecom) ||
		slices.Contains(jp.drained, ww.moveTP(mv.group))
}

// removedNode reports whether the run's decommissions removed n from the
// cluster (its REMOVE answered).
func (ww *wireWorkload) removedNode(n *simNode) bool {
	return ww.joins != nil && ww.joins.isRemoved(uint64(n.id))
}

// replicasOn is tp's replica set in live node n's applied metadata (nil:
// unknown).
func replicasOn(n *simNode, tp node.TopicPartition) []uint64 {
	mc, ok := n.core.(interface {
		MetadataNodes() ([]metadata.Node, []metadata.Topic)
	})
	if !ok {
		return nil
	}
	_, topics := mc.MetadataNodes()
	for _, t := range topics {
		if t.Name == tp.Topic && int(tp.Partition) < len(t.Replicas) {
			return t.Replicas[tp.Partition]
		}
	}
	return nil
}

// movedOn says why node n does not show tp moved to target ("" if it does).
func movedOn(n *simNode, tp node.TopicPartition, target []uint64) string {
	mc, ok := n.core.(interface {
		MetadataNodes() ([]metadata.Node, []metadata.Topic)
		PartitionConfig(node.TopicPartition) (node.ReplicaConfig, bool)
	})
	if !ok {
		return ""
	}
	_, topics := mc.MetadataNodes()
	i := slices.IndexFunc(topics, func(t metadata.Topic) bool { return t.Name == tp.Topic })
	if i < 0 {
		return "topic unknown"
	}
	t, p := topics[i], int(tp.Partition)
	if t.Targets[p] != nil || !sameIDSet(t.Replicas[p], target) {
		return fmt.Sprintf("metadata has replicas %v, target %v", t.Replicas[p], t.Targets[p])
	}
	cfg, hosts := mc.PartitionConfig(tp)
	if hosts != slices.Contains(target, uint64(n.id)) {
		return fmt.Sprintf("hosts the partition: %v", hosts)
	}
	if hosts {
		var voters []uint64
		for _, v := range cfg.Voters {
			voters = append(voters, uint64(v))
		}
		if !sameIDSet(voters, target) || len(cfg.Learners) > 0 || len(cfg.VotersOutgoing) > 0 {
			return fmt.Sprintf("raft configuration %+v", cfg)
		}
	}
	return ""
}

// sameIDSet reports whether a and b hold the same distinct ids.
func sameIDSet(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}

// owns reports whether c is one of the mover's clients (they send as the
// operator when authorization is on: operator.go caller).
func (mp *movePlan) owns(c *wireClient) bool {
	return mp != nil && (c == mp.client || c == mp.canceller)
}
