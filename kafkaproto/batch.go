package kafkaproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

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
	attrTimestampType = 0x08 // LogAppendTime
	attrTransactional = 0x10
	attrControl       = 0x20

	// decompressedBytesMax bounds what one compressed batch may inflate
	// to: a Strand batch holds at most recordbatch.BatchBytesMax, and
	// Kafka's record framing is about as dense, so anything near twice
	// that is refused before it is held in memory (decompression bombs).
	decompressedBytesMax = 2 * recordbatch.BatchBytesMax
)

// Errors of the conversion, mapped to Kafka codes by the produce handler.
var (
	// ErrCorruptBatch: the bytes are not a valid RecordBatch v2
	// (CORRUPT_MESSAGE).
	ErrCorruptBatch = errors.New("kafka: corrupt record batch")
	// ErrTooLarge: a record or the batch exceeds Strand's limits
	// (MESSAGE_TOO_LARGE).
	ErrTooLarge = errors.New("kafka: record batch too large")
	// ErrUnsupportedBatch: a valid batch Strand cannot store yet:
	// transactional or control batches, old magic (UNSUPPORTED_FOR_MESSAGE_FORMAT).
	ErrUnsupportedBatch = errors.New("kafka: unsupported record batch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ProducerFields are the idempotence fields of a Kafka batch header.
type ProducerFields struct {
	ID       int64
	Epoch    int16
	Sequence int32
}

// ToStrand converts one Kafka RecordBatch v2 (the whole of b) into a
// Strand batch appended to dst. It checks the CRC, the framing of every
// record and that offset deltas count 0, 1, 2, ...; compressed batches
// are inflated with the codec the attributes name. Record timestamps,
// keys, values (null kept distinct from empty) and headers carry over
// exactly; the batch-level fields Strand keeps beside the batch are
// returned (producer id, epoch, base sequence).
func ToStrand(dst, b []byte) ([]byte, ProducerFields, error) {
	var pf ProducerFields
	if len(b) < v2HeaderBytes {
		return dst, pf, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptBatch, len(b), v2HeaderBytes)
	}
	if b[v2MagicOffset] != 2 {
		return dst, pf, fmt.Errorf("%w: magic %d (only RecordBatch v2, magic 2)", ErrUnsupportedBatch, b[v2MagicOffset])
	}
	if n := int64(int32(binary.BigEndian.Uint32(b[v2LengthOffset:]))); n != int64(len(b)-12) {
		return dst, pf, fmt.Errorf("%w: length %d, but %d bytes follow it", ErrCorruptBatch, n, len(b)-12)
	}
	if want, got := binary.BigEndian.Uint32(b[v2CRCOffset:]), crc32.Checksum(b[v2AttrOffset:], castagnoli); want != got {
		return dst, pf, fmt.Errorf("%w: crc %#08x, computed %#08x", ErrCorruptBatch, want, got)
	}
	attr := binary.BigEndian.Uint16(b[v2AttrOffset:])
	if attr&(attrTransactional|attrControl) != 0 {
		return dst, pf, fmt.Errorf("%w: transactional or control batch (Strand has no transactions yet)", ErrUnsupportedBatch)
	}
	pf = ProducerFields{
		ID:       int64(binary.BigEndian.Uint64(b[v2ProducerID:])),
		Epoch:    int16(binary.BigEndian.Uint16(b[v2ProducerEpoch:])),
		Sequence: int32(binary.BigEndian.Uint32(b[v2BaseSequence:])),
	}
	firstTS := int64(binary.BigEndian.Uint64(b[v2FirstTSOffset:]))
	count := int32(binary.BigEndian.Uint32(b[v2CountOffset:]))
	lastDelta := int32(binary.BigEndian.Uint32(b[v2LastDeltaOffset:]))
	if count <= 0 || lastDelta != count-1 {
		return dst, pf, fmt.Errorf("%w: %d records, last offset delta %d", ErrCorruptBatch, count, lastDelta)
	}
	records, err := decompress(int(attr&attrCompression), b[v2HeaderBytes:])
	if err != nil {
		return dst, pf, err
	}
	if int64(count) > int64(len(records))/7+1 { // a record is at least 7 bytes
		return dst, pf, fmt.Errorf("%w: %d records in %d bytes", ErrCorruptBatch, count, len(records))
	}
	var bld recordbatch.Builder
	bld.Reset(dst)
	r := v2Reader{b: records}
	var hdrs []recordbatch.Header
	for i := range count {
		rec, err := r.record(firstTS, i, hdrs[:0])
		if err != nil {
			return dst, pf, err
		}
		hdrs = rec.Headers
		if err := bld.Append(rec); err != nil {
			if errors.Is(err, recordbatch.ErrRecordTooLarge) || errors.Is(err, recordbatch.ErrBatchTooLarge) {
				return dst, pf, fmt.Errorf("%w: %v", ErrTooLarge, err)
			}
			return dst, pf, fmt.Errorf("%w: record %d: %v", ErrCorruptBatch, i, err)
		}
	}
	if len(r.b) != 0 {
		return dst, pf, fmt.Errorf("%w: %d bytes after the last record", ErrCorruptBatch, len(r.b))
	}
	out, err := bld.Finish()
	if err != nil {
		return dst, pf, fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	return out, pf, nil
}

// v2Reader reads Kafka records (varint framed).
type v2Reader struct{ b []byte }

func (r *v2Reader) varint() (int64, bool) {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		return 0, false
	}
	r.b = r.b[n:]
	return v, true
}

// bytes reads a varint length and that many bytes; -1 is null.
func (r *v2Reader) bytes() ([]byte, bool) {
	n, ok := r.varint()
	if !ok || n < -1 || n > int64(len(r.b)) {
		return nil, false
	}
	if n == -1 {
		return nil, true
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v, true
}

// record reads record i of a batch whose first timestamp is firstTS.
func (r *v2Reader) record(firstTS int64, i int32, hdrs []recordbatch.Header) (recordbatch.Record, error) {
	bad := func(what string) (recordbatch.Record, error) {
		return recordbatch.Record{}, fmt.Errorf("%w: record %d: %s", ErrCorruptBatch, i, what)
	}
	length, ok := r.varint()
	if !ok || length < 0 || length > int64(len(r.b)) {
		return bad("length")
	}
	body := v2Reader{b: r.b[:length]}
	r.b = r.b[length:]
	if len(body.b) < 1 {
		return bad("attributes")
	}
	body.b = body.b[1:] // record attributes: unused by Kafka
	tsDelta, ok := body.varint()
	if !ok {
		return bad("timestamp delta")
	}
	offDelta, ok := body.varint()
	if !ok || offDelta != int64(i) {
		return bad(fmt.Sprintf("offset delta %d", offDelta))
	}
	rec := recordbatch.Record{TimestampMs: firstTS + tsDelta}
	if rec.Key, ok = body.bytes(); !ok {
		return bad("key")
	}
	if rec.Value, ok = body.bytes(); !ok {
		return bad("value")
	}
	n, ok := body.varint()
	if !ok || n < 0 || n > int64(len(body.b))/2 {
		return bad("header count")
	}
	for range n {
		k, ok := body.bytes()
		if !ok || k == nil {
			return bad("header key")
		}
		v, ok := body.bytes()
		if !ok {
			return bad("header value")
		}
		hdrs = append(hdrs, recordbatch.Header{Key: string(k), Value: v})
	}
	if len(body.b) != 0 {
		return bad("trailing bytes")
	}
	if n > 0 {
		rec.Headers = hdrs
	}
	return rec, nil
}

// Compression codecs of the attributes.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// xerialMagic starts the Java client's framed snappy (snappy-java).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(decompressedBytesMax))
	if err != nil {
		panic(err) // only for invalid options
	}
	return d
})

// decompress inflates a records section with the codec the attributes
// name, refusing more than decompressedBytesMax.
func decompress(codec int, b []byte) ([]byte, error) {
	tooLarge := fmt.Errorf("%w: inflates past %d bytes", ErrTooLarge, decompressedBytesMax)
	switch codec {
	case codecNone:
		return b, nil
	case codecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCorruptBatch, err)
		}
		return readLimited(zr, "gzip")
	case codecSnappy:
		if bytes.HasPrefix(b, xerialMagic) {
			return unxerial(b)
		}
		n, err := s2.DecodedLen(b)
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
		}
		if n > decompressedBytesMax {
			return nil, tooLarge
		}
		out, err := s2.Decode(nil, b)
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
		}
		return out, nil
	case codecLZ4:
		return readLimited(lz4.NewReader(bytes.NewReader(b)), "lz4")
	case codecZstd:
		out, err := zstdDecoder().DecodeAll(b, nil)
		if err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
				return nil, tooLarge
			}
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptBatch, err)
		}
		if len(out) > decompressedBytesMax {
			return nil, tooLarge
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: compression codec %d", ErrCorruptBatch, codec)
}

// readLimited reads r to the end, at most decompressedBytesMax bytes.
func readLimited(r io.Reader, name string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, decompressedBytesMax+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptBatch, name, err)
	}
	if len(out) > decompressedBytesMax {
		return nil, fmt.Errorf("%w: inflates past %d bytes", ErrTooLarge, decompressedBytesMax)
	}
	return out, nil
}

// unxerial inflates snappy-java's framing: the 16-byte header, then
// chunks of a big-endian length and a snappy block.
func unxerial(b []byte) ([]byte, error) {
	if len(b) < 16 {
		return nil, fmt.Errorf("%w: snappy: short xerial header", ErrCorruptBatch)
	}
	b = b[16:]
	var out []byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: snappy: short xerial chunk", ErrCorruptBatch)
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("%w: snappy: xerial chunk of %d bytes, %d left", ErrCorruptBatch, n, len(b))
		}
		dl, err := s2.DecodedLen(b[:n])
		if err != nil || len(out)+dl > decompressedBytesMax {
			if err == nil {
				return nil, fmt.Errorf("%w: inflates past %d bytes", ErrTooLarge, decompressedBytesMax)
			}
			return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
		}
		block, err := s2.Decode(nil, b[:n])
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
		}
		out = append(out, block...)
		b = b[n:]
	}
	return out, nil
}

// AppendKafka appends the Kafka RecordBatch v2 form of a stored Strand
// batch at baseOffset: uncompressed, CreateTime, with the producer fields
// given (ID -1 when the batch was not produced idempotently), leader epoch
// as given, and its CRC32C computed. Offsets are baseOffset, +1, ...; each
// record's timestamp, key, value and headers are the stored ones.
func AppendKafka(dst, strandBatch []byte, baseOffset int64, epoch int32, pf ProducerFields) ([]byte, error) {
	start := len(dst)
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
	binary.BigEndian.PutUint16(h[v2AttrOffset:], 0)
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
