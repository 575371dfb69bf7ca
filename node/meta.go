package node

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/raftlog"
)

// metaTopic is the topic name the metadata group's raft messages carry and
// its key in Observer calls: '@' is outside the topic alphabet, so no
// partition is ever named so.
const metaTopic = "@metadata"

// metaDir holds the metadata group's raft log (meta/log) and checkpoints
// (meta/checkpoint), laid out as a partition replica's.
const metaDir = "meta"

// metaWait is a metadata command waiting for its entry to be applied.
type metaWait struct {
	id       uint64
	deadline uint64
	done     func(res metadata.Result, err error)
	finished bool
}

// openMeta opens the metadata group over Config.Nodes, bootstrapping it on
// an empty log, and starts the replicas its recovered state places here.
func (c *Core) openMeta() error {
	joining, err := c.joining()
	if err != nil {
		return fmt.Errorf("node: open metadata group: %w", err)
	}
	c.joinedCluster = joining
	var replicas []NodeID // a joining node's group is never bootstrapped
	if !joining {
		for _, p := range c.cfg.Nodes {
			replicas = append(replicas, p.ID)
		}
		slices.Sort(replicas)
	}
	boot, err := nextBoot(c.cfg.Disk)
	if err != nil {
		return fmt.Errorf("node: open metadata group: %w", err)
	}
	// Proposal ids must differ from those of an earlier run whose entries
	// may still commit: the boot count makes this run's sequence new even
	// when the driver hands in an identically seeded Rand.
	c.rand = rand.New(rand.NewPCG(c.rand.Uint64(), boot))
	c.incarnation = c.rand.Uint64() | 1 // never 0, which says "not said"
	g := newGroup(TopicPartition{Topic: metaTopic}, replicas, metaDir)
	sm := &metadataSM{meta: metadata.New()}
	g.sm = sm
	if err := c.openRaft(g); err != nil {
		return fmt.Errorf("node: open metadata group: %w", err)
	}
	c.meta = &metaGroup{group: g, metadataSM: sm}
	c.refreshMetaReplicas(g.confState)
	c.groups = append(c.groups, g)
	c.statusChanged()
	if c.sweepAt, err = g.log.LastIndex(); err != nil {
		return fmt.Errorf("node: open metadata group: %w", err)
	}
	if err := c.reconcile(); err != nil {
		return err
	}
	return c.sweepWhenReplayed()
}

// bootFile counts the Opens of a dynamic-mode node: u64 count, then u32
// CRC32C of those 8 bytes, little-endian. Missing or damaged reads as 0.
const bootFile = metaDir + "/boot"

// nextBoot reads, increments and durably writes the boot count.
func nextBoot(disk raftlog.Disk) (uint64, error) {
	boot := uint64(0)
	if data, err := readFile(disk, bootFile); err == nil && len(data) == 12 &&
		binary.LittleEndian.Uint32(data[8:]) == crc32.Checksum(data[:8], castagnoli) {
		boot = binary.LittleEndian.Uint64(data)
	}
	boot++
	data := binary.LittleEndian.AppendUint64(nil, boot)
	data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(data, castagnoli))
	if err := writeFile(disk, bootFile, data); err != nil {
		return 0, err
	}
	return boot, disk.SyncDir(metaDir)
}

// partitionGroups is c.groups without the metadata group.
func (c *Core) partitionGroups() []*group {
	if c.meta != nil {
		return c.groups[1:]
	}
	return c.groups
}

// managedDir is where a replica the metadata group placed keeps its files:
// the topic id in the name keeps a re-created topic's replica from ever
// opening a deleted one's log.
func managedDir(topic string, topicID uint64, partition int32) string {
	return fmt.Sprintf("p/%s@%d/%d", topic, topicID, partition)
}

// wireTopic is the topic a replica's raft messages carry, name@topicID,
// so a message of a deleted topic's group never reaches its successor's.
func wireTopic(topic string, topicID uint64) string {
	return topic + "@" + strconv.FormatUint(topicID, 10)
}

// routeMessage finds the hosted group a raft message's topic and partition
// name, or nil.
func (c *Core) routeMessage(topic string, partition int32) *group {
	if topic == metaTopic {
		if partition != 0 || c.meta == nil {
			return nil
		}
		return c.meta.group
	}
	name, topicID := topic, uint64(0)
	if i := strings.LastIndexByte(topic, '@'); i >= 0 {
		id, err := strconv.ParseUint(topic[i+1:], 10, 64)
		if err != nil || id == 0 {
			return nil
		}
		name, topicID = topic[:i], id
	}
	g := c.byTP[TopicPartition{Topic: name, Partition: partition}]
	if g == nil || g.topicID != topicID {
		return nil
	}
	return g
}

// reconcile makes the hosted replicas match the metadata state: replicas
// of deleted topics (or of an older topic of the same name) are stopped
// and their files removed, in group order; replicas newly placed here are
// opened (bootstrapped when new), in (topic, partition) order. An error
// opening a replica is fatal, like any failed write.
func (c *Core) reconcile() error {
	st := c.meta.meta
	c.metaVersion = st.Version()
	c.refreshLiveness()
	hosted := st.HostedPartitions(uint64(c.cfg.ID))
	if c.bugMoveDropsEarly() {
		hosted = slices.DeleteFunc(hosted, func(ref metadata.PartitionRef) bool {
			return len(ref.Target) > 0 && !slices.Contains(ref.Target, uint64(c.cfg.ID))
		})
	}
	want := make(map[TopicPartition]metadata.PartitionRef, len(hosted)) // lookup only
	for _, ref := range hosted {
		want[TopicPartition{Topic: ref.Topic, Partition: ref.Partition}] = ref
	}
	kept := []*group{c.meta.group}
	for _, g := range c.partitionGroups() {
		if ref, ok := want[g.tp]; ok && ref.TopicID == g.topicID {
			g.setPlacement(refSpec(ref))
			kept = append(kept, g)
			continue
		}
		c.stopGroup(g)
	}
	clear(c.groups[len(kept):])
	c.groups = append(c.groups[:0], kept...)
	c.statusChanged()
	c.markAllReady() // new groups are ready; stopped ones must leave the marks
	for _, ref := range hosted {
		tp := TopicPartition{Topic: ref.Topic, Partition: ref.Partition}
		if c.byTP[tp] != nil {
			continue
		}
		dir := managedDir(ref.Topic, ref.TopicID, ref.Partition)
		if c.deletedBefore(dir) {
			// This node already deleted this incarnation: its metadata
			// replay (from a checkpoint older than the delete) has not
			// reached the delete yet. Hosting it again would bootstrap an
			// empty replica that votes with no memory of its terms.
			continue
		}
		g, err := c.openGroupRepairing(refSpec(ref), dir, ref.TopicID)
		if err != nil {
			return fmt.Errorf("node: start %s/%d: %w", ref.Topic, ref.Partition, err)
		}
		g.wire = wireTopic(ref.Topic, ref.TopicID)
		g.topicUUID = ref.TopicUUID
		c.insertGroup(g)
	}
	c.shareTailCaches()
	return nil
}

// logTailCacheBytesTotalDefault is the default Config.LogTailCacheBytesTotal;
// logTailCacheBytesMin the smallest share a log gets.
const (
	logTailCacheBytesTotalDefault = 256 << 20
	logTailCacheBytesMin          = 64 << 10
)

// tailCacheShare is each log's tail cache bound when the node hosts logs
// logs: an equal share of LogTailCacheBytesTotal, at most
// LogTailCacheBytesMax (negative: no cache) and at least
// logTailCacheBytesMin.
func (c *Core) tailCacheShare(logs int) int64 {
	if c.cfg.LogTailCacheBytesMax < 0 {
		return c.cfg.LogTailCacheBytesMax
	}
	share := c.cfg.LogTailCacheBytesTotal / int64(max(logs, 1))
	return max(min(share, c.cfg.LogTailCacheBytesMax), logTailCacheBytesMin)
}

// shareTailCaches resizes every log's tail cache to its share after the
// hosted set changed.
func (c *Core) shareTailCaches() {
	share := c.tailCacheShare(len(c.groups))
	if share == c.tailCacheBytes {
		return
	}
	c.tailCacheBytes = share
	for _, g := range c.groups {
		g.log.SetTailCacheBytesMax(share)
	}
}

// insertGroup adds a partition replica to groups, keeping the order.
func (c *Core) insertGroup(g *group) {
	parts := c.partitionGroups()
	i, _ := slices.BinarySearchFunc(parts, g.tp, func(x *group, tp TopicPartition) int { return compareTP(x.tp, tp) })
	c.groups = slices.Insert(c.groups, len(c.groups)-len(parts)+i, g)
	c.statusChanged()
	c.byTP[g.tp] = g
}

// stopGroup stops a replica whose topic was deleted (or that moved off
// this node): its waiting produces fail with ErrReplicaStopped (they were
// proposed: the entry may still commit on the other replicas, and one that
// has not applied the delete serves it), its waiting reads with
// ErrUnknownTopicPartition; its log is closed and its files removed. A
// crash midway leaves files under a directory no later topic uses (the
// topic id differs): garbage, never confusion.
func (c *Core) stopGroup(g *group) {
	delete(c.byTP, g.tp)
	for _, w := range g.produces {
		if !w.finished {
			c.finishProduce(g, w, ProduceResult{Err: ErrReplicaStopped, BaseOffset: -1})
		}
	}
	for _, r := range g.reads {
		if !r.finished {
			c.failRead(g, r, ErrUnknownTopicPartition, 0)
		}
	}
	for _, s := range g.parked {
		c.sessionGroupGone(s, g)
	}
	g.parked = nil
	c.removeReplica(g)
}

// removeReplica closes a stopped replica's log and removes its files
// behind a durable tombstone.
func (c *Core) removeReplica(g *group) {
	c.cancelReplicaJobs(g.dir) // a pass job reads the prefix closePrefix closes
	c.closePrefix(g)
	if err := g.log.Close(); err != nil {
		g.logs.log(slog.LevelWarn, "close replica log", slog.Any("err", err))
	}
	// The tombstone is durable before any file goes: a replica whose
	// files are gone but whose delete a restarted node has not replayed
	// yet must not come back empty (reconcile, deletedHere).
	if err := markDeleted(c.cfg, g.dir, c.meta.meta.Version(), voteFloor(g)); err != nil {
		g.logs.log(slog.LevelWarn, "mark replica deleted; its files stay", slog.String("dir", g.dir), slog.Any("err", err))
		return
	}
	c.removeReplicaFiles(g.dir, g.logs)
}

// removeReplicaFiles removes the files of a tombstoned replica's
// directory (all but the tombstone).
func (c *Core) removeReplicaFiles(dir string, logs coreLog) {
	// No checkpoint or snapshot job writes here once it returns
	// (checkpoint_job.go).
	c.cancelReplicaJobs(dir)
	if err := c.walVoid(dir + "/log"); err != nil { // wal.go
		logs.log(slog.LevelWarn, "write-ahead log reset of a deleted replica", slog.Any("err", err))
	}
	for _, sub := range replicaSubdirs {
		if err := removeDir(c.cfg, dir+sub); err != nil {
			logs.log(slog.LevelWarn, "remove replica files", slog.String("dir", dir+sub), slog.Any("err", err))
		}
	}
}

// replicaSubdirs are the directories of a replica's files, below its
// directory.
var replicaSubdirs = []string{"/log", "/checkpoint", "/checkpoint/index", "/rejoin", compactedDir}

// deletedName is the tombstone file in a deleted replica's directory.
const deletedName = "deleted"

// deletedTmpName is markDeleted's temporary file, renamed over
// deletedName once written and synced in full.
const deletedTmpName = "deleted.tmp"

// markDeleted writes dir's tombstone, carrying the metadata version that
// stopped the replica (a later move may place it here again:
// deletedBefore) and, when known, the highest term it may have voted in
// (floor+1; 0: unknown), and makes it durable: u64 version, then u64
// floor+1, little-endian (older tombstones hold the version alone). It is
// written atomically: a temporary file written and synced, renamed to
// deletedName, the directory synced; a kill or power loss at any point
// leaves no tombstone or the whole one (TestTombstoneWrittenAtomically).
// A tombstone written in place by older versions (created, then written)
// could be left empty by a kill in between: deletedBefore still reads one
// of another length as torn. A temporary file a crash left behind is
// overwritten by the next markDeleted of the directory (the replica's
// files are still there then: they go only after the tombstone is
// durable).
func markDeleted(cfg Config, dir string, version, floorPlusOne uint64) error {
	data := binary.LittleEndian.AppendUint64(nil, version)
	data = binary.LittleEndian.AppendUint64(data, floorPlusOne)
	tmp := dir + "/" + deletedTmpName
	if err := writeFile(cfg.Disk, tmp, data); err != nil {
		return err
	}
	if err := cfg.Disk.Rename(tmp, dir+"/"+deletedName); err != nil {
		return err
	}
	return cfg.Disk.SyncDir(dir)
}

// voteFloor is the highest term a stopped replica may ever have voted in,
// plus one (0: unknown). Raft persists its term before it votes and votes
// only in its current term, so the replica's term bounds every vote of
// this incarnation; a replica rebuilt earlier (rejoin done) also voted,
// before its loss, in terms up to its floor. A replica still recovering
// does not know its floor: unknown.
func voteFloor(g *group) uint64 {
	if g.raw == nil {
		return 0
	}
	term := g.raw.BasicStatus().GetTerm()
	switch r := g.rejoin; {
	case r == nil:
		return term + 1
	case r.phase == rejoinDone:
		return max(term, r.floor) + 1
	}
	return 0
}

// deletedHere reports whether dir holds a replica tombstone.
func deletedHere(cfg Config, dir string) bool {
	names, err := cfg.Disk.List(dir)
	return err == nil && slices.Contains(names, deletedName)
}

// durable makes the file name of dir, found listed, durable: its bytes and
// its name, which after a process kill may sit in the page cache only.
func durable(disk raftlog.Disk, dir, name string) error {
	if err := syncedWrite(disk, dir+"/"+name, func(raftlog.File) error { return nil }); err != nil {
		return err
	}
	return disk.SyncDir(dir)
}

// removeDir removes every file of dir and syncs the removal, even when
// dir lists empty: a removal a process kill interrupted (after its Remove
// calls, before its SyncDir) left the names gone from the listing but not
// durably, and a power loss would bring them back while a later removal
// that did sync stays done: a checkpoint header without the index chunks
// it names (the simulator's seed 155).
func removeDir(cfg Config, dir string) error {
	names, err := cfg.Disk.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := cfg.Disk.Remove(dir + "/" + n); err != nil {
			return err
		}
	}
	return cfg.Disk.SyncDir(dir)
}

// metaLeader is the metadata group's leader as this node knows it (0:
// none), and its term.
func (c *Core) metaLeader() (NodeID, uint64) {
	if c.meta == nil {
		return 0, 0
	}
	lead, term, _ := c.meta.leadership()
	return lead, term
}

// proposeMeta proposes a metadata command (the bytes of a metadata.Encode
// helper) and calls done once, at the end of a later call: with the
// applied result (its Err says whether the command took effect), or with
// ErrNotController (no leader known: nothing proposed), ErrBusy, ErrTimeout
// (indefinite: the command may still apply) or ErrStopped. Followers'
// proposals travel to the leader through raft's proposal forwarding; the
// applied entry finds its wait by a random 64-bit proposal id, unique
// across nodes and restarts (all nodes apply every entry).
func (c *Core) proposeMeta(data []byte, timeoutTicks uint64, done func(metadata.Result, error)) *metaWait {
	fail := func(err error) *metaWait {
		c.completions = append(c.completions, func() { done(metadata.Result{}, err) })
		return nil
	}
	switch lead, _ := c.metaLeader(); {
	case c.closed:
		return fail(ErrStopped)
	case lead == 0:
		return fail(ErrNotController)
	case len(c.metaQueue) >= c.cfg.PendingRequestsMax:
		return fail(ErrBusy)
	}
	id := c.rand.Uint64()
	for id == 0 || c.metaWaits[id] != nil {
		id = c.rand.Uint64()
	}
	data = metadata.WithProposalID(data, id)
	if c.meta.meta.ClusterID().IsZero() {
		// No cluster id yet: offer one. The first seeded command applied
		// fixes it; every node applies the same one.
		var seed metadata.UUID
		for i := 0; i < len(seed); i += 8 {
			binary.LittleEndian.PutUint64(seed[i:], c.rand.Uint64())
		}
		data = metadata.WithClusterSeed(data, seed)
	}
	c.markReady(c.meta.group)
	if err := c.meta.raw.Propose(data); err != nil {
		return fail(ErrNotController)
	}
	w := &metaWait{id: id, deadline: c.ticks + max(timeoutTicks, 1), done: done}
	c.metaWaits[id] = w
	c.metaQueue = append(c.metaQueue, w)
	return w
}

// finishMeta completes a metadata wait.
func (c *Core) finishMeta(w *metaWait, res metadata.Result, err error) {
	if w.finished {
		panic(fmt.Sprintf("node: metadata proposal %x finished twice", w.id))
	}
	w.finished = true
	delete(c.metaWaits, w.id)
	done := w.done
	w.done = nil
	c.completions = append(c.completions, func() { done(res, err) })
}

// metaApplied completes the wait of this node's proposal that res answers.
func (c *Core) metaApplied(res metadata.Result) {
	if w := c.metaWaits[res.ProposalID]; w != nil && res.ProposalID != 0 {
		c.finishMeta(w, res, nil)
	}
}

// expireMetaWaits fails the metadata waits whose deadline passed (their
// timeouts differ, so every wait is checked) and drops finished ones.
func (c *Core) expireMetaWaits() {
	kept := c.metaQueue[:0]
	for _, w := range c.metaQueue {
		if !w.finished && w.deadline <= c.ticks {
			c.finishMeta(w, metadata.Result{}, ErrTimeout)
		}
		if !w.finished {
			kept = append(kept, w)
		}
	}
	clear(c.metaQueue[len(kept):])
	c.metaQueue = kept
}

// selfRemoved tells whether this node's metadata state records it
// removed (strand node decommission): the metadata group dropped it, so
// what it proposes is never committed and the leader it knows is stale.
func (c *Core) selfRemoved() bool {
	if c.meta == nil {
		return false
	}
	n, ok := c.meta.meta.Node(uint64(c.cfg.ID))
	return ok && n.State == metadata.NodeRemoved
}

// maybeRegister proposes RegisterNode with this node's address and rack
// while the metadata state lacks or differs from them, one proposal at a
// time, retried after a timeout; it waits for a known leader.
func (c *Core) maybeRegister() {
	if c.meta == nil || c.closed || c.registerWait != nil || c.ticks < c.registerAfter {
		return
	}
	if lead, _ := c.metaLeader(); lead == 0 {
		return
	}
	self := c.selfPeer()
	if n, ok := c.meta.meta.Node(uint64(c.cfg.ID)); ok && (n.State != metadata.NodeActive ||
		n.Address == self.Address && n.Rack == self.Rack && n.KafkaAddress == self.KafkaAddress && !n.Fenced) {
		if n.State == metadata.NodeRemoved && !c.removedLogged {
			c.removedLogged = true
			c.log.log(slog.LevelError, "this node was removed from the cluster (strand node decommission): it hosts nothing and never registers again; stop it")
		}
		return // registered, or decommissioned: a removed node never registers again
	}
	data, err := metadata.EncodeRegisterNodeKafka(uint64(c.cfg.ID), self.Address, self.Rack, self.KafkaAddress)
	if err != nil {
		c.log.log(slog.LevelError, "cannot register node", slog.String("address", self.Address), slog.Any("err", err))
		return
	}
	c.registerWait = c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(res metadata.Result, err error) {
		c.registerWait = nil
		if err == nil && res.Err != nil {
			// Refused (a bad address, too many nodes): retrying at once
			// would propose every tick; wait a request timeout.
			c.registerAfter = c.ticks + uint64(c.cfg.RequestTimeoutTicks)
			c.log.log(slog.LevelError, "registration refused by the metadata group; retrying after a request timeout",
				slog.String("address", self.Address), slog.String("rack", self.Rack), slog.Any("err", res.Err))
		}
	})
}

// selfPeer is this node's entry of Config.Nodes.
func (c *Core) selfPeer() Peer {
	for _, p := range c.cfg.Nodes {
		if p.ID == c.cfg.ID {
			return p
		}
	}
	return Peer{ID: c.cfg.ID}
}

// MetadataStatus returns the metadata group's state; false only for a
// Core that failed to open it. Its HighWatermark is the metadata version;
// its Digest is computed once per applied index.
func (c *Core) MetadataStatus() (GroupStatus, bool) {
	if c.meta == nil {
		return GroupStatus{}, false
	}
	st := c.groupStatus(c.meta.group)
	st.HighWatermark = int64(c.meta.meta.Version())
	st.Digest = c.meta.digest()
	return st, true
}

// MetadataLeader returns the metadata group's leader as this node knows
// it (0: none) and the applied metadata version (MetadataStatus's Leader
// and HighWatermark), false without a metadata group. Unlike
// MetadataStatus it does not digest the metadata state (a hash of all of
// it, made again whenever an entry applied): the loop asks every round.
func (c *Core) MetadataLeader() (leader NodeID, version uint64, ok bool) {
	if c.meta == nil {
		return 0, 0, false
	}
	lead, _ := c.metaLeader()
	return lead, c.meta.meta.Version(), true
}

// MetadataNodes returns the registered nodes (sorted by id) and topics
// (sorted by name) as this node has applied them, for tools and tests.
func (c *Core) MetadataNodes() ([]metadata.Node, []metadata.Topic) {
	if c.meta == nil {
		return nil, nil
	}
	return c.meta.meta.Nodes(), c.meta.meta.Topics()
}

// peerAddress is the client address of node id: the registered one, else
// Config.Nodes', else empty.
func (c *Core) peerAddress(id NodeID) string {
	if id == 0 {
		return ""
	}
	if c.meta != nil {
		if n, ok := c.meta.meta.Node(uint64(id)); ok {
			return n.Address
		}
	}
	i := slices.IndexFunc(c.cfg.Nodes, func(p Peer) bool { return p.ID == id })
	if i < 0 {
		return ""
	}
	return c.cfg.Nodes[i].Address
}
