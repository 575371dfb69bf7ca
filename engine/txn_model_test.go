package engine

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// txnModelProducer is the transaction model's view of one producer id.
type txnModelProducer struct {
	// Idempotence record (hasIdem): epoch, next sequence, end offset and
	// append time of the newest batch.
	hasIdem           bool
	idemEpoch         int32
	nextSeq           int32
	idemEnd, idemLast int64
	// Transactional record (hasTxn).
	hasTxn           bool
	txnEpoch, coord  int32
	open             bool
	first, txnLastMs int64
}

// txnModelBatch is one batch or marker ever appended.
type txnModelBatch struct {
	base      int64
	count     int32
	raftIndex uint64
}

// txnModel is the reference: every batch ever appended, open
// transactions found by scanning the producers, the aborted list pruned
// by trims, linear scans everywhere.
type txnModel struct {
	applied        uint64
	next, logStart int64
	batches        []txnModelBatch
	producers      [3]txnModelProducer
	aborted        []AbortedTxn
}

// epochFloor is the epoch below which producer id's entries are fenced.
func (m *txnModel) epochFloor(id int64) int32 {
	pr := &m.producers[id]
	floor := int32(-1)
	if pr.hasTxn {
		floor = pr.txnEpoch
	}
	if pr.hasIdem {
		floor = max(floor, pr.idemEpoch)
	}
	return floor
}

// append gives count offsets to a batch at the next raft index.
func (m *txnModel) append(count int32) int64 {
	base := m.next
	m.batches = append(m.batches, txnModelBatch{base: base, count: count, raftIndex: m.applied})
	m.next += int64(count)
	return base
}

// produce is the model's answer to a batch of count records at the
// producer's expected sequence.
func (m *txnModel) produce(id int64, epoch int32, count int32, transactional bool, nowMs int64) string {
	m.applied++
	pr := &m.producers[id]
	if transactional || pr.hasTxn {
		switch {
		case epoch < m.epochFloor(id):
			return "fenced"
		case transactional && (!pr.hasTxn || !pr.open || pr.txnEpoch != epoch):
			return "invalid-txn-state"
		case !transactional && pr.open:
			return "invalid-txn-state"
		}
	}
	if pr.hasIdem && epoch < pr.idemEpoch {
		return "fenced"
	}
	base := m.append(count)
	if !pr.hasIdem || pr.idemEpoch != epoch {
		pr.nextSeq = 0
	}
	pr.hasIdem, pr.idemEpoch, pr.nextSeq = true, epoch, pr.nextSeq+count
	pr.idemEnd, pr.idemLast = base+int64(count), nowMs
	if transactional {
		pr.txnLastMs = nowMs
		if pr.first < 0 {
			pr.first = base
		}
	}
	return fmt.Sprintf("ok base=%d count=%d", base, count)
}

// expectedSeq is the sequence a well-behaved producer sends at epoch.
func (m *txnModel) expectedSeq(id int64, epoch int32) int32 {
	if pr := &m.producers[id]; pr.hasIdem && pr.idemEpoch == epoch {
		return pr.nextSeq
	}
	return 0
}

// begin is the model's TXN_BEGIN.
func (m *txnModel) begin(id int64, epoch int32, nowMs int64) string {
	m.applied++
	pr := &m.producers[id]
	switch {
	case epoch < m.epochFloor(id):
		return "fenced"
	case pr.hasTxn && pr.open && pr.txnEpoch == epoch:
		return "ok base=0 count=0"
	case pr.hasTxn && pr.open:
		return "invalid-txn-state"
	}
	if !pr.hasTxn {
		pr.coord = 0
	}
	pr.hasTxn, pr.txnEpoch, pr.open, pr.first, pr.txnLastMs = true, epoch, true, -1, nowMs
	return "ok base=0 count=0"
}

// marker is the model's TXN_MARKER.
func (m *txnModel) marker(id int64, epoch, coord int32, commit bool, nowMs int64) string {
	m.applied++
	pr := &m.producers[id]
	switch {
	case epoch < m.epochFloor(id):
		return "fenced"
	case pr.hasTxn && coord < pr.coord:
		return "coordinator-fenced"
	}
	out := "ok base=0 count=0"
	if pr.hasTxn && pr.open && pr.first >= 0 {
		base := m.append(1)
		if !commit {
			m.aborted = append(m.aborted, AbortedTxn{ProducerID: id, FirstOffset: pr.first, LastOffset: base})
		}
		out = fmt.Sprintf("ok base=%d count=1", base)
	}
	pr.hasTxn, pr.txnEpoch, pr.coord, pr.open, pr.first, pr.txnLastMs = true, epoch, coord, false, -1, nowMs
	return out
}

// trim is the model's TRIM: producers, records and aborted entries go by
// the trim's offset, the batches by the log start.
func (m *txnModel) trim(offset, nowMs int64) {
	m.applied++
	offset = min(offset, m.next)
	for i := range m.producers {
		pr := &m.producers[i]
		if pr.hasIdem && pr.idemEnd <= offset && pr.idemLast <= nowMs-ProducerExpirationMs && !(pr.hasTxn && pr.open) {
			pr.hasIdem = false
		}
		if pr.hasTxn && !pr.open && pr.txnLastMs <= nowMs-ProducerExpirationMs && !pr.hasIdem {
			pr.hasTxn = false
		}
	}
	m.aborted = slices.DeleteFunc(m.aborted, func(a AbortedTxn) bool { return a.LastOffset < offset })
	m.logStart = max(m.logStart, offset)
}

// compacted drops the batches at or below raftIndex, moving the log start.
func (m *txnModel) compacted(raftIndex uint64) {
	start := m.next
	dropped := false
	for _, b := range m.batches {
		if b.base+int64(b.count) <= m.logStart {
			continue
		}
		if b.raftIndex <= raftIndex {
			dropped = true
			continue
		}
		start = b.base
		break
	}
	if dropped {
		m.logStart = max(m.logStart, start)
	}
}

// lso is the model's last stable offset.
func (m *txnModel) lso() int64 {
	lso := m.next
	for _, pr := range m.producers {
		if pr.hasTxn && pr.open && pr.first >= 0 {
			lso = min(lso, pr.first)
		}
	}
	return max(lso, m.logStart)
}

// abortedIn is AppendAbortedTxns by linear scan.
func (m *txnModel) abortedIn(from, to int64) []AbortedTxn {
	var out []AbortedTxn
	for _, a := range m.aborted {
		if a.LastOffset >= from && a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// openTxns lists the model's open transactions that wrote, by first offset.
func (m *txnModel) openTxns() []OpenTxn {
	var out []OpenTxn
	for id, pr := range m.producers {
		if pr.hasTxn && pr.open && pr.first >= 0 {
			out = append(out, OpenTxn{ProducerID: int64(id), Epoch: pr.txnEpoch, FirstOffset: pr.first})
		}
	}
	slices.SortFunc(out, func(a, b OpenTxn) int { return cmpInt64(a.FirstOffset, b.FirstOffset) })
	return out
}

// txnMachine drives a Partition and the transaction model together.
type txnMachine struct {
	p         *Partition
	m         *txnModel
	entries   [][]byte
	results   []string
	compacted bool
}

// apply applies data to the partition, remembers it and returns the outcome.
func (s *txnMachine) apply(data []byte) string {
	s.entries = append(s.entries, data)
	got := outcome(s.p.Apply(s.p.AppliedIndex()+1, data))
	s.results = append(s.results, got)
	return got
}

// drawEpoch picks an epoch near the producer's floor: often equal, sometimes
// one below (stale) or above (a bump).
func (s *txnMachine) drawEpoch(t *rapid.T, id int64) int32 {
	floor := max(s.m.epochFloor(id), 0)
	return max(floor+rapid.Int32Range(-1, 1).Draw(t, "epochDelta"), 0)
}

// expect fails when the partition's outcome differs from the model's.
func expect(t *rapid.T, what, got, want string) {
	if got != want {
		t.Fatalf("%s: %s, model %s", what, got, want)
	}
}

// stepBegin applies a TXN_BEGIN.
func (s *txnMachine) stepBegin(t *rapid.T) {
	id := rapid.Int64Range(0, 2).Draw(t, "producer")
	epoch := s.drawEpoch(t, id)
	now := rapid.Int64Range(0, 10).Draw(t, "now")
	got := s.apply(EncodeTxnBeginEntry(nil, now, 0, id, epoch))
	expect(t, fmt.Sprintf("begin %d@%d", id, epoch), got, s.m.begin(id, epoch, now))
}

// stepProduce applies a transactional or plain batch at the expected sequence.
func (s *txnMachine) stepProduce(t *rapid.T) {
	id := rapid.Int64Range(0, 2).Draw(t, "producer")
	epoch := s.drawEpoch(t, id)
	transactional := rapid.IntRange(0, 3).Draw(t, "transactional") > 0
	batch, count, _ := drawBatch(t)
	now := rapid.Int64Range(0, 10).Draw(t, "now")
	producer := Producer{ID: id, Epoch: epoch, BaseSequence: s.m.expectedSeq(id, epoch)}
	data := EncodeProduceEntry(nil, now, 0, producer, batch)
	if transactional {
		data = EncodeTransactionalProduceEntry(nil, now, 0, producer, batch)
	}
	got := s.apply(data)
	expect(t, fmt.Sprintf("produce %+v transactional=%v", producer, transactional), got,
		s.m.produce(id, epoch, count, transactional, now))
}

// stepMarker applies a commit or abort marker, sometimes stale.
func (s *txnMachine) stepMarker(t *rapid.T) {
	id := rapid.Int64Range(0, 2).Draw(t, "producer")
	epoch := s.drawEpoch(t, id)
	coord := rapid.Int32Range(0, 2).Draw(t, "coordinatorEpoch")
	commit := rapid.Bool().Draw(t, "commit")
	now := rapid.Int64Range(0, 10).Draw(t, "now")
	marker := Marker{ProducerID: id, ProducerEpoch: epoch, CoordinatorEpoch: coord, Commit: commit}
	got := s.apply(EncodeTxnMarkerEntry(nil, now, 0, marker))
	expect(t, fmt.Sprintf("marker %+v", marker), got, s.m.marker(id, epoch, coord, commit, now))
}

// stepTrim applies a trim around the log, now and then a day later.
func (s *txnMachine) stepTrim(t *rapid.T) {
	offset := rapid.Int64Range(-2, s.m.next+2).Draw(t, "offset")
	now := rapid.SampledFrom([]int64{0, 10, ProducerExpirationMs + 20}).Draw(t, "now")
	expect(t, fmt.Sprintf("trim %d", offset), s.apply(EncodeTrimEntry(nil, now, 0, offset)), "ok base=0 count=0")
	s.m.trim(offset, now)
}

// stepCompacted drops raft entries below a drawn applied index.
func (s *txnMachine) stepCompacted(t *rapid.T) {
	index := rapid.Uint64Range(0, s.m.applied).Draw(t, "raftIndex")
	s.p.Compacted(index)
	s.m.compacted(index)
	s.compacted = true
}

// stepSnapshotRestore replaces the partition with its restored snapshot,
// whole or as state plus append-only index.
func (s *txnMachine) stepSnapshotRestore(t *rapid.T) {
	var q *Partition
	var err error
	if rapid.Bool().Draw(t, "indexed") {
		start, _ := s.p.IndexOrdinals()
		q, err = RestorePartitionIndexed(s.p.StateSnapshot(), slices.Clone(s.p.IndexSince(start)))
	} else {
		q, err = RestorePartition(s.p.Snapshot())
	}
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !bytes.Equal(q.Snapshot(), s.p.Snapshot()) || q.Digest() != s.p.Digest() || q.TailDigest() != s.p.TailDigest() {
		t.Fatalf("restored partition differs: digest %016x, original %016x", q.Digest(), s.p.Digest())
	}
	s.p = q
}

// stepRead compares the reads: LSO, read limits, a read_committed read and
// the aborted transactions of a range.
func (s *txnMachine) stepRead(t *rapid.T) {
	if got, want := s.p.LastStableOffset(), s.m.lso(); got != want {
		t.Fatalf("LastStableOffset %d, model %d", got, want)
	}
	if got, want := s.p.AppendOpenTxns(nil), s.m.openTxns(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("open transactions %v, model %v", got, want)
	}
	from := rapid.Int64Range(s.m.logStart-1, s.m.next+1).Draw(t, "from")
	to := rapid.Int64Range(from, s.m.next+2).Draw(t, "to")
	if got, want := s.p.AppendAbortedTxns(nil, from, to), s.m.abortedIn(from, to); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("aborted in [%d, %d): %v, model %v", from, to, got, want)
	}
	locs, err := s.p.AppendReadable(nil, from, 3, ReadCommitted)
	if inRange := from >= s.m.logStart && from <= s.m.next; inRange != (err == nil) {
		t.Fatalf("read_committed at %d: %v (log start %d, hwm %d)", from, err, s.m.logStart, s.m.next)
	}
	if err == nil && (len(locs) == 0) != (from >= s.m.lso()) {
		t.Fatalf("read_committed at %d gave %d batches, LSO %d", from, len(locs), s.m.lso())
	}
	for _, l := range locs {
		if l.BaseOffset+int64(l.RecordCount) > s.m.lso() {
			t.Fatalf("read_committed at %d returned %+v past the LSO %d", from, l, s.m.lso())
		}
	}
}

// checkState checks the invariants and the counters.
func (s *txnMachine) checkState(t *rapid.T) {
	if err := s.p.check(); err != nil {
		t.Fatalf("invariant: %v", err)
	}
	if s.p.HighWatermark() != s.m.next || s.p.LogStartOffset() != s.m.logStart {
		t.Fatalf("hwm %d start %d; model %d %d", s.p.HighWatermark(), s.p.LogStartOffset(), s.m.next, s.m.logStart)
	}
}

// replay applies the run's entries to a fresh partition that never
// compacts or restores: the same outcomes, and (without compaction) the
// same snapshot bytes and digest.
func (s *txnMachine) replay(t *rapid.T) {
	q := NewPartition()
	for i, data := range s.entries {
		if got := outcome(q.Apply(uint64(i+1), data)); got != s.results[i] {
			t.Fatalf("entry %d: replay gives %s, the run gave %s", i+1, got, s.results[i])
		}
	}
	if s.compacted {
		return
	}
	if !bytes.Equal(q.Snapshot(), s.p.Snapshot()) || q.Digest() != s.p.Digest() {
		t.Fatalf("replaying the same entries gave another state")
	}
}

// runTxnModel is one rapid run of the transaction model.
func runTxnModel(t *rapid.T) {
	s := &txnMachine{p: NewPartition(), m: &txnModel{}}
	actions := map[string]func(*rapid.T){
		"begin":           s.stepBegin,
		"produce":         s.stepProduce,
		"produceAgain":    s.stepProduce,
		"marker":          s.stepMarker,
		"trim":            s.stepTrim,
		"compacted":       s.stepCompacted,
		"snapshotRestore": s.stepSnapshotRestore,
		"read":            s.stepRead,
		"":                s.checkState,
	}
	for range 3 {
		t.Repeat(actions)
	}
	s.replay(t)
}

// TestTxnModel runs random begins, transactional and plain writes (at
// current, stale and bumped epochs), commit and abort markers (stale
// producer and coordinator epochs included), trims a day apart, raft log
// compactions and snapshot-restores (whole and indexed) against a linear
// model of open transactions, the last stable offset and the aborted list,
// then replays the entries into a fresh partition (same outcomes; same
// bytes and digest unless a compaction intervened).
func TestTxnModel(t *testing.T) {
	rapid.Check(t, runTxnModel)
}
