package node

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/raftlog"
)

// Defaults of Config's zero fields, and fixed raft sizing.
const (
	electionTicksDefault       = 10
	heartbeatTicksDefault      = 1
	requestTimeoutTicksDefault = 50
	checkpointEntriesDefault   = 1024
	pendingRequestsMaxDefault  = 4096
	tickDurationDefault        = 10 * time.Millisecond

	// raftMessageBytesMax bounds the entries of one MsgApp (one record of
	// 1 MiB always fits: raft sends at least one entry).
	raftMessageBytesMax = 1 << 20
	// raftInflightMessagesMax and raftInflightBytesMax bound the
	// unacknowledged MsgApps per follower of one group. The byte bound
	// keeps a catch-up from queueing hundreds of MB in one round (256
	// messages of 1 MiB each per group): a follower takes 4 MiB per round
	// trip per group, plenty on a LAN, and the peer's queue never fills.
	raftInflightMessagesMax = 256
	raftInflightBytesMax    = 4 << 20
	// raftCommittedBytesPerReadyMax bounds the committed entries one Ready
	// hands to apply, so one busy group cannot stall a round.
	raftCommittedBytesPerReadyMax = 8 << 20
	// raftUncommittedBytesMax bounds a leader's uncommitted tail; beyond it
	// proposals are dropped (ErrBusy).
	raftUncommittedBytesMax = 64 << 20
)

// Open opens a node: its metadata group over cfg.Nodes, recovered from its
// raft log and latest checkpoint, and every partition replica the
// recovered metadata state places on cfg.ID (replaying the metadata log
// then starts and stops replicas as the state moves on).
func Open(cfg Config) (*Core, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	c := &Core{cfg: cfg, byTP: make(map[TopicPartition]*group), metaWaits: make(map[uint64]*metaWait),
		syncsInFlight: make(map[uint64]syncJob), ready: readyMarks{all: true},
	}
	c.registerServices()
	c.rand = cfg.Rand
	c.log = coreLog{h: cfg.Logger.Handler()}.with(slog.Uint64("node", uint64(cfg.ID)))
	if c.rand == nil {
		c.rand = rand.New(rand.NewPCG(uint64(cfg.ID), 0x5ca1ab1e))
	}
	if err := c.dropWAL(); err != nil { // wal.go
		return nil, err
	}
	if cfg.WAL {
		if err := c.openWAL(); err != nil { // wal.go
			if c.wal != nil {
				_ = c.wal.Close()
			}
			return nil, err
		}
	}
	if err := c.openMeta(); err != nil {
		c.closeGroups()
		return nil, err
	}
	return c, nil
}

// compareTP orders partitions by topic, then partition number.
func compareTP(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// setDefaults fills zero fields and refuses a config the core cannot run.
func (cfg *Config) setDefaults() error {
	if cfg.ID == 0 {
		return errors.New("node: config: ID 0 is not a valid node id")
	}
	if cfg.Disk == nil || cfg.Network == nil || cfg.Clock == nil {
		return errors.New("node: config: Disk, Network and Clock are required")
	}
	if cfg.ElectionTicks == 0 {
		cfg.ElectionTicks = electionTicksDefault
	}
	if cfg.HeartbeatTicks == 0 {
		cfg.HeartbeatTicks = heartbeatTicksDefault
	}
	if cfg.HeartbeatTicks <= 0 || cfg.ElectionTicks <= cfg.HeartbeatTicks {
		return fmt.Errorf("node: config: ElectionTicks %d must exceed HeartbeatTicks %d > 0",
			cfg.ElectionTicks, cfg.HeartbeatTicks)
	}
	if cfg.LogTailCacheBytesMax == 0 {
		cfg.LogTailCacheBytesMax = raftlog.DefaultTailCacheBytesMax
	}
	if cfg.LogTailCacheBytesTotal <= 0 {
		cfg.LogTailCacheBytesTotal = logTailCacheBytesTotalDefault
	}
	if cfg.TicksPerRaftTick <= 0 {
		cfg.TicksPerRaftTick = 1
	}
	if cfg.RequestTimeoutTicks <= 0 {
		cfg.RequestTimeoutTicks = requestTimeoutTicksDefault
	}
	if cfg.PrefixChunkBytes <= 0 {
		cfg.PrefixChunkBytes = prefixChunkBytes
	}
	if cfg.CheckpointEntries == 0 {
		cfg.CheckpointEntries = checkpointEntriesDefault
	}
	if cfg.RetentionCheckTicks <= 0 {
		cfg.RetentionCheckTicks = retentionCheckTicksDefault
	}
	if cfg.PendingRequestsMax <= 0 {
		cfg.PendingRequestsMax = pendingRequestsMaxDefault
	}
	if cfg.FetchReadBytesPerProcess <= 0 {
		cfg.FetchReadBytesPerProcess = fetchReadBytesPerProcessDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TickDuration <= 0 {
		cfg.TickDuration = tickDurationDefault
	}
	return cfg.checkNodes()
}

// checkNodes refuses a Nodes list the metadata group cannot run over.
func (cfg *Config) checkNodes() error {
	self := false
	for i, p := range cfg.Nodes {
		if p.ID == 0 || slices.ContainsFunc(cfg.Nodes[:i], func(q Peer) bool { return q.ID == p.ID }) {
			return fmt.Errorf("node: config: bad or repeated node id %d in Nodes", p.ID)
		}
		self = self || p.ID == cfg.ID
	}
	switch {
	case !self:
		return fmt.Errorf("node: config: Nodes must list this node %d", cfg.ID)
	}
	for _, p := range cfg.Nodes {
		if p.ID == cfg.ID && p.Address == "" {
			return fmt.Errorf("node: config: node %d needs an Address to register", cfg.ID)
		}
	}
	return nil
}

// openGroup opens one partition replica in dir: its raft log, its latest
// valid checkpoint (or an empty engine) and its RawNode, bootstrapping an
// empty log.
func (c *Core) openGroup(spec PartitionSpec, dir string, topicID uint64) (*group, error) {
	g := newGroup(spec.TopicPartition, nil, dir)
	g.setPlacement(spec)
	g.topicID = topicID
	if err := c.openRaft(g); err != nil {
		return nil, err
	}
	c.noteFreshLead(g, spec)
	return g, nil
}

// hosted reports whether g is still one of this node's groups: the
// metadata group, or the partition replica Core.byTP holds (a removed or
// reopened replica's finished jobs are ignored).
func (c *Core) hosted(g *group) bool {
	return (c.meta != nil && g == c.meta.group) || c.byTP[g.tp] == g
}

// openRaft opens g's log, restores its state machine and starts its
// RawNode, bootstrapping an empty log over g.replicas.
func (c *Core) openRaft(g *group) error {
	replicas := g.bootSet()
	rj, err := c.prepareRejoin(g.dir, g.sm.policy().control)
	if err != nil {
		return err
	}
	g.rejoin = rj
	log, err := raftlog.Open(c.cfg.Disk, g.dir+"/log", c.logOptions(len(c.groups)+1))
	if err != nil {
		return err
	}
	g.log = log
	g.storage = &groupStorage{Log: log}
	if g.sm.policy().repairable {
		g.storage.corrupt = func(err error) { c.corruptFound(g, err) }
	}
	applied, err := c.restoreEngine(g)
	if err != nil {
		_ = log.Close()
		return err
	}
	// Open read only the seals of sealed segments: check now, as Open
	// once did, every entry raft will hand back to apply, so damage there
	// is repaired (openGroupRepairing) before raft reads it.
	if err := log.VerifyFrom(applied + 1); err != nil {
		_ = log.Close()
		return err
	}
	g.logs = c.log.with(g.sm.logAttrs(g.tp)...)
	raw, err := raft.NewRawNode(c.raftConfig(g, applied))
	if err != nil {
		_ = log.Close()
		return err
	}
	g.raw = raw
	if hs, _, err := log.InitialState(); err == nil && hs != nil {
		// Recovered state is durable: Open synced what it recovered.
		g.pipe.hard.Term, g.pipe.hard.Vote, g.pipe.hard.Commit = hs.Term, hs.Vote, hs.Commit
		g.pipe.durableTerm, g.pipe.durableCommit = hs.GetTerm(), hs.GetCommit()
	}
	last, err := log.LastIndex()
	if err != nil {
		_ = log.Close()
		return err
	}
	if last == 0 && len(replicas) > 0 {
		// Every replica bootstraps the same entries 1..n (the voters in
		// sorted order, term 1), so their committed prefixes agree.
		peers := make([]raft.Peer, len(replicas))
		for i, r := range replicas {
			peers[i] = raft.Peer{ID: uint64(r)}
		}
		if err := raw.Bootstrap(peers); err != nil {
			_ = log.Close()
			return err
		}
	}
	if err := c.startRejoin(g); err != nil {
		_ = log.Close()
		return err
	}
	return nil
}

// logOptions are the options a group's raft log opens with, logs being
// the number of logs sharing the tail cache.
func (c *Core) logOptions(logs int) raftlog.Options {
	opts := raftlog.Options{SegmentBytesMax: c.cfg.SegmentBytesMax, TailCacheBytesMax: c.tailCacheShare(logs)}
	if c.wal != nil {
		opts.BeforeSync = c.walBeforeSync // wal.go
	}
	c.bugLogOptions(&opts)
	return opts
}

// raftConfig is the raft configuration of one group; applied is the index
// the engine already reflects, so raft does not hand those entries again.
func (c *Core) raftConfig(g *group, applied uint64) *raft.Config {
	return &raft.Config{
		ID:                        uint64(c.cfg.ID),
		ElectionTick:              c.bugElectionTick(), // ElectionTicks (planted ElectionInCoreTicks)
		HeartbeatTick:             c.cfg.HeartbeatTicks,
		Storage:                   g.storage,
		Applied:                   applied,
		MaxSizePerMsg:             raftMessageBytesMax,
		MaxCommittedSizePerReady:  raftCommittedBytesPerReadyMax,
		MaxUncommittedEntriesSize: raftUncommittedBytesMax,
		MaxInflightMsgs:           raftInflightMessagesMax,
		MaxInflightBytes:          raftInflightBytesMax,
		CheckQuorum:               true,
		// A leader a move removes steps down at once (moves.go hands the
		// lead on while the joint configuration still holds it).
		StepDownOnRemoval:  true,
		PreVote:            true,
		ReadOnlyOption:     c.bugReadOnlyOption(),
		Logger:             raftLogger{g.logs},
		AsyncStorageWrites: true,
	}
}

// restoreEngine loads the newest valid checkpoint into g and returns the
// raft index raft must consider applied. Without one the engine starts
// empty and raft replays the whole log (applied 0).

func (c *Core) restoreEngine(g *group) (uint64, error) {
	hs, _, err := g.log.InitialState()
	if err != nil {
		return 0, err
	}
	last, err := g.log.LastIndex()
	if err != nil {
		return 0, err
	}
	ck, err := g.sm.loadCheckpoint(c.cfg.Disk, g.dir+"/checkpoint", min(hs.GetCommit(), last))
	if err != nil {
		return 0, err
	}
	var ckIndex uint64
	if ck != nil {
		ckIndex = ck.raftIndex
	}
	if applied, ok, err := c.restoreSnapshotAtOpen(g, ckIndex); ok || err != nil {
		return applied, err
	}
	if ck == nil {
		g.sm.startEmpty(g)
		return 0, nil
	}
	if g.sm.restoreCheckpoint(c, g, ck) {
		return 0, nil
	}
	g.storage.confState = ck.confState
	g.confState = ck.confState
	g.appliedRaft = ck.raftIndex
	return ck.raftIndex, nil
}

// groupStorage is the raft log as raft's Storage, with the configuration
// recorded in the engine checkpoint: raft restores its voters from
// InitialState and, when told Applied = K, never re-reads the conf changes
// at or below K, so the checkpoint must supply them.
type groupStorage struct {
	*raftlog.Log
	confState *raftpb.ConfState // of the loaded checkpoint; nil: none
	// commitFloor: InitialState reports at least this commit (a metadata
	// log reopened in place after a full disk, diskfull.go).
	commitFloor uint64

	// corrupt, when set (partition replicas), takes damage raft read in a
	// sealed segment (sending old entries to a follower): the replica is
	// rebuilt at the next Tick instead of raft panicking, which would only
	// recur after a restart (Open does not read sealed segments' bodies).
	corrupt func(error)
	damaged bool
}

// Entries implements raft.Storage. Damage found while raft reads becomes
// raft.ErrCompacted (raft then tries a snapshot, which Snapshot refuses as
// temporarily unavailable: nothing is sent) and a repair of the replica.
func (s *groupStorage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	ents, err := s.Log.Entries(lo, hi, maxSize)
	if err != nil && s.corrupt != nil && errors.Is(err, raftlog.ErrCorrupt) {
		s.damaged = true
		s.corrupt(err)
		return nil, raft.ErrCompacted
	}
	return ents, err
}

// Snapshot implements raft.Storage; see Entries.
func (s *groupStorage) Snapshot() (*raftpb.Snapshot, error) {
	if s.damaged {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return s.Log.Snapshot()
}

// InitialState implements raft.Storage.
func (s *groupStorage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	hs, cs, err := s.Log.InitialState()
	if err == nil && hs != nil && hs.GetCommit() < s.commitFloor {
		// A metadata log reopened in place (diskfull.go): what was
		// applied is committed, whatever commit the log last recorded.
		commit := s.commitFloor
		hs = &raftpb.HardState{Term: hs.Term, Vote: hs.Vote, Commit: &commit}
	}
	if err != nil || s.confState == nil {
		return hs, cs, err
	}
	// The configuration as of the state restored (a checkpoint newer than
	// the raft snapshot, or the snapshot itself): raft replays no conf
	// change at or below Applied, and a move may have changed it since the
	// snapshot.
	return hs, s.confState, nil
}

// closeGroups closes every open log, for a failed Open.
func (c *Core) closeGroups() {
	for _, g := range c.groups {
		_ = g.log.Close()
	}
}
