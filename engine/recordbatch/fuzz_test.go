package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// fuzzSeeds are valid batches and near misses the fuzzers start from; the
// same inputs are checked in under testdata/fuzz.
func fuzzSeeds(t testing.TB) [][]byte {
	good := mustEncode(t, sampleRecords())
	one := mustEncode(t, []Record{{TimestampMs: 7, Key: []byte("k"), Value: []byte("v")}})
	return [][]byte{
		good,
		one,
		good[:HeaderBytes],
		appendFixed(one, 0),
		withUint32(good, 8, 3),
		forgeBatch(1, 5, func(b []byte) []byte { return append(b, 0x80, 0x00, 1, 1, 0) }),
		{},
		kafkaSeed(),
	}
}

// kafkaSeed is an uncompressed Kafka RecordBatch v2 in the stored form:
// two records, one with a header.
func kafkaSeed() []byte {
	var records []byte
	for i, body := range [][]byte{
		{0, 0, 0, 2, 'k', 2, 'v', 0},
		{0, 2, 2, 1, 2, 'w', 2, 2, 'h', 1},
	} {
		body[2] = byte(2 * i) // offset delta i, zigzag
		records = binary.AppendVarint(records, int64(len(body)))
		records = append(records, body...)
	}
	b := make([]byte, KafkaHeaderBytes, KafkaHeaderBytes+len(records))
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[kafkaLengthOffset:], uint32(len(b)-12))
	b[kafkaMagicOffset] = 2
	binary.BigEndian.PutUint32(b[kafkaLastDeltaOffset:], 1)
	binary.BigEndian.PutUint64(b[kafkaFirstTSOffset:], 1000)
	binary.BigEndian.PutUint64(b[kafkaProducerID:], ^uint64(0))
	binary.BigEndian.PutUint32(b[kafkaCountOffset:], 2)
	binary.BigEndian.PutUint32(b[kafkaCRCOffset:], crc32.Checksum(b[kafkaAttrOffset:], castagnoli))
	return b
}

// TestKafkaForm shows the Kafka form is read by Validate and Decode (two
// records, timestamps from the header's first timestamp), and that a
// stored Kafka batch must carry base offset 0.
func TestKafkaForm(t *testing.T) {
	b := kafkaSeed()
	info, err := Validate(b)
	if err != nil || info.RecordCount != 2 || info.FirstTimestampMs != 1000 || info.MaxTimestampMs != 1001 {
		t.Fatalf("Validate: %+v, %v", info, err)
	}
	recs, err := decodeAll(t, b)
	if err != nil || len(recs) != 2 || string(recs[0].Key) != "k" || string(recs[1].Value) != "w" ||
		recs[1].Key != nil || len(recs[1].Headers) != 1 || recs[1].Headers[0].Key != "h" || recs[1].Headers[0].Value != nil {
		t.Fatalf("Decode: %+v, %v", recs, err)
	}
	b[7] = 5
	if _, err := Validate(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("base offset 5 stored: %v", err)
	}
}

// checkBatch is the property both fuzzers assert: Validate and Decode
// agree, a valid batch decodes to Info's count and re-encodes to itself.
func checkBatch(t *testing.T, batch []byte) {
	info, verr := Validate(batch)
	records, derr := decodeAll(t, batch)
	if (verr == nil) != (derr == nil) {
		t.Fatalf("Validate: %v, Decode: %v", verr, derr)
	}
	if verr != nil {
		if !errors.Is(verr, ErrCorrupt) && !errors.Is(verr, ErrEmpty) && !errors.Is(verr, ErrUnsupported) && !errors.Is(verr, ErrControl) &&
			!errors.Is(verr, ErrRecordTooLarge) && !errors.Is(verr, ErrBatchTooLarge) {
			t.Fatalf("Validate error %v wraps no sentinel", verr)
		}
		return
	}
	if int(info.RecordCount) != len(records) {
		t.Fatalf("Validate counts %d, Decode gave %d", info.RecordCount, len(records))
	}
	if IsKafka(batch) {
		return // the Kafka form is stored as sent, not canonical
	}
	again, err := Encode(nil, records)
	if err != nil {
		t.Fatalf("re-Encode: %v", err)
	}
	if !bytes.Equal(again, batch) {
		t.Fatalf("re-encoding differs:\n%x\n%x", again, batch)
	}
}

// FuzzValidate feeds arbitrary bytes to Validate: no panic, agreement with
// Decode, and exact re-encoding of valid batches.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkBatch)
}

// FuzzDecode feeds a valid batch with one byte changed and its CRC fixed,
// so mutations reach the record walk rather than dying at the checksum.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, uint16(0), byte(0))
	}
	f.Fuzz(func(t *testing.T, batch []byte, at uint16, xor byte) {
		if len(batch) > HeaderBytes+int(at) {
			batch = bytes.Clone(batch)
			batch[HeaderBytes+int(at)] ^= xor
			fixCRC(batch)
		}
		checkBatch(t, batch)
	})
}
