package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
)

// Disk-loss recovery (issue 9 item 3; "Protocol-Aware Recovery for
// Consensus-Based Storage", FAST '18). A replica that lost its state (its
// node's data directory was wiped, or its own files were found corrupt and
// discarded) forgot two promises raft relies on: the votes it granted and
// the entries it acknowledged. Rejoining under its old id as if new, it
// could vote twice in one term, or vote for a candidate missing an entry
// that was committed with its help; either loses committed data. Such a
// replica is *recovering*: it runs raft (it stores and acknowledges the
// entries a leader sends, which are real copies) but sends and grants no
// vote or pre-vote until
//
//  1. it learned, from ceil(n/2) other replicas whose state was never lost
//     (probing), the highest term any of them has seen (floor) and their
//     highest last index (until): any quorum that elected a leader or
//     committed an entry with its help shares a member with those, so every
//     term it voted in is <= floor and every entry it acknowledged in a
//     commit is at or below until. During a move, ceil(n/2) of each
//     replica set it belongs to (the current replicas, the target, and all
//     the nodes it talks to; heardFromQuorums): a new learner never voted
//     with it and witnesses nothing of the current replicas' quorums; and
//  2. its commit index reached until, or an entry of a term above floor is
//     committed in its log (catching up): its log then holds every entry
//     committed before the loss, so its vote cannot elect a leader without
//     one.
//
// After that it votes only in terms above floor, forever. Every phase is in
// a small file written durably before the phase's effects, so a crash in
// recovery resumes it. Rejected: rejoining as a raft learner and promoting
// it with conf changes (replica sets are fixed today, and a conf change per
// wiped replica needs a live leader per group); an operator "format" step
// (the issue asks for no operator).
//
// A new cluster is told apart from a wiped node by asking: a node whose
// metadata log is empty starts undecided and asks every node; if any
// trusted node answers (a cluster exists) it recovers; if a majority of the
// nodes (itself included) answer that they too start empty, the cluster is
// new. A joining node skips the question (the cluster exists) and probes
// the nodes its Config.Nodes lists. Assumed, as for any raft: at most a
// minority of a group lost its state at once (a wiped node plus a node that
// never started are two).

// Rejoin phases, as persisted.
const (
	rejoinUndecided  = 1 // metadata group on an empty directory: new cluster or lost disk?
	rejoinProbing    = 2 // state lost: asking the other replicas for floor and until
	rejoinCatchingUp = 3 // floor and until known: no votes until caught up
	rejoinDone       = 4 // votes only in terms above floor
)

// rejoinProbeTicks is the interval between two probes of a group still
// probing, in ticks.
const rejoinProbeTicks = 10

// rejoin is a recovering (or recovered) replica's state.
type rejoin struct {
	phase uint8
	floor uint64 // no vote in a term at or below floor
	until uint64 // no vote before the commit index reaches until
	// answers from other replicas, one per node (the latest), sorted by node.
	answers []rejoinAnswer
	// nextProbe is the tick at or after which the next probe goes out.
	nextProbe uint64
	// outOfBootstrap: a moved-back replica (untilOutOfBootstrap) applied a
	// configuration that does not name it a voter.
	outOfBootstrap bool
}

// rejoinAnswer is one replica's answer to a probe.
type rejoinAnswer struct {
	from  NodeID
	state strandpb.RejoinState
	term  uint64
	last  uint64
}

// rejoinFile is where a replica keeps its rejoin state, in two slots
// written alternately (so a torn write never damages the state before it,
// as raftlog's hard state): each slot is magic "SRJ2", seq u64, phase u8,
// floor u64, until u64, CRC32C u32 of the preceding bytes, little-endian;
// the valid slot with the higher seq is the state. A missing file: the
// replica never lost its state.
func rejoinFile(dir string) string { return dir + "/rejoin/state" }

// rejoinDirOf is the directory of rejoinFile.
func rejoinDirOf(dir string) string { return dir + "/rejoin" }

const rejoinSlotBytes = 4 + 8 + 1 + 8 + 8 + 4

// errRejoinFile: a rejoin file that cannot be read.
var errRejoinFile = errors.New("node: rejoin state file damaged")

// rejoinSlot decodes one slot: its seq and state, ok false when damaged.
func rejoinSlot(b []byte) (uint64, rejoin, bool) {
	if len(b) < rejoinSlotBytes || string(b[:4]) != "SRJ2" ||
		binary.LittleEndian.Uint32(b[rejoinSlotBytes-4:]) != crc32.Checksum(b[:rejoinSlotBytes-4], castagnoli) ||
		b[12] < rejoinUndecided || b[12] > rejoinDone {
		return 0, rejoin{}, false
	}
	return binary.LittleEndian.Uint64(b[4:]), rejoin{
		phase: b[12],
		floor: binary.LittleEndian.Uint64(b[13:]),
		until: binary.LittleEndian.Uint64(b[21:]),
	}, true
}

// readRejoin returns the newest valid slot of the replica in dir: its seq
// and state; exists false when there is no file, valid false when no slot
// decodes.
func (c *Core) readRejoin(dir string) (seq uint64, r rejoin, exists, valid bool, err error) {
	names, err := c.cfg.Disk.List(rejoinDirOf(dir))
	if err != nil || !slices.Contains(names, "state") {
		return 0, rejoin{}, false, false, err
	}
	data, err := readFile(c.cfg.Disk, rejoinFile(dir))
	if err != nil {
		return 0, rejoin{}, true, false, fmt.Errorf("%w: %s: %w", errRejoinFile, rejoinFile(dir), err)
	}
	for off := 0; off+rejoinSlotBytes <= len(data); off += rejoinSlotBytes {
		if s, x, ok := rejoinSlot(data[off:]); ok && (!valid || s > seq) {
			seq, r, valid = s, x, true
		}
	}
	return seq, r, true, valid, nil
}

// loadRejoin reads the rejoin state of the replica in dir; nil, nil when
// it has none. A file whose slots all fail to decode was torn by a crash
// in its first write (the only write with no older slot to fall back on),
// or damaged on disk. With an empty raft log nothing was built on it: it
// counts as absent and the replica decides afresh (prepareRejoin). With a
// log, the replica cannot tell whether it may vote: it recovers from the
// start (probing), which costs a probe round and is always safe.
func (c *Core) loadRejoin(dir string) (*rejoin, error) {
	_, r, exists, valid, err := c.readRejoin(dir)
	if err != nil || !exists {
		return nil, err
	}
	// What was read may not be durable: a crash in saveRejoin, after its
	// write and before its syncs, leaves a file that a restart reads and
	// the next power loss takes back. Sync it before acting on it, as a
	// raft log syncs what it recovers: a replica trusted its probing phase
	// from such a file, opened its raft log, lost the file at the next
	// power cut, and came back with a log and no rejoin file, so voting
	// as a replica that never lost its state (simulator seed 290 with
	// clientlib's producers).
	if err := syncedWrite(c.cfg.Disk, rejoinFile(dir), func(raftlog.File) error { return nil }); err != nil {
		return nil, err
	}
	if err := c.cfg.Disk.SyncDir(rejoinDirOf(dir)); err != nil {
		return nil, err
	}
	if valid {
		return &r, nil
	}
	empty, err := c.logIsEmpty(dir)
	if err != nil || empty {
		return nil, err
	}
	return &rejoin{phase: rejoinProbing}, nil
}

// saveRejoin writes r durably as the rejoin state of the replica in dir,
// into the slot the newest state is not in.
func (c *Core) saveRejoin(dir string, r *rejoin) error {
	seq, _, _, _, err := c.readRejoin(dir)
	if err != nil && !errors.Is(err, errRejoinFile) {
		return err
	}
	seq++
	data := binary.LittleEndian.AppendUint64([]byte("SRJ2"), seq)
	data = append(data, r.phase)
	data = binary.LittleEndian.AppendUint64(data, r.floor)
	data = binary.LittleEndian.AppendUint64(data, r.until)
	data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(data, castagnoli))
	if err := writeAtSync(c.cfg.Disk, rejoinFile(dir), data, int64(seq%2)*rejoinSlotBytes); err != nil {
		return err
	}
	return c.cfg.Disk.SyncDir(rejoinDirOf(dir))
}

// logIsEmpty tells whether the raft log directory of the replica in dir
// holds no file at all: nothing was ever written there.
func (c *Core) logIsEmpty(dir string) (bool, error) {
	names, err := c.cfg.Disk.List(dir + "/log")
	return len(names) == 0, err
}

// prepareRejoin decides, before a replica's log is opened, whether it
// recovers: it loads its rejoin file, or writes one when the replica
// starts with no files on a node that cannot vouch for it (the metadata
// group of a node with an empty metadata log: undecided; a partition
// replica opened while the node's own metadata group still recovers:
// probing).
func (c *Core) prepareRejoin(dir string, isMeta bool) (*rejoin, error) {
	r, err := c.loadRejoin(dir)
	if err != nil || r != nil {
		return r, err
	}
	empty, err := c.logIsEmpty(dir)
	if err != nil || !empty {
		return nil, err
	}
	switch {
	case isMeta && c.joinedCluster:
		// A joining node's cluster exists: its empty log is a first join
		// or a lost disk, which it cannot tell apart, so it recovers
		// either way (a first join only waits to be caught up, which it
		// must be before its promotion anyway). Undecided, it would count
		// itself a majority of its empty set of peers and decide on a new
		// cluster: the wiped joined node then voted at once in the
		// metadata group and reopened its partition replicas as new ones.
		r = &rejoin{phase: rejoinProbing}
	case isMeta:
		r = &rejoin{phase: rejoinUndecided}
	case c.meta != nil && c.meta.rejoin != nil && c.meta.rejoin.phase != rejoinDone:
		r = &rejoin{phase: rejoinProbing}
	default:
		return nil, nil // a new replica on a node that never lost its state
	}
	if c.bugWipedNodeVotes() {
		return nil, nil
	}
	if err := c.saveRejoin(dir, r); err != nil {
		return nil, err
	}
	return r, nil
}

// startRejoin registers a group that opened recovering, and settles at
// once what needs no peer (a group of one replica: no one else can hold
// its data; a single-node cluster is new).
func (c *Core) startRejoin(g *group) error {
	if g.rejoin == nil || g.rejoin.phase == rejoinDone {
		return nil
	}
	c.rejoining = append(c.rejoining, g)
	if g.rejoin.phase != rejoinUndecided {
		c.stats.RejoinsStarted++
		g.logs.log(slog.LevelWarn, "replica lost its state: it rebuilds from its peers and votes only once caught up",
			slog.Int("phase", int(g.rejoin.phase)))
	}
	if g.rejoin.phase == rejoinCatchingUp {
		// Not at open: a metadata group whose replay reaches until would
		// be done before the partition replicas its state places here
		// open (recovering), which would then open as new and vote at
		// once. rejoinTick decides, between Process calls.
		return nil
	}
	return c.advanceRejoin(g)
}

// rejoinTick sends due probes and moves caught-up groups to done; called
// on every Tick. A failed write of a phase is fatal (fail-stop), like a
// failed raft log write.
func (c *Core) rejoinTick() {
	if len(c.rejoining) == 0 {
		return
	}
	probes := map[NodeID][]*strandpb.RejoinProbe{} // lookup only; sent in node order
	var to []NodeID
	kept := c.rejoining[:0]
	for _, g := range c.rejoining {
		if c.fatal == nil {
			if err := c.advanceRejoin(g); err != nil {
				c.fatal = fmt.Errorf("node: %s/%d: rejoin: %w", g.tp.Topic, g.tp.Partition, err)
			}
		}
		r := g.rejoin
		if r.phase == rejoinDone || !c.hosted(g) { // done, or stopped
			continue
		}
		kept = append(kept, g)
		// Probes go on while catching up: a leader whose progress still
		// holds the lost acknowledgements learns of them from a probe.
		if c.ticks < r.nextProbe {
			continue
		}
		r.nextProbe = c.ticks + rejoinProbeTicks
		for _, id := range c.rejoinWitnesses(g) {
			if id == c.cfg.ID || (r.phase != rejoinCatchingUp && r.trusted(id)) {
				continue
			}
			if probes[id] == nil {
				to = append(to, id)
			}
			_, last := c.rejoinOwnState(g)
			probes[id] = append(probes[id], &strandpb.RejoinProbe{Topic: g.wire, Partition: g.tp.Partition, LastIndex: last})
		}
	}
	clear(c.rejoining[len(kept):])
	c.rejoining = kept
	slices.Sort(to)
	for _, id := range to {
		c.sendRejoinFrame(id, &strandpb.RaftFrame{FromNode: uint64(c.cfg.ID), RejoinProbes: probes[id]})
	}
}

// sendRejoinFrame marshals and sends a frame carrying only probes or
// answers.
func (c *Core) sendRejoinFrame(to NodeID, f *strandpb.RaftFrame) {
	b, err := deterministic.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("node: marshal rejoin frame: %v", err))
	}
	c.cfg.Network.Send(to, b)
	c.stats.FramesSent++
}

// trusted tells whether node id answered as a trusted replica.
func (r *rejoin) trusted(id NodeID) bool {
	i, ok := slices.BinarySearchFunc(r.answers, id, func(a rejoinAnswer, id NodeID) int { return compareIDs(a.from, id) })
	return ok && r.answers[i].state == strandpb.RejoinState_REJOIN_STATE_TRUSTED
}

func compareIDs(a, b NodeID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// advanceRejoin moves g's recovery as far as its answers and its log
// allow, persisting each new phase before it takes effect.
func (c *Core) advanceRejoin(g *group) error {
	r := g.rejoin
	n := len(g.replicas)
	if r.phase == rejoinUndecided {
		term, last := c.rejoinOwnState(g)
		fresh, trusted := 1, 0 // itself: empty
		for _, a := range r.answers {
			switch {
			case a.state == strandpb.RejoinState_REJOIN_STATE_FRESH,
				a.state == strandpb.RejoinState_REJOIN_STATE_TRUSTED && a.term <= 1 && a.last <= uint64(n):
				// A node that decided on a new cluster but never saw an
				// election (terms start at 1) is as empty as this one.
				fresh++
			case a.state == strandpb.RejoinState_REJOIN_STATE_TRUSTED:
				trusted++
			}
		}
		switch {
		case trusted > 0 || term > 1 || last > uint64(n):
			// A cluster exists: this node lost its disk (or joins late).
			g.logs.log(slog.LevelWarn, "empty data directory but the cluster exists: rebuilding from peers")
			c.stats.RejoinsStarted++
			if err := c.setRejoin(g, rejoin{phase: rejoinProbing}); err != nil {
				return err
			}
		case fresh > n/2:
			g.logs.log(slog.LevelDebug, "new cluster: a majority of the nodes start empty")
			return c.setRejoin(g, rejoin{phase: rejoinDone})
		default:
			return nil
		}
	}
	if r.phase == rejoinProbing {
		witnesses := c.rejoinWitnesses(g)
		if len(witnesses) == 1 {
			// No other copy exists: nothing to learn, nothing to break.
			return c.setRejoin(g, rejoin{phase: rejoinDone})
		}
		if !r.heardFromQuorums(c.cfg.ID, witnesses, g.current, g.target) {
			return nil
		}
		var floor, until uint64
		for _, a := range r.answers {
			if a.state == strandpb.RejoinState_REJOIN_STATE_TRUSTED {
				floor, until = max(floor, a.term), max(until, a.last)
			}
		}
		g.logs.log(slog.LevelInfo, "learned from peers: catching up before voting",
			slog.Uint64("floor_term", floor), slog.Uint64("until_index", until))
		if err := c.setRejoin(g, rejoin{phase: rejoinCatchingUp, floor: floor, until: until}); err != nil {
			return err
		}
	}
	if r.phase == rejoinCatchingUp && c.caughtUp(g) {
		g.logs.log(slog.LevelInfo, "caught up: votes again, in terms above the floor", slog.Uint64("floor_term", g.rejoin.floor))
		c.stats.RejoinsDone++
		return c.setRejoin(g, rejoin{phase: rejoinDone, floor: g.rejoin.floor, until: g.rejoin.until})
	}
	return nil
}

// rejoinWitnesses are the nodes a recovering g probes and hears from: its
// replicas, and for the metadata group also Config.Nodes and this node. A
// joining node's metadata group has no replicas until its log names them
// (openMeta never bootstraps it), yet it may have voted and acknowledged
// as a member of a configuration of the nodes its Config.Nodes lists (the
// registered nodes, as serve --join takes them).
func (c *Core) rejoinWitnesses(g *group) []NodeID {
	if g.tp.Topic != metaTopic {
		return g.replicas
	}
	ids := append(slices.Clone(g.replicas), c.cfg.ID)
	for _, p := range c.cfg.Nodes {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// heardFromQuorums tells whether trusted answers came from ceil(n/2) of
// the other members of each replica set self belongs to: every node the
// replica talks to, and, on their own, the current replicas and a move's
// target. Those answers meet every quorum of each set, so every vote and
// every committed acknowledgement self gave in a configuration it was a
// voter of has a witness among them. Counting answers over the union
// alone is not enough during a move: with replicas {3,4,5} moving to
// {1,2,4}, a rebuilt node 3 that heard 1, 2 and 4 (the new learners, and
// a node 4 that lagged) learned nothing of the entries {3,5} committed,
// and with its vote 4 was elected without them (the moves simulator's
// seed 79: two entries of term 4 at one index).
func (r *rejoin) heardFromQuorums(self NodeID, sets ...[]NodeID) bool {
	for _, set := range sets {
		n := len(set)
		if n <= 1 || !slices.Contains(set, self) {
			continue
		}
		got := 0
		for _, id := range set {
			if id != self && r.trusted(id) {
				got++
			}
		}
		if got < n-n/2 { // ceil(n/2): meets every quorum's other members
			return false
		}
	}
	return true
}

// namesVoter tells whether cs names id a voter, incoming or outgoing.
func namesVoter(cs *raftpb.ConfState, id NodeID) bool {
	return slices.Contains(cs.GetVoters(), uint64(id)) || slices.Contains(cs.GetVotersOutgoing(), uint64(id))
}

// leftBootstrap tells whether g's configuration, applied at index, is one
// its peers' entries made (past the bootstrap entries, one per member of
// the bootstrap set) and does not name this node a voter.
func (c *Core) leftBootstrap(g *group, index uint64) bool {
	return index > uint64(len(g.bootSet())) && !namesVoter(g.confState, c.cfg.ID)
}

// noteConfApplied records, for a moved-back replica waiting to leave the
// bootstrap configuration, a configuration applied at index that does not
// name it a voter (caughtUp): the next tick may find it a voter again,
// promoted.
func (c *Core) noteConfApplied(g *group, index uint64) {
	if r := g.rejoin; r != nil && r.until == untilOutOfBootstrap && c.leftBootstrap(g, index) {
		r.outOfBootstrap = true
	}
}

// setRejoin persists and enters a new phase (answers are kept).
func (c *Core) setRejoin(g *group, next rejoin) error {
	if err := c.saveRejoin(g.dir, &next); err != nil {
		return err
	}
	next.answers, next.nextProbe, next.outOfBootstrap = g.rejoin.answers, g.rejoin.nextProbe, g.rejoin.outOfBootstrap
	*g.rejoin = next
	c.statusChanged()
	return nil
}

// untilOutOfBootstrap is the until of a replica a move placed here again
// (deletedBefore): it is caught up once its applied configuration has
// stopped naming it a voter since it reopened (outOfBootstrap), not at an
// index.
const untilOutOfBootstrap = math.MaxUint64

// caughtUp tells whether g's committed log holds every entry committed
// before it lost its state: its commit reached until, or it committed an
// entry of a term above floor (committed terms only grow along the log).
// The metadata group is asked only between Process calls, so every replica
// its applied state placed here was opened (recovering) before it is done.
// A moved-back replica (untilOutOfBootstrap) lost no entry, only its
// votes: it waits only to leave the bootstrap configuration.
func (c *Core) caughtUp(g *group) bool {
	if g.rejoin.until == untilOutOfBootstrap {
		return g.rejoin.outOfBootstrap || c.leftBootstrap(g, g.appliedRaft)
	}
	commit := g.raw.BasicStatus().GetCommit()
	if commit >= g.rejoin.until && g.appliedRaft >= g.rejoin.until {
		return true
	}
	term, err := g.storage.Term(commit)
	return err == nil && term > g.rejoin.floor && g.appliedRaft >= commit
}

// rejoinOwnState is g's raft term and last index.
func (c *Core) rejoinOwnState(g *group) (term, last uint64) {
	last, err := g.log.LastIndex()
	if err != nil {
		return 0, 0
	}
	return g.raw.BasicStatus().GetTerm(), last
}

// voteAllowed tells whether a vote or pre-vote message (in or out) of g
// may pass: never while recovering, and after only in terms above floor.
// Other messages always pass.
func (g *group) voteAllowed(m *raftpb.Message) bool {
	switch m.GetType() {
	case raftpb.MsgVote, raftpb.MsgPreVote:
	default:
		return true
	}
	r := g.rejoin
	return r == nil || (r.phase == rejoinDone && m.GetTerm() > r.floor)
}

// leaderMessageAllowed tells whether a leader's append, snapshot or
// heartbeat may reach g: while g recovers without knowing its floor
// (undecided, probing), none may, and after only those of terms at or
// above floor. The replica lost its term with its state, so raft would
// take any leader's term, and its acknowledgements count toward commits
// and read confirmations: a leader deposed, unawares, while this replica
// helped a newer term commit (its host stalled, its idle group quiesced
// past CheckQuorum) could then commit, with it, entries at the indexes
// the newer term committed (TestRepairedReplicaDoesNotAckStaleLeader; the
// simulator's seed 46 at production's ticks). A leader of a term at or
// above floor was elected after every term this replica helped commit
// in, so it holds their entries. Other messages always pass.
func (g *group) leaderMessageAllowed(m *raftpb.Message) bool {
	switch m.GetType() {
	case raftpb.MsgApp, raftpb.MsgSnap, raftpb.MsgHeartbeat:
	default:
		return true
	}
	r := g.rejoin
	switch {
	case r == nil:
		return true
	case r.phase == rejoinUndecided || r.phase == rejoinProbing:
		return false
	}
	return m.GetTerm() >= r.floor
}

// answerProbes answers a peer's probes in one frame.
func (c *Core) answerProbes(from NodeID, probes []*strandpb.RejoinProbe) {
	f := &strandpb.RaftFrame{FromNode: uint64(c.cfg.ID)}
	for _, p := range probes {
		a := &strandpb.RejoinAnswer{Topic: p.GetTopic(), Partition: p.GetPartition()}
		g := c.routeMessage(p.GetTopic(), p.GetPartition())
		switch {
		case g != nil && !g.isReplica(from):
			continue
		case g != nil:
			// A group quiesced under the probing replica (its leader
			// until it lost its state) must tick again and elect.
			c.touch(g)
			a.State, a.Term, a.LastIndex = c.vouch(g)
			c.handOnLeadership(g, from, p.GetLastIndex())
		case p.GetTopic() == metaTopic || !c.trustedNode() || c.holdsUnopened(p.GetTopic(), p.GetPartition()):
			// Not opened is not "not hosted": a node that just restarted
			// answers before its metadata replay reopens its replicas,
			// and the replica on its disk may have voted and acknowledged
			// entries. Its answer must not count.
			a.State = strandpb.RejoinState_REJOIN_STATE_RECOVERING
		default:
			// A node that never lost its state and hosts no such replica
			// never voted in, nor acknowledged anything of, that group.
			a.State = strandpb.RejoinState_REJOIN_STATE_TRUSTED
		}
		f.RejoinAnswers = append(f.RejoinAnswers, a)
	}
	if len(f.RejoinAnswers) > 0 {
		c.sendRejoinFrame(from, f)
	}
}

// holdsUnopened tells whether this node may hold a replica of the group a
// probe names (wire topic name@topicID) that is not open here: the
// metadata state places one here, or the replica's directory holds files
// other than a deletion tombstone. Judged from the placement and the disk,
// never from the open groups, which a restart empties until reconcile.
func (c *Core) holdsUnopened(wire string, partition int32) bool {
	i := strings.LastIndexByte(wire, '@')
	if i < 0 {
		return true // not a partition's wire name: vouch for nothing
	}
	name := wire[:i]
	topicID, err := strconv.ParseUint(wire[i+1:], 10, 64)
	if err != nil || topicID == 0 {
		return true
	}
	if c.meta != nil {
		if t, ok := c.meta.meta.Topic(name); ok && t.ID == topicID && partition >= 0 && int(partition) < len(t.Replicas) &&
			(slices.Contains(t.Replicas[partition], uint64(c.cfg.ID)) || slices.Contains(t.Targets[partition], uint64(c.cfg.ID))) {
			return true
		}
	}
	dir := managedDir(name, topicID, partition)
	for _, d := range []string{dir, dir + "/log"} {
		names, err := c.cfg.Disk.List(d)
		if err != nil || slices.ContainsFunc(names, func(n string) bool { return n != deletedName }) {
			return true
		}
	}
	return false
}

// vouch is what g can answer a probe with.
func (c *Core) vouch(g *group) (strandpb.RejoinState, uint64, uint64) {
	term, last := c.rejoinOwnState(g)
	r := g.rejoin
	switch {
	case r == nil:
		return strandpb.RejoinState_REJOIN_STATE_TRUSTED, term, last
	case r.phase == rejoinDone:
		// It may have voted, before its loss, in terms up to its floor.
		return strandpb.RejoinState_REJOIN_STATE_TRUSTED, max(term, r.floor), last
	case r.phase == rejoinUndecided && term <= 1 && last <= uint64(len(g.replicas)):
		return strandpb.RejoinState_REJOIN_STATE_FRESH, 0, 0
	}
	return strandpb.RejoinState_REJOIN_STATE_RECOVERING, 0, 0
}

// trustedNode tells whether this node can vouch for replicas it does not
// host: its metadata group never lost its state or has fully recovered
// (every replica it hosted before is open again).
func (c *Core) trustedNode() bool {
	return c.meta != nil && (c.meta.rejoin == nil || c.meta.rejoin.phase == rejoinDone)
}

// takeAnswers records a peer's answers in the groups still asking.
func (c *Core) takeAnswers(from NodeID, answers []*strandpb.RejoinAnswer) {
	for _, a := range answers {
		g := c.routeMessage(a.GetTopic(), a.GetPartition())
		if g == nil || g.rejoin == nil || !g.isReplica(from) || from == c.cfg.ID {
			continue
		}
		r := g.rejoin
		if r.phase != rejoinUndecided && r.phase != rejoinProbing {
			continue
		}
		ans := rejoinAnswer{from: from, state: a.GetState(), term: a.GetTerm(), last: a.GetLastIndex()}
		i, ok := slices.BinarySearchFunc(r.answers, from, func(x rejoinAnswer, id NodeID) int { return compareIDs(x.from, id) })
		if ok {
			r.answers[i] = ans
		} else {
			r.answers = slices.Insert(r.answers, i, ans)
		}
		if c.fatal == nil {
			if err := c.advanceRejoin(g); err != nil {
				c.fatal = fmt.Errorf("node: %s/%d: rejoin: %w", g.tp.Topic, g.tp.Partition, err)
			}
		}
	}
}

// receiveRejoin handles the probes and answers of a frame.
func (c *Core) receiveRejoin(from NodeID, rj *rejoinFrame) {
	if len(rj.probes) > 0 {
		c.answerProbes(from, rj.probes)
	}
	if len(rj.answers) > 0 {
		c.takeAnswers(from, rj.answers)
	}
}

// rejoinFrame is what a received frame carried for disk-loss recovery,
// and the disk state of a liveness frame.
type rejoinFrame struct {
	probes      []*strandpb.RejoinProbe
	answers     []*strandpb.RejoinAnswer
	disk        uint64       // RaftFrame.disk_state of a liveness frame (liveness.go), 0: absent
	incarnation uint64       // RaftFrame.incarnation of a liveness frame (quiesce.go), 0: absent
	txn         txnPeerFrame // the transaction coordinators' peer requests (txn_peer.go)
	prefix      prefixFrame  // compacted-prefix installs (compaction_install.go)
}

// parseRejoinField decodes a RaftFrame's probe or answer field.
func (rj *rejoinFrame) parse(answer bool, b []byte) bool {
	if answer {
		a := &strandpb.RejoinAnswer{}
		if proto.Unmarshal(b, a) != nil {
			return false
		}
		rj.answers = append(rj.answers, a)
		return true
	}
	p := &strandpb.RejoinProbe{}
	if proto.Unmarshal(b, p) != nil {
		return false
	}
	rj.probes = append(rj.probes, p)
	return true
}

// handOnLeadership: g leads, and its progress says replica from holds
// entries up to a match above the last index from reports having now (it
// lost them with its disk). Raft never lowers a match, so this leader
// would send from there forever and from could never catch up: the
// leader hands leadership to its most caught-up other replica, whose
// fresh progress probes from's log down from scratch.
func (c *Core) handOnLeadership(g *group, from NodeID, last uint64) {
	if _, _, leading := g.leadership(); !leading {
		return
	}
	st := g.raw.Status()
	pr, ok := st.Progress[uint64(from)]
	if !ok || pr.Match <= last || st.LeadTransferee != 0 {
		return
	}
	var to NodeID
	var best uint64
	for _, id := range g.replicas {
		if id == c.cfg.ID || id == from {
			continue
		}
		if p, ok := st.Progress[uint64(id)]; ok && !p.IsLearner && (to == 0 || p.Match > best) {
			to, best = id, p.Match
		}
	}
	if to == 0 {
		return
	}
	g.logs.log(slog.LevelInfo, "a replica lost acknowledged entries: handing leadership on so it can catch up",
		slog.Uint64("replica", uint64(from)), slog.Uint64("to", uint64(to)))
	c.markReady(g) // ready.go
	g.raw.TransferLeader(uint64(to))
}

// handOnLostEntries runs for a stale reject m (staleReject) from a
// replica: when it answers a current probe (an index past what the
// replica acknowledged; a reordered old reject names one below it), the
// replica lost its disk, and the leader hands leadership on itself. The
// replica's own probe does the same, but it reaches only the nodes the
// replica knows: a wiped static node knows Config.Nodes, not a node that
// joined later and leads (TestWipedStaticNodeCatchesUpUnderJoinedLeader).
func (c *Core) handOnLostEntries(g *group, from NodeID, m *raftpb.Message) {
	if pr, ok := g.raw.Status().Progress[uint64(from)]; ok && m.GetIndex() > pr.Match {
		c.handOnLeadership(g, from, m.GetRejectHint())
	}
}

// staleReject tells whether m, for g which leads, is a rejected append
// whose hint lies below what the replica acknowledged before: it lost its
// disk. Raft would answer it by resending from its match, at once, in a
// loop; the reject is dropped and the replica's probe hands leadership on
// (handOnLeadership).
func (g *group) staleReject(m *raftpb.Message) bool {
	if m.GetType() != raftpb.MsgAppResp || !m.GetReject() {
		return false
	}
	if _, _, leading := g.leadership(); !leading {
		return false
	}
	pr, ok := g.raw.Status().Progress[m.GetFrom()]
	return ok && pr.Match > m.GetRejectHint()
}
