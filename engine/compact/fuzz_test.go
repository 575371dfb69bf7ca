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

// FuzzCompact runs a pass over a log whose compacted prefix is one batch
// of fuzzed bytes (valid ones mutated with the CRC fixed), followed by
// raft batches and a marker: no panic; a damaged prefix fails with
// ErrCorrupt or ErrInput; otherwise the pass is deterministic, emits
// valid batches, and a second pass over its output changes nothing.
func FuzzCompact(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, uint16(0), byte(0), int64(1000), uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, at uint16, xor byte, timeMs int64, end uint8) {
		if len(b) > int(at)+8 && xor != 0 {
			b = recrc(append([]byte(nil), b...))
			b[8+int(at)] ^= xor
			recrc(b)
		}
		base, first := int64(0), int64(1) // bytes that are no compacted batch: refused below FirstDirty
		if batch, err := DecodeBatch(b); err == nil {
			base, first = batch.BaseOffset, batch.LastOffset()+1
		}
		l := testLog{firstDirty: first, next: first, inputs: []Input{{BaseOffset: base, Data: b}}}
		p := Producer{ID: 7, Epoch: 2}
		start := l.produce(t, p, true, rec("a", "1", 5000), rec("b", "-", 5001))
		l.marker(p, false, start, 5002)
		l.produce(t, noProducer, false, rec("a", "2", 5003))
		d := decision(first+int64(end%5), max(timeMs, 0), 10)
		var out [][]byte
		res, err := Compact(l.log(), d, func(batch []byte) error { out = append(out, bytes.Clone(batch)); return nil })
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInput) && !errors.Is(err, ErrBatchTooLarge) {
				t.Fatalf("Compact: %v", err)
			}
			return
		}
		res2, after := l.compact(t, d)
		if res2.Digest != res.Digest {
			t.Fatal("two passes of one decision differ")
		}
		prefix := *after
		prefix.inputs = prefix.inputs[:len(out)]
		if _, again := prefix.compact(t, d); !sameInputs(&prefix, again) {
			t.Fatal("a second pass changed the output")
		}
	})
}
