package node

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/objstore"
	"github.com/strandlog/strand/proto/strandpb"
)

// Recovery from the bucket (engine/tier's "Recovery"; `strand topic
// recover`), the node's part:
//
//   - The bucket names its topics: the leader of each partition of a
//     tiered topic Puts the topic's descriptor (tier.DescriptorKey: name,
//     the UUID its objects are under, partitions, replication factor,
//     configs) before its first upload as leader and whenever the topic
//     changed since (topic alter), so a cluster with no local state finds
//     a topic by name, as it was last. The leader also Puts a log start
//     marker (tier.StartKey) at each remote log start it applies, before
//     any deletion (tierCheck), so a recovery starts where the partition
//     did (retention, delete-records). Objects are under the topic's
//     UUID (unique across clusters: a new cluster's topic never shares a
//     prefix with a lost one's), or under strand.remote.recovery.from's.
//   - A recovered topic is created with strand.remote.recovery.from set.
//     The leader of each of its partitions, while the partition is empty,
//     lists the partition's objects, takes the remote log tier.RemoteLog
//     names, reads each object whole (decoding it: a damaged object fails
//     the recovery, retried, rather than serving wrong bytes; its CRC and
//     newest timestamp come from the read), and proposes TIER_RESTORE.
//     Until that applies, produce is refused (ErrTierRecovering, retriable),
//     so no offset is given out twice.

// ErrTierRecovering: the partition is being recovered from the bucket and
// takes no write until it is; retry.
var ErrTierRecovering = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE,
	"node: the partition is being recovered from the object store; retry once `strand topic recover` reports it done")

// topicConfigNow answers g's topic configuration: the retention check's
// copy, or the metadata's when that check has not run yet.
func (c *Core) topicConfigNow(g *group) (metadata.TopicConfig, bool) {
	if g.ret.configKnown {
		return g.ret.config, true
	}
	if c.meta == nil {
		return metadata.TopicConfig{}, false
	}
	id, cfg, ok := c.meta.meta.TopicConfig(g.tp.Topic)
	return cfg, ok && id == g.topicID
}

// tierRemoteID answers the id g's objects are under: the recovered
// topic's UUID, the topic's own, or (a static topic, no UUID) its id.
func (c *Core) tierRemoteID(g *group) string {
	if cfg, ok := c.topicConfigNow(g); ok && !cfg.RemoteRecoveryFrom.IsZero() {
		return cfg.RemoteRecoveryFrom.String()
	}
	if !g.topicUUID.IsZero() {
		return g.topicUUID.String()
	}
	return fmt.Sprintf("%016x", g.topicID)
}

// tierPrefix is g's object key prefix.
func (c *Core) tierPrefix(g *group) string {
	return tier.PartitionPrefix(c.tierRemoteID(g), g.tp.Partition)
}

// tierRecovering reports whether g's partition waits for its restore from
// the bucket: its topic was recovered and nothing applied a TIER_RESTORE.
func (c *Core) tierRecovering(g *group) bool {
	if g.part == nil || g.part.TierActive() {
		return false
	}
	cfg, ok := c.topicConfigNow(g)
	return ok && !cfg.RemoteRecoveryFrom.IsZero()
}

// tierRecoverCheck is tierCheck's first step on a leader that applied an
// entry of its term: the restore of a recovered partition, then the
// topic's descriptor, kept current (the partition's log start marker is
// tierCheck's first step, before deletions). It reports whether tier work
// started or must wait.
func (c *Core) tierRecoverCheck(g *group) bool {
	if c.tierRecovering(g) {
		if g.part.HighWatermark() != 0 {
			if !g.tier.restoreRefused {
				g.tier.restoreRefused = true
				g.logs.log(slog.LevelError, "a recovered partition took records before its restore from the bucket; it is not restored and uploads nothing (recover the topic again)",
					slog.Int64("high_watermark", g.part.HighWatermark()))
			}
			return true
		}
		if g.tier.restoring && c.ticks < g.tier.addDeadline {
			return true
		}
		c.startTierRestore(g)
		return true
	}
	return c.startTierDescribe(g)
}

// startTierDescribe Puts g's topic descriptor when it differs from the
// one this leader last wrote (its first check as leader, before any
// upload; then after each topic alter or partition addition), and
// reports whether it started the job.
func (c *Core) startTierDescribe(g *group) bool {
	if c.meta == nil || g.tier.descriptorBad {
		return false
	}
	t, ok := c.meta.meta.Topic(g.tp.Topic)
	if !ok || t.ID != g.topicID {
		return false // deleted: the replica stops
	}
	d := tier.Descriptor{Name: t.Name, ID: c.tierRemoteID(g), Partitions: int32(len(t.Replicas)), ReplicationFactor: t.ReplicationFactor}
	for _, e := range t.Config.Entries() {
		if e.Name != metadata.ConfigRemoteRecoveryFrom {
			d.Configs = append(d.Configs, [2]string{e.Name, e.Value})
		}
	}
	obj, err := tier.EncodeDescriptor(d)
	if err != nil {
		g.tier.descriptorBad = true // nothing a retry mends; the topic is found by no recovery
		g.logs.log(slog.LevelError, "tier: topic descriptor not written", slog.Any("err", err))
		return false
	}
	if bytes.Equal(obj, g.tier.descriptor) {
		return false
	}
	j := &tierJob{describe: true, object: obj}
	store, key := c.cfg.ObjectStore, tier.DescriptorKey(t.Name)
	run := func() error { return store.Put(context.Background(), key, bytes.NewReader(obj), int64(len(obj))) }
	g.tier.job = c.queueJob(syncJob{g: g, run: run, tier: j, untimed: true})
	return true
}

// startTierMark Puts the log start marker of g's remote log start, which
// moved above the last marker this leader wrote (a retention or
// delete-records TRIM applied; its first check as leader). Without it a
// recovery would start at the first object left in the bucket: a trim
// whose objects were not deleted yet, or that cut inside an object, would
// be undone.
func (c *Core) startTierMark(g *group) {
	start := g.part.TierStart()
	j := &tierJob{mark: true, start: start}
	body := []byte(strconv.FormatInt(start, 10))
	store, key := c.cfg.ObjectStore, tier.StartKey(c.tierPrefix(g), start)
	run := func() error { return store.Put(context.Background(), key, bytes.NewReader(body), int64(len(body))) }
	g.tier.job = c.queueJob(syncJob{g: g, run: run, tier: j, untimed: true})
}

// startTierRestore reads g's remote log from the bucket, off the loop.
func (c *Core) startTierRestore(g *group) {
	j := &tierJob{restore: true}
	store, prefix := c.cfg.ObjectStore, c.tierPrefix(g)
	run := func() error {
		m, err := readRemoteLog(context.Background(), store, prefix)
		j.manifest = m
		return err
	}
	g.tier.job = c.queueJob(syncJob{g: g, run: run, tier: j, untimed: true})
}

// readRemoteLog answers the remote log of the partition whose objects are
// under prefix: tier.RemoteLog of its listing (its objects and log start
// markers), each object read whole and decoded; an empty manifest from
// the highest marker (or 0) when it has no object above it.
func readRemoteLog(ctx context.Context, store objstore.Store, prefix string) (tier.Manifest, error) {
	objs, err := store.List(ctx, prefix+"/")
	if err != nil {
		return tier.Manifest{}, err
	}
	var segs []tier.Segment
	var starts []int64
	for _, o := range objs {
		if seg, ok := tier.ParseSegmentKey(prefix, o.Key); ok {
			seg.Bytes = o.Size
			segs = append(segs, seg)
		} else if start, ok := tier.ParseStartKey(prefix, o.Key); ok {
			starts = append(starts, start)
		}
	}
	chain, start := tier.RemoteLog(segs, starts)
	for i := range chain {
		seg := &chain[i]
		key := tier.SegmentKey(prefix, *seg)
		b, err := store.Get(ctx, key, 0, -1)
		if err != nil {
			return tier.Manifest{}, err
		}
		batches, err := tier.DecodeObject(b)
		if err != nil {
			return tier.Manifest{}, fmt.Errorf("%s: %w", key, err)
		}
		if len(batches) == 0 || batches[0].BaseOffset != seg.Base || batches[len(batches)-1].NextOffset != seg.End {
			return tier.Manifest{}, fmt.Errorf("%s: %w: its batches do not hold the offsets its key names", key, tier.ErrCorrupt)
		}
		seg.Bytes, seg.CRC, seg.MaxTimeMs = int64(len(b)), crc32c(b), -1
		for _, bt := range batches {
			seg.MaxTimeMs = max(seg.MaxTimeMs, bt.MaxTimeMs)
		}
	}
	return tier.Restore(chain, start)
}

// finishTierRecoverJob ends a describe or restore job, on the loop.
func (c *Core) finishTierRecoverJob(g *group, j *tierJob, err error) {
	if err != nil {
		what := "topic descriptor upload"
		if j.mark {
			what = fmt.Sprintf("log start marker %d upload", j.start)
		}
		if j.restore {
			what = "restore from the bucket"
			// An operator waits on it (topic recover): say why, not only at debug level.
			g.logs.log(slog.LevelWarn, "restore from the object store failed; retried after a backoff", slog.Any("err", err))
		}
		c.tierFailed(g, fmt.Errorf("%s: %w", what, err))
		return
	}
	g.tier.backoff = 0
	if j.describe {
		g.tier.descriptor = j.object
		return
	}
	if j.mark {
		if prev := g.tier.startMarked; prev > 0 && prev < j.start {
			g.tier.deletes = append(g.tier.deletes, tier.StartKey(c.tierPrefix(g), prev))
		}
		g.tier.startMarked = max(g.tier.startMarked, j.start)
		return
	}
	if _, _, leading := g.leadership(); !leading || !c.tierRecovering(g) {
		return // the next leader reads the bucket again
	}
	c.nextProposalID++
	c.touch(g)
	if err := g.raw.Propose(engine.EncodeTierRestoreEntry(nil, c.cfg.Clock.Realtime().UnixMilli(), c.nextProposalID, j.manifest)); err != nil {
		c.tierFailed(g, fmt.Errorf("restore from the bucket: propose: %w", err))
		return
	}
	g.tier.restoring, g.tier.addDeadline = true, c.ticks+uint64(c.cfg.RequestTimeoutTicks)
}

// tierRestored logs an applied TIER_RESTORE (every replica) and ends the
// leader's wait for it.
func (c *Core) tierRestored(g *group) {
	g.tier.restoring = false
	m := g.part.Tier()
	g.logs.log(slog.LevelInfo, "partition restored from the object store", slog.Int64("log_start", m.Start()),
		slog.Int64("high_watermark", m.Next()), slog.Int("segments", len(m.Segments())))
}
