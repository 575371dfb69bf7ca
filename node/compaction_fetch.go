package node

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/raftlog/compacted"
)

// Reads of a compacted prefix (issue 24; engine/compact's doc,
// "Replicas"). A fetch at an offset below the replica's own prefix end
// (its store's End, the CleanedTo of the last pass it finished) is served
// from the prefix: the compacted batches as stored (engine/compact's form,
// which clientlib decodes and the Kafka listener turns into v2 batches
// with kafkaproto.AppendCompacted), each keeping its original base offset
// and offset range whatever records survived; the read goes on in the raft
// log from the prefix end within the same budget, so a read spanning both
// continues seamlessly (the prefix end is a batch boundary of the raft
// log). The prefix lies below every decision's cleanable end, so below
// the last stable offset: read_committed serves it whole, and it holds no
// aborted record (rule 4). A replica whose own pass lags serves the rest
// from its raft log, which still holds it: both views hold the latest
// value of every key.
//
// The aborted list of an answer (txn_fetch.go) leaves out an aborted
// transaction whose abort marker a later pass removed (rule 5) when the
// read covered the marker's offset: a Kafka read_committed consumer drops
// the producer's transactional batches from the transaction's first offset
// until it meets the abort marker, so listing one whose marker is gone
// would hide that producer's later committed transactions. Its records
// are all below the marker, so all gone from the prefix: nothing needs it.
// One whose marker is still in the prefix stays listed, as Kafka keeps a
// cleaned segment's transaction index entry while its marker stays (a
// client popping an entry at every abort marker it meets would otherwise
// pop the producer's next one; franz-go and the Java client do not).
//
// Reads run on the loop (a raft-log read the tail cache cannot serve is a
// storage job, fetch_cold.go; the prefix's are not yet), within the fetch
// read budget (fetchbudget.go): at most
// the fetch's max_bytes (the first batch whole) and fetchBatchesMax
// batches a read, charged to the Process call's fetch read budget. A
// prefix that fails a read (ErrCorrupt) stops the replica's passes and
// the read is served from the raft log instead.
//
// ListOffsets by timestamp looks in the prefix first (its sparse index of
// running maximum timestamps, then the records of the batches from there,
// within the scan's bounds), then in the raft log from the prefix end.
//
// The raft log is trimmed up to the prefix (compaction_replica.go), so a
// replica that cannot serve an offset from its prefix (stuck, or the read
// failed) may not hold it in its raft log either (trimmedBelow): the fetch
// is then REPLICA_RECOVERING, retriable, never served from the next batch
// the raft log holds; the replica installs a peer's prefix meanwhile.

// servedPrefix is g's compacted prefix when reads may use it: a decision
// exists, the store opens, holds a generation, the replica's passes are
// not stopped (a prefix that differs from the record is not served) and
// its end is past the log start. Nil otherwise: the raft log serves.
func (c *Core) servedPrefix(g *group) *compacted.Store {
	if g.pass.stuck != "" || g.part.Compaction().Decision.Generation == 0 || !c.openPrefix(g) {
		return nil
	}
	if s := g.pass.store; s.Generation() > 0 && s.End() > g.part.LogStartOffset() {
		return s
	}
	return nil
}

// trimmedBelow reports whether g's raft log no longer holds offset (at or
// past the log start): on a compacted topic the raft log is trimmed up to
// the prefix, so a replica whose prefix is behind (a raft snapshot past
// it, stuck until it installs a peer's) holds the offset nowhere.
func (c *Core) trimmedBelow(g *group, offset int64) bool {
	if g.part.Compaction().Decision.Generation == 0 {
		return false
	}
	first, ok := c.firstInRaftLog(g)
	return ok && offset < first
}

// firstInRaftLog is the base offset of the first indexed batch whose raft
// entry g's raft log still holds (the index may keep entries below it: a
// raft snapshot's state keeps those its record does not cover).
func (c *Core) firstInRaftLog(g *group) (int64, bool) {
	index, err := g.log.FirstIndex()
	if err != nil {
		return 0, false
	}
	b, ok := g.part.FirstBatchFrom(index)
	if !ok {
		return g.part.HighWatermark(), true
	}
	return b.BaseOffset, true
}

// prefixRead is what a read of a prefix returns besides its batches.
type prefixRead struct {
	// to is the offset the read covered up to: after its last batch, or
	// the prefix end when it reached it.
	to int64
	// forgotten are the marker offsets of aborted transactions whose
	// marker the read's range [offset, to) covers but the prefix no
	// longer holds.
	forgotten []int64
}

// readPrefix reads s from offset: whole batches within budget (the first
// whatever its size) and fetchBatchesMax, the control batches only when
// markers is set. It returns the batches, the budget left and what the
// read covered.
func (c *Core) readPrefix(g *group, s *compacted.Store, offset, budget int64, markers bool) ([]FetchedBatch, int64, prefixRead, error) {
	buf, to, err := s.ReadBatches(nil, offset, int(min(max(budget, 0), int64(^uint(0)>>1))), fetchBatchesMax)
	if err != nil {
		return nil, budget, prefixRead{}, err
	}
	var out []FetchedBatch
	var aborts []int64 // offsets of the abort markers read
	rd := prefixRead{to: to}
	for len(buf) > 0 {
		if len(buf) < compact.HeaderBytes {
			return nil, budget, prefixRead{}, fmt.Errorf("%w: %d bytes left after a batch", compacted.ErrCorrupt, len(buf))
		}
		n := compact.HeaderBytes + int(binary.LittleEndian.Uint32(buf[compact.HeaderBytes-4:]))
		if n > len(buf) {
			return nil, budget, prefixRead{}, fmt.Errorf("%w: batch of %d bytes, %d read", compacted.ErrCorrupt, n, len(buf))
		}
		b := buf[:n:n]
		buf = buf[n:]
		h, err := compact.DecodeHeader(b)
		if err != nil {
			return nil, budget, prefixRead{}, fmt.Errorf("%w: %w", compacted.ErrCorrupt, err)
		}
		if h.Control {
			if full, err := compact.DecodeBatch(b); err == nil && !full.MarkerCommits() {
				aborts = append(aborts, h.BaseOffset)
			}
			if !markers {
				continue
			}
		}
		out = append(out, FetchedBatch{BaseOffset: h.BaseOffset, AppendTimeMs: h.MaxTimestampMs, Batch: b,
			Producer:      engine.Producer{ID: h.ProducerID, Epoch: h.ProducerEpoch, BaseSequence: h.BaseSequence},
			Transactional: h.Transactional})
		budget -= int64(n)
	}
	for _, a := range g.part.AppendAbortedTxns(nil, offset, rd.to) {
		if a.LastOffset >= offset && a.LastOffset < rd.to && !slices.Contains(aborts, a.LastOffset) {
			rd.forgotten = append(rd.forgotten, a.LastOffset)
		}
	}
	return out, budget, rd, nil
}

// prefixFailed stops g's passes after its prefix failed a read: the
// caller serves from the raft log.
func (c *Core) prefixFailed(g *group, err error) {
	g.pass.damaged = true // installed again from a peer (compaction_install.go)
	c.passStuck(g, fmt.Sprintf("reading the compacted prefix: %v", err))
}

// compactedNextOffset is the offset after a compacted batch's range
// (base + last offset delta + 1), whatever records it still holds.
func compactedNextOffset(base int64, batch []byte) int64 {
	const offLastDelta = 16
	if len(batch) < compact.HeaderBytes {
		return base
	}
	return base + int64(int32(binary.LittleEndian.Uint32(batch[offLastDelta:]))) + 1
}

// prefixOffsetForTimestamp looks for the first record at or after
// timestampMs, at or after the log start, in s: from the batch the
// sparse index and the running maximum timestamps point at, scanning
// records within timestampScanBatchesMax and timestampScanBytesMax. found
// is false when the prefix holds no such record (the raft log from the
// prefix end is next); when the scan's bounds run out first, offset is
// where it stopped (every record before it is older) with ts -1.
func (c *Core) prefixOffsetForTimestamp(g *group, s *compacted.Store, timestampMs int64) (offset, ts int64, found bool, err error) {
	from, ok, err := s.OffsetForTimestamp(timestampMs)
	if err != nil || !ok {
		return 0, -1, false, err
	}
	logStart := g.part.LogStartOffset()
	buf, next, err := s.ReadBatches(nil, max(from, logStart), timestampScanBytesMax, timestampScanBatchesMax)
	if err != nil {
		return 0, -1, false, err
	}
	for len(buf) >= compact.HeaderBytes {
		n := compact.HeaderBytes + int(binary.LittleEndian.Uint32(buf[compact.HeaderBytes-4:]))
		if n > len(buf) {
			return 0, -1, false, fmt.Errorf("%w: batch of %d bytes, %d read", compacted.ErrCorrupt, n, len(buf))
		}
		b, err := compact.DecodeBatch(buf[:n])
		if err != nil {
			return 0, -1, false, fmt.Errorf("%w: %w", compacted.ErrCorrupt, err)
		}
		buf = buf[n:]
		if !b.Control {
			for _, r := range b.Records {
				if r.Offset >= logStart && r.TimestampMs >= timestampMs {
					return r.Offset, r.TimestampMs, true, nil
				}
			}
		}
	}
	if next >= s.End() {
		return 0, -1, false, nil
	}
	return next, -1, true, nil
}
