package node

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/tier"
)

// TierManifest answers tp's manifest of remote segments on this replica,
// the raft index it is as of and the topic id of the replica's
// incarnation, for checks; false when not hosted.
func (c *Core) TierManifest(tp TopicPartition) (m tier.Manifest, applied, topicID uint64, ok bool) {
	g := c.byTP[tp]
	if g == nil || g.part == nil {
		return tier.Manifest{}, 0, 0, false
	}
	return g.part.Tier(), g.appliedRaft, g.topicID, true
}

// TierPrefix answers tp's object key prefix on this replica.
func (c *Core) TierPrefix(tp TopicPartition) (string, bool) {
	g := c.byTP[tp]
	if g == nil {
		return "", false
	}
	return c.tierPrefix(g), true
}

// VerifyTierLocal checks that tp's replica holds every record from its log
// start on in one of the tiers: the offsets below the first batch its raft
// log holds are remote, [Start, Next) of its manifest. A record deleted
// locally before an applied TIER_ADD covered it fails. For the replicas at
// the newest applied index (one restored from a raft snapshot holds
// records below its raft log whose ADDs it has yet to apply).
func (c *Core) VerifyTierLocal(tp TopicPartition) error {
	g := c.byTP[tp]
	if g == nil || g.part == nil {
		return nil
	}
	first, ok := c.firstInRaftLog(g)
	start := g.part.LogStartOffset()
	if !ok || first <= start {
		return nil
	}
	m := g.part.Tier()
	if _, remote := m.Locate(start); !remote || first > m.Next() {
		return fmt.Errorf("%s/%d: its raft log starts at offset %d, above the log start %d, and the remote log holds [%d, %d) only: deleted locally before it was uploaded",
			tp.Topic, tp.Partition, first, start, m.Start(), m.Next())
	}
	return nil
}

// VerifyTier checks every segment of tp's manifest on this replica
// against the bucket, read through object (the checker's faultless read:
// the object's bytes, false when there is none): the object exists, its
// size and CRC are the segment's, it decodes, its batches are dense and
// cover [Base, End), and every batch this replica's log still holds there
// (its engine index and the raft log's tail cache, never its disk) is the object's, field for field. It
// answers how many batches it compared. A check for tests and the
// simulator: it reads the raft log on the loop.
func (c *Core) VerifyTier(tp TopicPartition, object func(key string) ([]byte, bool)) (int, error) {
	g := c.byTP[tp]
	if g == nil || g.part == nil {
		return 0, nil
	}
	m, prefix := g.part.Tier(), c.tierPrefix(g)
	compared := 0
	for _, seg := range m.Segments() {
		key := tier.SegmentKey(prefix, seg)
		b, ok := object(key)
		if !ok {
			return compared, fmt.Errorf("%s/%d: segment [%d, %d) of term %d listed, object %s missing", tp.Topic, tp.Partition, seg.Base, seg.End, seg.Term, key)
		}
		if int64(len(b)) != seg.Bytes || crc32c(b) != seg.CRC {
			return compared, fmt.Errorf("%s: %d bytes of CRC %08x, the segment says %d bytes of CRC %08x", key, len(b), crc32c(b), seg.Bytes, seg.CRC)
		}
		batches, err := tier.DecodeObject(b)
		if err != nil {
			return compared, fmt.Errorf("%s: %w", key, err)
		}
		if len(batches) == 0 || batches[0].BaseOffset > seg.Base || batches[0].NextOffset <= seg.Base || batches[len(batches)-1].NextOffset != seg.End {
			return compared, fmt.Errorf("%s: object's batches do not cover [%d, %d) (%d batches)", key, seg.Base, seg.End, len(batches))
		}
		n, err := c.compareTierBatches(g, batches)
		compared += n
		if err != nil {
			return compared, fmt.Errorf("%s: %w", key, err)
		}
	}
	return compared, nil
}

// compareTierBatches compares an object's batches with the ones g's log
// holds at their offsets in memory (its tail cache: those only on disk,
// below its log start or behind its raft snapshot are not compared).
func (c *Core) compareTierBatches(g *group, batches []tier.Batch) (int, error) {
	from := max(batches[0].BaseOffset, g.part.LogStartOffset(), g.part.LocalStart())
	locs, err := g.part.AppendLocations(nil, from, len(batches))
	if err != nil {
		return 0, nil // nothing held there any more
	}
	compared := 0
	for _, loc := range locs {
		i, found := slices.BinarySearchFunc(batches, loc.BaseOffset, func(b tier.Batch, off int64) int { return int(b.BaseOffset - off) })
		if loc.BaseOffset >= batches[len(batches)-1].NextOffset {
			break
		}
		if !found {
			return compared, fmt.Errorf("the log holds a batch at %d, the object none", loc.BaseOffset)
		}
		// Only entries the log holds in memory: a check must not touch
		// the disk (in the simulator, a read would take a fault meant
		// for the node, or find damage the node has not met yet).
		ents, read, err := g.log.StartRead(loc.RaftIndex, loc.RaftIndex+1, math.MaxUint64)
		if err != nil || read != nil || len(ents) != 1 {
			continue
		}
		want, err := tierBatches([]engine.BatchLocation{loc}, ents)
		if err != nil {
			return compared, err
		}
		if got := batches[i]; !sameTierBatch(got, want[0]) {
			return compared, fmt.Errorf("batch at %d: object holds %+v, the log %+v", loc.BaseOffset, brief(got), brief(want[0]))
		}
		compared++
	}
	return compared, nil
}

// sameTierBatch reports whether a and b are the same batch, bytes and all.
func sameTierBatch(a, b tier.Batch) bool {
	return bytes.Equal(a.Data, b.Data) && brief(a) == brief(b)
}

// tierBatchFields is a tier.Batch without its bytes: comparable, and
// short in messages.
type tierBatchFields struct {
	BaseOffset, NextOffset, AppendTimeMs, ProducerID, MaxTimeMs int64
	ProducerEpoch, BaseSequence, CoordinatorEpoch               int32
	Transactional, Marker, Commit                               bool
	DataBytes                                                   int
}

// brief is b's fields but its bytes.
func brief(b tier.Batch) tierBatchFields {
	return tierBatchFields{b.BaseOffset, b.NextOffset, b.AppendTimeMs, b.ProducerID, b.MaxTimeMs, b.ProducerEpoch,
		b.BaseSequence, b.CoordinatorEpoch, b.Transactional, b.Marker, b.Commit, len(b.Data)}
}

// TierLocal answers, for tp's replica on this node, the first offset its
// raft log still holds and its log start (the records [logStart, first)
// live only in the bucket), and how many compactions of its raft log it
// decided and finished: for the simulator's check that no replica deletes
// a record no committed TIER_ADD covered when it decided to.
func (c *Core) TierLocal(tp TopicPartition) (first, logStart int64, decided, done uint64, ok bool) {
	g := c.byTP[tp]
	if g == nil || g.part == nil {
		return 0, 0, 0, 0, false
	}
	first, ok = c.firstInRaftLog(g)
	return first, g.part.LogStartOffset(), g.ret.decided, g.ret.done, ok
}

// Compactions answers how many raft log compactions this node decided
// and finished (Stats.CompactionsDecided and Compactions, without copying
// Stats), so the simulator looks at TierLocal only when they move.
func (c *Core) Compactions() (decided, finished uint64) {
	return c.stats.CompactionsDecided, c.stats.Compactions
}
