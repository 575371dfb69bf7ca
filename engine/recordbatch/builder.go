package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Builder encodes records into a batch, appending to a caller's buffer so a
// producer can reuse one buffer per partition:
//
//	var b recordbatch.Builder
//	b.Reset(buf[:0])
//	for ... { if err := b.Append(r); err != nil { ... } }
//	batch, err := b.Finish()
//
// The first record's timestamp becomes the batch's first_time_ms. The zero
// Builder is ready to use with a nil buffer.
type Builder struct {
	buf              []byte
	start            int
	count            uint32
	firstTimestampMs int64
}

// Reset starts a new batch appended to dst.
func (b *Builder) Reset(dst []byte) {
	b.buf = dst
	b.start = len(dst)
	b.count = 0
	b.firstTimestampMs = 0
}

// Grow makes room for at least n more bytes without another allocation:
// when the buffer lacks it, the buffer moves to one of twice its capacity
// (at least n more than its length), capped at limit bytes of capacity
// when that still holds n more. Appending a record at a time to a large
// batch otherwise grows it by append's quarter steps, which copied and
// zeroed a 256 KiB batch about five times over (a producer's profile:
// growslice was 27% of the bench client's CPU at full speed).
func (b *Builder) Grow(n, limit int) {
	if cap(b.buf)-len(b.buf) >= n {
		return
	}
	need := len(b.buf) + n
	size := max(2*cap(b.buf), need)
	if limit >= need {
		size = min(size, limit)
	}
	b.buf = append(make([]byte, 0, size), b.buf...)
}

// Count is the number of records appended.
func (b *Builder) Count() int { return int(b.count) }

// Len is the encoded size of the batch so far, header included; a producer
// compares it with its batch.size.
func (b *Builder) Len() int {
	if b.count == 0 {
		return HeaderBytes
	}
	return len(b.buf) - b.start
}

// Append encodes r at the end of the batch. A record over RecordBytesMax
// fails with ErrRecordTooLarge, one that would push the batch over
// BatchBytesMax with ErrBatchTooLarge; either way the batch is unchanged.
func (b *Builder) Append(r Record) error {
	if n := r.payloadBytes(); n > RecordBytesMax {
		return fmt.Errorf("%w: %d bytes", ErrRecordTooLarge, n)
	}
	if b.count == 0 {
		b.buf = append(b.buf[:b.start], make([]byte, HeaderBytes)...)
		b.firstTimestampMs = r.TimestampMs
	}
	delta := r.TimestampMs - b.firstTimestampMs
	if (delta > 0) != (r.TimestampMs > b.firstTimestampMs) {
		return fmt.Errorf("%w: timestamp %d too far from the first record's %d",
			ErrCorrupt, r.TimestampMs, b.firstTimestampMs)
	}
	if b.count == math.MaxInt32 {
		return fmt.Errorf("%w: %d records", ErrBatchTooLarge, b.count)
	}
	mark := len(b.buf)
	b.buf = binary.AppendVarint(b.buf, delta)
	b.buf = appendNullable(b.buf, r.Key)
	b.buf = appendNullable(b.buf, r.Value)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(r.Headers)))
	for i := range r.Headers {
		b.buf = binary.AppendUvarint(b.buf, uint64(len(r.Headers[i].Key)))
		b.buf = append(b.buf, r.Headers[i].Key...)
		b.buf = appendNullable(b.buf, r.Headers[i].Value)
	}
	if len(b.buf)-b.start > BatchBytesMax {
		b.buf = b.buf[:mark]
		if b.count == 0 {
			b.buf = b.buf[:b.start]
		}
		return fmt.Errorf("%w: record would make the batch over %d bytes", ErrBatchTooLarge, BatchBytesMax)
	}
	b.count++
	return nil
}

// appendNullable appends a zigzag length (-1 for nil) and the bytes.
func appendNullable(buf, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(buf, -1)
	}
	buf = binary.AppendVarint(buf, int64(len(v)))
	return append(buf, v...)
}

// Finish writes the header and checksum and returns the caller's buffer
// with the batch appended. A batch without records fails with ErrEmpty.
// The Builder must be Reset before it is used again.
func (b *Builder) Finish() ([]byte, error) {
	if b.count == 0 {
		return b.buf[:b.start], ErrEmpty
	}
	batch := b.buf[b.start:]
	batch[0] = Magic
	batch[1] = 0
	binary.LittleEndian.PutUint16(batch[2:4], 0)
	binary.LittleEndian.PutUint32(batch[8:12], b.count)
	binary.LittleEndian.PutUint64(batch[12:20], uint64(b.firstTimestampMs))
	binary.LittleEndian.PutUint32(batch[20:24], uint32(len(batch)-HeaderBytes))
	binary.LittleEndian.PutUint32(batch[4:8], crc32.Checksum(batch[8:], castagnoli))
	return b.buf, nil
}

// Encode appends the batch of records to dst and returns the extended
// buffer. It is Builder's Reset, Append each, Finish.
func Encode(dst []byte, records []Record) ([]byte, error) {
	var b Builder
	b.Reset(dst)
	for i := range records {
		if err := b.Append(records[i]); err != nil {
			return dst, fmt.Errorf("record %d: %w", i, err)
		}
	}
	return b.Finish()
}
