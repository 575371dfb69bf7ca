package node

import (
	"context"
	"fmt"
	"slices"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/objstore"
)

// Remote reads (issue 27; engine/tier's "Next", step 5). Once local
// retention dropped a tiered partition's oldest raft segments
// (tierLocalLimit), the offsets from the log start to the first batch the
// raft log still holds are read from the bucket, with the same bytes,
// offsets and errors a local read answers:
//
//  1. readNow finds the offset below the raft log (remoteBelow) and the
//     segment holding it in the manifest (Locate); the read becomes a
//     storage job of the fetch (fetch_cold.go's coldRead, untimed: the
//     bucket, not the disk), one of the node's coldReadsMax, so a slow
//     bucket delays those fetches only, never the loop;
//  2. the job reads the object's footer and index by ranges (or takes
//     them from the node's index cache, tierIndexCacheMax objects), seeks
//     the frame holding the offset, and reads the frames from it by one
//     range, the first whole and the next ones while they fit the fetch's
//     byte budget (fetchBatchesMax at most); every frame checks its CRC;
//  3. its completion, on the loop, caches the index and serves the fetch
//     again from the state now: the frames stand in for the raft entries
//     (remoteBatches: a batch as stored with its producer fields, a
//     marker as a marker batch or skipped), one object per fetch (the
//     reader fetches on from where it ended).
//
// A failed read answers REPLICA_RECOVERING (retriable: the reader tries
// again, perhaps another replica); an offset below the raft log that no
// segment holds (a replica restored from a raft snapshot that has not
// applied the ADDs covering it yet) too. Bounded like a cold read:
// coldReadTriesMax jobs per fetch.
//
// Rejected: reading the whole object (objects are a segment's size; a
// fetch needs a few frames); caching frames (the index is what every read
// of an object needs; the frames are read once by a catching-up reader).

// tierIndexCacheMax bounds the object indexes a node keeps (24 bytes a
// batch each: a 1 MiB segment of 1 KiB batches has a 24 KiB index).
const tierIndexCacheMax = 32

// tierIndex is a cached object index.
type tierIndex struct {
	key    string
	footer tier.Footer
	index  []tier.IndexEntry
}

// tierRead is a fetch's remote read: the job's inputs, and its answer
// once done.
type tierRead struct {
	key    string
	seg    tier.Segment
	offset int64
	budget int64
	// footer and index: from the cache, or read by the job.
	footer tier.Footer
	index  []tier.IndexEntry
	// offByOne plants TierRemoteOffByOne (-tags simbugs).
	offByOne bool
	// done: the job ended, with batches or err.
	done    bool
	batches []tier.Batch
	err     error
}

// remoteBelow reports whether offset lies below g's raft log on a
// partition that does not compact (compaction_fetch.go serves those): a
// remote read on a tiered partition, or, when no segment holds it, an
// answer of REPLICA_RECOVERING (a replica restored from a raft snapshot of
// a tiered partition indexes batches below its raft log until it applies
// the TRIM or ADDs that cover them), never a raft log read that cannot
// succeed.
func (c *Core) remoteBelow(g *group, offset int64) bool {
	if g.part.Compaction().Decision.Generation != 0 {
		return false
	}
	first, ok := c.firstInRaftLog(g)
	return ok && offset < first
}

// readRemote serves a fetch at offset from the bucket (see above): the
// batches and the offset read through, or errReadPending while its job
// runs.
func (c *Core) readRemote(g *group, f *coldRead, offset, budget int64, markers bool) ([]FetchedBatch, int64, error) {
	seg, ok := g.part.TierLocate(offset)
	if !ok || c.cfg.ObjectStore == nil {
		return nil, 0, fmt.Errorf("%w: offset %d is below this replica's raft log and no remote segment it knows holds it", ErrReplicaRecovering, offset)
	}
	if f == nil {
		return nil, 0, fmt.Errorf("%w: offset %d is remote: only fetches read it", ErrReplicaRecovering, offset)
	}
	key := tier.SegmentKey(c.tierPrefix(g), seg)
	if r := f.remote; r != nil && r.done && r.key == key && r.offset == offset {
		f.remote = nil
		if r.err != nil {
			c.stats.TierReadErrors++
			g.tier.counts.readErrs++
			return nil, 0, fmt.Errorf("%w: remote read of %s at %d: %w", ErrReplicaRecovering, key, offset, r.err)
		}
		c.cacheTierIndex(tierIndex{key: key, footer: r.footer, index: r.index})
		out, through := remoteBatches(r.batches, offset, budget, markers)
		for _, b := range out {
			g.tier.counts.readBytes += uint64(len(b.Batch))
		}
		return out, through, nil
	}
	if f.tries >= coldReadTriesMax {
		return nil, 0, fmt.Errorf("%w: remote read of %s at %d: the state moved under %d reads", ErrReplicaRecovering, key, offset, f.tries)
	}
	if len(c.coldReads) >= coldReadsMax {
		c.coldWaiting = append(c.coldWaiting, f)
		return nil, 0, errReadPending
	}
	r := &tierRead{key: key, seg: seg, offset: offset, budget: max(budget, 0), offByOne: c.bugTierRemoteOffByOne()}
	if i := c.tierIndexAt(key); i >= 0 {
		r.footer, r.index = c.tierIndexes[i].footer, c.tierIndexes[i].index
	}
	f.tries++
	f.log, f.remote = g.log, r
	store := c.cfg.ObjectStore
	f.token = c.queueJob(syncJob{g: g, run: func() error { return r.run(store) }, cold: f, untimed: true})
	c.coldReads = append(c.coldReads, f)
	c.stats.TierReads++
	g.tier.counts.reads++
	return nil, 0, errReadPending
}

// run is a remote read job's work, off the loop: footer and index unless
// cached, then the frames from the one holding the offset. Its error is
// the read's answer (finishTierRead), never the node's.
func (r *tierRead) run(store objstore.Store) error {
	r.err = r.read(store)
	return nil
}

// read is run's reads.
func (r *tierRead) read(store objstore.Store) error {
	ctx := context.Background()
	if r.index == nil {
		foot, err := store.Get(ctx, r.key, r.seg.Bytes-tier.FooterBytes, tier.FooterBytes)
		if err != nil {
			return err
		}
		f, err := tier.DecodeFooter(foot, r.seg.Bytes)
		if err != nil {
			return err
		}
		b, err := store.Get(ctx, r.key, f.IndexPos, r.seg.Bytes-tier.FooterBytes-f.IndexPos)
		if err != nil {
			return err
		}
		if r.index, err = tier.DecodeIndex(f, foot, b); err != nil {
			return err
		}
		r.footer = f
	}
	i := tier.Seek(r.index, r.offset)
	if i < 0 {
		return fmt.Errorf("%w: %s holds no frame at offset %d", tier.ErrCorrupt, r.key, r.offset)
	}
	if r.offByOne && i+1 < len(r.index) {
		i++ // planted: the frame after the one holding the offset
	}
	end := func(k int) int64 { // the end of frame k
		if k+1 < len(r.index) {
			return r.index[k+1].Position
		}
		return r.footer.IndexPos
	}
	start, j := r.index[i].Position, i+1
	for j < len(r.index) && j-i < fetchBatchesMax && end(j)-start <= r.budget {
		j++
	}
	b, err := store.Get(ctx, r.key, start, end(j-1)-start)
	if err != nil {
		return err
	}
	if int64(len(b)) != end(j-1)-start {
		return fmt.Errorf("%w: %s: %d bytes read of frames [%d, %d)", tier.ErrCorrupt, r.key, len(b), start, end(j-1))
	}
	for k := i; k < j; k++ {
		bt, n, err := tier.DecodeFrame(b)
		if err != nil {
			return fmt.Errorf("%s frame %d: %w", r.key, k, err)
		}
		if bt.BaseOffset != r.index[k].BaseOffset {
			return fmt.Errorf("%w: %s frame %d at offset %d, its index says %d", tier.ErrCorrupt, r.key, k, bt.BaseOffset, r.index[k].BaseOffset)
		}
		r.batches = append(r.batches, bt)
		b = b[n:]
	}
	return nil
}

// finishTierRead ends f's remote read job, on the loop: the fetch is
// served again from the state now, the job's answer standing in for the
// read at its offset.
func (c *Core) finishTierRead(f *coldRead) {
	c.dropColdRead(f)
	defer c.startWaitingColdReads()
	if !c.hosted(f.g) || f.g.log != f.log {
		c.coldGone(f)
		return
	}
	f.remote.done = true
	c.serveCold(f)
}

// remoteBatches turns an object's frames into a fetch's batches from
// offset: a batch as stored, the first whole and the next ones while they
// fit budget; a marker as a marker batch when markers is set, else
// skipped (as readBatches does with the raft entries). It answers the
// offset after the last one accounted for.
func remoteBatches(bs []tier.Batch, offset, budget int64, markers bool) ([]FetchedBatch, int64) {
	var out []FetchedBatch
	through := int64(0)
	for _, b := range bs {
		if b.NextOffset <= offset {
			continue
		}
		if len(out) >= fetchBatchesMax {
			break
		}
		p := engine.Producer{ID: b.ProducerID, Epoch: b.ProducerEpoch, BaseSequence: b.BaseSequence}
		if b.Marker {
			if markers {
				m := engine.Marker{ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch, CoordinatorEpoch: b.CoordinatorEpoch, Commit: b.Commit}
				p.BaseSequence = -1
				out = append(out, FetchedBatch{BaseOffset: b.BaseOffset, AppendTimeMs: b.AppendTimeMs, Marker: &m, Producer: p})
			}
			through = b.NextOffset
			continue
		}
		if len(out) > 0 && int64(len(b.Data)) > budget {
			break
		}
		out = append(out, FetchedBatch{Batch: b.Data, Producer: p, Transactional: b.Transactional,
			BaseOffset: b.BaseOffset, AppendTimeMs: b.AppendTimeMs})
		through = b.NextOffset
		budget -= int64(len(b.Data))
	}
	return out, through
}

// tierIndexAt answers the cache slot of key's index, -1 when not cached.
func (c *Core) tierIndexAt(key string) int {
	return slices.IndexFunc(c.tierIndexes, func(x tierIndex) bool { return x.key == key })
}

// cacheTierIndex keeps x as the most recently used index, evicting the
// least recently used beyond tierIndexCacheMax.
func (c *Core) cacheTierIndex(x tierIndex) {
	if i := c.tierIndexAt(x.key); i >= 0 {
		c.tierIndexes = slices.Delete(c.tierIndexes, i, i+1)
	}
	if len(c.tierIndexes) >= tierIndexCacheMax {
		c.tierIndexes = slices.Delete(c.tierIndexes, 0, 1)
	}
	c.tierIndexes = append(c.tierIndexes, x)
}
