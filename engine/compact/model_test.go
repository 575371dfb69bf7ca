package compact

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
	"pgregory.net/rapid"
)

// modelRecord is one offset of the model's log: a data record or a marker.
type modelRecord struct {
	key     string
	value   []byte
	ts      int64
	headers string
	control bool
	txn     int // index in model.txns, -1 outside a transaction
}

// modelTxn is one transaction that wrote.
type modelTxn struct {
	producer int64
	first    int64
	marker   int64 // -1 while open
	commit   bool
}

// modelBatch is one data batch ever appended.
type modelBatch struct {
	base     int64
	producer Producer
}

// compactModel is the reference: every offset ever written, the
// transactions, and the horizon each tombstone and marker got from the
// first pass that kept it. What survives is decided by scanning it.
type compactModel struct {
	log      testLog
	records  []modelRecord
	txns     []modelTxn
	batches  []modelBatch
	open     map[int64]int // producer → open transaction (index), -1 if begun without writes
	sequence map[int64]int32
	horizon  map[int64]int64
	nowMs    int64
}

// committed reports whether offset o holds a data record that is not part
// of an aborted or open transaction.
func (m *compactModel) committed(o int64) bool {
	r := m.records[o]
	if r.control {
		return false
	}
	return r.txn < 0 || (m.txns[r.txn].marker >= 0 && m.txns[r.txn].commit)
}

// latestBelow returns, per key, the offset of its latest committed record
// below end.
func (m *compactModel) latestBelow(end int64) map[string]int64 {
	latest := map[string]int64{}
	for o := int64(0); o < end; o++ {
		if m.committed(o) {
			latest[m.records[o].key] = o
		}
	}
	return latest
}

// lastStable is the first offset of the oldest open transaction that wrote.
func (m *compactModel) lastStable() int64 {
	lso := int64(len(m.records))
	for _, i := range m.open {
		if i >= 0 {
			lso = min(lso, m.txns[i].first)
		}
	}
	return lso
}

// produce appends a batch of 1–4 records of a small key space, in Strand's
// or Kafka's form, for no producer or an idempotent one (transactional
// while its transaction is open).
func (m *compactModel) produce(t *rapid.T) {
	id := rapid.SampledFrom([]int64{-1, 1, 2}).Draw(t, "producer")
	n := rapid.IntRange(1, 4).Draw(t, "records")
	var records []recordbatch.Record
	for i := range n {
		key := fmt.Sprintf("k%d", rapid.IntRange(0, 5).Draw(t, "key"))
		value := []byte(fmt.Sprintf("v%d", len(m.records)+i))
		if rapid.IntRange(0, 4).Draw(t, "tombstone") == 0 {
			value = nil
		}
		r := recordbatch.Record{TimestampMs: m.nowMs - int64(rapid.IntRange(0, 3).Draw(t, "skew")), Key: []byte(key), Value: value}
		if rapid.Bool().Draw(t, "header") {
			r.Headers = []recordbatch.Header{{Key: "h", Value: []byte(key)}}
		}
		records = append(records, r)
	}
	p, txn := Producer{ID: -1}, -1
	if id >= 0 {
		p = Producer{ID: id, Epoch: 1, BaseSequence: m.sequence[id]}
		m.sequence[id] += int32(n)
		if i, ok := m.open[id]; ok {
			if i < 0 {
				m.txns = append(m.txns, modelTxn{producer: id, first: int64(len(m.records)), marker: -1})
				i = len(m.txns) - 1
				m.open[id] = i
			}
			txn = i
		}
	}
	base := m.log.next
	if rapid.Bool().Draw(t, "kafka form") {
		m.log.inputs = append(m.log.inputs, Input{BaseOffset: base, Data: kafkaBatch(p, txn >= 0, records), Producer: p, Transactional: txn >= 0})
		m.log.next += int64(n)
	} else {
		m.log.produce(t, p, txn >= 0, records...)
	}
	m.batches = append(m.batches, modelBatch{base: base, producer: p})
	for _, r := range records {
		m.records = append(m.records, modelRecord{key: string(r.Key), value: r.Value, ts: r.TimestampMs, headers: headerText(r.Headers), txn: txn})
	}
}

// end ends producer id's transaction: a marker if it wrote, else nothing;
// or begins one if none is open.
func (m *compactModel) end(t *rapid.T) {
	id := rapid.SampledFrom([]int64{1, 2}).Draw(t, "txn producer")
	i, ok := m.open[id]
	if !ok {
		m.open[id] = -1
		return
	}
	delete(m.open, id)
	if i < 0 {
		return
	}
	commit := rapid.Bool().Draw(t, "commit")
	m.txns[i].marker = m.log.marker(Producer{ID: id, Epoch: 1}, commit, m.txns[i].first, m.nowMs)
	m.txns[i].commit = commit
	m.records = append(m.records, modelRecord{control: true, ts: m.nowMs, txn: i})
}

// compact runs a pass with a random decision below the last stable offset
// and checks it against the model.
func (m *compactModel) compact(t *rapid.T) {
	var ends []int64
	for _, in := range m.log.inputs {
		if in.BaseOffset >= m.log.firstDirty && !IsCompacted(in.Data) && in.BaseOffset <= m.lastStable() {
			ends = append(ends, in.BaseOffset)
		}
	}
	if m.log.next <= m.lastStable() {
		ends = append(ends, m.log.next)
	}
	if len(ends) == 0 {
		return
	}
	d := Decision{
		CleanableEnd:      rapid.SampledFrom(ends).Draw(t, "cleanable end"),
		TimeMs:            m.nowMs,
		DeleteRetentionMs: rapid.SampledFrom([]int64{0, 5, 40}).Draw(t, "retention"),
		OffsetMapBytes:    int64(rapid.IntRange(6, 40).Draw(t, "map slots")) * SlotBytes,
	}
	res, after := m.log.compact(t, d)
	if res.CleanedTo > d.CleanableEnd || res.CleanedTo < m.log.firstDirty {
		t.Fatalf("cleaned to %d, decision's end %d, first dirty %d", res.CleanedTo, d.CleanableEnd, m.log.firstDirty)
	}
	// The same pass again, in steps (Pass): the same bytes.
	step := int64(rapid.IntRange(1, 2048).Draw(t, "step bytes"))
	again, twice := m.log.compactInSteps(t, d, step, rapid.Bool().Draw(t, "resume with From"))
	if again.Digest != res.Digest || !sameInputs(after, twice) || again.Stats != res.Stats {
		t.Fatalf("two passes of one decision over one log differ (the second in steps of %d bytes)", step)
	}
	m.checkIdempotent(t, after, d)
	for o := m.log.firstDirty; o < res.CleanedTo; o++ {
		if _, ok := m.horizon[o]; !ok {
			m.horizon[o] = d.horizon()
		}
	}
	m.log = *after
	m.check(t, d)
}

// checkIdempotent compacts the compacted prefix again with the same
// decision and wants the same bytes.
func (m *compactModel) checkIdempotent(t *rapid.T, after *testLog, d Decision) {
	prefix := *after
	prefix.inputs = slices.DeleteFunc(slices.Clone(after.inputs), func(in Input) bool { return !IsCompacted(in.Data) })
	res, again := prefix.compact(t, d)
	if !sameInputs(&prefix, again) || res.CleanedTo != after.firstDirty {
		t.Fatalf("compacting the compacted prefix again changed it (cleaned to %d, was %d)", res.CleanedTo, after.firstDirty)
	}
}

// sameInputs reports whether two logs hold the same batches byte for byte.
func sameInputs(a, b *testLog) bool {
	return slices.EqualFunc(a.inputs, b.inputs, func(x, y Input) bool {
		return x.BaseOffset == y.BaseOffset && bytes.Equal(x.Data, y.Data) && (x.Marker == nil) == (y.Marker == nil)
	})
}

// check compares a full read of the log with the model (see
// TestCompactModel).
func (m *compactModel) check(t *rapid.T, d Decision) {
	read := readAll(t, m.log.inputs)
	cleaned := m.log.firstDirty
	present := map[int64]bool{}
	keptTxn := map[int]bool{}
	for i, r := range read {
		want := m.records[r.offset]
		if i > 0 && r.offset <= read[i-1].offset {
			t.Fatalf("offset %d after %d", r.offset, read[i-1].offset)
		}
		if r.control != want.control || (!r.control && (r.key != want.key || !bytes.Equal(r.value, want.value) ||
			(r.value == nil) != (want.value == nil) || r.ts != want.ts || r.headers != want.headers)) {
			t.Fatalf("offset %d reads %+v, was written %+v", r.offset, r, want)
		}
		present[r.offset] = true
		if !r.control && want.txn >= 0 {
			keptTxn[want.txn] = true
		}
	}
	for o := cleaned; o < int64(len(m.records)); o++ {
		if !present[o] {
			t.Fatalf("offset %d at or past the cleaned end %d is gone", o, cleaned)
		}
	}
	m.checkPrefix(t, d, present, keptTxn)
	m.checkLastBatches(t)
}

// checkPrefix checks the compacted prefix: per key only its latest
// committed record below the cleaned end, always there unless a tombstone
// past its horizon; no aborted record; markers there exactly while their
// transaction keeps a record or their horizon has not passed.
func (m *compactModel) checkPrefix(t *rapid.T, d Decision, present map[int64]bool, keptTxn map[int]bool) {
	cleaned := m.log.firstDirty
	latest := m.latestBelow(cleaned)
	for o := int64(0); o < cleaned; o++ {
		r := m.records[o]
		switch {
		case r.control:
			want := keptTxn[r.txn] || !d.passed(m.horizon[o])
			if present[o] != want {
				t.Fatalf("marker at %d present %t, want %t (records kept %t, horizon %d, now %d)",
					o, present[o], want, keptTxn[r.txn], m.horizon[o], d.TimeMs)
			}
		case !m.committed(o) || latest[r.key] != o:
			if present[o] {
				t.Fatalf("offset %d (key %s, latest below %d at %d, committed %t) kept", o, r.key, cleaned, latest[r.key], m.committed(o))
			}
		case r.value == nil && d.passed(m.horizon[o]):
			if present[o] {
				t.Fatalf("tombstone at %d kept past its horizon %d (now %d)", o, m.horizon[o], d.TimeMs)
			}
		default:
			if !present[o] {
				t.Fatalf("latest record of %s at %d removed (horizon %d, now %d)", r.key, o, m.horizon[o], d.TimeMs)
			}
		}
	}
}

// checkLastBatches checks each producer's last data batch below the
// cleaned end is still there, with its producer fields.
func (m *compactModel) checkLastBatches(t *rapid.T) {
	last := map[int64]modelBatch{}
	for _, b := range m.batches {
		if b.producer.ID >= 0 && b.base < m.log.firstDirty {
			last[b.producer.ID] = b
		}
	}
	for id, want := range last {
		i := slices.IndexFunc(m.log.inputs, func(in Input) bool { return in.BaseOffset == want.base })
		if i < 0 {
			t.Fatalf("producer %d's last batch at %d is gone", id, want.base)
		}
		b, err := DecodeBatch(m.log.inputs[i].Data)
		if err != nil || b.ProducerID != id || b.BaseSequence != want.producer.BaseSequence || b.ProducerEpoch != want.producer.Epoch {
			t.Fatalf("producer %d's last batch %+v, %v", id, b, err)
		}
	}
}

// TestCompactModel runs random histories of keyed updates, tombstones,
// transactions (committed and aborted) in both raft forms, interleaved
// with passes of random decisions (cleanable ends below the last stable
// offset, small offset maps forcing partial passes, retentions that
// change), against a model that scans every offset ever written. After
// each pass: offsets strictly increasing and each record as written;
// nothing at or past the cleaned end touched; below it, per key exactly
// its latest committed record, kept unless a tombstone past the horizon
// of the first pass that kept it; no aborted record; markers kept exactly
// while their transaction has a record or their horizon is ahead; each
// producer's last batch kept; the same decision twice gives the same
// bytes and digest, and compacting the prefix again changes nothing.
func TestCompactModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &compactModel{open: map[int64]int{}, sequence: map[int64]int32{}, horizon: map[int64]int64{}, nowMs: 1000}
		t.Repeat(map[string]func(*rapid.T){
			"produce": m.produce,
			"txn":     m.end,
			"compact": m.compact,
			"": func(t *rapid.T) {
				m.nowMs += int64(rapid.IntRange(0, 20).Draw(t, "advance"))
			},
		})
	})
}
