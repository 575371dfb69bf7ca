package kafkaproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/strandlog/strand/engine/recordbatch"
)

// Kafka RecordBatch v2 layout (big-endian), the offsets this file uses.
const (
	v2HeaderBytes     = 61 // up to and including the record count
	v2LengthOffset    = 8  // int32: bytes after this field
	v2EpochOffset     = 12 // partition leader epoch
	v2MagicOffset     = 16
	v2CRCOffset       = 17 // CRC32C of bytes [21, end)
	v2AttrOffset      = 21
	v2LastDeltaOffset = 23
	v2FirstTSOffset   = 27
	v2MaxTSOffset     = 35
	v2ProducerID      = 43
	v2ProducerEpoch   = 51
	v2BaseSequence    = 53
	v2CountOffset     = 57

	attrCompression   = 0x07
	attrTransactional = 0x10
	attrControl       = 0x20
)

// Errors of the conversion, mapped to Kafka codes by the produce handler.
var (
	// ErrCorruptBatch: the bytes are not a valid RecordBatch v2
	// (CORRUPT_MESSAGE).
	ErrCorruptBatch = errors.New("kafka: corrupt record batch")
	// ErrTooLarge: a record or the batch exceeds Strand's limits
	// (MESSAGE_TOO_LARGE).
	ErrTooLarge = errors.New("kafka: record batch too large")
	// ErrUnsupportedBatch: a valid batch Strand cannot store: old magic,
	// LogAppendTime, unknown attributes (UNSUPPORTED_FOR_MESSAGE_FORMAT).
	ErrUnsupportedBatch = errors.New("kafka: unsupported record batch")
	// ErrControlBatch: a producer sent a control batch, which only the
	// broker writes (Kafka's INVALID_RECORD).
	ErrControlBatch = errors.New("kafka: clients may not write control batches")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ProducerFields are the idempotence fields of a Kafka batch header.
type ProducerFields struct {
	ID       int64
	Epoch    int16
	Sequence int32
	// Transactional is the batch's transactional attribute bit (ToStore
	// and ToStrand report it; AppendKafka sets it on a batch in Strand's
	// form).
	Transactional bool
}

// Compression codecs of the attributes (recordbatch inflates them).
const (
	codecNone   = recordbatch.CodecNone
	codecGzip   = recordbatch.CodecGzip
	codecSnappy = recordbatch.CodecSnappy
	codecLZ4    = recordbatch.CodecLZ4
	codecZstd   = recordbatch.CodecZstd
)

// kafkaError wraps a recordbatch error in this package's matching error.
func kafkaError(err error) error {
	switch {
	case errors.Is(err, recordbatch.ErrControl):
		return fmt.Errorf("%w: %v", ErrControlBatch, err)
	case errors.Is(err, recordbatch.ErrUnsupported):
		return fmt.Errorf("%w: %v", ErrUnsupportedBatch, err)
	case errors.Is(err, recordbatch.ErrRecordTooLarge), errors.Is(err, recordbatch.ErrBatchTooLarge):
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
}

// ToStore turns one produced Kafka RecordBatch v2 (the whole of b) into
// the batch Strand stores: the same bytes, base offset zeroed (it lies
// outside Kafka's CRC), compressed or not as the producer sent them. Only
// the header is checked here (length, magic, CRC32C, attributes, count);
// the node validates every record (recordbatch.Validate, inflating a
// compressed batch) before proposing it, and refuses it definitely if
// damaged. The producer id, epoch and base sequence are returned to travel
// beside the batch as in Strand's own produce.
func ToStore(b []byte) ([]byte, ProducerFields, error) {
	h, err := recordbatch.ParseKafkaHeader(b)
	if err != nil {
		return nil, ProducerFields{}, kafkaError(err)
	}
	out := append([]byte(nil), b...)
	binary.BigEndian.PutUint64(out, 0)
	return out, headerFields(h), nil
}

// headerFields are the producer fields of a parsed batch header.
func headerFields(h recordbatch.KafkaHeader) ProducerFields {
	return ProducerFields{ID: h.ProducerID, Epoch: h.ProducerEpoch, Sequence: h.BaseSequence, Transactional: h.Transactional}
}

// ToStrand converts one Kafka RecordBatch v2 (the whole of b) into a
// Strand batch in Strand's own form appended to dst. It checks the CRC,
// the framing of every record and that offset deltas count 0, 1, 2, ...;
// compressed batches are inflated. Record timestamps, keys, values (null
// kept distinct from empty) and headers carry over exactly; the producer
// id, epoch and base sequence are returned. The listener stores Kafka
// batches as sent (ToStore); this conversion serves the simulator's Kafka
// client, which hands fetched records to code expecting Strand's form.
func ToStrand(dst, b []byte) ([]byte, ProducerFields, error) {
	h, err := recordbatch.ParseKafkaHeader(b)
	if err != nil {
		return dst, ProducerFields{}, kafkaError(err)
	}
	pf := headerFields(h)
	var bld recordbatch.Builder
	bld.Reset(dst)
	it := recordbatch.NewKafkaIterator(b)
	for it.Next() {
		if err := bld.Append(it.Record()); err != nil {
			return dst, pf, kafkaError(err)
		}
	}
	if err := it.Err(); err != nil {
		return dst, pf, kafkaError(err)
	}
	out, err := bld.Finish()
	if err != nil {
		return dst, pf, kafkaError(err)
	}
	return out, pf, nil
}

// AppendKafka appends the Kafka RecordBatch v2 form of a stored Strand
// batch at baseOffset: uncompressed, CreateTime, with the producer fields
// given (ID -1 when the batch was not produced idempotently; the
// transactional bit when pf.Transactional), leader epoch
// as given, and its CRC32C computed. Offsets are baseOffset, +1, ...; each
// record's timestamp, key, value and headers are the stored ones.
//
// A batch stored in the Kafka form (recordbatch.IsKafka) is served as the
// producer sent it, compressed or not: its bytes with the base offset and
// leader epoch stamped, which Kafka's CRC leaves out; pf is not used (the
// producer fields are the batch's own).
func AppendKafka(dst, strandBatch []byte, baseOffset int64, epoch int32, pf ProducerFields) ([]byte, error) {
	start := len(dst)
	if recordbatch.IsKafka(strandBatch) {
		if len(strandBatch) < v2HeaderBytes {
			return dst, fmt.Errorf("%w: stored Kafka batch of %d bytes", ErrCorruptBatch, len(strandBatch))
		}
		dst = append(dst, strandBatch...)
		binary.BigEndian.PutUint64(dst[start:], uint64(baseOffset))
		binary.BigEndian.PutUint32(dst[start+v2EpochOffset:], uint32(epoch))
		return dst, nil
	}
	dst = append(dst, make([]byte, v2HeaderBytes)...)
	var count int32
	var firstTS, maxTS int64 = 0, math.MinInt64
	var tmp []byte
	err := recordbatch.Decode(strandBatch, func(i int, r recordbatch.Record) error {
		if i == 0 {
			firstTS = r.TimestampMs
		}
		maxTS = max(maxTS, r.TimestampMs)
		tmp = appendRecord(tmp[:0], int64(i), r.TimestampMs-firstTS, r)
		dst = binary.AppendVarint(dst, int64(len(tmp)))
		dst = append(dst, tmp...)
		count++
		return nil
	})
	if err != nil {
		return dst[:start], err
	}
	h := dst[start:]
	binary.BigEndian.PutUint64(h[0:], uint64(baseOffset))
	binary.BigEndian.PutUint32(h[v2LengthOffset:], uint32(len(h)-12))
	binary.BigEndian.PutUint32(h[v2EpochOffset:], uint32(epoch))
	h[v2MagicOffset] = 2
	attrs := uint16(0)
	if pf.Transactional {
		attrs = attrTransactional
	}
	binary.BigEndian.PutUint16(h[v2AttrOffset:], attrs)
	binary.BigEndian.PutUint32(h[v2LastDeltaOffset:], uint32(count-1))
	binary.BigEndian.PutUint64(h[v2FirstTSOffset:], uint64(firstTS))
	binary.BigEndian.PutUint64(h[v2MaxTSOffset:], uint64(maxTS))
	binary.BigEndian.PutUint64(h[v2ProducerID:], uint64(pf.ID))
	binary.BigEndian.PutUint16(h[v2ProducerEpoch:], uint16(pf.Epoch))
	binary.BigEndian.PutUint32(h[v2BaseSequence:], uint32(pf.Sequence))
	binary.BigEndian.PutUint32(h[v2CountOffset:], uint32(count))
	binary.BigEndian.PutUint32(h[v2CRCOffset:], crc32.Checksum(h[v2AttrOffset:], castagnoli))
	return dst, nil
}

// Marker is a transaction marker as a fetch serves it: Kafka's control
// batch of one control record, at the marker's one offset.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	TimestampMs      int64 // the marker's append time
}

// Control record types of the key (Kafka's ControlRecordType).
const (
	controlAbort  = 0
	controlCommit = 1
)

// AppendControl appends marker m as Kafka writes it at baseOffset: a
// RecordBatch v2 with the transactional and control attribute bits, the
// marker's producer id and epoch, base sequence -1 and one record whose
// key is version 0 and the type (0 abort, 1 commit) and whose value is
// version 0 and the coordinator epoch, all big-endian. Consumers skip it
// as data; a read_committed one ends the producer's aborted transaction
// at it.
func AppendControl(dst []byte, baseOffset int64, epoch int32, m Marker) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, v2HeaderBytes)...)
	kind := int16(controlAbort)
	if m.Commit {
		kind = controlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(kind))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(m.CoordinatorEpoch))
	rec := appendRecord(nil, 0, 0, recordbatch.Record{Key: key, Value: value})
	dst = binary.AppendVarint(dst, int64(len(rec)))
	dst = append(dst, rec...)
	h := dst[start:]
	binary.BigEndian.PutUint64(h[0:], uint64(baseOffset))
	binary.BigEndian.PutUint32(h[v2LengthOffset:], uint32(len(h)-12))
	binary.BigEndian.PutUint32(h[v2EpochOffset:], uint32(epoch))
	h[v2MagicOffset] = 2
	binary.BigEndian.PutUint16(h[v2AttrOffset:], attrTransactional|attrControl)
	binary.BigEndian.PutUint32(h[v2LastDeltaOffset:], 0)
	binary.BigEndian.PutUint64(h[v2FirstTSOffset:], uint64(m.TimestampMs))
	binary.BigEndian.PutUint64(h[v2MaxTSOffset:], uint64(m.TimestampMs))
	binary.BigEndian.PutUint64(h[v2ProducerID:], uint64(m.ProducerID))
	binary.BigEndian.PutUint16(h[v2ProducerEpoch:], uint16(m.ProducerEpoch))
	binary.BigEndian.PutUint32(h[v2BaseSequence:], math.MaxUint32) // -1
	binary.BigEndian.PutUint32(h[v2CountOffset:], 1)
	binary.BigEndian.PutUint32(h[v2CRCOffset:], crc32.Checksum(h[v2AttrOffset:], castagnoli))
	return dst
}

// appendRecord appends a record's body (everything after its length).
func appendRecord(dst []byte, offsetDelta, tsDelta int64, r recordbatch.Record) []byte {
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, offsetDelta)
	dst = appendNullable(dst, r.Key)
	dst = appendNullable(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullable(dst, h.Value)
	}
	return dst
}

func appendNullable(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}
