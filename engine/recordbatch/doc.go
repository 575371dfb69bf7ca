// Package recordbatch encodes and decodes Strand's record batch: the unit a producer sends, a raft
// entry stores and a fetch serves, byte for byte.
//
// Layout (little-endian), header of HeaderBytes bytes then the records:
//
//	0  magic          u8   = Magic
//	1  attributes     u8   bits 0-2 compression (0 none), others zero
//	2  reserved       u16  = 0
//	4  crc            u32  CRC32C (Castagnoli) of bytes [8, end)
//	8  record_count   u32  > 0
//	12 first_time_ms  i64  producer timestamp of the first record
//	20 records_bytes  u32  length of the records section
//	24 records        record_count records, each:
//	     timestamp_delta_ms  zigzag varint, added to first_time_ms
//	     key_length          zigzag varint, -1 for a null key
//	     key
//	     value_length        zigzag varint, -1 for a null value (tombstone)
//	     value
//	     header_count        uvarint
//	     headers             each: uvarint key length, key,
//	                         zigzag varint value length (-1 null), value
//
// Every encoding is canonical, so a batch has exactly one valid byte form and Encode(Decode(b)) ==
// b: varints are minimal (no redundant 0x80 groups), the first record's timestamp delta is 0
// (first_time_ms is its timestamp), only compression 0 exists yet, and no byte follows the last
// record. Timestamps are producer values; the leader's append time travels beside the batch in the
// raft entry, never inside it, so the stored bytes are the sent bytes.
//
// # Limits and the Kafka form
//
// A record's key + value + headers ≤ 1 MiB (ErrRecordTooLarge, R4); a batch ≤ 1 MiB + 64 KiB
// (ErrBatchTooLarge); record_count ≤ records_bytes/4 and records_bytes = length − 24; every other
// defect is ErrCorrupt naming field and record. Canonical form means replicas never accept two
// spellings of one batch. Validate allocates nothing; Decode yields sub-slices of the batch. The
// Kafka form (byte 0 = 0: a Kafka RecordBatch v2 with its base offset zeroed, compressed or not) is
// stored as the Kafka listener received it (package kafkaproto, "Batches: stored as sent"; a Kafka
// batch inflates to at most 16 MiB, MESSAGE_TOO_LARGE beyond); Validate inflates and walks it with
// the same limits, and Iterator/Decode read both forms (it is not canonical: Validate and Decode
// agree, Encode yields Strand's form). Rejected: Kafka's v2 as the only format (its offsets are
// rewritten by the broker; Strand's come from the entry's position, so the stored bytes stay
// exactly what the producer sent).
package recordbatch
