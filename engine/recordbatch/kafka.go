package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sync"
)

// The Kafka form. A batch whose first byte is 0 (Strand's own form starts
// with Magic, 1) is a Kafka RecordBatch v2 exactly as a Kafka producer sent
// it, big-endian, with its base offset (bytes 0-7, outside Kafka's CRC)
// zeroed:
//
//	0  base_offset            i64  = 0 when stored; a Kafka fetch stamps it
//	8  length                 i32  bytes after this field
//	12 partition_leader_epoch i32  ignored; a Kafka fetch stamps it
//	16 magic                  i8   = 2
//	17 crc                    u32  CRC32C of bytes [21, end)
//	21 attributes             i16  bits 0-2 compression, bit 4 transactional
//	23 last_offset_delta      i32  = record_count - 1
//	27 first_timestamp        i64
//	35 max_timestamp          i64
//	43 producer_id            i64
//	51 producer_epoch         i16
//	53 base_sequence          i32
//	57 record_count           i32  > 0
//	61 records                compressed with the codec of the attributes
//
// Storing it as sent is what lets a Kafka fetch serve a compressed batch
// as the producer compressed it: the broker only stamps the base offset
// and the leader epoch, which the CRC deliberately leaves out. Strand's
// readers (Validate, Iterator, Decode) inflate it with well-kept codecs and
// walk Kafka's record framing, so native consumers read either form
// through the same calls. The Kafka form is not canonical: a producer may
// spell a batch many ways, which is harmless because raft replicates the
// exact bytes and dedup is by producer sequence, not by content.
const (
	// KafkaHeaderBytes is the fixed header of a Kafka RecordBatch v2.
	KafkaHeaderBytes = 61

	kafkaLengthOffset    = 8
	kafkaEpochOffset     = 12
	kafkaMagicOffset     = 16
	kafkaCRCOffset       = 17
	kafkaAttrOffset      = 21
	kafkaLastDeltaOffset = 23
	kafkaFirstTSOffset   = 27
	kafkaProducerID      = 43
	kafkaProducerEpoch   = 51
	kafkaBaseSequence    = 53
	kafkaCountOffset     = 57

	kafkaAttrCompression   = 0x07
	kafkaAttrTransactional = 0x10
	kafkaAttrControl       = 0x20

	// kafkaRecordBytesMin is the smallest Kafka record: length, attributes,
	// timestamp delta, offset delta, key, value and header count.
	kafkaRecordBytesMin = 7
)

// ErrUnsupported is a well-formed Kafka batch Strand does not store:
// another magic, LogAppendTime, unknown attribute bits.
var ErrUnsupported = errors.New("recordbatch: unsupported Kafka batch")

// ErrControl is a Kafka control batch (attribute bit 5): only the broker
// writes those (transaction markers, served from Strand's marker entries),
// so a producer's is refused, as Kafka refuses it (INVALID_RECORD).
var ErrControl = errors.New("recordbatch: Kafka control batch from a client")

// IsKafka reports whether a batch is in the Kafka form (see above) rather
// than Strand's own.
func IsKafka(batch []byte) bool { return len(batch) > 0 && batch[0] == 0 }

// KafkaHeader is what ParseKafkaHeader reads from a Kafka batch's header.
type KafkaHeader struct {
	Codec            int
	RecordCount      int32
	FirstTimestampMs int64
	ProducerID       int64
	ProducerEpoch    int16
	BaseSequence     int32
	// Transactional is the attributes' transactional bit: the batch
	// belongs to its producer's open transaction.
	Transactional bool
}

// ParseKafkaHeader checks everything about a Kafka RecordBatch v2 but its
// records: length, magic, CRC32C, attributes and count. The base offset and
// leader epoch are not looked at.
func ParseKafkaHeader(b []byte) (KafkaHeader, error) {
	if len(b) > BatchBytesMax {
		return KafkaHeader{}, fmt.Errorf("%w: %d bytes, at most %d", ErrBatchTooLarge, len(b), BatchBytesMax)
	}
	if len(b) < KafkaHeaderBytes {
		return KafkaHeader{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte Kafka header", ErrCorrupt, len(b), KafkaHeaderBytes)
	}
	if b[kafkaMagicOffset] != 2 {
		return KafkaHeader{}, fmt.Errorf("%w: magic %d (only Kafka's RecordBatch v2, magic 2)", ErrUnsupported, b[kafkaMagicOffset])
	}
	if n := int64(int32(binary.BigEndian.Uint32(b[kafkaLengthOffset:]))); n != int64(len(b)-12) {
		return KafkaHeader{}, fmt.Errorf("%w: length %d, but %d bytes follow it", ErrCorrupt, n, len(b)-12)
	}
	if want, got := binary.BigEndian.Uint32(b[kafkaCRCOffset:]), crc32.Checksum(b[kafkaAttrOffset:], castagnoli); want != got {
		return KafkaHeader{}, fmt.Errorf("%w: crc %#08x, computed %#08x", ErrCorrupt, want, got)
	}
	attr := binary.BigEndian.Uint16(b[kafkaAttrOffset:])
	switch {
	case attr&kafkaAttrControl != 0:
		return KafkaHeader{}, fmt.Errorf("%w: attributes %#x", ErrControl, attr)
	case attr&^(kafkaAttrCompression|kafkaAttrTransactional) != 0:
		return KafkaHeader{}, fmt.Errorf("%w: attributes %#x (LogAppendTime or unknown bits)", ErrUnsupported, attr)
	case attr&kafkaAttrCompression > CodecZstd:
		return KafkaHeader{}, fmt.Errorf("%w: compression codec %d", ErrCorrupt, attr&kafkaAttrCompression)
	}
	h := KafkaHeader{
		Codec:            int(attr & kafkaAttrCompression),
		RecordCount:      int32(binary.BigEndian.Uint32(b[kafkaCountOffset:])),
		FirstTimestampMs: int64(binary.BigEndian.Uint64(b[kafkaFirstTSOffset:])),
		ProducerID:       int64(binary.BigEndian.Uint64(b[kafkaProducerID:])),
		ProducerEpoch:    int16(binary.BigEndian.Uint16(b[kafkaProducerEpoch:])),
		BaseSequence:     int32(binary.BigEndian.Uint32(b[kafkaBaseSequence:])),
		Transactional:    attr&kafkaAttrTransactional != 0,
	}
	if h.RecordCount <= 0 {
		return KafkaHeader{}, fmt.Errorf("%w: record count %d", ErrEmpty, h.RecordCount)
	}
	if last := int32(binary.BigEndian.Uint32(b[kafkaLastDeltaOffset:])); last != h.RecordCount-1 {
		return KafkaHeader{}, fmt.Errorf("%w: %d records, last offset delta %d", ErrCorrupt, h.RecordCount, last)
	}
	return h, nil
}

// inflatePool holds buffers Validate inflates into; nothing of them
// escapes Validate.
var inflatePool = sync.Pool{New: func() any { return new([]byte) }}

// kafkaRecords returns a Kafka batch's records section, inflated into dst
// when compressed (the section itself, without a copy, when not), and
// checks the record count fits in it.
func kafkaRecords(dst, b []byte, h KafkaHeader) ([]byte, error) {
	records := b[KafkaHeaderBytes:]
	if h.Codec != CodecNone {
		var err error
		if records, err = inflate(dst[:0], h.Codec, records); err != nil {
			return nil, err
		}
	}
	if int64(h.RecordCount) > int64(len(records))/kafkaRecordBytesMin {
		return nil, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, h.RecordCount, len(records))
	}
	return records, nil
}

// ValidateKafka checks a whole Kafka RecordBatch v2 (base offset and
// leader epoch aside): its header, and every record after inflating the
// section, with Strand's record size limit. Info's first timestamp is the
// first record's.
func ValidateKafka(b []byte) (Info, error) {
	h, err := ParseKafkaHeader(b)
	if err != nil {
		return Info{}, err
	}
	buf := inflatePool.Get().(*[]byte)
	defer inflatePool.Put(buf)
	records, err := kafkaRecords(*buf, b, h)
	if err != nil {
		return Info{}, err
	}
	if h.Codec != CodecNone && cap(records) <= InflatedBytesMax+BatchBytesMax {
		*buf = records[:0]
	}
	info := Info{RecordCount: h.RecordCount, MaxTimestampMs: math.MinInt64}
	r := reader{buf: records}
	var rec Record
	for i := 0; i < int(h.RecordCount); i++ {
		if err := r.kafkaRecord(h.FirstTimestampMs, i, &rec, nil); err != nil {
			return Info{}, err
		}
		if i == 0 {
			info.FirstTimestampMs = rec.TimestampMs
		}
		info.MaxTimestampMs = max(info.MaxTimestampMs, rec.TimestampMs)
	}
	if r.pos != len(records) {
		return Info{}, fmt.Errorf("%w: %d trailing bytes after record %d", ErrCorrupt, len(records)-r.pos, h.RecordCount)
	}
	return info, nil
}

// validateStoredKafka is Validate for the Kafka form: the base offset must
// be zero, so a stored batch has one marker.
func validateStoredKafka(b []byte) (Info, error) {
	if err := storedBaseOffset(b); err != nil {
		return Info{}, err
	}
	return ValidateKafka(b)
}

// storedBaseOffset checks a stored Kafka batch's base offset is zero.
func storedBaseOffset(b []byte) error {
	if len(b) >= 8 && len(b) <= BatchBytesMax && binary.BigEndian.Uint64(b) != 0 {
		return fmt.Errorf("%w: Kafka batch with base offset %d (stored batches carry 0)", ErrCorrupt, int64(binary.BigEndian.Uint64(b)))
	}
	return nil
}

// kvarint reads a zigzag varint as Kafka writes it (not necessarily
// minimal).
func (r *reader) kvarint() (int64, bool) {
	v, n := binary.Varint(r.buf[r.pos:])
	if n <= 0 {
		return 0, false
	}
	r.pos += n
	return v, true
}

// kbytes reads a Kafka varint length and that many bytes; -1 is null.
func (r *reader) kbytes() ([]byte, bool) {
	n, ok := r.kvarint()
	if !ok {
		return nil, false
	}
	return r.bytes(n)
}

// kafkaRecord reads Kafka record index into rec; headers as in record.
func (r *reader) kafkaRecord(firstTimestampMs int64, index int, rec *Record, headers *[]Header) error {
	length, ok := r.kvarint()
	if !ok || length < kafkaRecordBytesMin-1 || length > int64(len(r.buf)-r.pos) {
		return corrupt(index, "bad Kafka record length")
	}
	body := reader{buf: r.buf[:r.pos+int(length)], pos: r.pos + 1} // attributes: unused by Kafka
	r.pos += int(length)
	delta, ok := body.kvarint()
	if !ok {
		return corrupt(index, "bad timestamp delta")
	}
	ts := firstTimestampMs + delta
	if (delta > 0) != (ts > firstTimestampMs) {
		return corrupt(index, "timestamp overflows int64")
	}
	*rec = Record{TimestampMs: ts}
	if offsetDelta, ok := body.kvarint(); !ok || offsetDelta != int64(index) {
		return corrupt(index, fmt.Sprintf("offset delta %d", offsetDelta))
	}
	if rec.Key, ok = body.kbytes(); !ok {
		return corrupt(index, "bad key length")
	}
	if rec.Value, ok = body.kbytes(); !ok {
		return corrupt(index, "bad value length")
	}
	payloadBytes := len(rec.Key) + len(rec.Value)
	count, ok := body.kvarint()
	if !ok || count < 0 || count > int64(len(body.buf)-body.pos)/headerBytesMin {
		return corrupt(index, "bad header count")
	}
	for range count {
		key, ok := body.kbytes()
		if !ok || key == nil {
			return corrupt(index, "bad header key")
		}
		value, ok := body.kbytes()
		if !ok {
			return corrupt(index, "bad header value")
		}
		if headers != nil {
			*headers = append(*headers, Header{Key: string(key), Value: value})
		}
		payloadBytes += len(key) + len(value)
	}
	if body.pos != len(body.buf) {
		return corrupt(index, "trailing bytes in a Kafka record")
	}
	if payloadBytes > RecordBytesMax {
		return fmt.Errorf("%w: record %d holds %d bytes", ErrRecordTooLarge, index, payloadBytes)
	}
	return nil
}

// NewKafkaIterator iterates a Kafka RecordBatch v2 (any base offset): the
// header is checked and the records inflated here, so keys and values are
// slices of the inflated copy for a compressed batch and of b otherwise.
// Damage shows in Err after the first Next.
func NewKafkaIterator(b []byte) Iterator {
	h, err := ParseKafkaHeader(b)
	it := Iterator{kafka: true, index: -1, err: err}
	if err != nil {
		return it
	}
	records, err := kafkaRecords(nil, b, h)
	it.r = reader{buf: records}
	it.firstTimestampMs, it.count, it.err = h.FirstTimestampMs, int(h.RecordCount), err
	return it
}
