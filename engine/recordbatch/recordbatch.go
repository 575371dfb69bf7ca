package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Sizes and limits of the format.
const (
	Magic       = 1
	HeaderBytes = 24
	// RecordBytesMax bounds one record's key, value and headers together
	// (R4: Kafka's max.request.size default, 1 MiB).
	RecordBytesMax = 1 << 20
	// BatchBytesMax bounds a whole encoded batch: one maximal record plus
	// room for the batch header and record framing.
	BatchBytesMax = RecordBytesMax + 64<<10

	// recordBytesMin is the smallest encoded record: four one-byte varints
	// (delta, key length, value length, header count). It bounds
	// record_count by the section length before any record is walked.
	recordBytesMin = 4
	// headerBytesMin is the smallest encoded header: two one-byte varints.
	headerBytesMin = 2
	// compressionMask selects the compression codec bits of attributes.
	compressionMask = 0x07
)

// Errors of Validate and Decode. Callers match them with errors.Is.
var (
	ErrCorrupt        = errors.New("recordbatch: corrupt batch")
	ErrRecordTooLarge = errors.New("recordbatch: record larger than 1 MiB")
	ErrBatchTooLarge  = errors.New("recordbatch: batch too large")
	ErrEmpty          = errors.New("recordbatch: batch holds no records")
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one decoded record. A nil Key or Value is null, as in Kafka.
type Record struct {
	TimestampMs int64
	Key         []byte
	Value       []byte
	Headers     []Header
}

// payloadBytes is what RecordBytesMax limits: key, value and header keys
// and values, without framing.
func (r *Record) payloadBytes() int {
	n := len(r.Key) + len(r.Value)
	for i := range r.Headers {
		n += len(r.Headers[i].Key) + len(r.Headers[i].Value)
	}
	return n
}

// Info is what Validate learns about a valid batch.
type Info struct {
	RecordCount      int32
	FirstTimestampMs int64
	// MaxTimestampMs is the largest record timestamp in the batch.
	MaxTimestampMs int64
}

// castagnoli is CRC32C's table; crc32 uses the CPU's instruction with it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the decoded fixed part of a batch.
type header struct {
	recordCount      uint32
	firstTimestampMs int64
}

// parseHeader checks everything about a batch but its records section.
func parseHeader(batch []byte) (header, error) {
	if len(batch) > BatchBytesMax {
		return header{}, fmt.Errorf("%w: %d bytes, at most %d", ErrBatchTooLarge, len(batch), BatchBytesMax)
	}
	if len(batch) < HeaderBytes {
		return header{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorrupt, len(batch), HeaderBytes)
	}
	if batch[0] != Magic {
		return header{}, fmt.Errorf("%w: magic %d, want %d", ErrCorrupt, batch[0], Magic)
	}
	if batch[1] != 0 {
		if batch[1]&compressionMask != 0 {
			return header{}, fmt.Errorf("%w: compression %d unsupported", ErrCorrupt, batch[1]&compressionMask)
		}
		return header{}, fmt.Errorf("%w: attributes %#x, unknown bits set", ErrCorrupt, batch[1])
	}
	if batch[2] != 0 || batch[3] != 0 {
		return header{}, fmt.Errorf("%w: reserved bytes not zero", ErrCorrupt)
	}
	sectionBytes := binary.LittleEndian.Uint32(batch[20:24])
	if uint64(sectionBytes) != uint64(len(batch)-HeaderBytes) {
		return header{}, fmt.Errorf("%w: records_bytes %d, but %d bytes follow the header",
			ErrCorrupt, sectionBytes, len(batch)-HeaderBytes)
	}
	if want, got := binary.LittleEndian.Uint32(batch[4:8]), crc32.Checksum(batch[8:], castagnoli); want != got {
		return header{}, fmt.Errorf("%w: crc %#08x, computed %#08x", ErrCorrupt, want, got)
	}
	h := header{
		recordCount:      binary.LittleEndian.Uint32(batch[8:12]),
		firstTimestampMs: int64(binary.LittleEndian.Uint64(batch[12:20])),
	}
	if h.recordCount == 0 {
		return header{}, ErrEmpty
	}
	if uint64(h.recordCount)*recordBytesMin > uint64(sectionBytes) {
		return header{}, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, h.recordCount, sectionBytes)
	}
	return h, nil
}

// Validate checks a whole batch: header fields, checksum, and every record's
// framing, sizes and count, so that Decode of a valid batch cannot fail.
// Nothing is copied or allocated on success.
//
// A batch in the Kafka form (IsKafka) is checked as ValidateKafka does,
// its base offset zero; a compressed one is inflated to be checked.
func Validate(batch []byte) (Info, error) {
	if IsKafka(batch) {
		return validateStoredKafka(batch)
	}
	h, err := parseHeader(batch)
	if err != nil {
		return Info{}, err
	}
	info := Info{
		RecordCount:      int32(h.recordCount),
		FirstTimestampMs: h.firstTimestampMs,
		MaxTimestampMs:   math.MinInt64,
	}
	if h.recordCount > math.MaxInt32 {
		return Info{}, fmt.Errorf("%w: record_count %d exceeds int32", ErrCorrupt, h.recordCount)
	}
	r := reader{buf: batch, pos: HeaderBytes}
	for i := 0; i < int(h.recordCount); i++ {
		ts, err := r.skipRecord(h.firstTimestampMs, i)
		if err != nil {
			return Info{}, err
		}
		info.MaxTimestampMs = max(info.MaxTimestampMs, ts)
	}
	if r.pos != len(batch) {
		return Info{}, fmt.Errorf("%w: %d trailing bytes after record %d", ErrCorrupt, len(batch)-r.pos, h.recordCount)
	}
	return info, nil
}

// reader walks the records section, checking every field it reads.
type reader struct {
	buf []byte
	pos int
}

// uvarint reads a minimal unsigned varint: a redundant trailing zero group
// or an overflow of 64 bits fails, so every value has one encoding. The
// one-byte case stays small enough to inline.
func (r *reader) uvarint() (uint64, bool) {
	if p := r.pos; p < len(r.buf) {
		if b := r.buf[p]; b < 0x80 {
			r.pos = p + 1
			return uint64(b), true
		}
	}
	return r.uvarintLong()
}

// uvarintLong reads a varint of two bytes or more.
func (r *reader) uvarintLong() (uint64, bool) {
	var x uint64
	var shift uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if r.pos >= len(r.buf) {
			return 0, false
		}
		b := r.buf[r.pos]
		r.pos++
		if b < 0x80 {
			if b == 0 || (i == binary.MaxVarintLen64-1 && b > 1) {
				return 0, false
			}
			return x | uint64(b)<<shift, true
		}
		x |= uint64(b&0x7f) << shift
		shift += 7
	}
	return 0, false
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

// bytes reads n >= -1 bytes as a slice of the batch; -1 gives nil (null).
// A zero length gives an empty, non-nil slice so null and empty differ.
func (r *reader) bytes(n int64) ([]byte, bool) {
	if n < -1 || n > int64(len(r.buf)-r.pos) {
		return nil, false
	}
	if n == -1 {
		return nil, true
	}
	b := r.buf[r.pos : r.pos+int(n) : r.pos+int(n)]
	r.pos += int(n)
	return b, true
}

// corrupt describes damage in record index.
func corrupt(index int, what string) error {
	return fmt.Errorf("%w: record %d: %s", ErrCorrupt, index, what)
}

// record reads record index into rec. Headers are appended to *headers when
// headers is non-nil (Decode) and only counted otherwise (Validate).
func (r *reader) record(firstTimestampMs int64, index int, rec *Record, headers *[]Header) error {
	delta, ok := r.varint()
	if !ok {
		return corrupt(index, "bad timestamp delta varint")
	}
	if index == 0 && delta != 0 {
		return corrupt(index, "first record's timestamp delta is not 0")
	}
	ts := firstTimestampMs + delta
	if (delta > 0) != (ts > firstTimestampMs) {
		return corrupt(index, "timestamp overflows int64")
	}
	rec.TimestampMs = ts
	keyLength, ok := r.varint()
	if ok {
		rec.Key, ok = r.bytes(keyLength)
	}
	if !ok {
		return corrupt(index, "bad key length")
	}
	valueLength, ok := r.varint()
	if ok {
		rec.Value, ok = r.bytes(valueLength)
	}
	if !ok {
		return corrupt(index, "bad value length")
	}
	payloadBytes := len(rec.Key) + len(rec.Value)
	headerCount, ok := r.uvarint()
	if !ok || headerCount > uint64(len(r.buf)-r.pos)/headerBytesMin {
		return corrupt(index, "bad header count")
	}
	for h := 0; h < int(headerCount); h++ {
		n, err := r.header(index, headers)
		if err != nil {
			return err
		}
		payloadBytes += n
	}
	if payloadBytes > RecordBytesMax {
		return fmt.Errorf("%w: record %d holds %d bytes", ErrRecordTooLarge, index, payloadBytes)
	}
	return nil
}

// header reads one record header and returns its payload bytes.
func (r *reader) header(index int, headers *[]Header) (int, error) {
	keyLength, ok := r.uvarint()
	if !ok || keyLength > uint64(len(r.buf)-r.pos) {
		return 0, corrupt(index, "bad header key length")
	}
	key, _ := r.bytes(int64(keyLength))
	valueLength, ok := r.varint()
	var value []byte
	if ok {
		value, ok = r.bytes(valueLength)
	}
	if !ok {
		return 0, corrupt(index, "bad header value length")
	}
	if headers != nil {
		*headers = append(*headers, Header{Key: string(key), Value: value})
	}
	return len(key) + len(value), nil
}

// skipRecord checks record index and returns its timestamp.
func (r *reader) skipRecord(firstTimestampMs int64, index int) (int64, error) {
	var rec Record
	err := r.record(firstTimestampMs, index, &rec, nil)
	return rec.TimestampMs, err
}

// Iterator yields a batch's records in order without copying keys and
// values: they are slices of the batch, valid as long as the batch is.
//
//	it := recordbatch.NewIterator(batch)
//	for it.Next() {
//		r := it.Record()
//	}
//	if err := it.Err(); err != nil { ... }
type Iterator struct {
	r                reader
	firstTimestampMs int64
	count            int
	index            int
	rec              Record
	headers          []Header
	err              error
	kafka            bool // records in Kafka's framing
}

// NewIterator checks the batch's header and checksum and returns an
// iterator over its records. A bad header shows in Err after the first Next.
// A batch in the Kafka form is iterated as NewKafkaIterator does.
func NewIterator(batch []byte) Iterator {
	if IsKafka(batch) {
		if err := storedBaseOffset(batch); err != nil {
			return Iterator{kafka: true, index: -1, err: err}
		}
		return NewKafkaIterator(batch)
	}
	h, err := parseHeader(batch)
	return Iterator{
		r:                reader{buf: batch, pos: HeaderBytes},
		firstTimestampMs: h.firstTimestampMs,
		count:            int(h.recordCount),
		index:            -1,
		err:              err,
	}
}

// Next moves to the next record and reports whether there is one. It stops
// at the end or at the first damage, which Err then reports. A batch that
// Validate accepted is iterated to its end without error.
func (it *Iterator) Next() bool {
	if it.err != nil || it.index+1 >= it.count {
		if it.err == nil && it.index+1 == it.count && it.r.pos != len(it.r.buf) {
			it.err = fmt.Errorf("%w: %d trailing bytes after record %d",
				ErrCorrupt, len(it.r.buf)-it.r.pos, it.count)
		}
		it.index = it.count
		return false
	}
	it.index++
	it.headers = it.headers[:0]
	it.rec = Record{}
	read := it.r.record
	if it.kafka {
		read = it.r.kafkaRecord
	}
	if err := read(it.firstTimestampMs, it.index, &it.rec, &it.headers); err != nil {
		it.err = err
		return false
	}
	if len(it.headers) > 0 {
		it.rec.Headers = it.headers
	}
	return true
}

// Record is the current record. Its Headers slice is reused by the next
// call of Next; keys and values stay valid.
func (it *Iterator) Record() Record { return it.rec }

// Index is the current record's position in the batch, from 0.
func (it *Iterator) Index() int { return it.index }

// Err is the damage that stopped Next, or nil.
func (it *Iterator) Err() error { return it.err }

// Decode calls fn for each record of batch in order and stops at fn's first
// error, which it returns. Records are views into batch (see Iterator); a
// record's Headers slice is valid only during its call. On a batch Validate
// accepted Decode fails only through fn; on a damaged batch fn may already
// have seen the records before the damage.
func Decode(batch []byte, fn func(index int, r Record) error) error {
	it := NewIterator(batch)
	for it.Next() {
		if err := fn(it.Index(), it.Record()); err != nil {
			return err
		}
	}
	return it.Err()
}
