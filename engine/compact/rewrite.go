package compact

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"math"

	"github.com/strandlog/strand/engine/recordbatch"
)

// rewriter is the second pass: it reads every batch below the plan's end
// again, keeps the records the rules keep (doc.go, "Rules") and emits the
// survivors batch by batch.
type rewriter struct {
	decision Decision
	plan     *plan
	tracker  *abortedTracker
	emit     func([]byte) error
	digest   hash.Hash
	buf      []byte
	stats    Stats
	// txnKept marks producers whose current transaction (since their last
	// marker) has a record in the output: its marker must stay.
	txnKept   map[int64]bool
	forgotten []AbortedTxn
}

// newRewriter starts the second pass.
func newRewriter(log Log, d Decision, p *plan, emit func([]byte) error) *rewriter {
	return &rewriter{decision: d, plan: p, tracker: newAbortedTracker(log.Aborted), emit: emit,
		digest: sha256.New(), txnKept: make(map[int64]bool)}
}

// batch compacts one input batch.
func (w *rewriter) batch(in Input) error {
	b, err := w.read(in)
	if err != nil {
		return err
	}
	w.stats.BatchesIn++
	w.stats.BytesIn += int64(len(in.Data))
	w.stats.RecordsIn += int64(len(b.Records))
	if b.LastOffset() < w.decision.LogStart {
		return w.belowLogStart(&b)
	}
	if b.Control {
		return w.control(&b)
	}
	inputMax := b.MaxTimestampMs
	aborted := b.Transactional && w.tracker.aborted(b.ProducerID, b.BaseOffset)
	kept := b.Records[:0]
	for _, r := range b.Records {
		if w.keep(&b, &r, aborted) {
			kept = append(kept, r)
		}
	}
	if bugDropsLastRecord && len(kept) > 0 && len(kept) < len(b.Records) {
		kept = kept[:len(kept)-1] // planted (simbugs): an off-by-one copying a thinned batch's survivors
	}
	b.Records = kept
	if len(kept) > 0 && b.Transactional {
		w.txnKept[b.ProducerID] = true
	}
	last, isLast := w.plan.lastData[b.ProducerID]
	if len(kept) == 0 && !(b.ProducerID >= 0 && isLast && last == b.BaseOffset && !w.expired(&b)) {
		return nil
	}
	b.MaxTimestampMs = inputMax
	w.stampHorizon(&b)
	return w.write(&b)
}

// expired reports whether b's producer expired at the decision (rule 6):
// b's newest timestamp is ProducerExpirationMs or more before the
// decision's time, as Kafka expires a producer by its last batch's
// timestamp (producer.id.expiration.ms).
func (w *rewriter) expired(b *Batch) bool {
	return b.MaxTimestampMs <= w.decision.TimeMs-ProducerExpirationMs
}

// belowLogStart drops b, wholly below the decision's log start (rule 8):
// a marker still ends its producer's transaction in the walk, and an
// abort's goes from the engine's aborted index with it.
func (w *rewriter) belowLogStart(b *Batch) error {
	w.stats.RetentionRemoved += int64(len(b.Records))
	if !b.Control {
		return nil
	}
	if abort, wasAborted := w.tracker.marker(b.ProducerID, b.BaseOffset); wasAborted {
		w.forgotten = append(w.forgotten, abort)
	}
	delete(w.txnKept, b.ProducerID)
	return nil
}

// keep applies the record rules to r of b: aborted records go, records
// without a key go, older values of a key go, tombstones go once past
// their horizon.
func (w *rewriter) keep(b *Batch, r *Record, aborted bool) bool {
	switch {
	case aborted:
		w.stats.AbortedRemoved++
		return false
	case r.Key == nil:
		w.stats.KeylessRemoved++
		return false
	case w.superseded(r):
		w.stats.RecordsSuperseded++
		return false
	case r.Value == nil && (bugTombstoneEarly || w.decision.passed(b.DeleteHorizonMs)):
		w.stats.TombstonesRemoved++
		return false
	}
	return true
}

// superseded reports whether the dirty section holds a newer record of
// r's key.
func (w *rewriter) superseded(r *Record) bool {
	latest, ok := w.plan.offsets.latest(hashKey(r.Key))
	if bugKeepsOlder {
		return ok && latest != r.Offset
	}
	return ok && latest > r.Offset
}

// control keeps or drops a marker: it goes once no record of its
// transaction is left in the output and its horizon has passed (Kafka's
// rule), and ends the producer's transaction either way.
func (w *rewriter) control(b *Batch) error {
	abort, wasAborted := w.tracker.marker(b.ProducerID, b.BaseOffset)
	kept := w.txnKept[b.ProducerID]
	delete(w.txnKept, b.ProducerID)
	if !kept && w.decision.passed(b.DeleteHorizonMs) {
		w.stats.MarkersRemoved++
		if wasAborted {
			w.forgotten = append(w.forgotten, abort)
		}
		return nil
	}
	w.stampHorizon(b)
	return w.write(b)
}

// stampHorizon gives a batch holding tombstones, or a marker, the
// decision's horizon if no pass stamped one yet, and takes it from a batch
// left without either.
func (w *rewriter) stampHorizon(b *Batch) {
	switch {
	case !b.Control && !b.holdsTombstone():
		b.DeleteHorizonMs = NoHorizon
	case b.DeleteHorizonMs == NoHorizon:
		b.DeleteHorizonMs = w.decision.horizon()
	}
}

// write encodes and emits b.
func (w *rewriter) write(b *Batch) error {
	var err error
	w.buf, err = AppendBatch(w.buf[:0], b)
	if err != nil {
		return fmt.Errorf("compacting the batch at %d: %w", b.BaseOffset, err)
	}
	w.digest.Write(w.buf)
	w.stats.BatchesOut++
	w.stats.RecordsOut += int64(len(b.Records))
	w.stats.BytesOut += int64(len(w.buf))
	return w.emit(w.buf)
}

// read turns an input into a batch with its records and offsets.
func (w *rewriter) read(in Input) (Batch, error) {
	if IsCompacted(in.Data) {
		b, err := DecodeBatch(in.Data)
		if err != nil {
			return Batch{}, fmt.Errorf("compacted batch at %d: %w", in.BaseOffset, err)
		}
		return b, nil
	}
	p := normalProducer(in)
	b := Batch{BaseOffset: in.BaseOffset, DeleteHorizonMs: NoHorizon, ProducerID: p.ID,
		ProducerEpoch: p.Epoch, BaseSequence: p.BaseSequence, Transactional: in.Transactional}
	if in.Marker != nil {
		b.Control, b.Transactional, b.BaseSequence = true, true, -1
		b.FirstTimestampMs, b.MaxTimestampMs = in.Marker.TimestampMs, in.Marker.TimestampMs
		b.Records = []Record{{Offset: in.BaseOffset, Record: recordbatch.Record{TimestampMs: in.Marker.TimestampMs,
			Key: ControlKey(in.Marker.Commit), Value: ControlValue(in.Marker.CoordinatorEpoch)}}}
		return b, nil
	}
	return readRaft(in, b)
}

// readRaft reads a raft batch's records (either form) into b; record i has
// offset BaseOffset+i. Record headers are copied (the iterator reuses its
// slice); keys and values stay views of the batch.
func readRaft(in Input, b Batch) (Batch, error) {
	b.MaxTimestampMs = math.MinInt64
	it := recordbatch.NewIterator(in.Data)
	for it.Next() {
		r := it.Record()
		if it.Index() == 0 {
			b.FirstTimestampMs = r.TimestampMs
		}
		if len(r.Headers) > 0 {
			r.Headers = append([]recordbatch.Header(nil), r.Headers...)
		}
		b.MaxTimestampMs = max(b.MaxTimestampMs, r.TimestampMs)
		b.Records = append(b.Records, Record{Offset: in.BaseOffset + int64(it.Index()), Record: r})
	}
	if err := it.Err(); err != nil {
		return Batch{}, fmt.Errorf("raft batch at %d: %w", in.BaseOffset, err)
	}
	if recordbatch.IsKafka(in.Data) {
		h, _ := recordbatch.ParseKafkaHeader(in.Data) // the iterator checked it
		b.FirstTimestampMs = h.FirstTimestampMs
	}
	if n := len(b.Records); n == 0 || int64(n-1) > math.MaxInt32 {
		return Batch{}, fmt.Errorf("%w: raft batch at %d of %d records", ErrInput, in.BaseOffset, n)
	}
	b.LastOffsetDelta = int32(len(b.Records) - 1)
	return b, nil
}
