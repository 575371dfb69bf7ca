package node

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
)

// Full disks (issue 9 item 4). A node whose disk is below its free-space
// floor (Config.MinFreeBytes, checked through raftlog.SpaceReporter every
// SpaceCheckTicks), or whose raft log write just failed with
// raftlog.ErrNoSpace, is *full*: its partition leaders refuse produce before
// proposing with ErrNotEnoughSpace (retriable, NOT_ENOUGH_SPACE on the
// wire), its partition followers drop appends carrying data (their
// leaders resend once they answer again), and checkpoints are skipped.
// Reads, heartbeats, elections and the small metadata group go on. Once
// the free space is back above the floor (plus what the failed write
// needed) the node accepts writes again; nothing needs a restart.
//
// A write that fails for space fails before anything is synced or sent:
// the replica's log is closed and reopened from its files (recovery drops
// a torn tail) exactly as after a process kill, so nothing acknowledged is
// lost and nothing crashes. A failed fsync stays fatal for the node
// (fsyncgate): after it the page cache may hold data the disk never got,
// so the full disk must be seen before or at the write, never by ignoring
// a failed sync. The metadata group's write failures stay fatal too (its
// reopen would need the whole node's state rebuilt).
//
// A full node hands its leaderships on (issue 19 item 3): every
// SpaceCheckTicks, each partition it leads transfers its leadership (raft
// TransferLeader) to a voter whose node has space (its liveness frames say
// so, liveness.go), is up, and holds the most of the log, preferring the
// metadata's replica order. While full, and while a replica with space is
// there to lead instead, it does not take a leadership: its partition
// followers do not tick (so never time out and campaign) and it drops a
// MsgTimeoutNow (a transfer to it); healthy leaders do not hand it a
// preferred leadership (handleElectLeaders). With no replica with space,
// it keeps leading so reads go on. The hold-off is bounded (holdOff,
// quiesce.go): a follower that has seen no leader for two election
// timeouts ticks and campaigns again, since no replica with space could
// win (this one alone holds the newest entry, which raft's vote rule asks
// of a winner), then hands the leadership on as above. Once space returns it campaigns and
// takes transfers again; `strand cluster leaders --balance` hands the
// preferred leaderships back. A node whose disk stalls (stall.go) is, for
// leadership, a node that cannot write: the same hand-off, hold-off and
// liveness flag, with the metadata group handed off too.
//
// Rejected: refusing only the replicas whose write failed (the disk is
// shared: every replica on it is about to fail the same way); a reserve
// file deleted when full (hides the problem; the floor does the same
// openly); leaving the leaderships where they are (the partitions take no
// writes at all while their other replicas have space).

// ErrNotEnoughSpace: the node's disk is full or below its free-space
// floor; nothing was written. Retriable: writes resume once space returns.
var ErrNotEnoughSpace = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_SPACE, "node: not enough disk space")

const (
	// SpaceCheckTicks is the interval between two free-space checks.
	SpaceCheckTicks = 10
	// spaceAfterFailure is the space, above the floor, a node wants back
	// after a write failed for space before it writes again.
	spaceAfterFailure = 1 << 20
)

// diskFull reports whether the node refuses writes for lack of space.
func (c *Core) diskFull() bool { return c.space.full }

// spaceState is the node's view of its disk space.
type spaceState struct {
	full bool
	// metaRefused: a metadata log write failed for space; until space
	// returns the metadata replica takes no appends and never campaigns.
	metaRefused bool
	want        int64  // free bytes needed to leave the full state
	nextCheck   uint64 // tick of the next check
}

// checkSpace re-reads the disk's free space when due and enters or leaves
// the full state; called on Tick.
func (c *Core) checkSpace() {
	if c.ticks < c.space.nextCheck {
		return
	}
	c.space.nextCheck = c.ticks + SpaceCheckTicks
	sr, ok := c.cfg.Disk.(raftlog.SpaceReporter)
	if !ok {
		if c.space.full && c.cfg.MinFreeBytes <= 0 {
			c.setFull(false, 0) // nothing to measure: try writing again
		}
		return
	}
	free, err := sr.FreeBytes()
	if err != nil {
		c.log.log(slog.LevelWarn, "cannot read the disk's free space", slog.Any("err", err))
		return
	}
	want := max(c.cfg.MinFreeBytes, 0)
	if c.space.full {
		want = max(want, c.space.want)
	}
	c.setFull(free < want || (free <= 0), free)
	c.handOffForSpace()
}

// handOffForSpace, on a full node, starts a leadership transfer for each
// partition it leads to a replica with space (handOffTarget), unless one
// is in flight.
func (c *Core) handOffForSpace() {
	if !c.space.full || c.stall.stalled || c.bugFullKeepsLeading() { // stalled: checkStall hands off (stall.go)
		return
	}
	for _, g := range c.partitionGroups() {
		if to := c.handOff(g); to != 0 {
			c.stats.SpaceHandOffs++
			g.logs.log(slog.LevelWarn, "disk full: handing the leadership to a replica with space", slog.Uint64("to", uint64(to)))
		}
	}
}

// handOffLeaderships, on a stalled node (stall.go), starts a leadership
// transfer for each group it leads, the metadata group too (its writes
// stall as well), to a replica whose disk can write, unless one is in
// flight.
func (c *Core) handOffLeaderships() {
	if !c.stall.stalled {
		return
	}
	for _, g := range c.groups {
		if to := c.handOff(g); to != 0 {
			c.stats.StallHandOffs++
			g.logs.log(slog.LevelWarn, "disk stalled: handing the leadership to a replica on a healthy disk",
				slog.Uint64("to", uint64(to)), slog.String("file", c.stall.oldestJob))
		}
	}
}

// handOff starts a transfer of g's leadership to handOffTarget when this
// node leads g and no transfer is in flight; it returns the target, 0
// when it started none.
func (c *Core) handOff(g *group) NodeID {
	st := g.raw.Status()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 {
		return 0
	}
	to := c.handOffTarget(g, st)
	if to == 0 {
		return 0
	}
	c.touch(g)
	g.raw.TransferLeader(uint64(to))
	g.handedTo, g.handedTerm = to, st.GetTerm()
	return to
}

// handOffTarget is the voter of g (status st, this node leading) a full
// or stalled node hands its leadership to: a voter of the incoming
// configuration on a node that is up and can write (neither full nor
// stalled), with the highest match, ties broken by the metadata's replica
// order; 0 when there is none.
//
// Two kinds of voter are passed over. An outgoing-only voter of a joint
// configuration (the leaver of a move) may already have applied the leave
// this stalled leader cannot apply, and calls itself unpromotable: its
// MsgTimeoutNow is void. And the target of this term's last transfer,
// which did not complete (raft aborts one after an election timeout: the
// target restarted, or could not campaign), is tried again only when no
// other voter qualifies; without that rotation a stalled leader handed
// every attempt to the same replica and kept leading (simnet seed 68 with
// drawn knobs).
func (c *Core) handOffTarget(g *group, st raft.Status) NodeID {
	failed := NodeID(0)
	if g.handedTerm == st.GetTerm() {
		failed = g.handedTo
	}
	var best NodeID
	var bestMatch uint64
	retry := false
	for _, id := range c.replicaOrder(g, st) {
		pr := st.Progress[uint64(id)]
		_, incoming := st.Config.Voters[0][uint64(id)]
		if id == c.cfg.ID || pr.IsLearner || !incoming || c.peerDown(id) || c.peerCannotWrite(id) {
			continue
		}
		if id == failed {
			retry = true
			continue
		}
		if best == 0 || pr.Match > bestMatch {
			best, bestMatch = id, pr.Match
		}
	}
	if best == 0 && retry {
		return failed
	}
	return best
}

// replicaOrder lists g's raft peers (st.Progress) in the metadata's replica
// order, peers the metadata does not list after them by id.
func (c *Core) replicaOrder(g *group, st raft.Status) []NodeID {
	var order []NodeID
	if c.meta != nil {
		if t, ok := c.meta.meta.Topic(g.tp.Topic); ok && t.ID == g.topicID && int(g.tp.Partition) < len(t.Replicas) {
			for _, id := range t.Replicas[g.tp.Partition] {
				if _, in := st.Progress[id]; in {
					order = append(order, NodeID(id))
				}
			}
		}
	}
	var rest []NodeID
	for id := range st.Progress { // sorted below
		if !slices.Contains(order, NodeID(id)) {
			rest = append(rest, NodeID(id))
		}
	}
	slices.Sort(rest)
	return append(order, rest...)
}

// holdsOffLeadership reports whether g's replica here must not take a
// leadership now: the node is full or stalled and another replica of g is
// up and can write to lead instead (with none, this one may lead, so
// reads go on). A full node's metadata replica leads on unless its own
// write was refused.
func (c *Core) holdsOffLeadership(g *group) bool {
	if g.sm.policy().control && !c.stall.stalled {
		return c.space.full && c.space.metaRefused
	}
	if !c.cannotWrite() {
		return false
	}
	for _, id := range g.replicas {
		if id != c.cfg.ID && !c.peerDown(id) && !c.peerCannotWrite(id) {
			return true
		}
	}
	return false
}

// setFull enters or leaves the full state, logging the change.
func (c *Core) setFull(full bool, free int64) {
	if full == c.space.full {
		return
	}
	c.space.full = full
	if full {
		c.stats.DiskFullEntered++
		c.log.log(slog.LevelError, "disk full: refusing produce until space returns (reads go on)",
			slog.Int64("free_bytes", free), slog.Int64("min_free_bytes", c.cfg.MinFreeBytes))
		return
	}
	c.space.want, c.space.metaRefused = 0, false
	c.log.log(slog.LevelInfo, "disk space back: accepting writes again", slog.Int64("free_bytes", free))
}

// noSpace notes a write refused for space: the node is full until the
// floor plus spaceAfterFailure is free.
func (c *Core) noSpace() {
	c.space.want = max(c.cfg.MinFreeBytes, 0) + spaceAfterFailure
	c.space.nextCheck = c.ticks + SpaceCheckTicks
	c.setFull(true, 0)
}

// dropForSpace tells whether a received raft message must be dropped
// because the disk is full: appends to a partition replica carrying data,
// and leadership transfers to it while another replica has space.
// Empty entries pass (a new leader's first entry must commit before it
// can serve reads), and so does everything of the metadata group.
func (c *Core) dropForSpace(g *group, m *raftpb.Message) bool {
	if m.GetType() == raftpb.MsgTimeoutNow && c.holdsOffLeadership(g) {
		return true // a transfer to a full node: the old leader aborts it
	}
	if !c.space.full || m.GetType() != raftpb.MsgApp || g.sm.policy().control && !c.space.metaRefused {
		return false
	}
	if g.sm.policy().control {
		return len(m.GetEntries()) > 0 // its log write failed: no appends until space returns
	}
	for _, e := range m.GetEntries() {
		if len(e.GetData()) > 0 {
			return true
		}
	}
	return false
}

// writeRefused handles a failed raft log write of g: when the disk was
// full, g's log is reopened from its files and the node turns full, and
// writeRefused reports true (the round goes on without g's Ready). Any
// other failure, and any failure of the metadata group, is left to the
// caller (fatal).
func (c *Core) writeRefused(g *group, err error) bool {
	if !c.spaceRefusable(g, err) {
		return false
	}
	g.logs.log(slog.LevelWarn, "disk full: raft log write refused; the replica reopens from its files and the node goes on",
		slog.Any("err", err))
	c.noSpace()
	if g.sm.policy().control {
		c.space.metaRefused = true
		if rerr := c.reopenMeta(g); rerr != nil {
			g.logs.log(slog.LevelError, "reopen of the metadata log after a full disk failed; the node stops", slog.Any("err", rerr))
			if c.fatal == nil {
				c.fatal = rerr
			}
		}
		return true
	}
	c.failGroupWaits(g, ErrNotEnoughSpace)
	if cerr := g.log.Close(); cerr != nil {
		g.logs.log(slog.LevelWarn, "close replica log", slog.Any("err", cerr))
	}
	if rerr := c.reopenReplica(g); rerr != nil {
		g.logs.log(slog.LevelError, "reopen after a full disk failed; the node stops", slog.Any("err", rerr))
		if c.fatal == nil {
			c.fatal = rerr
		}
	}
	return true
}

// spaceRefusable reports whether the failed write err of g is one
// writeRefused survives: a write refused for space, of a partition replica
// or of the metadata group.
func (c *Core) spaceRefusable(g *group, err error) bool {
	return errors.Is(err, raftlog.ErrNoSpace) && c.hosted(g)
}

// reopenMeta reopens the metadata group's raft log from its files after a
// write refused for space, keeping the applied metadata state: a new
// RawNode starts as a follower from the durable hard state with Applied
// where the state is (everything applied was durable: raft applies only
// stable entries with asynchronous storage writes), so the replica steps
// down and rejoins as after a restart, without the node restarting. What
// the refused write held was never acknowledged (its responses were
// held until a sync) and comes again from the leader.
func (c *Core) reopenMeta(g *group) error {
	if cerr := g.log.Close(); cerr != nil {
		g.logs.log(slog.LevelWarn, "close metadata log", slog.Any("err", cerr))
	}
	log, err := raftlog.Open(c.cfg.Disk, g.dir+"/log", c.logOptions(len(c.groups)))
	if err != nil {
		return fmt.Errorf("node: metadata group: reopen after a full disk: %w", err)
	}
	if last, _ := log.LastIndex(); last < g.appliedRaft {
		_ = log.Close()
		return fmt.Errorf("node: metadata group: reopened log ends at %d, below the applied %d", last, g.appliedRaft)
	}
	g.log = log
	g.storage = &groupStorage{Log: log, confState: g.confState, commitFloor: g.appliedRaft}
	raw, err := raft.NewRawNode(c.raftConfig(g, g.appliedRaft))
	if err != nil {
		_ = log.Close()
		return fmt.Errorf("node: metadata group: reopen after a full disk: %w", err)
	}
	g.raw = raw
	c.statusChanged()
	g.pipe = groupPipe{}
	if hs, _, err := g.storage.InitialState(); err == nil && hs != nil {
		g.pipe.hard.Term, g.pipe.hard.Vote, g.pipe.hard.Commit = hs.Term, hs.Vote, hs.Commit
		g.pipe.durableTerm, g.pipe.durableCommit = hs.GetTerm(), hs.GetCommit()
	}
	g.quiesced = false
	c.markAllReady()
	return nil
}

// reopenReplica opens g's files again as a new group in g's place.
func (c *Core) reopenReplica(g *group) error {
	spec := g.spec()
	ng, err := c.openGroupRepairing(spec, g.dir, g.topicID)
	if err != nil {
		return err
	}
	ng.wire, ng.topicUUID = g.wire, g.topicUUID
	for i, x := range c.groups {
		if x == g {
			c.groups[i] = ng
		}
	}
	c.byTP[g.tp] = ng
	c.statusChanged()
	c.markAllReady() // ng is new; g must leave the marks (ready.go)
	return nil
}
