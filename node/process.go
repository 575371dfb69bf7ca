package node

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/frame"
)

// processRoundsMax bounds the Ready rounds of one Process call: a round's
// Advance can make more work ready (self-acks on the leader, reads), but a
// call never spins.
const processRoundsMax = 64

// groupReady is one group's Ready taken in the current round, and its
// MsgStorageApply (nil when nothing committed).
type groupReady struct {
	g     *group
	rd    raft.Ready
	apply *raftpb.Message
}

// outFrame collects the raft messages for one destination node, sized as
// they come and encoded into one exact-size buffer by sendFrames (frame.go).
type outFrame struct {
	to       NodeID
	messages []raftFrameMessage
}

// Process runs Ready cycles until no group has work or processRoundsMax
// rounds ran. Each round takes every ready group's Ready in order, then:
// sends the messages that depend on nothing unsynced, one frame per
// destination node; applies committed entries and completes requests;
// writes each group's appends and starts the syncs raft requires (see
// pipeline.go), which the host runs (TakeSyncJobs, SyncDone); sends what
// depends on nothing unsynced. An error is fatal (a write or sync failed): the caller
// must fail-stop the node, since raft state in memory is now ahead of the
// disk.
func (c *Core) Process() error {
	if c.closed {
		return ErrStopped
	}
	if c.fatal != nil {
		return c.fatal
	}
	defer c.flush()
	c.startAuthConfirm() // auth.go: the requests parked since the last call
	c.serveDeferredReads()
	for round := 0; round < processRoundsMax; round++ {
		n, err := c.processRound()
		if err != nil {
			return err
		}
		if c.fatal != nil {
			return c.fatal
		}
		if n == 0 {
			c.checkNoneReady()
			return nil
		}
	}
	return nil
}

// processRound runs one Ready cycle over every ready group; it returns how
// many groups had a Ready or wrote.
func (c *Core) processRound() (int, error) {
	c.readies = c.readies[:0]
	for _, g := range c.readyCandidates() {
		if !g.raw.HasReady() {
			continue
		}
		c.markReady(g) // Advance may leave more: poll it again next round
		gr := groupReady{g: g, rd: g.raw.Ready()}
		c.routeMessages(&gr)
		c.readies = append(c.readies, gr)
	}
	c.sendFrames()
	for i := range c.readies {
		if err := c.applyReady(&c.readies[i]); err != nil {
			return 0, err
		}
		c.groupStatusChanged(c.readies[i].g) // raft state, applied entries, snapshots (StatusSeq)
	}
	n := len(c.readies)
	clear(c.readies)
	wrote, err := c.writeAppends() // each written group's status moves (writeGroup)
	if err != nil {
		return 0, err
	}
	c.sendFrames()
	if c.meta != nil && c.meta.meta.Version() != c.metaVersion {
		if err := c.reconcile(); err != nil {
			return 0, err
		}
	}
	if err := c.sweepWhenReplayed(); err != nil {
		return 0, err
	}
	return n + wrote, nil
}

// queueMessage adds one of g's outgoing raft messages to the frame of its
// destination node.
func (c *Core) queueMessage(g *group, m *raftpb.Message) {
	to := NodeID(m.GetTo())
	if to == c.cfg.ID || !g.isReplica(to) {
		return
	}
	if !g.voteAllowed(m) {
		c.stats.VotesWithheld++ // recovering from a lost disk (rejoin.go)
		return
	}
	if !c.throttleAllows(g, m) { // catch-up over its rate (throttle.go)
		return
	}
	if m.GetType() == raftpb.MsgSnap {
		c.sentSnapshot(g, to)
		m = snapshotForLearner(g, m) // moves.go
	}
	f := c.frameTo(to)
	f.messages = append(f.messages, sizeRaftMessage(g.wire, g.tp.Partition, m))
	c.stats.MessagesSent++
}

// frameTo returns the frame being built for node to, adding one; the outbox
// stays sorted by node so frames go out in a fixed order.
func (c *Core) frameTo(to NodeID) *outFrame {
	i, found := slices.BinarySearchFunc(c.outbox, to, func(f outFrame, to NodeID) int {
		return cmp.Compare(f.to, to)
	})
	if !found {
		c.outbox = slices.Insert(c.outbox, i, outFrame{to: to})
	}
	return &c.outbox[i]
}

// sendFrames sends each destination node its messages, in order, in frames
// of at most frame.PeerFrameBytesTarget bytes (one message alone may pass
// it), and empties the outbox. One frame per node per round used to carry a
// catch-up of tens of MB, which the peer refused (over its read limit) and
// closed the connection on, again and again.
func (c *Core) sendFrames() {
	for i := range c.outbox {
		f := &c.outbox[i]
		msgs := f.messages
		for len(msgs) > 0 {
			n, size := 0, 0
			for n < len(msgs) && (n == 0 || size+msgs[n].frameBytes() <= frame.PeerFrameBytesTarget) {
				size += msgs[n].frameBytes()
				n++
			}
			if size > frame.BytesMaxDefault-raftFrameEnvelopeBytesMax {
				panic(fmt.Sprintf("node: raft message of %d bytes to node %d: over the peer frame limit %d",
					size, f.to, frame.BytesMaxDefault))
			}
			c.cfg.Network.Send(f.to, encodeRaftFrame(c.cfg.ID, msgs[:n]))
			c.stats.FramesSent++
			msgs = msgs[n:]
		}
	}
	clear(c.outbox)
	c.outbox = c.outbox[:0]
}

// raftFrameEnvelopeBytesMax bounds what wraps a raft frame's messages on
// the wire: the RaftFrame's sender field, the Request field holding the
// frame, and the length prefix.
const raftFrameEnvelopeBytesMax = 64

// applyReady applies committed entries, notes read states, fails
// waits orphaned by a leadership change, serves reads that became
// servable, and checkpoints the engine when due.
func (c *Core) applyReady(gr *groupReady) error {
	g, rd := gr.g, &gr.rd
	if gr.apply != nil {
		for _, e := range gr.apply.GetEntries() {
			c.applyEntry(g, e)
		}
		for _, m := range gr.apply.GetResponses() {
			c.stepLocal(g, m)
		}
	}
	for _, rs := range rd.ReadStates {
		c.noteReadState(g, rs)
	}
	if rd.SoftState != nil {
		c.logLeadership(g, rd.SoftState)
	}
	if rd.SoftState != nil || rd.HardState != nil {
		c.checkLeadership(g)
		c.queueLeaderReport(g)
	}
	c.serveReads(g)
	if len(g.parked) > 0 {
		c.wakeParked(g)
	}
	g.trimWaits()
	if c.checkpointDue(g) { // checkpoint_job.go
		return c.checkpointNow(g)
	}
	return nil
}

// applyEntry applies one committed entry to raft's configuration or to the
// group's state machine, which completes the wait for it.
func (c *Core) applyEntry(g *group, e *raftpb.Entry) {
	index := e.GetIndex()
	if index != g.appliedRaft+1 {
		panic(fmt.Sprintf("node: %s/%d: apply index %d after %d", g.tp.Topic, g.tp.Partition, index, g.appliedRaft))
	}
	engineIndex := g.bugEngineIndex(index)
	switch e.GetType() {
	case raftpb.EntryConfChange:
		var cc raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			panic(fmt.Sprintf("node: committed conf change %d: %v", index, err))
		}
		g.confState = g.raw.ApplyConfChange(&cc)
		c.noteConfApplied(g, index)
		g.sm.applyEmpty(engineIndex)
		g.sm.confApplied(c, &cc)
	case raftpb.EntryConfChangeV2:
		var cc raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			panic(fmt.Sprintf("node: committed conf change %d: %v", index, err))
		}
		g.confState = g.raw.ApplyConfChange(&cc)
		c.noteConfApplied(g, index)
		g.sm.applyEmpty(engineIndex)
		g.sm.confApplied(c, &cc)
	default:
		if len(e.GetData()) == 0 {
			g.sm.applyEmpty(engineIndex)
			break
		}
		g.sm.applyCommand(c, g, e, engineIndex)
	}
	g.appliedRaft = index
	g.tier.appliedTerm = e.GetTerm()
	if c.cfg.Observer != nil {
		c.cfg.Observer(g.tp, g.topicID, index, e.GetTerm(), e.GetData())
	}
}

// logLeadership logs a change of g's leader: at info when this replica
// takes or loses the lead, at debug when it only follows another leader.
func (c *Core) logLeadership(g *group, ss *raft.SoftState) {
	leading := ss.RaftState == raft.StateLeader
	term := g.raw.BasicStatus().GetTerm()
	switch {
	case leading && !g.loggedLeading:
		g.logs.log(slog.LevelInfo, "became leader", slog.Uint64("term", term))
	case !leading && g.loggedLeading:
		g.logs.log(slog.LevelInfo, "lost leadership", slog.Uint64("term", term), slog.Uint64("leader", ss.Lead))
	case !leading:
		g.logs.log(slog.LevelDebug, "leader changed", slog.Uint64("term", term), slog.Uint64("leader", ss.Lead))
	}
	g.loggedLeading = leading
}

// checkLeadership fails the waits that can no longer complete here: every
// produce and unindexed read when this replica stopped leading, and those
// of an older term when it leads in a new one. Their entries may still
// commit, so ErrNotLeader is indefinite for produces.
func (c *Core) checkLeadership(g *group) {
	if !g.sm.policy().leaderBoundWaits {
		return // the metadata group's waits and reads end by apply or timeout
	}
	lead, term, leading := g.leadership()
	if leading && term == g.leaderTerm {
		return
	}
	g.leaderTerm = 0
	if leading {
		g.leaderTerm = term
	}
	for _, w := range g.produces {
		if !w.finished && (!leading || w.term != term) {
			c.finishProduce(g, w, ProduceResult{Err: ErrLeadershipLost, BaseOffset: -1, Leader: lead})
		}
	}
	for _, r := range g.reads {
		if !r.finished && !r.indexKnown && (!leading || r.term != term) {
			c.failRead(g, r, ErrNotLeader, lead)
		}
	}
}

// readContext is the ReadIndex request context of read id: unique per
// node, so a ReadState finds its fetch.
func readContext(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }
