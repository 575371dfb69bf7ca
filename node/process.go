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

// groupReady is one group's Ready taken in the current round.
type groupReady struct {
	g      *group
	rd     raft.Ready
	wrote  bool           // anything written to the log
	acked  []*produceWait // acks=1 waits completed once synced
	synced bool
}

// outFrame collects the raft messages for one destination node, sized as
// they come and encoded into one exact-size buffer by sendFrames (frame.go).
type outFrame struct {
	to       NodeID
	messages []raftFrameMessage
}

// Process runs Ready cycles until no group has work or processRoundsMax
// rounds ran. Each round takes every ready group's Ready in order, then:
// persists all of them; syncs every log whose Ready must be durable; sends
// all messages, one frame per destination node; applies committed entries
// and completes requests; Advances. An error is fatal (a write or sync
// failed): the caller must fail-stop the node, since raft state in memory
// is now ahead of the disk.
func (c *Core) Process() error {
	if c.closed {
		return ErrStopped
	}
	if c.fatal != nil {
		return c.fatal
	}
	defer c.flush()
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
// many groups had a Ready.
func (c *Core) processRound() (int, error) {
	c.readies = c.readies[:0]
	for _, g := range c.readyCandidates() {
		if !g.raw.HasReady() {
			continue
		}
		c.markReady(g) // Advance may leave more: poll it again next round
		gr := groupReady{g: g, rd: g.raw.Ready()}
		if err := c.persist(&gr); err != nil {
			return 0, err
		}
		c.readies = append(c.readies, gr)
	}
	if err := c.syncRound(); err != nil {
		return 0, err
	}
	for i := range c.readies {
		gr := &c.readies[i]
		for _, w := range gr.acked {
			if !w.finished {
				c.finishProduce(gr.g, w, ProduceResult{BaseOffset: -1, Leader: c.cfg.ID})
			}
		}
		c.queueMessages(gr.g, gr.rd.Messages)
	}
	c.sendFrames()
	for i := range c.readies {
		if err := c.applyReady(&c.readies[i]); err != nil {
			return 0, err
		}
	}
	n := len(c.readies)
	clear(c.readies)
	if c.meta != nil && c.meta.meta.Version() != c.metaVersion {
		if err := c.reconcile(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// persist writes a Ready's snapshot, entries and hard state to the log,
// buffered (Sync follows), and indexes this node's proposals among them.
func (c *Core) persist(gr *groupReady) error {
	g, rd := gr.g, &gr.rd
	if !raft.IsEmptySnap(rd.Snapshot) {
		// Never sent: logs are not compacted and Receive drops MsgSnap.
		panic(fmt.Sprintf("node: %s/%d: raft snapshot in Ready; snapshots are not supported", g.tp.Topic, g.tp.Partition))
	}
	hs := rd.HardState
	if raft.IsEmptyHardState(hs) {
		hs = nil
	}
	if len(rd.Entries) > 0 {
		gr.acked = c.indexProposals(g, rd.Entries, gr.acked)
	}
	if len(rd.Entries) == 0 && hs == nil {
		return nil
	}
	// Entries then hard state, in one write when both are there.
	if err := g.log.Save(rd.Entries, hs); err != nil {
		g.logs.log(slog.LevelError, "raft log write failed; the node stops (fail-stop)", slog.Any("err", err))
		return fmt.Errorf("node: %s/%d: save: %w", g.tp.Topic, g.tp.Partition, err)
	}
	gr.wrote = true
	return nil
}

// syncRound makes the round's Readies durable where raft requires it (new
// entries, term or vote), through Config.SyncLogs: the logs are independent,
// so the runtime syncs them in parallel. A commit-index-only hard state is
// not synced: raft recovers the commit index from its peers.
func (c *Core) syncRound() error {
	if c.bugSkipFsync() {
		return nil
	}
	c.syncs = c.syncs[:0]
	for i := range c.readies {
		gr := &c.readies[i]
		if !gr.wrote || !gr.rd.MustSync {
			continue
		}
		g := gr.g
		c.syncs = append(c.syncs, func() error {
			if err := g.log.Sync(); err != nil {
				g.logs.log(slog.LevelError, "raft log sync failed; the node stops (fail-stop)", slog.Any("err", err))
				return fmt.Errorf("node: %s/%d: sync: %w", g.tp.Topic, g.tp.Partition, err)
			}
			return nil
		})
	}
	if len(c.syncs) == 0 {
		return nil
	}
	err := c.cfg.SyncLogs(c.syncs)
	clear(c.syncs)
	if err != nil {
		return err
	}
	for i := range c.readies {
		gr := &c.readies[i]
		if gr.wrote && gr.rd.MustSync {
			gr.synced = true
			c.stats.Syncs++
		}
	}
	return nil
}

// queueMessages adds a group's outgoing raft messages to the frames of
// their destination nodes.
func (c *Core) queueMessages(g *group, msgs []*raftpb.Message) {
	for _, m := range msgs {
		to := NodeID(m.GetTo())
		if to == c.cfg.ID || !g.isReplica(to) {
			continue
		}
		if m.GetType() == raftpb.MsgSnap {
			// No snapshot streaming: tell raft it failed so the follower
			// goes back to probing (unreachable with uncompacted logs).
			g.raw.ReportSnapshot(uint64(to), raft.SnapshotFailure)
			continue
		}
		f := c.frameTo(to)
		f.messages = append(f.messages, sizeRaftMessage(g.wire, g.tp.Partition, m))
		c.stats.MessagesSent++
	}
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

// applyReady applies committed entries, notes read states, Advances, fails
// waits orphaned by a leadership change, serves reads that became
// servable, and checkpoints the engine when due.
func (c *Core) applyReady(gr *groupReady) error {
	g, rd := gr.g, &gr.rd
	for _, e := range rd.CommittedEntries {
		c.applyEntry(g, e)
	}
	for _, rs := range rd.ReadStates {
		c.noteReadState(g, rs)
	}
	g.raw.Advance(*rd)
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
	if g.appliedRaft >= g.checkpointIndex+c.cfg.CheckpointEntries && !c.bugNoCheckpoint(g) {
		return c.writeCheckpoint(g)
	}
	return nil
}

// applyEntry applies one committed entry to raft's configuration or to the
// engine, and completes the acks=all produce waiting for it.
func (c *Core) applyEntry(g *group, e *raftpb.Entry) {
	index := e.GetIndex()
	if index != g.appliedRaft+1 {
		panic(fmt.Sprintf("node: %s/%d: apply index %d after %d", g.tp.Topic, g.tp.Partition, index, g.appliedRaft))
	}
	engineIndex := g.engineIndex(index)
	switch e.GetType() {
	case raftpb.EntryConfChange:
		var cc raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			panic(fmt.Sprintf("node: committed conf change %d: %v", index, err))
		}
		g.confState = g.raw.ApplyConfChange(&cc)
		g.applyEmpty(engineIndex)
	case raftpb.EntryConfChangeV2:
		var cc raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			panic(fmt.Sprintf("node: committed conf change %d: %v", index, err))
		}
		g.confState = g.raw.ApplyConfChange(&cc)
		g.applyEmpty(engineIndex)
	default:
		if len(e.GetData()) == 0 {
			g.applyEmpty(engineIndex)
			break
		}
		if g.meta != nil {
			c.metaApplied(g.meta.Apply(index, e.GetData()))
			break
		}
		res := g.part.Apply(engineIndex, e.GetData())
		if w := g.byIndex[index]; w != nil {
			if w.term == e.GetTerm() {
				c.finishProduce(g, w, produceResult(res, c.cfg.ID))
			} else {
				c.finishProduce(g, w, ProduceResult{Err: ErrNotLeader, BaseOffset: -1})
			}
		}
	}
	g.appliedRaft = index
	if c.cfg.Observer != nil {
		c.cfg.Observer(g.tp, index, e.GetTerm(), e.GetData())
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
	if g.meta != nil {
		return // metadata waits and reads end by apply or timeout
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
