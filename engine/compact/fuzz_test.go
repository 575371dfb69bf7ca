package compact

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzSeeds are valid compacted batches and near misses.
func fuzzSeeds(t fataler) [][]byte {
	good := mustAppend(t, sampleBatch())
	marker := mustAppend(t, sampleMarker())
	empty := mustAppend(t, Batch{BaseOffset: 3, LastOffsetDelta: 4, FirstTimestampMs: 10, MaxTimestampMs: 12,
		DeleteHorizonMs: NoHorizon, ProducerID: 1, BaseSequence: 9})
	return [][]byte{good, marker, empty, good[:HeaderBytes], append(bytes.Clone(good), 0), {}, {Magic}}
}

// checkDecode is the decoder's property: any input either decodes to a
// batch that re-encodes to exactly the input, or fails with ErrCorrupt or
// ErrBatchTooLarge; never a panic.
func checkDecode(t *testing.T, b []byte) {
	batch, err := DecodeBatch(b)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBatchTooLarge) {
			t.Fatalf("DecodeBatch error %v wraps no sentinel", err)
		}
		return
	}
	again, err := AppendBatch(nil, &batch)
	if err != nil {
		t.Fatalf("re-encoding a decoded batch: %v", err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
	}
}

// FuzzDecodeBatch feeds DecodeBatch arbitrary bytes and, so mutations get
// past the checksum, valid batches with one byte changed and the CRC
// recomputed.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, uint16(0), byte(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, at uint16, xor byte) {
		checkDecode(t, b)
		if len(b) > int(at)+8 && xor != 0 {
			b = bytes.Clone(b)
			b[8+int(at)] ^= xor
			checkDecode(t, recrc(b))
		}
	})
}
