//go:build simbugs

package node

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/node/groupsvc"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
)

// Bugs plants known bugs so the simulator can prove its checkers catch
// them. It exists only in builds with the simbugs tag (make sim BUG=...,
// the planted-bug tests); production builds have no such switch.
type Bugs struct {
	// TierUploadShifted and TierDeleteOnPropose: tier_bugs_simbugs.go.
	TierUploadShifted, TierDeleteOnPropose bool
	// TierLocalEarly and TierRemoteOffByOne: tier_bugs_simbugs.go,
	// tier_read.go.
	TierLocalEarly, TierRemoteOffByOne bool
	AckBeforeCommit                    bool // complete acks=all produces when proposed, not applied
	SkipFsync                          bool // tell raft entries are stable without syncing
	FetchBeyondHighMark                bool // serve entries past the commit index
	ReapplyAfterRestart                bool // re-apply committed entries after restart without dedup
	LocalRead                          bool // serve a fetch from the leader's applied state, no read index
	// RestoreForgetsProducers restores a partition's checkpoint without its
	// idempotent-producer table.
	RestoreForgetsProducers bool
	// CheckpointForgetsProducers writes partition checkpoints without the
	// idempotent-producer table.
	CheckpointForgetsProducers bool
	// FetchRenumbersInsideBatch: a fetch that starts inside a batch hands
	// that batch out with the requested offset as its base offset, so the
	// client numbers its records from there (wrong by the records skipped).
	FetchRenumbersInsideBatch bool
	// AckLeaderEarly completes an acks=1 produce once proposed, before the
	// leader's log holds it durably (as acks=0 does).
	AckLeaderEarly bool
	// RecoverTrustsPageCache plants raftlog's RecoverTrustsPageCache in
	// every raft log the node opens.
	RecoverTrustsPageCache bool
	// LeaseReads serves linearizable reads from the leader's lease
	// (raft.ReadOnlyLeaseBased: no quorum round, trusting that no other
	// leader can exist within an election timeout of the last quorum
	// contact, counted in the leader's own ticks). Sound only while every
	// node ticks at the same rate and none stops: a paused or slow-ticking
	// leader still believes its lease.
	LeaseReads bool
	// RestoreIndexTimes restores a partition's offset index with each
	// batch's max timestamp read as its append time.
	RestoreIndexTimes bool
	// QuiescedNeverWake: a quiesced follower is never woken when its
	// leader's node goes silent (quiesce.go), so a crashed leader's idle
	// groups stay without a leader until a request arrives.
	QuiescedNeverWake bool
	// RestartNeverWakes: a quiesced follower is never woken when its
	// leader's node restarts within an election timeout (quiesce.go), so
	// a leader restarted on a full disk, which may not campaign, leaves
	// its idle groups without a leader.
	RestartNeverWakes bool
	// FullLeaderKeepsLeading: a node whose disk is full refuses produce
	// but never hands its leaderships on (diskfull.go), so its partitions
	// take no writes while replicas with space could lead them.
	FullLeaderKeepsLeading bool
	// FirstBatchMustFit: a fetch serves its first batch only if it fits
	// the fetch's byte budget, as later ones must (KIP-74 serves it
	// whole), so a reader whose budget is smaller than the next batch is
	// answered nothing, below the high-water mark, forever.
	FirstBatchMustFit bool
	// StalledLeaderKeepsLeading: the disk watchdog (stall.go) never calls
	// the node stalled, so a leader whose fsyncs hang keeps its
	// partitions (they commit on the followers but never apply there).
	StalledLeaderKeepsLeading bool
	// ElectionInCoreTicks: raft's ElectionTick gets the election timeout
	// in Core ticks (ElectionTicks × TicksPerRaftTick, as liveness.go and
	// stall.go count it) where raft counts raft ticks: elections take
	// TicksPerRaftTick times too long. Invisible while raft ticks every
	// Core tick (TicksPerRaftTick 1, the simulator's old configuration).
	ElectionInCoreTicks bool
	// AckBeforeSyncDone releases what a log write allows (acks=1 answers,
	// append and vote responses, the leader's own acknowledgement) once
	// the write's fsync is handed to the storage pipeline, not when it
	// completes.
	AckBeforeSyncDone bool
	// WALAckBeforeFsync answers acks=1 produces once their records are
	// written to the node-wide write-ahead log, before its fsync (wal.go).
	WALAckBeforeFsync bool
	// WipedNodeVotes: a replica that lost its state rejoins as if new,
	// voting at once (no disk-loss recovery: rejoin.go).
	WipedNodeVotes bool
	// RepairTrustsItself: a replica discarded for corrupt data reopens
	// as if new, voting at once (no recovery: repair.go).
	RepairTrustsItself bool
	// CompactPastStart compacts one segment too many: the one holding the
	// first retained batch goes too, above the agreed log start.
	CompactPastStart bool
	// StaleSnapshot builds a compaction snapshot without replaying the
	// entries since the previous one (each applied as empty): a follower
	// that installs it holds a state older than the log it continues.
	StaleSnapshot bool
	// TopicIDUnchecked: produce and fetch ignore the topic id a request
	// names, so a client that started on a topic deleted and re-created
	// under the same name reads and writes the new one as if it were the
	// old (checkTopicID always passes).
	TopicIDUnchecked bool
	// ProduceSkipsCRC: the produce path validates a batch's framing but
	// not its CRC, so a batch damaged in flight is proposed and committed
	// (the engine refuses it only when applying).
	ProduceSkipsCRC bool
	// MoveDropsOldReplicaEarly: a node stops and deletes its replica as
	// soon as a move's target leaves it out, not once the move completed
	// (moves.go): an old voter's copy goes before the new replicas hold
	// the log and before the configuration that removes it committed.
	MoveDropsOldReplicaEarly bool
	// RemoveBeforeCaughtUp: the metadata leader takes a removed node out
	// of the metadata group at once, not once its log holds everything
	// committed (members.go removalDue): a node down through its
	// decommission never learns its replicas moved and keeps hosting them.
	RemoveBeforeCaughtUp bool
	// AuthSkipsAlterQuotas: HandleAs runs an AlterQuotas request without
	// asking the ACLs (as if the request type were missing from
	// requestAccesses' switch and fell through unchecked), so any
	// principal may change anyone's quotas.
	AuthSkipsAlterQuotas bool
	// AuthRefusesUnconfirmed: authorization decides a refusal on the
	// node's applied metadata as it is, without a read index confirming
	// it current for the request (auth.go confirmThenHandle skipped): a
	// follower that has not heard of an ACL grant the leader committed and
	// acknowledged refuses the principal it allows.
	AuthRefusesUnconfirmed bool
	// MoveRacesRebalance: a coordinator built on a replica that a move
	// added (this node outside the partition's bootstrap set) starts at
	// the high-water mark, as if a replica new to the partition had no
	// group history to replay: when a move hands the group partition's
	// lead to it during a rebalance, it knows no member and no committed
	// offset.
	MoveRacesRebalance bool
	// CompactActiveSegment: a replica's compaction pass cleans up to its
	// own last stable offset, through the raft segment still being
	// appended to, instead of stopping at the decision's cleanable end
	// (which the leader bounds by its open segment's base, its checkpoint
	// and min.compaction.lag.ms): each replica's prefix then ends where
	// its own log happened to end.
	CompactActiveSegment bool
	// CompactDeleteUncut: on one replica of each partition (its lowest
	// voter) a compaction pass ignores its decision's log start, so after
	// a TRIM (compact,delete retention, DeleteRecords) its prefix keeps the
	// batches wholly below the log start the other replicas' passes drop
	// (engine/compact's rule 8): the replicas' prefixes differ.
	CompactDeleteUncut bool
	// PrefixInstallUnchecked: a stuck replica installing a peer's
	// compacted prefix switches to it after the first chunk, and the
	// switch does not check the bytes written against the record's digest
	// (raftlog/compacted's planted SetInstallBugs, set with it): the
	// replica's prefix ends where the first chunk did, under the record's
	// end and digest (compaction_install.go).
	PrefixInstallUnchecked bool
	// PrefixTrimUnheld: a replica trims its raft log up to its own
	// compacted prefix, not to what a majority of the voters' prefixes
	// hold (compaction_held.go): a follower that installs a raft snapshot
	// past its prefix then holds neither, and the records below may live
	// on one replica only.
	PrefixTrimUnheld bool
	// MarkersBeforeDecision: the transaction coordinator writes an
	// EndTxn's markers as the request arrives, before its decision is
	// durable (txn_bugs_simbugs.go).
	MarkersBeforeDecision bool
	// TierUploadNotReplicated: the leader counts an upload as remote once
	// its Put answers, in its own memory, not once its TIER_ADD applies
	// (tier_bugs_simbugs.go).
	TierUploadNotReplicated bool
}

// bugCoordinatorFromEnd (MoveRacesRebalance) starts co at the
// high-water mark when g is a replica a move added.
func (c *Core) bugCoordinatorFromEnd(g *group, co *groupsvc.Coordinator) {
	if !c.cfg.Bugs.MoveRacesRebalance || slices.Contains(g.bootSet(), c.cfg.ID) {
		return
	}
	co.Next, co.Fresh = g.part.HighWatermark(), false
}

// bugSkipAuthorization (AuthSkipsAlterQuotas) lets an AlterQuotas request
// past the authorization check.
func (c *Core) bugSkipAuthorization(req *strandpb.Request) bool {
	return c.cfg.Bugs.AuthSkipsAlterQuotas && req.GetAlterQuotas() != nil
}

// bugRefuseUnconfirmed (AuthRefusesUnconfirmed) takes the applied
// metadata as confirmed current for every request.
func (c *Core) bugRefuseUnconfirmed() bool { return c.cfg.Bugs.AuthRefusesUnconfirmed }

// bugRemoveBeforeCaughtUp (RemoveBeforeCaughtUp) makes every removal due.
func (c *Core) bugRemoveBeforeCaughtUp() bool { return c.cfg.Bugs.RemoveBeforeCaughtUp }

// bugMoveDropsEarly (MoveDropsOldReplicaEarly) hosts a moving partition
// only when this node is in the move's target.
func (c *Core) bugMoveDropsEarly() bool { return c.cfg.Bugs.MoveDropsOldReplicaEarly }

// bugQuiescedNeverWake (QuiescedNeverWake) turns off the wake of quiesced
// followers whose leader's node went silent.
func (c *Core) bugQuiescedNeverWake() bool { return c.cfg.Bugs.QuiescedNeverWake }

// bugRestartNeverWakes (RestartNeverWakes) turns off the wake of quiesced
// followers whose leader's node restarted (a new incarnation).
func (c *Core) bugRestartNeverWakes() bool { return c.cfg.Bugs.RestartNeverWakes }

// bugFullKeepsLeading (FullLeaderKeepsLeading) turns off a full node's
// hand-off of its partition leaderships.
func (c *Core) bugFullKeepsLeading() bool { return c.cfg.Bugs.FullLeaderKeepsLeading }

// bugFirstBatchMustFit (FirstBatchMustFit) holds a fetch's first batch to
// its byte budget too.
func (c *Core) bugFirstBatchMustFit() bool { return c.cfg.Bugs.FirstBatchMustFit }

// bugElectionTick (ElectionInCoreTicks) is raft's ElectionTick.
func (c *Core) bugElectionTick() int {
	if c.cfg.Bugs.ElectionInCoreTicks {
		return c.cfg.ElectionTicks * c.cfg.TicksPerRaftTick
	}
	return c.cfg.ElectionTicks
}

// bugIgnoreStall (StalledLeaderKeepsLeading) keeps the watchdog from
// calling the node stalled.
func (c *Core) bugIgnoreStall() bool { return c.cfg.Bugs.StalledLeaderKeepsLeading }

// bugReleaseBeforeSync (AckBeforeSyncDone) releases g's held responses and
// acks=1 answers as its sync starts.
func (c *Core) bugReleaseBeforeSync(g *group) {
	if c.cfg.Bugs.AckBeforeSyncDone {
		c.release(g)
	}
}

// bugWALAckEarly (WALAckBeforeFsync) answers g's acks=1 produces as the
// write-ahead log's sync starts: a power loss before the fsync loses an
// acknowledged write the partition log never synced either.
func (c *Core) bugWALAckEarly(g *group) {
	if !c.cfg.Bugs.WALAckBeforeFsync {
		return
	}
	for _, w := range g.pipe.acked {
		if !w.finished {
			c.finishProduce(g, w, ProduceResult{BaseOffset: -1, Leader: c.cfg.ID})
		}
	}
	clear(g.pipe.acked)
	g.pipe.acked = g.pipe.acked[:0]
}

// bugRepairTrustsItself (RepairTrustsItself) skips the rejoin file of a
// discarded replica.
func (c *Core) bugRepairTrustsItself() bool { return c.cfg.Bugs.RepairTrustsItself }

// bugWipedNodeVotes (WipedNodeVotes) skips disk-loss recovery.
func (c *Core) bugWipedNodeVotes() bool { return c.cfg.Bugs.WipedNodeVotes }

// bugCompactLimit (CompactPastStart) raises a compaction's limit to the
// last index of the segment holding limit+1, the first retained batch.
func (c *Core) bugCompactLimit(g *group, limit uint64) uint64 {
	if !c.cfg.Bugs.CompactPastStart {
		return limit
	}
	for _, s := range g.log.Segments(nil) {
		if s.Base <= limit+1 && limit+1 <= s.Last && s.Last <= g.appliedRaft {
			return s.Last
		}
	}
	return limit
}

// bugReplayEmpty (StaleSnapshot) replays every entry as empty.
func (c *Core) bugReplayEmpty() bool { return c.cfg.Bugs.StaleSnapshot }

// bugBatchCRC (ProduceSkipsCRC) hands the produce path's validation a
// copy of batch whose CRC field is recomputed, so only its framing is
// checked; the proposed bytes stay as received.
func (c *Core) bugBatchCRC(batch []byte) []byte {
	if !c.cfg.Bugs.ProduceSkipsCRC || len(batch) < recordbatch.HeaderBytes {
		return batch
	}
	fixed := append([]byte(nil), batch...)
	binary.LittleEndian.PutUint32(fixed[4:8], crc32.Checksum(fixed[8:], crc32.MakeTable(crc32.Castagnoli)))
	return fixed
}

// bugSkipTopicID (TopicIDUnchecked) makes checkTopicID pass any id.
func (c *Core) bugSkipTopicID() bool { return c.cfg.Bugs.TopicIDUnchecked }

// bugRestoreIndexTimes (RestoreIndexTimes) rebuilds a partition just
// restored from its checkpoint with every index entry's MaxTimestampMs
// replaced by its AppendTimeMs (kept non-decreasing, as the engine
// requires), as a decoder reading the wrong field would. Offsets, the
// high-water mark and the producer table stay right; ListOffsets by
// timestamp (which the workload does not issue yet) and the whole-state
// digest can see it.
func (c *Core) bugRestoreIndexTimes(g *group) {
	if !c.cfg.Bugs.RestoreIndexTimes || g.part == nil {
		return
	}
	start, _ := g.part.IndexOrdinals()
	index := append([]engine.BatchLocation(nil), g.part.IndexSince(start)...)
	running := int64(math.MinInt64) // the engine wants max times non-decreasing along the index
	for i := range index {
		running = max(running, index[i].AppendTimeMs)
		index[i].MaxTimestampMs = running
	}
	part, err := engine.RestorePartitionIndexed(g.part.StateSnapshot(), index)
	if err != nil {
		panic(fmt.Sprintf("node: planted bug: %v", err))
	}
	g.part = part
	c.statusChanged()
}

// bugReadOnlyOption is raft's read-only mode: lease-based under LeaseReads.
func (c *Core) bugReadOnlyOption() raft.ReadOnlyOption {
	if c.cfg.Bugs.LeaseReads {
		return raft.ReadOnlyLeaseBased
	}
	return raft.ReadOnlySafe
}

// bugLogOptions plants the raftlog bugs of cfg.Bugs in a log's options.
func (c *Core) bugLogOptions(o *raftlog.Options) {
	o.Bugs.RecoverTrustsPageCache = c.cfg.Bugs.RecoverTrustsPageCache
}

// plantedBugs is embedded in Config: cfg.Bugs selects the planted bugs.
type plantedBugs struct {
	Bugs Bugs
}

// groupBugs is a replica's planted-bug state.
type groupBugs struct {
	// shifts maps engine indexes to raft indexes; empty unless
	// ReapplyAfterRestart renumbered entries (see bugReapply).
	shifts []indexShift
	// ghostCount: records acknowledged early (AckBeforeCommit), not applied.
	ghostCount int64
	// tierCursor: the end of the last upload this node's leader saw put
	// (TierUploadNotReplicated, tier_bugs_simbugs.go).
	tierCursor int64
}

// produceBugs is a produce wait's planted-bug state.
type produceBugs struct {
	// ghost: already acknowledged by AckBeforeCommit; kept only to count
	// its records into the next guess until it applies.
	ghost bool
}

// indexShift: engine indexes from engineFrom on are raft index + delta.
type indexShift struct {
	engineFrom uint64
	delta      uint64
}

// bugSkipFsync: raft is told the entries are stable (messages go out, the
// leader counts its own vote for the entry) while they sit in the page
// cache. A crash then loses acknowledged entries and votes: committed data
// vanishes or a node votes twice in a term.
func (c *Core) bugSkipFsync() bool { return c.cfg.Bugs.SkipFsync }

// bugStartSyncSkippingFsync is bugSkipFsync for a log's sync job, which
// issues the log's pending writes and then skips its fsyncs; nil, nil
// without the bug.
func (c *Core) bugStartSyncSkippingFsync(g *group) (write, sync func() error) {
	if !c.cfg.Bugs.SkipFsync {
		return nil, nil
	}
	return g.log.StartWriteOnly()
}

// bugLocalRead: a replica that believes it leads serves a fetch from its
// applied state at once, without a read index confirming its leadership
// (a lease read with no lease). A leader deposed without knowing it (cut
// off from the majority) serves a stale high-water mark and misses
// acknowledged writes; a new leader that has not applied its
// predecessor's committed entries does too.
func (c *Core) bugLocalRead() bool { return c.cfg.Bugs.LocalRead }

// bugAckEarly (AckBeforeCommit) acknowledges an acks=all produce before
// its entry is even stable, with the leader's guess of its offset. A later
// leader change that drops the entry loses an acknowledged write, and a
// guess that misses a concurrent proposal gives inconsistent offsets.
func (c *Core) bugAckEarly(g *group, w *produceWait, done func(ProduceResult)) {
	if w.acks != AcksAll || !c.cfg.Bugs.AckBeforeCommit {
		return
	}
	guess := g.part.HighWatermark() + g.ghostCount
	w.ghost = true
	g.ghostCount += int64(w.records)
	c.completeProduce(done, ProduceResult{BaseOffset: guess, Leader: c.cfg.ID})
	w.done = nil
}

// bugAckedEarly reports whether w was acknowledged by bugAckEarly, and
// takes its records out of the guess.
func (c *Core) bugAckedEarly(g *group, w *produceWait) bool {
	if !w.ghost {
		return false
	}
	g.ghostCount -= int64(w.records)
	return true
}

// bugUncommittedTail (FetchBeyondHighMark) serves the produce batches in
// the log past the applied index, not yet committed, with offsets guessed
// on from hwm. Raft may still replace them.
func (c *Core) bugUncommittedTail(g *group, hwm int64) ([]FetchedBatch, error) {
	if !c.cfg.Bugs.FetchBeyondHighMark {
		return nil, nil
	}
	last, err := g.log.LastIndex()
	if err != nil || last <= g.appliedRaft {
		return nil, nil
	}
	lo := g.appliedRaft + 1
	hi := min(last+1, lo+fetchBatchesMax)
	entries, err := g.log.Entries(lo, hi, math.MaxUint64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s/%d entries %d..%d: %v", ErrStorage, g.tp.Topic, g.tp.Partition, lo, hi, err)
	}
	var tail []FetchedBatch
	next := hwm
	for _, e := range entries {
		if e.GetType() != raftpb.EntryNormal {
			continue
		}
		fields, err := engine.DecodeEntry(e.GetData())
		if err != nil || fields.Kind != strandpb.EntryKind_ENTRY_KIND_PRODUCE || len(fields.Batch) == 0 {
			continue
		}
		tail = append(tail, FetchedBatch{BaseOffset: next, AppendTimeMs: fields.AppendTimeMs, Batch: fields.Batch})
		next += int64(batchRecordCount(fields.Batch))
	}
	return tail, nil
}

// bugReapply (ReapplyAfterRestart), called once a partition's checkpoint
// is restored: raft is still told applied = 0, and every redelivered entry
// goes to the engine under a renumbered index (raft index + the
// checkpoint's engine index) so the engine's gap check passes. Entries
// 1..K are applied twice: their batches get a second, higher set of
// offsets, this replica's high-water mark runs ahead of its peers', and
// its fetches return records twice — the bug of a node that trusts the
// engine's own "next index" and forgets to pass Applied. It reports
// whether raft must start from applied 0.
func (c *Core) bugReapply(g *group) bool {
	if !c.cfg.Bugs.ReapplyAfterRestart {
		return false
	}
	engineIndex := g.part.AppliedIndex()
	g.shifts = append(g.shifts, indexShift{engineFrom: engineIndex + 1, delta: engineIndex})
	g.checkpointIndex = 0
	return true
}

// bugNoCheckpoint: a replica whose entries were renumbered writes no more
// checkpoints (the checkpoint format has no room for the renumbering); its
// next restart starts again from the clean checkpoint before the bug.
func (c *Core) bugNoCheckpoint(g *group) bool { return len(g.shifts) > 0 }

// bugEngineIndex (ReapplyAfterRestart) is the index under which raft entry index is applied to the
// engine: the same, unless ReapplyAfterRestart renumbered entries.
func (g *group) bugEngineIndex(raftIndex uint64) uint64 {
	if len(g.shifts) == 0 {
		return raftIndex
	}
	return raftIndex + g.shifts[len(g.shifts)-1].delta
}

// bugRaftIndexOf (ReapplyAfterRestart) inverts bugEngineIndex for the batch locations the engine holds.
func (g *group) bugRaftIndexOf(engineIndex uint64) uint64 {
	for i := len(g.shifts) - 1; i >= 0; i-- {
		if engineIndex >= g.shifts[i].engineFrom {
			return engineIndex - g.shifts[i].delta
		}
	}
	return engineIndex
}

// bugForgetProducers (RestoreForgetsProducers) drops the producer table
// from a partition just restored from its checkpoint, as a restore that
// forgot to decode it would. The replica then refuses a known producer's
// next batch as unknown (or accepts a retry twice) where its peers, which
// kept the table, decide otherwise; until then its high-water mark and
// offsets agree with theirs.
func (c *Core) bugForgetProducers(g *group) {
	if !c.cfg.Bugs.RestoreForgetsProducers || g.part == nil {
		return
	}
	start, _ := g.part.IndexOrdinals() // keep the ordinals the index chunks use
	index := append([]engine.BatchLocation(nil), g.part.IndexSince(start)...)
	part, err := engine.RestorePartitionIndexed(withoutProducers(g.part.StateSnapshot()), index)
	if err != nil {
		panic(fmt.Sprintf("node: planted bug: %v", err))
	}
	g.part = part
	c.statusChanged()
}

// bugCheckpointState (CheckpointForgetsProducers) returns a partition's
// checkpoint state without its producer table, as an encoder that forgot
// the field would. Nothing shows until a replica restarts from such a
// checkpoint and a known producer's next batch, or a retry, reaches it.
func (c *Core) bugCheckpointState(state []byte) []byte {
	if !c.cfg.Bugs.CheckpointForgetsProducers {
		return state
	}
	return withoutProducers(state)
}

// withoutProducers re-encodes a PartitionSnapshot with no producer table.
func withoutProducers(state []byte) []byte {
	var snap strandpb.PartitionSnapshot
	if err := proto.Unmarshal(state, &snap); err != nil {
		panic(fmt.Sprintf("node: planted bug: %v", err))
	}
	snap.Producers = nil
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(&snap)
	if err != nil {
		panic(fmt.Sprintf("node: planted bug: %v", err))
	}
	return data
}

// bugBatchBase (FetchRenumbersInsideBatch) is the base offset a fetch from
// offset gives a served batch whose true base offset is base: offset when
// the fetch starts inside the batch. Invisible while every batch holds one
// record (the fetch then starts at a batch's base).
func (c *Core) bugBatchBase(base, offset int64) int64 {
	if c.cfg.Bugs.FetchRenumbersInsideBatch && base < offset {
		return offset
	}
	return base
}

// bugAckLeaderEarly (AckLeaderEarly) reports whether a produce at acks
// should complete once proposed: an acks=1 produce then is acknowledged
// before the leader synced it, and a power loss drops an acknowledged
// write. Invisible to a workload that never sends acks=1.
func (c *Core) bugAckLeaderEarly(acks Acks) bool {
	return c.cfg.Bugs.AckLeaderEarly && acks == AcksLeader
}

// bugHeldUnbounded (PrefixTrimUnheld) takes this replica's own prefix
// end for what a majority holds.
func (c *Core) bugHeldUnbounded() bool { return c.cfg.Bugs.PrefixTrimUnheld }

// bugInstallFirstChunk (PrefixInstallUnchecked) makes an install's first
// chunk its last.
func (c *Core) bugInstallFirstChunk() bool { return c.cfg.Bugs.PrefixInstallUnchecked }

// bugPassDecision (CompactActiveSegment) moves a pass's cleanable end to
// the replica's last stable offset when that is past the decision's;
// (CompactDeleteUncut) on the partition's lowest voter it drops the
// decision's log start.
func (c *Core) bugPassDecision(g *group, d compact.Decision) compact.Decision {
	if c.cfg.Bugs.CompactActiveSegment {
		d.CleanableEnd = max(d.CleanableEnd, g.part.LastStableOffset())
	}
	if c.cfg.Bugs.CompactDeleteUncut && g.confState != nil && len(g.confState.GetVoters()) > 0 &&
		NodeID(slices.Min(g.confState.GetVoters())) == c.cfg.ID {
		d.LogStart = 0
	}
	return d
}
