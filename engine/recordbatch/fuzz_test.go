package recordbatch

import (
	"bytes"
	"errors"
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
		if !errors.Is(verr, ErrCorrupt) && !errors.Is(verr, ErrEmpty) &&
			!errors.Is(verr, ErrRecordTooLarge) && !errors.Is(verr, ErrBatchTooLarge) {
			t.Fatalf("Validate error %v wraps no sentinel", verr)
		}
		return
	}
	if int(info.RecordCount) != len(records) {
		t.Fatalf("Validate counts %d, Decode gave %d", info.RecordCount, len(records))
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
