package compact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/strandlog/strand/engine/recordbatch"
)

// IsCompacted reports whether b is in the compacted form (byte 0 = Magic)
// rather than one of the forms a raft entry stores.
func IsCompacted(b []byte) bool { return len(b) > 0 && b[0] == Magic }

// DecodeBatch checks b is one canonical compacted batch and decodes it.
// Keys, values and header values are slices of b; nothing is copied. Any
// defect is ErrCorrupt (or ErrBatchTooLarge) naming the field and record,
// and every batch it accepts re-encodes to exactly b (AppendBatch).
func DecodeBatch(b []byte) (Batch, error) {
	batch, count, err := decodeHeader(b)
	if err != nil {
		return Batch{}, err
	}
	r := reader{buf: b, pos: HeaderBytes}
	batch.Records = make([]Record, 0, count)
	for i := 0; i < count; i++ {
		rec, err := r.record(&batch, i)
		if err != nil {
			return Batch{}, err
		}
		batch.Records = append(batch.Records, rec)
		if err := checkRecord(&batch, i, &batch.Records[i]); err != nil {
			return Batch{}, err
		}
	}
	if r.pos != len(b) {
		return Batch{}, fmt.Errorf("%w: %d trailing bytes after record %d", ErrCorrupt, len(b)-r.pos, count)
	}
	if err := batch.checkDerived(); err != nil {
		return Batch{}, err
	}
	return batch, nil
}

// DecodeHeader checks b's fixed header as DecodeBatch does (length, magic,
// attributes, CRC over the whole batch, fields) and decodes it without its
// records (Records nil): what a reader that serves the batch as stored
// needs. The records are not checked.
func DecodeHeader(b []byte) (Batch, error) {
	batch, _, err := decodeHeader(b)
	return batch, err
}

// decodeHeader checks the fixed header (length, magic, attributes, CRC,
// fields) and returns it with the record count.
func decodeHeader(b []byte) (Batch, int, error) {
	switch {
	case len(b) > BatchBytesMax:
		return Batch{}, 0, fmt.Errorf("%w: %d bytes, at most %d", ErrBatchTooLarge, len(b), BatchBytesMax)
	case len(b) < HeaderBytes:
		return Batch{}, 0, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorrupt, len(b), HeaderBytes)
	case b[0] != Magic:
		return Batch{}, 0, fmt.Errorf("%w: magic %d, want %d", ErrCorrupt, b[0], Magic)
	case b[1]&^(AttrTransactional|AttrControl) != 0:
		return Batch{}, 0, fmt.Errorf("%w: attributes %#x, unknown bits set", ErrCorrupt, b[1])
	case b[2] != 0 || b[3] != 0:
		return Batch{}, 0, fmt.Errorf("%w: reserved bytes not zero", ErrCorrupt)
	}
	le := binary.LittleEndian
	if n := le.Uint32(b[offRecords:]); uint64(n) != uint64(len(b)-HeaderBytes) {
		return Batch{}, 0, fmt.Errorf("%w: records_bytes %d, but %d bytes follow the header", ErrCorrupt, n, len(b)-HeaderBytes)
	}
	if want, got := le.Uint32(b[4:8]), Checksum(b); want != got {
		return Batch{}, 0, fmt.Errorf("%w: crc %#08x, computed %#08x", ErrCorrupt, want, got)
	}
	batch := Batch{
		BaseOffset:       int64(le.Uint64(b[offBase:])),
		LastOffsetDelta:  int32(le.Uint32(b[offLastDelta:])),
		FirstTimestampMs: int64(le.Uint64(b[offFirstTS:])),
		MaxTimestampMs:   int64(le.Uint64(b[offMaxTS:])),
		DeleteHorizonMs:  int64(le.Uint64(b[offHorizon:])),
		ProducerID:       int64(le.Uint64(b[offProducer:])),
		ProducerEpoch:    int32(le.Uint32(b[offEpoch:])),
		BaseSequence:     int32(le.Uint32(b[offSequence:])),
		Transactional:    b[1]&AttrTransactional != 0,
		Control:          b[1]&AttrControl != 0,
	}
	count := int64(int32(le.Uint32(b[offCount:])))
	if count < 0 || count > int64(len(b)-HeaderBytes)/recordBytesMin {
		return Batch{}, 0, fmt.Errorf("%w: record_count %d cannot fit in %d bytes", ErrCorrupt, count, len(b)-HeaderBytes)
	}
	if err := batch.checkHeader(int(count)); err != nil {
		return Batch{}, 0, err
	}
	return batch, int(count), nil
}

// checkDerived checks what the decoded records determine: the maximum
// timestamp of a batch with records and the horizon rule.
func (b *Batch) checkDerived() error {
	if len(b.Records) > 0 {
		maxMs := int64(math.MinInt64)
		for i := range b.Records {
			maxMs = max(maxMs, b.Records[i].TimestampMs)
		}
		if maxMs != b.MaxTimestampMs {
			return fmt.Errorf("%w: max timestamp %d, records' maximum %d", ErrCorrupt, b.MaxTimestampMs, maxMs)
		}
	}
	return b.checkHorizon()
}

// reader walks a records section, checking every field it reads.
type reader struct {
	buf []byte
	pos int
}

// uvarint reads a minimal unsigned varint: a redundant trailing zero group
// or more than 64 bits fails, so every value has one encoding.
func (r *reader) uvarint() (uint64, bool) {
	v, n := binary.Uvarint(r.buf[r.pos:])
	if n <= 0 || (n > 1 && r.buf[r.pos+n-1] == 0) {
		return 0, false
	}
	r.pos += n
	return v, true
}

// varint reads a minimal zigzag varint.
func (r *reader) varint() (int64, bool) {
	u, ok := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x, ok
}

// bytes reads a zigzag length n >= -1 and n bytes as a slice of the batch;
// -1 gives nil (null), 0 an empty non-nil slice.
func (r *reader) bytes() ([]byte, bool) {
	n, ok := r.varint()
	if !ok || n < -1 || n > int64(len(r.buf)-r.pos) {
		return nil, false
	}
	if n == -1 {
		return nil, true
	}
	b := r.buf[r.pos : r.pos+int(n) : r.pos+int(n)]
	r.pos += int(n)
	return b, true
}

// record reads record index of batch; DecodeBatch checks it as AppendBatch
// does.
func (r *reader) record(batch *Batch, index int) (Record, error) {
	var rec Record
	delta, ok := r.uvarint()
	if !ok || delta > uint64(batch.LastOffsetDelta) {
		return rec, corrupt(index, "bad offset delta")
	}
	rec.Offset = batch.BaseOffset + int64(delta)
	tsDelta, ok := r.varint()
	if !ok {
		return rec, corrupt(index, "bad timestamp delta")
	}
	rec.TimestampMs = batch.FirstTimestampMs + tsDelta
	if (tsDelta > 0) != (rec.TimestampMs > batch.FirstTimestampMs) {
		return rec, corrupt(index, "timestamp overflows int64")
	}
	if rec.Key, ok = r.bytes(); !ok {
		return rec, corrupt(index, "bad key length")
	}
	if rec.Value, ok = r.bytes(); !ok {
		return rec, corrupt(index, "bad value length")
	}
	err := r.headers(index, &rec.Record)
	return rec, err
}

// headers reads a record's header count and headers into rec.
func (r *reader) headers(index int, rec *recordbatch.Record) error {
	count, ok := r.uvarint()
	if !ok || count > uint64(len(r.buf)-r.pos)/headerBytesMin {
		return corrupt(index, "bad header count")
	}
	if count > 0 {
		rec.Headers = make([]recordbatch.Header, 0, count)
	}
	for range count {
		n, ok := r.uvarint()
		if !ok || n > uint64(len(r.buf)-r.pos) {
			return corrupt(index, "bad header key length")
		}
		key := string(r.buf[r.pos : r.pos+int(n)])
		r.pos += int(n)
		value, ok := r.bytes()
		if !ok {
			return corrupt(index, "bad header value length")
		}
		rec.Headers = append(rec.Headers, recordbatch.Header{Key: key, Value: value})
	}
	return nil
}

// Control record types, as Kafka's ControlRecordType.
const (
	controlAbort  = 0
	controlCommit = 1
)

// ControlKey is a marker's control record key as Kafka writes it: version
// 0 and the type (0 abort, 1 commit), big-endian int16s.
func ControlKey(commit bool) []byte {
	kind := byte(controlAbort)
	if commit {
		kind = controlCommit
	}
	return []byte{0, 0, 0, kind}
}

// ControlValue is a marker's control record value as Kafka writes it:
// version 0 and the coordinator epoch, big-endian.
func ControlValue(coordinatorEpoch int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordinatorEpoch))
}

// validControl reports whether r is a version-0 marker record.
func validControl(r *Record) bool {
	return len(r.Key) == 4 && bytes.Equal(r.Key[:3], []byte{0, 0, 0}) && r.Key[3] <= controlCommit &&
		len(r.Value) == 6 && r.Value[0] == 0 && r.Value[1] == 0 && len(r.Headers) == 0
}

// MarkerCommits reports whether control batch b is a commit marker (else
// an abort). It is meaningful only for a decoded control batch.
func (b *Batch) MarkerCommits() bool {
	return b.Control && len(b.Records) == 1 && b.Records[0].Key[3] == controlCommit
}
