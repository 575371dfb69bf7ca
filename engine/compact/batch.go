package compact

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/strandlog/strand/engine/recordbatch"
)

// The compacted form's sizes and flags (doc.go, "The compacted batch").
const (
	// Magic is byte 0 of a compacted batch: Strand's raft form is 1
	// (recordbatch.Magic), the Kafka form 0.
	Magic = 2
	// HeaderBytes is the fixed header before the records.
	HeaderBytes = 68
	// BatchBytesMax bounds a compacted batch: it holds a subset of one
	// input batch's records, and a Kafka batch inflates to at most
	// recordbatch.InflatedBytesMax; the compacted record framing is never
	// longer than Kafka's and at most 3 bytes a record longer than
	// Strand's (whose batches are under 1.1 MiB).
	BatchBytesMax = HeaderBytes + recordbatch.InflatedBytesMax

	// AttrTransactional and AttrControl are the attribute bits, numbered
	// as Kafka's.
	AttrTransactional = 0x10
	AttrControl       = 0x20

	// NoHorizon is DeleteHorizonMs of a batch no pass has stamped.
	NoHorizon = -1

	// recordBytesMin is the smallest record: offset delta, timestamp
	// delta, key length, value length and header count, a byte each.
	recordBytesMin = 5
	headerBytesMin = 2

	offBase      = 8
	offLastDelta = 16
	offCount     = 20
	offFirstTS   = 24
	offMaxTS     = 32
	offHorizon   = 40
	offProducer  = 48
	offEpoch     = 56
	offSequence  = 60
	offRecords   = 64
)

// Errors of DecodeBatch and AppendBatch; callers match them with errors.Is.
var (
	// ErrCorrupt: bytes that are not a canonical compacted batch. The
	// message names the field and, for a record, its index.
	ErrCorrupt = errors.New("compact: corrupt compacted batch")
	// ErrBatchTooLarge: a batch over BatchBytesMax, or a record over
	// recordbatch.RecordBytesMax.
	ErrBatchTooLarge = errors.New("compact: compacted batch too large")
)

// Record is one record of a compacted batch: a record and its offset,
// which compaction never changes.
type Record struct {
	Offset int64
	recordbatch.Record
}

// Batch is a decoded compacted batch: the survivors of one original batch
// (or marker), covering offsets [BaseOffset, BaseOffset+LastOffsetDelta]
// whatever records remain, with the original's producer identity so a
// replica (or a Kafka reader) can rebuild producer state from it.
type Batch struct {
	BaseOffset      int64
	LastOffsetDelta int32
	// FirstTimestampMs is the original batch's base timestamp; record
	// timestamps are stored as deltas from it.
	FirstTimestampMs int64
	// MaxTimestampMs is the largest record timestamp; an empty batch keeps
	// its original's. AppendBatch computes it for a batch with records.
	MaxTimestampMs int64
	// DeleteHorizonMs is when this batch's tombstones (or, for a control
	// batch, the marker) may go: stamped by the first pass that kept them,
	// NoHorizon otherwise (and whenever the batch holds neither).
	DeleteHorizonMs int64
	// ProducerID is -1 for a batch without idempotence (epoch and
	// sequence -1 then too).
	ProducerID    int64
	ProducerEpoch int32
	BaseSequence  int32
	Transactional bool
	// Control marks a transaction marker: one control record (ControlKey,
	// ControlValue) at BaseOffset.
	Control bool
	Records []Record
}

// LastOffset is the batch's last offset, whether or not a record holds it.
func (b *Batch) LastOffset() int64 { return b.BaseOffset + int64(b.LastOffsetDelta) }

// holdsTombstone reports whether a data record of b has a null value.
func (b *Batch) holdsTombstone() bool {
	if b.Control {
		return false
	}
	for i := range b.Records {
		if b.Records[i].Value == nil {
			return true
		}
	}
	return false
}

// castagnoli is CRC32C's table, as recordbatch's.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendBatch appends b in the compacted form to dst. b must be a valid
// canonical batch (the rules DecodeBatch checks); otherwise dst comes back
// unchanged with ErrCorrupt or ErrBatchTooLarge naming the defect.
func AppendBatch(dst []byte, b *Batch) ([]byte, error) {
	enc := *b
	if len(b.Records) > 0 {
		enc.MaxTimestampMs = math.MinInt64
		for i := range b.Records {
			enc.MaxTimestampMs = max(enc.MaxTimestampMs, b.Records[i].TimestampMs)
		}
	}
	if err := enc.checkHeader(len(b.Records)); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderBytes)...)
	for i := range b.Records {
		if err := checkRecord(&enc, i, &b.Records[i]); err != nil {
			return dst[:start], err
		}
		dst = appendRecord(dst, &enc, &b.Records[i])
		if len(dst)-start > BatchBytesMax {
			return dst[:start], fmt.Errorf("%w: over %d bytes at record %d", ErrBatchTooLarge, BatchBytesMax, i)
		}
	}
	if err := enc.checkHorizon(); err != nil {
		return dst[:start], err
	}
	putHeader(dst[start:], &enc, len(b.Records))
	return dst, nil
}

// checkHorizon checks a horizon is stamped only on a batch that holds a
// tombstone or is a marker, so one batch has one form.
func (b *Batch) checkHorizon() error {
	if b.DeleteHorizonMs != NoHorizon && !b.Control && !b.holdsTombstone() {
		return fmt.Errorf("%w: delete horizon %d on a batch without tombstones", ErrCorrupt, b.DeleteHorizonMs)
	}
	return nil
}

// checkRecord checks record i of b for what the header cannot show:
// offsets strictly increasing inside the range, a key on data records,
// the control record's form, the size limit.
func checkRecord(b *Batch, i int, r *Record) error {
	if r.Offset < b.BaseOffset || r.Offset > b.LastOffset() || (i > 0 && r.Offset <= b.Records[i-1].Offset) {
		return corrupt(i, fmt.Sprintf("offset %d outside [%d, %d] or not after the previous record's",
			r.Offset, b.BaseOffset, b.LastOffset()))
	}
	delta := r.TimestampMs - b.FirstTimestampMs
	if (delta > 0) != (r.TimestampMs > b.FirstTimestampMs) {
		return corrupt(i, "timestamp too far from the batch's first timestamp")
	}
	if b.Control {
		if !validControl(r) {
			return corrupt(i, "control record not a version-0 transaction marker")
		}
		return nil
	}
	if r.Key == nil {
		return corrupt(i, "data record without a key")
	}
	if n := payloadBytes(&r.Record); n > recordbatch.RecordBytesMax {
		return fmt.Errorf("%w: record %d holds %d bytes", ErrBatchTooLarge, i, n)
	}
	return nil
}

// payloadBytes is what recordbatch.RecordBytesMax limits.
func payloadBytes(r *recordbatch.Record) int {
	n := len(r.Key) + len(r.Value)
	for i := range r.Headers {
		n += len(r.Headers[i].Key) + len(r.Headers[i].Value)
	}
	return n
}

// appendRecord encodes one record (checked) of b.
func appendRecord(dst []byte, b *Batch, r *Record) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.Offset-b.BaseOffset))
	dst = binary.AppendVarint(dst, r.TimestampMs-b.FirstTimestampMs)
	dst = appendNullable(dst, r.Key)
	dst = appendNullable(dst, r.Value)
	dst = binary.AppendUvarint(dst, uint64(len(r.Headers)))
	for i := range r.Headers {
		dst = binary.AppendUvarint(dst, uint64(len(r.Headers[i].Key)))
		dst = append(dst, r.Headers[i].Key...)
		dst = appendNullable(dst, r.Headers[i].Value)
	}
	return dst
}

// appendNullable appends a zigzag length (-1 for nil) and the bytes.
func appendNullable(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}

// putHeader writes the fixed header and the checksum over h's records.
func putHeader(h []byte, b *Batch, count int) {
	h[0] = Magic
	h[1] = 0
	if b.Transactional {
		h[1] |= AttrTransactional
	}
	if b.Control {
		h[1] |= AttrControl
	}
	h[2], h[3] = 0, 0
	le := binary.LittleEndian
	le.PutUint64(h[offBase:], uint64(b.BaseOffset))
	le.PutUint32(h[offLastDelta:], uint32(b.LastOffsetDelta))
	le.PutUint32(h[offCount:], uint32(count))
	le.PutUint64(h[offFirstTS:], uint64(b.FirstTimestampMs))
	le.PutUint64(h[offMaxTS:], uint64(b.MaxTimestampMs))
	le.PutUint64(h[offHorizon:], uint64(b.DeleteHorizonMs))
	le.PutUint64(h[offProducer:], uint64(b.ProducerID))
	le.PutUint32(h[offEpoch:], uint32(b.ProducerEpoch))
	le.PutUint32(h[offSequence:], uint32(b.BaseSequence))
	le.PutUint32(h[offRecords:], uint32(len(h)-HeaderBytes))
	le.PutUint32(h[4:8], Checksum(h))
}

// Checksum is the CRC32C a compacted batch b stores in bytes [4, 8): over
// every other byte, [0, 4) and [8, end), so a flipped attribute bit (a
// batch turned transactional or control) is caught like any other. b must
// be at least 8 bytes long.
func Checksum(b []byte) uint32 {
	return crc32.Update(crc32.Checksum(b[:4], castagnoli), castagnoli, b[8:])
}

// checkHeader checks the header fields of b holding count records: the
// canonical rules that do not need the records themselves.
func (b *Batch) checkHeader(count int) error {
	switch {
	case b.BaseOffset < 0 || b.LastOffsetDelta < 0 || b.BaseOffset > math.MaxInt64-int64(b.LastOffsetDelta):
		return fmt.Errorf("%w: offsets [%d, +%d]", ErrCorrupt, b.BaseOffset, b.LastOffsetDelta)
	case int64(count) > int64(b.LastOffsetDelta)+1:
		return fmt.Errorf("%w: %d records in %d offsets", ErrCorrupt, count, int64(b.LastOffsetDelta)+1)
	case b.DeleteHorizonMs < NoHorizon:
		return fmt.Errorf("%w: delete horizon %d", ErrCorrupt, b.DeleteHorizonMs)
	}
	if err := b.checkProducer(); err != nil {
		return err
	}
	if b.Control && (count != 1 || b.LastOffsetDelta != 0) {
		return fmt.Errorf("%w: control batch of %d records over %d offsets", ErrCorrupt, count, int64(b.LastOffsetDelta)+1)
	}
	return nil
}

// checkProducer checks the producer fields: all -1 without idempotence; a
// transaction needs a producer; a marker has no sequence.
func (b *Batch) checkProducer() error {
	switch {
	case b.ProducerID == -1:
		if b.ProducerEpoch != -1 || b.BaseSequence != -1 || b.Transactional || b.Control {
			return fmt.Errorf("%w: no producer, but epoch %d, sequence %d, transactional %t, control %t",
				ErrCorrupt, b.ProducerEpoch, b.BaseSequence, b.Transactional, b.Control)
		}
	case b.ProducerID < -1 || b.ProducerEpoch < 0:
		return fmt.Errorf("%w: producer %d epoch %d", ErrCorrupt, b.ProducerID, b.ProducerEpoch)
	case b.Control && (!b.Transactional || b.BaseSequence != -1):
		return fmt.Errorf("%w: control batch transactional %t, sequence %d", ErrCorrupt, b.Transactional, b.BaseSequence)
	case !b.Control && b.BaseSequence < 0:
		return fmt.Errorf("%w: producer %d sequence %d", ErrCorrupt, b.ProducerID, b.BaseSequence)
	}
	return nil
}

// corrupt describes damage in record index.
func corrupt(index int, what string) error {
	return fmt.Errorf("%w: record %d: %s", ErrCorrupt, index, what)
}
