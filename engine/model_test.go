package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/engine/tier"
	"github.com/strandlog/strand/proto/strandpb"
)

// modelBatch is one batch ever appended to the model log.
type modelBatch struct {
	loc     BatchLocation
	dropped bool
}

// modelSeq is one remembered batch of a model producer.
type modelSeq struct {
	base, count int32
	offset      int64
}

// modelProducer is the model's idempotence record.
type modelProducer struct {
	epoch      int32
	batches    []modelSeq // last five, oldest first
	lastAppend int64
}

// model is the trivial reference: every batch ever appended, linear scans
// everywhere, sequence arithmetic in int64 modulo 2^31.
type model struct {
	applied        uint64
	next, logStart int64
	batches        []modelBatch
	producers      map[int64]*modelProducer
	// seeded: a compaction (not a TRIM) dropped the last batch and no
	// batch or TRIM came since: the next batch still takes its running
	// maximum timestamp, as on a replica that indexes it.
	seeded bool
}

// indexed returns the batches not dropped, in order.
func (m *model) indexed() []BatchLocation {
	var out []BatchLocation
	for _, b := range m.batches {
		if !b.dropped {
			out = append(out, b.loc)
		}
	}
	return out
}

// produce is the model's answer to a valid batch.
func (m *model) produce(p Producer, count int32, appendTimeMs, maxTs int64) string {
	m.applied++
	var st *modelProducer
	if p.ID >= 0 {
		if p.Epoch < 0 || p.BaseSequence < 0 {
			return "invalid"
		}
		st = m.producers[p.ID]
		switch {
		case st == nil && p.BaseSequence != 0:
			return "unknown-producer"
		case st == nil:
		case p.Epoch > st.epoch:
			if p.BaseSequence != 0 {
				return "out-of-order"
			}
		case p.Epoch < st.epoch:
			return "fenced"
		default:
			for _, b := range st.batches {
				if b.base == p.BaseSequence && b.count == count {
					return fmt.Sprintf("duplicate base=%d count=%d", b.offset, b.count)
				}
			}
			last := st.batches[len(st.batches)-1]
			if want := (int64(last.base) + int64(last.count)) % (1 << 31); int64(p.BaseSequence) != want {
				return "out-of-order"
			}
		}
	}
	loc := BatchLocation{BaseOffset: m.next, RecordCount: count, RaftIndex: m.applied, AppendTimeMs: appendTimeMs, MaxTimestampMs: maxTs}
	if n := len(m.batches); n > 0 && (!m.batches[n-1].dropped || m.seeded) {
		loc.MaxTimestampMs = max(loc.MaxTimestampMs, m.batches[n-1].loc.MaxTimestampMs)
	}
	m.seeded = false
	m.batches = append(m.batches, modelBatch{loc: loc})
	m.next += int64(count)
	if p.ID >= 0 {
		if st == nil || st.epoch != p.Epoch {
			st = &modelProducer{epoch: p.Epoch}
			m.producers[p.ID] = st
		}
		st.batches = append(st.batches, modelSeq{p.BaseSequence, count, loc.BaseOffset})
		st.lastAppend = appendTimeMs
		if len(st.batches) > 5 {
			st.batches = st.batches[1:]
		}
	}
	return fmt.Sprintf("ok base=%d count=%d", loc.BaseOffset, count)
}

// trim moves the model's log start.
func (m *model) trim(offset, nowMs int64) {
	m.applied++
	offset = min(offset, m.next)
	if offset == m.next {
		m.seeded = false
	}
	for id, st := range m.producers {
		if last := st.batches[len(st.batches)-1]; last.offset+int64(last.count) <= offset && st.lastAppend <= nowMs-ProducerExpirationMs {
			delete(m.producers, id)
		}
	}
	if offset > m.logStart {
		m.logStart = offset
	}
	for i := range m.batches {
		if m.batches[i].loc.BaseOffset+int64(m.batches[i].loc.RecordCount) <= m.logStart {
			m.batches[i].dropped = true
		}
	}
}

// compacted drops batches at or below raftIndex; on a tiered partition
// (remote: the manifest is active, its remote log ending at next) only
// those wholly below next, and the log start stays.
func (m *model) compacted(raftIndex uint64, remote bool, next int64) {
	dropped := false
	for i := range m.batches {
		b := &m.batches[i]
		if remote && b.loc.BaseOffset+int64(b.loc.RecordCount) > next {
			break
		}
		if !b.dropped && b.loc.RaftIndex <= raftIndex {
			b.dropped, dropped = true, true
		}
	}
	if remote {
		m.seeded = m.seeded || dropped && len(m.indexed()) == 0
		return
	}
	if dropped {
		start := m.next
		idx := m.indexed()
		if len(idx) > 0 {
			start = idx[0].BaseOffset
		}
		m.seeded = len(idx) == 0
		m.logStart = max(m.logStart, start)
	}
}

// locate is Locate by linear scan; remote says the partition tiers (its
// offsets below the first indexed batch are remote, refused).
func (m *model) locate(offset int64, maxBatches int, remote bool) ([]BatchLocation, bool) {
	if offset < m.logStart || offset > m.next {
		return nil, false
	}
	if idx := m.indexed(); remote && offset < m.next && (len(idx) == 0 || offset < idx[0].BaseOffset) {
		return nil, false
	}
	var out []BatchLocation
	for _, b := range m.indexed() {
		if b.BaseOffset+int64(b.RecordCount) > offset && len(out) < max(maxBatches, 1) {
			out = append(out, b)
		}
	}
	return out, true
}

// offsetForTimestamp is OffsetForTimestamp by linear scan.
func (m *model) offsetForTimestamp(ts int64) int64 {
	for _, b := range m.indexed() {
		if b.MaxTimestampMs >= ts {
			return max(b.BaseOffset, m.logStart)
		}
	}
	return m.next
}

// machine drives a Partition and the model with the same steps.
type machine struct {
	p       *Partition
	m       *model
	entries [][]byte // every applied entry's data, nil for empty entries
	results []string // outcome of each entry in entries ("" for empty)
}

// drawProducer picks a producer and a sequence that is often right, often
// a retry and sometimes wrong, with epochs that move both ways.
func (s *machine) drawProducer(t *rapid.T) Producer {
	id := rapid.Int64Range(-1, 1).Draw(t, "producer")
	if id < 0 {
		return NoProducer
	}
	st := s.m.producers[id]
	epoch := rapid.Int32Range(0, 2).Draw(t, "epoch")
	seq := rapid.Int32Range(0, 20).Draw(t, "randomSequence")
	if st == nil {
		return Producer{ID: id, Epoch: epoch, BaseSequence: seq % 2}
	}
	// Mostly the current epoch with the next sequence or a retry, so runs
	// of accepted batches fill the window of five and retries probe it.
	if rapid.IntRange(0, 9).Draw(t, "epochKind") < 8 {
		epoch = st.epoch
		switch k := rapid.IntRange(0, 9).Draw(t, "sequenceKind"); {
		case k < 5:
			last := st.batches[len(st.batches)-1]
			seq = last.base + last.count
		case k < 9:
			seq = st.batches[rapid.IntRange(0, len(st.batches)-1).Draw(t, "retry")].base
		}
	}
	return Producer{ID: id, Epoch: epoch, BaseSequence: seq}
}

// drawBatch encodes 1-4 records and returns the batch and its max timestamp.
func drawBatch(t *rapid.T) ([]byte, int32, int64) {
	count := rapid.IntRange(1, 4).Draw(t, "count")
	records := make([]recordbatch.Record, count)
	maxTs := int64(math.MinInt64)
	for i := range records {
		records[i] = recordbatch.Record{TimestampMs: rapid.Int64Range(0, 1000).Draw(t, "ts"), Value: []byte{byte(i)}}
		maxTs = max(maxTs, records[i].TimestampMs)
	}
	batch, err := recordbatch.Encode(nil, records)
	if err != nil {
		t.Fatal(err)
	}
	return batch, int32(count), maxTs
}

// apply applies data to the partition and remembers it.
func (s *machine) apply(data []byte) Result {
	s.entries = append(s.entries, data)
	r := s.p.Apply(s.p.AppliedIndex()+1, data)
	s.results = append(s.results, outcome(r))
	return r
}

// actions lists the steps rapid chooses from; "" is the invariant check.
func (s *machine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"produce":            s.stepProduce,
		"invalid":            s.stepInvalid,
		"trim":               s.stepTrim,
		"empty":              s.stepEmpty,
		"compacted":          s.stepCompacted,
		"snapshotRestore":    s.stepSnapshotRestore,
		"locate":             s.stepLocate,
		"offsetForTimestamp": s.stepOffsetForTimestamp,
		"tierAdd":            s.stepTierAdd,
		"":                   s.checkState,
	}
}

// stepTierAdd applies a TIER_ADD of a segment near the remote log's end:
// its outcome must follow tier.Manifest's rules on the state before it
// (the replay in TestPartitionModel then shows every replica decides it
// alike, through compactions and restores).
func (s *machine) stepTierAdd(t *rapid.T) {
	m := s.p.Tier()
	from := m.Next()
	if !m.Active() {
		from = s.m.logStart
	}
	base := max(0, from+rapid.Int64Range(-2, 2).Draw(t, "tierBase"))
	seg := tier.Segment{Base: base, End: base + rapid.Int64Range(1, 8).Draw(t, "tierLen"), Bytes: 10, MaxTimeMs: -1,
		Term: rapid.Uint64Range(1, 3).Draw(t, "tierTerm")}
	wantOut, _ := m.Add(seg) // m is a copy
	if seg.End > s.p.LastStableOffset() {
		wantOut = 0
	}
	s.m.applied++
	got := s.apply(EncodeTierAddEntry(nil, 0, 0, seg))
	if wantOut == 0 {
		if !errors.Is(got.Err, ErrInvalidEntry) {
			t.Fatalf("TIER_ADD %+v past the last stable offset %d: %s", seg, s.p.LastStableOffset(), outcome(got))
		}
		return
	}
	if got.Err != nil || got.Tier != wantOut {
		t.Fatalf("TIER_ADD %+v: %s, want outcome %d", seg, outcome(got), wantOut)
	}
}

// stepProduce applies a valid batch from a drawn producer and compares
// the outcome with the model's.
func (s *machine) stepProduce(t *rapid.T) {
	producer := s.drawProducer(t)
	batch, count, maxTs := drawBatch(t)
	appendTime := rapid.Int64Range(0, 10).Draw(t, "appendTime")
	got := outcome(s.apply(EncodeProduceEntry(nil, appendTime, 0, producer, batch)))
	if want := s.m.produce(producer, count, appendTime, maxTs); got != want {
		t.Fatalf("produce %+v x%d: %s, model %s", producer, count, got, want)
	}
}

// stepInvalid applies a damaged batch, a truncated entry or an unknown
// kind: all refused as invalid.
func (s *machine) stepInvalid(t *rapid.T) {
	batch, _, _ := drawBatch(t)
	var data []byte
	switch rapid.IntRange(0, 2).Draw(t, "how") {
	case 0:
		batch[rapid.IntRange(recordbatch.HeaderBytes, len(batch)-1).Draw(t, "at")] ^= 0x40
		data = EncodeProduceEntry(nil, 0, 0, s.drawProducer(t), batch)
	case 1:
		data = EncodeProduceEntry(nil, 0, 0, NoProducer, batch)
		data = data[:len(data)-1]
	default:
		data = AppendEntry(nil, &EntryFields{Kind: strandpb.EntryKind(9 + rapid.Int32Range(0, 5).Draw(t, "kind"))})
	}
	if r := s.apply(data); !errors.Is(r.Err, ErrInvalidEntry) {
		t.Fatalf("invalid entry gave %s", outcome(r))
	}
	s.m.applied++
}

// stepTrim applies a trim entry to a drawn offset around the log.
func (s *machine) stepTrim(t *rapid.T) {
	offset := rapid.Int64Range(-3, s.m.next+3).Draw(t, "offset")
	// Producers last seen at 0..10 expire only at a trim a day later.
	now := rapid.SampledFrom([]int64{0, 10, ProducerExpirationMs + 5, ProducerExpirationMs + 20}).Draw(t, "now")
	before := s.p.Tier()
	r := s.apply(EncodeTrimEntry(nil, now, 0, offset))
	s.m.trim(offset, now)
	if r.Err != nil || s.p.LogStartOffset() != s.m.logStart {
		t.Fatalf("trim to %d: %+v, model log start %d", offset, r, s.m.logStart)
	}
	// An active manifest follows the trim and answers what left it.
	if after, to := s.p.Tier(), min(offset, s.m.next); before.Active() && to > before.Start() {
		if after.Start() != to || len(r.TierDropped)+len(after.Segments()) != len(before.Segments()) {
			t.Fatalf("trim to %d: remote start %d, %d dropped + %d kept of %d", to, after.Start(),
				len(r.TierDropped), len(after.Segments()), len(before.Segments()))
		}
	}
}

// stepEmpty applies an empty entry.
func (s *machine) stepEmpty(t *rapid.T) {
	s.entries = append(s.entries, nil)
	s.results = append(s.results, "")
	s.p.ApplyEmpty(s.p.AppliedIndex() + 1)
	s.m.applied++
}

// stepCompacted tells the partition raft compacted to a drawn applied index.
func (s *machine) stepCompacted(t *rapid.T) {
	index := rapid.Uint64Range(0, s.m.applied).Draw(t, "raftIndex")
	m := s.p.Tier()
	s.p.Compacted(index)
	s.m.compacted(index, m.Active(), m.Next())
}

// stepSnapshotRestore replaces the partition with its restored snapshot.
func (s *machine) stepSnapshotRestore(t *rapid.T) {
	snap := s.p.Snapshot()
	q, err := RestorePartition(snap)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !bytes.Equal(q.Snapshot(), snap) {
		t.Fatalf("restored partition snapshots differently")
	}
	if q.Digest() != s.p.Digest() {
		t.Fatalf("restored partition digest %016x, original %016x", q.Digest(), s.p.Digest())
	}
	s.p = q
}

// stepLocate compares Locate with the model's linear scan.
func (s *machine) stepLocate(t *rapid.T) {
	offset := rapid.Int64Range(s.m.logStart-2, s.m.next+2).Draw(t, "offset")
	maxBatches := rapid.IntRange(0, 3).Draw(t, "maxBatches")
	got, err := s.p.Locate(offset, maxBatches)
	want, ok := s.m.locate(offset, maxBatches, s.p.Tier().Active())
	if ok != (err == nil) || (ok && fmt.Sprint(got) != fmt.Sprint(want)) {
		t.Fatalf("Locate(%d, %d) = %v, %v; model %v, %v", offset, maxBatches, got, err, want, ok)
	}
	if !ok && !errors.Is(err, ErrOffsetOutOfRange) && !errors.Is(err, ErrOffsetRemote) {
		t.Fatalf("Locate error %v", err)
	}
}

// stepOffsetForTimestamp compares OffsetForTimestamp with the model's linear scan.
func (s *machine) stepOffsetForTimestamp(t *rapid.T) {
	ts := rapid.Int64Range(-10, 1010).Draw(t, "ts")
	want := s.m.offsetForTimestamp(ts)
	if m, idx := s.p.Tier(), s.m.indexed(); m.Active() && (len(idx) == 0 && s.m.next > s.m.logStart || len(idx) > 0 && idx[0].BaseOffset > s.m.logStart) {
		// Below the local start the remote segments answer: the first
		// whose newest record is at or after ts.
		for _, seg := range m.Segments() {
			if len(idx) > 0 && seg.Base >= idx[0].BaseOffset || len(idx) == 0 && seg.Base >= s.m.next {
				break
			}
			if seg.MaxTimeMs >= ts {
				want = max(seg.Base, m.Start(), s.m.logStart)
				break
			}
		}
	}
	if got := s.p.OffsetForTimestamp(ts); got != want {
		t.Fatalf("OffsetForTimestamp(%d) = %d, model %d", ts, got, want)
	}
}

// checkState compares the invariants and counters after every step.
func (s *machine) checkState(t *rapid.T) {
	if err := s.p.check(); err != nil {
		t.Fatalf("invariant: %v", err)
	}
	if d, tail := s.p.Digests(); d != s.p.Digest() || tail != s.p.TailDigest() {
		t.Fatalf("Digests %016x %016x, the state's %016x %016x", d, tail, s.p.Digest(), s.p.TailDigest())
	}
	if s.p.AppliedIndex() != s.m.applied || s.p.HighWatermark() != s.m.next || s.p.LogStartOffset() != s.m.logStart {
		t.Fatalf("applied %d hwm %d start %d; model %d %d %d", s.p.AppliedIndex(), s.p.HighWatermark(),
			s.p.LogStartOffset(), s.m.applied, s.m.next, s.m.logStart)
	}
}

// TestPartitionModel runs random produce (valid, invalid, duplicate, out of
// order, fenced, new epoch), trim, empty, compaction, snapshot-restore,
// Locate and OffsetForTimestamp steps against the trivial model. Then it
// replays the same entries into a fresh partition that never compacts nor
// restores: every entry's outcome must match (a replica's local compaction
// or restore never changes a replicated decision), and so must the snapshot
// bytes unless a local compaction intervened (determinism).
func TestPartitionModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &machine{p: NewPartition(), m: &model{producers: map[int64]*modelProducer{}}}
		compacted := false
		actions := s.actions()
		actions["compacted"] = func(t *rapid.T) { compacted = true; s.stepCompacted(t) }
		// Producers need long runs to fill and overflow their last-five
		// window: weight produce up and repeat past rapid's 30 steps.
		actions["produceAgain"] = actions["produce"]
		actions["produceOnceMore"] = actions["produce"]
		for range 4 {
			t.Repeat(actions)
		}
		replay := NewPartition()
		for i, data := range s.entries {
			got := ""
			if data == nil {
				replay.ApplyEmpty(uint64(i + 1))
			} else {
				got = outcome(replay.Apply(uint64(i+1), data))
			}
			if got != s.results[i] {
				t.Fatalf("entry %d: replay gives %s, the run gave %s", i+1, got, s.results[i])
			}
		}
		if !compacted && !bytes.Equal(replay.Snapshot(), s.p.Snapshot()) {
			t.Fatalf("replaying the same entries gave different snapshot bytes")
		}
		if !compacted && replay.Digest() != s.p.Digest() {
			t.Fatalf("replaying the same entries gave digest %016x, the run %016x", replay.Digest(), s.p.Digest())
		}
	})
}
