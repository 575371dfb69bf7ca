package kafkaproto

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
)

// AppendCompacted appends the Kafka RecordBatch v2 form of one batch of a
// compacted prefix (engine/compact's form) to dst, as Kafka's cleaner
// leaves a batch: the original base offset and last offset delta, fewer
// records than the range (gaps where records were removed, and an empty
// batch kept for its producer's state has none), each survivor's offset
// delta, timestamp, key, value and headers, the producer fields and the
// transactional and control bits, uncompressed, leader epoch as given and
// its CRC32C computed. Kafka clients read such batches from Kafka itself.
//
// The delete horizon (KIP-534's attribute bit and base timestamp) is not
// set: it is the cleaner's own bookkeeping, which no client reads, and
// the first timestamp stays the original's so record deltas stay small.
// A batch that is not a canonical compacted batch is ErrCorruptBatch.
func AppendCompacted(dst, batch []byte, epoch int32) ([]byte, error) {
	b, err := compact.DecodeBatch(batch)
	if err != nil {
		return dst, fmt.Errorf("%w: %w", ErrCorruptBatch, err)
	}
	start := len(dst)
	dst = append(dst, make([]byte, v2HeaderBytes)...)
	var tmp []byte
	for _, r := range b.Records {
		tmp = appendRecord(tmp[:0], r.Offset-b.BaseOffset, r.TimestampMs-b.FirstTimestampMs, r.Record)
		dst = binary.AppendVarint(dst, int64(len(tmp)))
		dst = append(dst, tmp...)
	}
	h := dst[start:]
	be := binary.BigEndian
	be.PutUint64(h[0:], uint64(b.BaseOffset))
	be.PutUint32(h[v2LengthOffset:], uint32(len(h)-12))
	be.PutUint32(h[v2EpochOffset:], uint32(epoch))
	h[v2MagicOffset] = 2
	attrs := uint16(0)
	if b.Transactional {
		attrs |= attrTransactional
	}
	if b.Control {
		attrs |= attrControl
	}
	be.PutUint16(h[v2AttrOffset:], attrs)
	be.PutUint32(h[v2LastDeltaOffset:], uint32(b.LastOffsetDelta))
	be.PutUint64(h[v2FirstTSOffset:], uint64(b.FirstTimestampMs))
	be.PutUint64(h[v2MaxTSOffset:], uint64(b.MaxTimestampMs))
	be.PutUint64(h[v2ProducerID:], uint64(b.ProducerID))
	be.PutUint16(h[v2ProducerEpoch:], uint16(b.ProducerEpoch))
	be.PutUint32(h[v2BaseSequence:], uint32(b.BaseSequence))
	be.PutUint32(h[v2CountOffset:], uint32(len(b.Records)))
	be.PutUint32(h[v2CRCOffset:], crc32.Checksum(h[v2AttrOffset:], castagnoli))
	return dst, nil
}

// CompactedToStrand converts a Kafka RecordBatch v2 with fewer records than
// its offset range (a compacted batch, as AppendCompacted and Kafka's
// cleaner write it; uncompressed) into engine/compact's form, the one a
// native fetch of a compacted prefix carries: the simulator's Kafka client
// hands fetched batches to code that reads Strand's forms (ToStrand refuses
// gaps, which a producer never sends). Parsed with franz-go's kmsg, as a
// Kafka client parses it; the CRC is checked.
func CompactedToStrand(dst, b []byte) ([]byte, error) {
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b); err != nil {
		return dst, fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	if uint32(kb.CRC) != crc32.Checksum(b[v2AttrOffset:], castagnoli) {
		return dst, fmt.Errorf("%w: crc mismatch", ErrCorruptBatch)
	}
	if kb.Attributes&0x07 != 0 {
		return dst, fmt.Errorf("%w: a compressed compacted batch", ErrCorruptBatch)
	}
	out := compact.Batch{BaseOffset: kb.FirstOffset, LastOffsetDelta: kb.LastOffsetDelta,
		FirstTimestampMs: kb.FirstTimestamp, MaxTimestampMs: kb.MaxTimestamp, DeleteHorizonMs: compact.NoHorizon,
		ProducerID: kb.ProducerID, ProducerEpoch: int32(kb.ProducerEpoch), BaseSequence: kb.FirstSequence,
		Transactional: uint16(kb.Attributes)&attrTransactional != 0, Control: uint16(kb.Attributes)&attrControl != 0}
	if out.ProducerID < 0 {
		out.ProducerEpoch, out.BaseSequence = -1, -1
	}
	for rest, i := kb.Records, int32(0); i < kb.NumRecords; i++ {
		n, used := binary.Varint(rest)
		if used <= 0 || n < 0 || int64(len(rest)-used) < n {
			return dst, fmt.Errorf("%w: record %d framing", ErrCorruptBatch, i)
		}
		var kr kmsg.Record
		if err := kr.ReadFrom(rest[:used+int(n)]); err != nil {
			return dst, fmt.Errorf("%w: record %d: %v", ErrCorruptBatch, i, err)
		}
		rest = rest[used+int(n):]
		r := compact.Record{Offset: kb.FirstOffset + int64(kr.OffsetDelta)}
		r.TimestampMs, r.Key, r.Value = kb.FirstTimestamp+kr.TimestampDelta64, kr.Key, kr.Value
		for _, h := range kr.Headers {
			r.Headers = append(r.Headers, recordbatch.Header{Key: h.Key, Value: h.Value})
		}
		out.Records = append(out.Records, r)
	}
	dst, err := compact.AppendBatch(dst, &out)
	if err != nil {
		return dst, fmt.Errorf("%w: %w", ErrCorruptBatch, err)
	}
	return dst, nil
}
