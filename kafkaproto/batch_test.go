package kafkaproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/proto/strandpb"
)

// testRecords covers what the conversion must keep: null and empty keys
// and values, headers with null and empty values, timestamps before and
// after the first record's.
func testRecords() []recordbatch.Record {
	return []recordbatch.Record{
		{TimestampMs: 1_700_000_000_000, Key: []byte("k1"), Value: []byte("v1"),
			Headers: []recordbatch.Header{{Key: "h", Value: []byte("x")}, {Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}}},
		{TimestampMs: 1_700_000_000_005, Key: nil, Value: []byte("no key")},
		{TimestampMs: 1_699_999_999_990, Key: []byte{}, Value: nil},
		{TimestampMs: 1_700_000_000_100, Key: []byte("k4"), Value: bytes.Repeat([]byte("v"), 300)},
	}
}

// kafkaBatch builds a RecordBatch v2 the way a Kafka producer does:
// records encoded, compressed with codec, header and CRC filled.
func kafkaBatch(t testing.TB, recs []recordbatch.Record, codec int, pf ProducerFields, attrs uint16) []byte {
	t.Helper()
	var raw, tmp []byte
	first := recs[0].TimestampMs
	maxTS := first
	for i, r := range recs {
		tmp = appendRecord(tmp[:0], int64(i), r.TimestampMs-first, r)
		raw = binary.AppendVarint(raw, int64(len(tmp)))
		raw = append(raw, tmp...)
		maxTS = max(maxTS, r.TimestampMs)
	}
	body := compress(t, codec, raw)
	b := make([]byte, v2HeaderBytes, v2HeaderBytes+len(body))
	b = append(b, body...)
	binary.BigEndian.PutUint64(b[0:], 0)
	binary.BigEndian.PutUint32(b[v2LengthOffset:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[v2EpochOffset:], 0xffffffff)
	b[v2MagicOffset] = 2
	binary.BigEndian.PutUint16(b[v2AttrOffset:], uint16(codec)|attrs)
	binary.BigEndian.PutUint32(b[v2LastDeltaOffset:], uint32(len(recs)-1))
	binary.BigEndian.PutUint64(b[v2FirstTSOffset:], uint64(first))
	binary.BigEndian.PutUint64(b[v2MaxTSOffset:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[v2ProducerID:], uint64(pf.ID))
	binary.BigEndian.PutUint16(b[v2ProducerEpoch:], uint16(pf.Epoch))
	binary.BigEndian.PutUint32(b[v2BaseSequence:], uint32(pf.Sequence))
	binary.BigEndian.PutUint32(b[v2CountOffset:], uint32(len(recs)))
	binary.BigEndian.PutUint32(b[v2CRCOffset:], crc32.Checksum(b[v2AttrOffset:], castagnoli))
	return b
}

func compress(t testing.TB, codec int, raw []byte) []byte {
	var buf bytes.Buffer
	switch codec {
	case codecNone:
		return raw
	case codecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case codecSnappy:
		return s2.EncodeSnappy(nil, raw)
	case codecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case codecZstd:
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(raw)
		w.Close()
	}
	return buf.Bytes()
}

// An uncompressed Kafka batch converted to Strand's format and served back
// at the same base offset, leader epoch and producer fields is the very
// bytes the producer sent: CRC32C, attributes, timestamps (first and max),
// producer id/epoch/sequence, keys, values and headers, null kept apart
// from empty.
func TestBatchRoundTripIsExact(t *testing.T) {
	pf := ProducerFields{ID: 42, Epoch: 3, Sequence: 1000}
	in := kafkaBatch(t, testRecords(), codecNone, pf, 0)
	strand, gotPF, err := ToStrand(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if gotPF != pf {
		t.Fatalf("producer fields %+v, want %+v", gotPF, pf)
	}
	if _, err := recordbatch.Validate(strand); err != nil {
		t.Fatalf("converted batch invalid: %v", err)
	}
	out, err := AppendKafka(nil, strand, 0, -1, pf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, out) {
		t.Fatalf("round trip differs:\n in %x\nout %x", in, out)
	}
	// franz-go's own parser agrees, offsets stamped at the base offset.
	served, _ := AppendKafka(nil, strand, 500, 7, pf)
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(served); err != nil {
		t.Fatal(err)
	}
	if rb.FirstOffset != 500 || rb.NumRecords != 4 || rb.PartitionLeaderEpoch != 7 ||
		uint32(rb.CRC) != crc32.Checksum(served[v2AttrOffset:], castagnoli) {
		t.Fatalf("served batch header %+v", rb)
	}
}

// Batches compressed with each codec Kafka clients use (and snappy-java's
// framing) convert to the same Strand batch as the uncompressed one.
func TestCompressedBatchesConvert(t *testing.T) {
	pf := ProducerFields{ID: -1, Epoch: -1, Sequence: -1}
	want, _, err := ToStrand(nil, kafkaBatch(t, testRecords(), codecNone, pf, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []int{codecGzip, codecSnappy, codecLZ4, codecZstd} {
		got, _, err := ToStrand(nil, kafkaBatch(t, testRecords(), codec, pf, 0))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("codec %d: %v, equal=%v", codec, err, bytes.Equal(got, want))
		}
	}
	// snappy-java (the Java client): a 16-byte header, then length-prefixed blocks.
	var raw []byte
	uncompressed := kafkaBatch(t, testRecords(), codecNone, pf, 0)
	raw = append(raw, 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0)
	raw = append(raw, 0, 0, 0, 1, 0, 0, 0, 1)
	records := uncompressed[v2HeaderBytes:]
	for _, chunk := range [][]byte{records[:100], records[100:]} {
		block := s2.EncodeSnappy(nil, chunk)
		raw = binary.BigEndian.AppendUint32(raw, uint32(len(block)))
		raw = append(raw, block...)
	}
	b := append(append([]byte{}, uncompressed[:v2HeaderBytes]...), raw...)
	binary.BigEndian.PutUint32(b[v2LengthOffset:], uint32(len(b)-12))
	binary.BigEndian.PutUint16(b[v2AttrOffset:], codecSnappy)
	binary.BigEndian.PutUint32(b[v2CRCOffset:], crc32.Checksum(b[v2AttrOffset:], castagnoli))
	if got, _, err := ToStrand(nil, b); err != nil || !bytes.Equal(got, want) {
		t.Errorf("xerial snappy: %v", err)
	}
}

// A produced batch of each codec is stored as sent (base offset zeroed)
// and served to a Kafka fetch as the very bytes the producer sent with the
// base offset and leader epoch stamped, compression attribute and CRC
// kept, while Strand's own readers (recordbatch.Validate and Decode, which
// native consumers use) see the same records as in the uncompressed batch.
func TestCompressedBatchesServedAsSent(t *testing.T) {
	pf := ProducerFields{ID: 42, Epoch: 3, Sequence: 1000}
	want := decodeRecords(t, kafkaBatch(t, testRecords(), codecNone, pf, 0))
	for _, codec := range []int{codecNone, codecGzip, codecSnappy, codecLZ4, codecZstd} {
		in := kafkaBatch(t, testRecords(), codec, pf, 0)
		binary.BigEndian.PutUint64(in, 77) // a producer's base offset is overwritten
		stored, gotPF, err := ToStore(in)
		if err != nil || gotPF != pf {
			t.Fatalf("codec %d: ToStore: %v, producer %+v", codec, err, gotPF)
		}
		info, err := recordbatch.Validate(stored)
		if err != nil || info.RecordCount != 4 || info.FirstTimestampMs != 1_700_000_000_000 ||
			info.MaxTimestampMs != 1_700_000_000_100 {
			t.Fatalf("codec %d: stored batch: %+v, %v", codec, info, err)
		}
		if got := decodeRecords(t, stored); !equalRecords(got, want) {
			t.Errorf("codec %d: native readers decode %+v, want %+v", codec, got, want)
		}
		served, err := AppendKafka(nil, stored, 500, 7, ProducerFields{})
		if err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint64(in, 500)
		binary.BigEndian.PutUint32(in[v2EpochOffset:], 7)
		if !bytes.Equal(served, in) {
			t.Errorf("codec %d: served bytes differ from the produced ones", codec)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(served); err != nil || rb.FirstOffset != 500 || rb.NumRecords != 4 ||
			int(rb.Attributes&attrCompression) != codec || uint32(rb.CRC) != crc32.Checksum(served[v2AttrOffset:], castagnoli) {
			t.Errorf("codec %d: served batch header %+v (%v)", codec, rb, err)
		}
	}
}

// decodeRecords decodes a batch of either form with recordbatch.Decode,
// copying each record.
func decodeRecords(t *testing.T, b []byte) []recordbatch.Record {
	t.Helper()
	var out []recordbatch.Record
	err := recordbatch.Decode(b, func(_ int, r recordbatch.Record) error {
		r.Headers = append([]recordbatch.Header(nil), r.Headers...)
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// equalRecords compares records, null apart from empty.
func equalRecords(a, b []recordbatch.Record) bool {
	same := func(x, y []byte) bool { return (x == nil) == (y == nil) && bytes.Equal(x, y) }
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].TimestampMs != b[i].TimestampMs || !same(a[i].Key, b[i].Key) || !same(a[i].Value, b[i].Value) ||
			len(a[i].Headers) != len(b[i].Headers) {
			return false
		}
		for j, h := range a[i].Headers {
			if h.Key != b[i].Headers[j].Key || !same(h.Value, b[i].Headers[j].Value) {
				return false
			}
		}
	}
	return true
}

// Damaged, unsupported and oversized batches are refused with the error
// the produce handler maps to CORRUPT_MESSAGE, an unsupported-batch error
// and MESSAGE_TOO_LARGE; a small zstd batch inflating past the limit is
// refused without inflating it all.
func TestBatchRefusals(t *testing.T) {
	pf := ProducerFields{ID: -1, Epoch: -1, Sequence: -1}
	good := kafkaBatch(t, testRecords(), codecNone, pf, 0)
	flipped := bytes.Clone(good)
	flipped[len(flipped)-3] ^= 1
	bomb := kafkaBatch(t, []recordbatch.Record{{Value: make([]byte, 3*recordbatch.BatchBytesMax)}}, codecZstd, pf, 0)
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"crc":        {flipped, ErrCorruptBatch},
		"short":      {good[:40], ErrCorruptBatch},
		"control":    {kafkaBatch(t, testRecords(), codecNone, pf, attrTransactional|attrControl), ErrControlBatch},
		"log append": {kafkaBatch(t, testRecords(), codecNone, pf, 0x08), ErrUnsupportedBatch},
		"bomb":       {bomb, ErrTooLarge},
		"record too large": {kafkaBatch(t, []recordbatch.Record{{Value: make([]byte, recordbatch.RecordBytesMax+1)}}, codecNone, pf, 0),
			ErrTooLarge},
	} {
		if _, _, err := ToStrand(nil, tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// BenchmarkToStrand measures converting a produced Kafka batch (100
// records of 100 bytes, uncompressed) into Strand's batch: the produce-side
// cost of converting at the edge.
func BenchmarkToStrand(b *testing.B) {
	in := benchBatch(b, codecNone)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	var dst []byte
	for b.Loop() {
		var err error
		if dst, _, err = ToStrand(dst[:0], in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToStrandZstd is BenchmarkToStrand with a zstd-compressed batch.
func BenchmarkToStrandZstd(b *testing.B) {
	in := benchBatch(b, codecZstd)
	b.ReportAllocs()
	var dst []byte
	for b.Loop() {
		var err error
		if dst, _, err = ToStrand(dst[:0], in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendKafka measures serving one stored batch (100 records of
// 100 bytes) as a RecordBatch v2: the fetch-side cost.
func BenchmarkAppendKafka(b *testing.B) {
	strand, _, err := ToStrand(nil, benchBatch(b, codecNone))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(strand)))
	b.ReportAllocs()
	var dst []byte
	pf := ProducerFields{ID: -1, Epoch: -1, Sequence: -1}
	for b.Loop() {
		if dst, err = AppendKafka(dst[:0], strand, 1000, -1, pf); err != nil {
			b.Fatal(err)
		}
	}
}

// benchCodecs are the codecs the stored-form benchmarks run with.
var benchCodecs = []struct {
	name  string
	codec int
}{{"none", codecNone}, {"gzip", codecGzip}, {"snappy", codecSnappy}, {"lz4", codecLZ4}, {"zstd", codecZstd}}

// BenchmarkStoredValidate measures what the node spends on a produced
// Kafka batch stored as sent (ToStore, then recordbatch.Validate, which
// inflates a compressed batch and walks every record), per codec; the
// node validates once before proposing and once per replica on apply.
// Compare BenchmarkToStrand, the conversion this replaced.
func BenchmarkStoredValidate(b *testing.B) {
	for _, c := range benchCodecs {
		b.Run(c.name, func(b *testing.B) {
			in := benchBatch(b, c.codec)
			b.ReportAllocs()
			for b.Loop() {
				stored, _, err := ToStore(in)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := recordbatch.Validate(stored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStoredDecode measures a native consumer reading a batch stored
// in the Kafka form (recordbatch.Decode: inflate, walk), per codec, and
// "strand" the same records in Strand's own form: the conversion cost the
// native read path pays for Kafka-produced batches.
func BenchmarkStoredDecode(b *testing.B) {
	run := func(b *testing.B, batch []byte) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			if err := recordbatch.Decode(batch, func(_ int, r recordbatch.Record) error { n += len(r.Value); return nil }); err != nil || n != 10000 {
				b.Fatal(err, n)
			}
		}
	}
	for _, c := range benchCodecs {
		b.Run(c.name, func(b *testing.B) {
			stored, _, err := ToStore(benchBatch(b, c.codec))
			if err != nil {
				b.Fatal(err)
			}
			run(b, stored)
		})
	}
	b.Run("strand", func(b *testing.B) {
		strand, _, err := ToStrand(nil, benchBatch(b, codecNone))
		if err != nil {
			b.Fatal(err)
		}
		run(b, strand)
	})
}

// BenchmarkAppendKafkaStored measures serving a batch stored in the Kafka
// form to a Kafka fetch: a copy with the base offset and epoch stamped.
func BenchmarkAppendKafkaStored(b *testing.B) {
	stored, _, err := ToStore(benchBatch(b, codecZstd))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var dst []byte
	for b.Loop() {
		if dst, err = AppendKafka(dst[:0], stored, 1000, -1, ProducerFields{}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchBatch(b *testing.B, codec int) []byte {
	recs := make([]recordbatch.Record, 100)
	for i := range recs {
		recs[i] = recordbatch.Record{TimestampMs: 1_700_000_000_000 + int64(i), Key: []byte("key-0001"),
			Value: bytes.Repeat([]byte{byte('a' + i%26)}, 100)}
	}
	return kafkaBatch(b, recs, codec, ProducerFields{ID: 7, Epoch: 0, Sequence: 0}, 0)
}

// A create refused for want of registered nodes answers Kafka's own code for
// that state, INVALID_REPLICATION_FACTOR, not the produce-path mapping
// (NOT_ENOUGH_REPLICAS_AFTER_APPEND means nothing to an admin client); every
// other code maps as for any request.
func TestCreateTopicCodeNotEnoughReplicas(t *testing.T) {
	e := &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS, Message: "2 nodes available"}
	if got := createTopicCode(e); got != kerr.InvalidReplicationFactor.Code {
		t.Errorf("createTopicCode(NOT_ENOUGH_REPLICAS) = %d, want INVALID_REPLICATION_FACTOR", got)
	}
	for code := range kafkaCodes {
		if code == strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS {
			continue
		}
		e := &strandpb.Error{Code: code}
		if createTopicCode(e) != kafkaCode(e) {
			t.Errorf("createTopicCode(%v) = %d, kafkaCode %d", code, createTopicCode(e), kafkaCode(e))
		}
	}
}
