package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/objstore"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
)

// Tiered storage, the node's part (issue 27; engine/tier's "Next: node
// integration", steps 1-5). Built: the topic settings and their gate,
// uploads, deletion from the bucket, local retention (tierLocalLimit, with
// total retention over the remote segments, remoteRetention) and remote
// reads (tier_read.go), the figures of both tiers (tier_view.go: topic
// describe, /metrics), an upload budget (tier_throttle.go) and recovery
// from the bucket (tier_recover.go: the topic descriptor, TIER_RESTORE).
// remote.storage.enable=true is still refused unless
// Config.TieredStorageUnfinished (engine/tier's "Next", step 6).
//
// Uploads, on the leader of a tiered partition, at each retention check
// (tierCheck), one job at a time per partition, once the leader applied
// an entry of its own term (its manifest then holds every committed ADD:
// it never uploads again, as its own term's object, a range an older
// leader's ADD covers):
//
//  1. tier.Manifest.NextUpload over the sealed raft segments as offset
//     ranges (through the engine's index) and the last stable offset names
//     [Base, End); the indexed batches of the range are located and their
//     raft entries read as a cold fetch reads them (raftlog StartRead);
//  2. a storage job (untimed: the bucket, not the disk) reads the entries,
//     turns each indexed batch or marker into a tier.Batch
//     (tierBatches), EncodeObject, and Puts it under
//     tier.SegmentKey(c.tierPrefix(g), seg) (topics/<topic UUID>/<partition>) with the
//     leader's term;
//  3. its completion, on the loop, proposes a TIER_ADD; the ADD's apply
//     answers Added, Duplicate or Stale (tierApplied). A Stale object is
//     deleted (a job); so is an object whose ADD was never proposed (the
//     leadership moved). A failed read or Put is retried after a backoff
//     of tierBackoffMinTicks doubling to tierBackoffMaxTicks.
//
// Deletion, by the leader, as jobs: the objects of the segments a TRIM
// took out of the manifest (Result.TierDropped), and every
// tierSweepTicks an orphan sweep: List the partition's prefix, delete what
// tier.Manifest.Orphan names, only once the leader applied an entry of its
// own term (no ADD of an older term can commit after that). A deletion
// that fails is retried at the next check; one that was missed (a crash,
// a leadership change) is the next sweep's.
//
// Rejected: uploading on every replica (N copies in the bucket; the
// manifest names one object per range, its uploader's term in the key),
// and deleting an object when its ADD is proposed (the ADD may be lost
// with the leadership while the object is what the next leader's ADD of
// the same key would name; planted as TierDeleteOnPropose).

const (
	// tierBackoffMinTicks and tierBackoffMaxTicks bound the wait before a
	// failed upload or deletion is tried again (doubling).
	tierBackoffMinTicks = 20
	tierBackoffMaxTicks = 1000
	// tierSweepTicks is how often a leader lists its partition's prefix
	// for orphans.
	tierSweepTicks = 600
	// tierUploadBatchesMax bounds the batches of one object: a longer
	// sealed segment is uploaded in several objects.
	tierUploadBatchesMax = 1 << 14
)

// errTierStore says the node has no object store for a tiered topic.
var errTierStore = errors.New("no object store configured on this node (strand serve --tier-dir, or --s3-endpoint and --s3-bucket); leave remote.storage.enable unset")

// tierState is a replica's tiered-storage bookkeeping; only its leader
// uses it.
type tierState struct {
	// job is the token of the partition's tier job in flight (0: none).
	job uint64
	// adding is the segment whose TIER_ADD this leader proposed and has
	// not seen applied, until tick addDeadline.
	adding      *tier.Segment
	addDeadline uint64
	// retryAt: no new job before this tick; backoff is the next wait.
	retryAt uint64
	backoff uint64
	// deletes are object keys to delete, oldest first.
	deletes []string
	// sweepAt is the tick of the next orphan sweep.
	sweepAt uint64
	// appliedTerm is the raft term of the last entry applied.
	appliedTerm uint64
	// counts are the replica's figures (tier_view.go).
	counts tierCounts
	// Recovery (tier_recover.go): descriptor is the topic descriptor
	// this replica, as leader, last wrote (rewritten when the topic
	// changes: topic alter); descriptorBad once it logged that none can
	// be written; startMarked the remote log start of the last log start
	// marker it wrote (0: none); restoring while its TIER_RESTORE waits to
	// apply (until addDeadline); restoreRefused once it logged that a
	// recovered partition took records first.
	descriptor                               []byte
	startMarked                              int64
	descriptorBad, restoring, restoreRefused bool
}

// tierJob is a tier job in flight: an upload (read, seg, object), a
// deletion (keys) or a sweep (sweep set, the manifest as of its start).
type tierJob struct {
	log  *raftlog.Log
	read *raftlog.Read
	// pre: the entries StartRead answered without a job read.
	pre  []*raftpb.Entry
	locs []engine.BatchLocation
	seg  tier.Segment
	key  string
	// deletion: keys to delete; failed the ones that failed.
	keys   []string
	failed []string
	// sweep: the manifest and term the orphans are judged by; found the
	// keys the sweep names.
	sweep    bool
	manifest tier.Manifest
	term     uint64
	found    []string
	// describe: a descriptor Put (object, its bytes); mark: a log start
	// marker's Put (start); restore: a read of the remote log into
	// manifest (tier_recover.go).
	describe, mark, restore bool
	object                  []byte
	start                   int64
}

// gateTiering refuses remote.storage.enable=true when this node has no
// object store, and, until tiered storage is finished, unless
// Config.TieredStorageUnfinished. Like the other config refusals it sits before the
// proposal, never in the metadata state machine.
func (c *Core) gateTiering(sets []metadata.ConfigEntry) error {
	for _, e := range sets {
		if e.Name != metadata.ConfigRemoteStorageEnable || e.Value != "true" {
			continue
		}
		if c.cfg.ObjectStore == nil {
			return fmt.Errorf("%w: %s=true: %w", metadata.ErrInvalidConfig, e.Name, errTierStore)
		}
		if !c.cfg.TieredStorageUnfinished {
			return fmt.Errorf("%w: %s=true is not enforced yet (tiered storage is unfinished); leave it unset",
				metadata.ErrInvalidConfig, e.Name)
		}
	}
	return nil
}

// tiered reports whether g's partition uploads: its topic has remote
// storage on and the node a store.
func (c *Core) tiered(g *group) bool {
	return c.cfg.ObjectStore != nil && g.ret.configKnown && g.ret.config.RemoteStorageEnable && !isCoordinatorTopic(g.tp.Topic)
}

// tierCheck is the leader's tier work at a retention check: one job at a
// time, deletions first, then an upload, then a sweep when due.
func (c *Core) tierCheck(g *group) {
	if !c.tiered(g) {
		return
	}
	_, term, leading := g.leadership()
	if !leading {
		g.tier.adding, g.tier.deletes = nil, nil       // the next leader's (its sweep finds what is left)
		g.tier.descriptor, g.tier.startMarked = nil, 0 // written again if it leads again
		return
	}
	if g.tier.job != 0 || c.ticks < g.tier.retryAt {
		return
	}
	// A trim's log start marker goes to the bucket before the trim's
	// objects leave it (engine/tier's "Recovery"): a recovery never
	// starts below a start whose objects are gone.
	if g.part.TierStart() > g.tier.startMarked {
		if g.tier.appliedTerm == term {
			c.startTierMark(g) // tier_recover.go
		}
		return
	}
	if len(g.tier.deletes) > 0 {
		c.startTierDelete(g)
		return
	}
	if g.tier.adding != nil && c.ticks < g.tier.addDeadline {
		return
	}
	g.tier.adding = nil
	if g.tier.appliedTerm != term {
		// A new leader uploads once it applied an entry of its own term:
		// its manifest then holds every committed TIER_ADD, so it neither
		// uploads again, under its term's key, a range an older leader's
		// ADD covers, nor starts past a range whose ADD it has yet to
		// apply (simnet/tier_replicated.go checks both at every Put).
		return
	}
	if c.tierRecoverCheck(g) { // tier_recover.go
		return
	}
	if !c.tierUploadHeld() && c.startTierUpload(g, term) { // tier_throttle.go
		return
	}
	if c.ticks >= g.tier.sweepAt {
		c.startTierSweep(g, term)
	}
}

// sealedRanges answers g's sealed, applied raft segments as offset ranges
// (empty ones left out).
func (c *Core) sealedRanges(g *group) []tier.Range {
	g.ret.segs = g.log.Segments(g.ret.segs[:0])
	var out []tier.Range
	hw := g.part.HighWatermark()
	for _, s := range g.ret.segs[:max(0, len(g.ret.segs)-1)] {
		if s.Last > g.appliedRaft {
			break
		}
		first, ok := g.part.FirstBatchFrom(s.Base)
		if !ok {
			break
		}
		end := hw
		if next, ok := g.part.FirstBatchFrom(s.Last + 1); ok {
			end = next.BaseOffset
		}
		if end > first.BaseOffset {
			out = append(out, tier.Range{Base: first.BaseOffset, End: end})
		}
	}
	return out
}

// startTierUpload starts the upload NextUpload names, if any; it reports
// whether a job started.
func (c *Core) startTierUpload(g *group, term uint64) bool {
	m := g.part.Tier()
	sealed, stable := c.sealedRanges(g), g.part.LastStableOffset()
	rng, ok := m.NextUpload(g.part.LogStartOffset(), sealed, stable)
	rng, ok = c.bugTierNextUpload(g, sealed, stable, rng, ok) // planted-bug hook (-tags simbugs)
	if !ok {
		return false
	}
	locs, err := g.part.AppendLocations(nil, rng.Base, tierUploadBatchesMax)
	for len(locs) > 0 && locs[len(locs)-1].BaseOffset >= rng.End {
		locs = locs[:len(locs)-1]
	}
	if err != nil || len(locs) == 0 {
		return false
	}
	locs = c.bugTierLocations(g, locs) // planted-bug hook (-tags simbugs)
	last := locs[len(locs)-1]
	rng.End = min(rng.End, last.BaseOffset+int64(last.RecordCount))
	pre, read, err := g.log.StartRead(locs[0].RaftIndex, last.RaftIndex+1, math.MaxUint64)
	if err != nil {
		g.tier.counts.uploadErrs++
		c.tierFailed(g, fmt.Errorf("upload of [%d, %d): %w", rng.Base, rng.End, err))
		return false
	}
	j := &tierJob{log: g.log, read: read, pre: pre, locs: locs,
		seg: tier.Segment{Base: rng.Base, End: rng.End, Term: term}}
	store, prefix := c.cfg.ObjectStore, c.tierPrefix(g)
	run := func() error { return j.upload(store, prefix) }
	g.tier.job = c.queueJob(syncJob{g: g, run: run, tier: j, untimed: true})
	return true
}

// upload is an upload job's work, off the loop: read, encode, Put.
func (j *tierJob) upload(store objstore.Store, prefix string) error {
	ents := j.pre
	if j.read != nil {
		if err := j.read.Run(); err != nil {
			return err
		}
		ents = j.read.Entries()
	}
	batches, err := tierBatches(j.locs, ents)
	if err != nil {
		return err
	}
	obj, err := tier.EncodeObject(batches)
	if err != nil {
		return err
	}
	j.seg.Bytes, j.seg.CRC, j.seg.MaxTimeMs = int64(len(obj)), crc32c(obj), -1
	for _, b := range batches {
		j.seg.MaxTimeMs = max(j.seg.MaxTimeMs, b.MaxTimeMs)
	}
	j.key = tier.SegmentKey(prefix, j.seg)
	return store.Put(context.Background(), j.key, bytes.NewReader(obj), int64(len(obj)))
}

// tierBatches turns the indexed batches locs, whose raft entries ents
// hold (contiguous, from locs[0].RaftIndex on), into an object's batches:
// a produce entry's batch with its producer fields, a marker entry's
// marker. Any other entry at an indexed location is ErrStorage.
func tierBatches(locs []engine.BatchLocation, ents []*raftpb.Entry) ([]tier.Batch, error) {
	if len(locs) == 0 {
		return nil, nil
	}
	lo := locs[0].RaftIndex
	out := make([]tier.Batch, 0, len(locs))
	for _, loc := range locs {
		k := loc.RaftIndex - lo
		if loc.RaftIndex < lo || k >= uint64(len(ents)) || ents[k].GetIndex() != loc.RaftIndex {
			return nil, fmt.Errorf("%w: entry %d of offset %d not read", ErrStorage, loc.RaftIndex, loc.BaseOffset)
		}
		b := tier.Batch{BaseOffset: loc.BaseOffset, NextOffset: loc.BaseOffset + int64(loc.RecordCount),
			AppendTimeMs: loc.AppendTimeMs, MaxTimeMs: max(-1, loc.MaxTimestampMs), ProducerID: -1, BaseSequence: -1}
		f, err := engine.DecodeEntry(ents[k].GetData())
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d at offset %d: %w", ErrStorage, loc.RaftIndex, loc.BaseOffset, err)
		}
		switch f.Kind {
		case strandpb.EntryKind_ENTRY_KIND_PRODUCE:
			b.Data, b.Transactional = f.Batch, f.Transactional
			b.ProducerID, b.ProducerEpoch, b.BaseSequence = f.ProducerID, f.ProducerEpoch, f.BaseSequence
		case strandpb.EntryKind_ENTRY_KIND_TXN_MARKER:
			m, err := engine.EntryMarker(ents[k].GetData())
			if err != nil {
				return nil, fmt.Errorf("%w: marker entry %d at offset %d: %w", ErrStorage, loc.RaftIndex, loc.BaseOffset, err)
			}
			b.Marker, b.Transactional, b.Commit, b.CoordinatorEpoch = true, true, m.Commit, m.CoordinatorEpoch
			b.ProducerID, b.ProducerEpoch = m.ProducerID, m.ProducerEpoch
		default:
			return nil, fmt.Errorf("%w: entry %d of kind %v at indexed offset %d", ErrStorage, loc.RaftIndex, f.Kind, loc.BaseOffset)
		}
		out = append(out, b)
	}
	return out, nil
}

// startTierDelete deletes the keys queued, in one job.
func (c *Core) startTierDelete(g *group) {
	j := &tierJob{keys: g.tier.deletes}
	g.tier.deletes = nil
	store := c.cfg.ObjectStore
	run := func() error {
		for _, k := range j.keys {
			if err := store.Delete(context.Background(), k); err != nil {
				j.failed = append(j.failed, k)
			}
		}
		return nil
	}
	g.tier.job = c.queueJob(syncJob{g: g, run: run, tier: j, untimed: true})
}

// startTierSweep lists g's prefix and names the orphans of m at term.
func (c *Core) startTierSweep(g *group, term uint64) {
	j := &tierJob{sweep: true, manifest: g.part.Tier(), term: term}
	store, prefix := c.cfg.ObjectStore, c.tierPrefix(g)
	run := func() error {
		objs, err := store.List(context.Background(), prefix+"/")
		if err != nil {
			return err
		}
		for _, o := range objs {
			if seg, ok := tier.ParseSegmentKey(prefix, o.Key); ok && j.manifest.Orphan(seg, j.term) {
				j.found = append(j.found, o.Key)
			}
			// A log start marker below the start: the leader wrote the
			// start's own before it swept (tierRecoverCheck).
			if start, ok := tier.ParseStartKey(prefix, o.Key); ok && start < j.manifest.Start() {
				j.found = append(j.found, o.Key)
			}
		}
		return nil
	}
	g.tier.job = c.queueJob(syncJob{g: g, run: run, tier: j, untimed: true})
}

// finishTierJob ends g's tier job, on the loop.
func (c *Core) finishTierJob(token uint64, job syncJob, err error) {
	g, j := job.g, job.tier
	if !c.hosted(g) || g.tier.job != token {
		return // the replica stopped or reopened meanwhile: its next leader's sweep
	}
	g.tier.job = 0
	switch {
	case j.describe || j.mark || j.restore:
		c.finishTierRecoverJob(g, j, err)
		return
	case j.sweep:
		g.tier.sweepAt = c.ticks + tierSweepTicks
		if err != nil {
			c.tierFailed(g, fmt.Errorf("orphan sweep: %w", err))
			return
		}
		g.tier.deletes = append(g.tier.deletes, j.found...)
		c.stats.TierOrphans += len(j.found)
	case j.keys != nil:
		c.stats.TierDeletes += len(j.keys) - len(j.failed)
		if len(j.failed) > 0 {
			g.tier.deletes = append(g.tier.deletes, j.failed...)
			c.tierFailed(g, fmt.Errorf("deletion of %d objects failed", len(j.failed)))
			return
		}
	default:
		if j.read != nil && g.log == j.log {
			if _, ferr := g.log.FinishRead(j.read); ferr != nil && err == nil {
				err = ferr
			}
		}
		if err != nil {
			g.tier.counts.uploadErrs++
			c.tierFailed(g, fmt.Errorf("upload of [%d, %d): %w", j.seg.Base, j.seg.End, err))
			return
		}
		c.proposeTierAdd(g, j)
		return
	}
	g.tier.backoff = 0
}

// proposeTierAdd proposes the TIER_ADD of an uploaded segment, or, when
// this replica no longer leads in the object's term, deletes the object.
func (c *Core) proposeTierAdd(g *group, j *tierJob) {
	c.stats.TierUploads++
	c.tierUploadCharge(j.seg.Bytes) // tier_throttle.go
	g.tier.counts.uploads++
	g.tier.counts.upBytes += uint64(j.seg.Bytes)
	c.bugTierUploaded(g, j.seg) // planted-bug hook (-tags simbugs)
	g.tier.backoff = 0
	if _, term, leading := g.leadership(); !leading || term != j.seg.Term {
		g.tier.deletes = append(g.tier.deletes, j.key)
		return
	}
	c.nextProposalID++
	c.touch(g)
	if err := g.raw.Propose(engine.EncodeTierAddEntry(nil, c.cfg.Clock.Realtime().UnixMilli(), c.nextProposalID, j.seg)); err != nil {
		g.tier.deletes = append(g.tier.deletes, j.key) // no ADD names it
		return
	}
	seg := j.seg
	g.tier.adding, g.tier.addDeadline = &seg, c.ticks+uint64(c.cfg.RequestTimeoutTicks)
	c.bugTierDeleteOnPropose(g, j.key)
	g.logs.log(slog.LevelDebug, "tier segment uploaded", slog.Int64("base", seg.Base), slog.Int64("end", seg.End),
		slog.Int64("bytes", seg.Bytes))
}

// tierFailed backs g's tier work off after err.
func (c *Core) tierFailed(g *group, err error) {
	g.tier.backoff = min(max(2*g.tier.backoff, tierBackoffMinTicks), tierBackoffMaxTicks)
	g.tier.retryAt = c.ticks + g.tier.backoff
	c.stats.TierFailures++
	g.logs.log(slog.LevelDebug, "tier job failed; retried later", slog.Any("err", err), slog.Uint64("backoff_ticks", g.tier.backoff))
}

// tierApplied reacts to an applied entry's tier outcome on the leader:
// the objects of segments a TRIM dropped are deleted, as is the object of
// a TIER_ADD of ours found Stale.
func (c *Core) tierApplied(g *group, data []byte, res engine.Result) {
	if res.TierRestored {
		c.tierRestored(g) // tier_recover.go
	}
	if c.cfg.ObjectStore == nil || (res.Tier == 0 && len(res.TierDropped) == 0) {
		return
	}
	if _, _, leading := g.leadership(); !leading {
		return
	}
	prefix := c.tierPrefix(g)
	for _, s := range res.TierDropped {
		g.tier.deletes = append(g.tier.deletes, tier.SegmentKey(prefix, s))
	}
	if res.Tier == 0 {
		return
	}
	f, err := engine.DecodeEntry(data)
	if err != nil {
		return
	}
	seg := tier.Segment{Base: f.TierBase, End: f.TierEnd, Bytes: f.TierBytes, MaxTimeMs: f.TierMaxTimeMs, Term: f.TierTerm, CRC: f.TierCRC}
	if a := g.tier.adding; a != nil && *a == seg {
		g.tier.adding = nil
	}
	if res.Tier == tier.Stale {
		c.stats.TierStale++
		g.tier.deletes = append(g.tier.deletes, tier.SegmentKey(prefix, seg))
	}
}

// crc32c is the CRC32C of b (a segment's CRC).
func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// tierLocalLimit is local retention (step 4 of engine/tier's "Next"): on
// a tiered partition, the highest raft index g's raft log may drop, 0 for
// none. Oldest first, every sealed, applied raft segment whose records
// the remote log holds (RaftTrimBound of the manifest's Next: never one
// holding a record no applied TIER_ADD covers) and that
// local.retention.ms (by its newest record) or local.retention.bytes (the
// raft log still holding them without it) lets go. The engine then drops
// the covered batches from its index and keeps the log start (Compacted):
// the records below the local start are read from the bucket.
func (c *Core) tierLocalLimit(g *group) uint64 {
	if !g.ret.configKnown || !g.part.TierActive() || !c.tiered(g) {
		return 0
	}
	ms, size := g.ret.config.LocalRetention()
	if ms < 0 && size < 0 {
		return 0
	}
	bound := min(g.part.RaftTrimBound(g.part.TierNext()), g.appliedRaft)
	bound = c.bugTierLocalBound(g, bound) // planted-bug hook (-tags simbugs)
	g.ret.segs = g.log.Segments(g.ret.segs[:0])
	segs := g.ret.segs
	var total int64
	for _, s := range segs {
		total += s.Bytes
	}
	now := c.cfg.Clock.Realtime().UnixMilli()
	limit := uint64(0)
	for k := 0; k < len(segs)-1 && segs[k].Last <= bound; k++ {
		s := segs[k]
		expired := false
		if ms >= 0 {
			newest, ok := g.part.LastBatchThrough(s.Last)
			expired = !ok || newest.MaxTimestampMs < now-ms
		}
		oversize := size >= 0 && total-s.Bytes >= size
		if !expired && !oversize {
			break
		}
		total -= s.Bytes
		limit = s.Last
	}
	return limit
}

// remoteRetention is total retention over a tiered partition's remote
// segments (retention.ms by each segment's newest record, retention.bytes
// over the remote bytes and raftBytes, the raft segments not wholly
// remote), oldest first, like prefixRetention over a compacted prefix: the
// log start at the end of the last segment that goes, and stop when one
// is kept (the younger raft segments are not weighed then). When every
// remote segment may go it answers their end and false, and the raft
// segments are weighed next. A TRIM to it takes the segments out of the
// manifest (Result.TierDropped), whose objects the leader deletes.
func remoteRetention(m tier.Manifest, cfg metadata.TopicConfig, nowMs, raftBytes int64) (int64, bool) {
	total := raftBytes + m.Bytes()
	cut := int64(0)
	for _, s := range m.Segments() {
		expired := cfg.RetentionMs >= 0 && s.MaxTimeMs < nowMs-cfg.RetentionMs
		oversize := cfg.RetentionBytes >= 0 && total-s.Bytes >= cfg.RetentionBytes
		if !expired && !oversize {
			return cut, true
		}
		total -= s.Bytes
		cut = s.End
	}
	return max(cut, m.Next()), false
}
