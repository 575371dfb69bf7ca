package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"go.etcd.io/raft/v3"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// fetchBatchesMax bounds the batches one fetch locates and serves.
const fetchBatchesMax = 1024

// fetch reads committed batches of one partition from req.Offset, on the
// leader only. It is linearizable: the leader asks raft for a read index
// (ReadOnlySafe: a heartbeat round confirms it still leads) and serves once
// it has applied up to that index, so a fetch sees every write that
// completed before it began. done runs once; it is queued, not run, so that
// callers inside the Core (HandleAs, and long polls woken inside Process)
// never run a callback in the middle of a Ready round.
func (c *Core) fetch(req FetchRequest, done func(FetchResult)) {
	fail := func(err error, lead NodeID) {
		c.completeFetch(done, FetchResult{Err: err, HighWatermark: -1, LogStartOffset: -1, Leader: lead})
	}
	c.readPartition(req.TopicPartition, func(g *group) {
		c.readAsync(g, req, func(res FetchResult) { c.completeFetch(done, res) }) // fetch_cold.go
	}, fail)
}

// readPartition runs serve once the leader of tp has confirmed a read
// index and applied up to it (the linearizable read of Fetch and
// ListOffsets), or fail with why it cannot.
func (c *Core) readPartition(tp TopicPartition, serve func(g *group), fail func(err error, lead NodeID)) {
	if c.closed {
		fail(ErrStopped, 0)
		return
	}
	g := c.byTP[tp]
	if g == nil {
		fail(ErrUnknownTopicPartition, 0)
		return
	}
	lead, term, leading := g.leadership()
	switch {
	case !leading:
		fail(ErrNotLeader, lead)
		return
	case g.live >= c.cfg.PendingRequestsMax:
		fail(ErrBusy, lead)
		return
	case c.bugLocalRead():
		serve(g) // planted bug: no read index, no leadership check
		return
	}
	c.readIndexShared(g, term, serve, fail)
}

// readIndexShared is readIndex for a partition this node leads, sharing
// one ReadIndex among the reads that arrive while no entry of g was
// applied: with many groups tailing a partition, every fetch asked raft
// for its own read index, a heartbeat to every follower and its answer per
// fetch (2,000 per wake at 1,000 groups). A read may take the read index
// of an earlier one still unconfirmed when g applied nothing since that
// one's ReadIndex call: the leader fixes a read index synchronously at the
// call (its commit index then, or later if it must first commit in its
// term), and a write is acknowledged only once applied here, so every
// write acknowledged before the later read began is at or below that
// index. Only on the leader: a follower's read index is fixed later by the
// leader, after writes the later read may have seen acknowledged.
func (c *Core) readIndexShared(g *group, term uint64, serve func(g *group), fail func(err error, lead NodeID)) {
	if s := g.readShared; s != nil && !s.finished && !s.indexKnown && s.term == term && g.readSharedApplied == g.appliedRaft {
		c.nextReadID++
		r := &readWait{
			id: c.nextReadID, term: term, serve: serve, fail: fail,
			deadline: c.ticks + uint64(c.cfg.RequestTimeoutTicks),
		}
		s.joined = append(s.joined, r)
		g.reads = append(g.reads, r)
		c.noteWait(r.deadline)
		g.live++
		return
	}
	c.readIndex(g, term, serve, fail)
	g.readShared, g.readSharedApplied = g.reads[len(g.reads)-1], g.appliedRaft
}

// readIndex asks g's raft for a read index and queues the wait for it.
func (c *Core) readIndex(g *group, term uint64, serve func(g *group), fail func(err error, lead NodeID)) {
	c.nextReadID++
	r := &readWait{
		id: c.nextReadID, term: term, serve: serve, fail: fail,
		deadline: c.ticks + uint64(c.cfg.RequestTimeoutTicks),
	}
	g.reads = append(g.reads, r)
	c.noteWait(r.deadline)
	g.readBy[r.id] = r
	g.live++
	g.raw.ReadIndex(readContext(r.id))
	c.touch(g)
}

// noteReadState records the read index raft confirmed for one of our reads.
func (c *Core) noteReadState(g *group, rs raft.ReadState) {
	if len(rs.RequestCtx) != 8 {
		return
	}
	r := g.readBy[binary.BigEndian.Uint64(rs.RequestCtx)]
	if r == nil || r.finished {
		return
	}
	r.index = rs.Index
	r.indexKnown = true
	for _, j := range r.joined {
		j.index, j.indexKnown = rs.Index, true
	}
	r.joined = nil
	if g.readShared == r {
		g.readShared = nil
	}
}

// serveReads serves every read whose read index has been applied, while
// the fetch read budget lasts (fetchbudget.go).
func (c *Core) serveReads(g *group) {
	for _, r := range g.reads {
		if !r.finished && r.indexKnown && r.index <= g.appliedRaft {
			if c.fetchBudgetSpent(g) {
				return
			}
			c.endRead(g, r)
			r.serve(g)
		}
	}
}

// failRead stops tracking r and fails it.
func (c *Core) failRead(g *group, r *readWait, err error, lead NodeID) {
	c.endRead(g, r)
	r.fail(err, lead)
}

// endRead stops tracking r; the caller serves or fails it.
func (c *Core) endRead(g *group, r *readWait) {
	if r.finished {
		panic(fmt.Sprintf("node: read %d finished twice", r.id))
	}
	r.finished = true
	g.live--
	delete(g.readBy, r.id)
}

// completeFetch queues done(result) to run at the end of the current call.
func (c *Core) completeFetch(done func(FetchResult), result FetchResult) {
	c.completions = append(c.completions, func() { done(result) })
}

// read serves a fetch from the engine's state now: the batch holding
// req.Offset, whatever its size, then the following ones while they fit in
// MaxBytes, read from the raft log and handed out as stored.
func (c *Core) read(g *group, req FetchRequest) FetchResult {
	res := c.readNow(g, req, nil)
	c.chargeFetch(&res)
	return res
}

// readNow is read without charging the fetch read budget. With cold set
// its log read may become a storage job instead (fetch_cold.go): the
// result is then errReadPending, and the job's completion serves again.
func (c *Core) readNow(g *group, req FetchRequest, cold *coldRead) FetchResult {
	hwm, logStart := g.part.HighWatermark(), g.part.LogStartOffset()
	res := FetchResult{HighWatermark: hwm, LogStartOffset: logStart, Leader: c.cfg.ID, LastStableOffset: g.part.LastStableOffset()}
	tail, err := c.bugUncommittedTail(g, hwm) // none unless a planted bug
	if err != nil {
		res.Err = err
		return res
	}
	if n := len(tail); n > 0 {
		last := tail[n-1]
		res.HighWatermark = last.BaseOffset + int64(batchRecordCount(last.Batch))
	}
	if req.Offset < logStart || req.Offset > res.HighWatermark {
		res.Err = fmt.Errorf("%w: offset %d outside [%d, %d]", ErrOffsetOutOfRange, req.Offset, logStart, res.HighWatermark)
		return res
	}
	budget := int64(max(req.MaxBytes, 0))
	offset := req.Offset
	if s := c.servedPrefix(g); s != nil && offset < s.End() {
		// Below the prefix end: the compacted prefix serves
		// (compaction_fetch.go), then the raft log from its end.
		batches, left, rd, err := c.readPrefix(g, s, offset, budget, req.Markers)
		switch {
		case err != nil:
			c.prefixFailed(g, err) // the raft log still holds it all
		case rd.to < s.End() || len(batches) >= fetchBatchesMax || len(batches) > 0 && left <= 0:
			res.Batches, res.forgotten, res.through = batches, rd.forgotten, rd.to
			return res
		default:
			res.Batches, res.forgotten, res.through, budget, offset = batches, rd.forgotten, rd.to, left, s.End()
		}
	}
	if offset < hwm && c.remoteBelow(g, offset) {
		// tier_read.go: below the raft log of a tiered partition, the
		// bucket serves (one object per fetch).
		if len(res.Batches) > 0 {
			return res
		}
		batches, through, err := c.readRemote(g, cold, offset, budget, req.Markers)
		if err != nil {
			res.Err = err
			return res
		}
		res.Batches, res.through = batches, through
		return res
	}
	if offset < hwm && c.trimmedBelow(g, offset) {
		// compaction_fetch.go: neither this replica's prefix nor its raft
		// log holds offset (a raft snapshot past its prefix; it installs
		// a peer's prefix). Another replica may serve.
		if len(res.Batches) == 0 {
			res.Err = fmt.Errorf("%w: offset %d below its raft log, past its compacted prefix", ErrReplicaRecovering, offset)
		}
		return res
	}
	if offset < hwm {
		locs, err := g.part.AppendReadable(nil, offset, fetchBatchesMax-len(res.Batches), req.Isolation)
		if err != nil {
			res.Err = fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
			return res
		}
		if len(locs) == 0 {
			return res // read_committed at or past the last stable offset
		}
		more, left, through, err := c.readBatches(g, locs, offset, budget, req.Markers, len(res.Batches) == 0, cold)
		if err != nil {
			res.Err, res.Batches, res.through = err, nil, 0
			return res
		}
		res.Batches, res.through, budget = append(res.Batches, more...), max(res.through, through), left
	}
	for _, b := range tail {
		if len(res.Batches) > 0 && int64(len(b.Batch)) > budget || len(res.Batches) >= fetchBatchesMax {
			break
		}
		if b.BaseOffset+int64(batchRecordCount(b.Batch)) > req.Offset {
			res.Batches = append(res.Batches, b)
			res.through = max(res.through, b.nextOffset())
			budget -= int64(len(b.Batch))
		}
	}
	return res
}

// fetchEntryOverheadBytes bounds what a produce entry adds to its batch
// (raft's entry fields and the engine's envelope), so a range read limited
// to the batch budget plus this much per entry never cuts a batch that fits.
const fetchEntryOverheadBytes = 256

// readBatches reads the batches at locs from the log with one Entries call
// over their raft index range (one read of each segment, where a call per
// batch cost a read and three allocations each), and hands them out as
// stored: the first whole (unless whole is false: batches were served
// before them), the next ones while they fit in budget. It
// returns the batches, the budget left and the offset after the last
// location it accounted for (0 when none): transaction markers are
// skipped, or served as marker batches when markers is set, and a reader
// goes on past the markers skipped after the last batch. With cold set a
// read the tail cache cannot serve becomes a storage job (errReadPending).
func (c *Core) readBatches(g *group, locs []engine.BatchLocation, offset, budget int64, markers, whole bool, cold *coldRead) ([]FetchedBatch, int64, int64, error) {
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, loc := range locs {
		i := g.bugRaftIndexOf(loc.RaftIndex)
		lo, hi = min(lo, i), max(hi, i+1)
	}
	limit := uint64(budget) + (hi-lo)*fetchEntryOverheadBytes
	entries, err := c.coldEntries(g, cold, lo, hi, limit)
	if errors.Is(err, errReadPending) {
		return nil, budget, 0, err
	}
	if err != nil || len(entries) == 0 {
		return nil, budget, 0, c.storageFailed(g, fmt.Errorf("%w: %s/%d entries [%d, %d): %w", ErrStorage, g.tp.Topic, g.tp.Partition, lo, hi, err))
	}
	var out []FetchedBatch
	through := int64(0)
	for _, loc := range locs {
		index := g.bugRaftIndexOf(loc.RaftIndex)
		if index-lo >= uint64(len(entries)) {
			break // cut by the size limit: the budget is spent
		}
		data := entries[index-lo].GetData()
		b, err := c.decodeProduced(g, index, data)
		if errors.Is(err, errMarkerEntry) {
			if m, ok := markerBatch(data, loc, markers); ok {
				out = append(out, m)
			}
			through = loc.BaseOffset + 1
			continue // a native reader skips the marker (txn_fetch.go)
		}
		if err != nil {
			return nil, budget, 0, err
		}
		if (len(out) > 0 || !whole || c.bugFirstBatchMustFit()) && int64(len(b.Batch)) > budget {
			break // the first batch goes out whole; later ones must fit
		}
		b.BaseOffset, b.AppendTimeMs = c.bugBatchBase(loc.BaseOffset, offset), loc.AppendTimeMs
		out = append(out, b)
		through = b.nextOffset()
		budget -= int64(len(b.Batch))
	}
	return out, budget, through, nil
}

// readBatch reads the batch bytes of the produce entry at raft index from
// the log, without copying the records.
func (c *Core) readBatch(g *group, index uint64) ([]byte, error) {
	batch, _, err := c.readProduced(g, index)
	return batch, err
}

// readProduced is readBatch that also returns the entry's producer fields.
func (c *Core) readProduced(g *group, index uint64) ([]byte, engine.Producer, error) {
	if first, _ := g.log.FirstIndex(); index < first {
		// Compacted away: the engine's index can still name such a
		// batch only between a restart and the replay of the TRIM that
		// dropped it; never serve, never fail-stop for it.
		return nil, engine.Producer{}, fmt.Errorf("%w: %s/%d: entry %d is below the raft log's first index %d",
			ErrOffsetOutOfRange, g.tp.Topic, g.tp.Partition, index, first)
	}
	entries, err := g.log.Entries(index, index+1, math.MaxUint64)
	if err != nil || len(entries) != 1 {
		return nil, engine.Producer{}, c.storageFailed(g, fmt.Errorf("%w: %s/%d entry %d: %w", ErrStorage, g.tp.Topic, g.tp.Partition, index, err))
	}
	b, err := c.decodeProduced(g, index, entries[0].GetData())
	return b.Batch, b.Producer, err
}

// decodeProduced decodes the produce entry at raft index: its batch,
// producer fields and transactional flag (offset and append time left
// to the caller); anything else is a storage failure.
func (c *Core) decodeProduced(g *group, index uint64, data []byte) (FetchedBatch, error) {
	e, err := engine.DecodeEntry(data)
	if err == nil && e.Kind == strandpb.EntryKind_ENTRY_KIND_TXN_MARKER {
		return FetchedBatch{}, errMarkerEntry
	}
	if err == nil && e.Kind != strandpb.EntryKind_ENTRY_KIND_PRODUCE {
		err = fmt.Errorf("%w: kind %v holds no batch", engine.ErrInvalidEntry, e.Kind)
	}
	if err != nil {
		return FetchedBatch{}, c.storageFailed(g, fmt.Errorf("%w: %s/%d entry %d: %w", ErrStorage, g.tp.Topic, g.tp.Partition, index, err))
	}
	return FetchedBatch{Batch: e.Batch, Producer: engine.Producer{ID: e.ProducerID, Epoch: e.ProducerEpoch, BaseSequence: e.BaseSequence},
		Transactional: e.Transactional}, nil
}

// storageFailed records that a replica could not read committed data from
// its own log (a failed read, or corruption raftlog detected) and returns
// err for the request at hand. Such a replica must not go on leading: raft
// never re-reads the entry, so the node would fail every fetch that needs it
// forever. The next Process returns the error and the node fail-stops;
// raftlog.Open then refuses the damaged log, and the healthy replicas serve.
func (c *Core) storageFailed(g *group, err error) error {
	if c.corruptFound(g, err) {
		return fmt.Errorf("%w: %w", ErrReplicaRecovering, err) // rebuilt at the next Tick (repair.go)
	}
	g.logs.log(slog.LevelError, "cannot read a committed entry from the raft log; the node stops (fail-stop)",
		slog.Any("err", err))
	if c.fatal == nil {
		c.fatal = err
	}
	return err
}

// batchRecordCount reads record_count from a batch header (bytes 8..12
// little-endian in Strand's form, 57..61 big-endian in Kafka's); 0 when
// the batch is too short.
func batchRecordCount(batch []byte) int32 {
	if recordbatch.IsKafka(batch) {
		if len(batch) < recordbatch.KafkaHeaderBytes {
			return 0
		}
		return int32(binary.BigEndian.Uint32(batch[recordbatch.KafkaHeaderBytes-4:]))
	}
	if len(batch) < 12 {
		return 0
	}
	return int32(binary.LittleEndian.Uint32(batch[8:12]))
}
