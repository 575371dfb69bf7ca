package tier

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

func genBatches(t *rapid.T) []Batch {
	n := rapid.IntRange(0, 12).Draw(t, "n")
	off := rapid.Int64Range(0, 1<<40).Draw(t, "base")
	out := make([]Batch, 0, n)
	for i := 0; i < n; i++ {
		b := Batch{
			BaseOffset:   off,
			AppendTimeMs: rapid.Int64Range(0, 1<<42).Draw(t, "append"),
			ProducerID:   rapid.Int64Range(-1, 1000).Draw(t, "pid"),
			MaxTimeMs:    rapid.Int64Range(-1, 1<<42).Draw(t, "maxts"),
		}
		if b.ProducerID >= 0 {
			b.ProducerEpoch = rapid.Int32Range(0, 5).Draw(t, "epoch")
			b.BaseSequence = rapid.Int32Range(-1, 1000).Draw(t, "seq")
			b.Transactional = rapid.Bool().Draw(t, "txn")
		}
		if b.Transactional && rapid.IntRange(0, 3).Draw(t, "marker?") == 0 {
			b.Marker, b.Commit = true, rapid.Bool().Draw(t, "commit")
			b.CoordinatorEpoch = rapid.Int32Range(0, 9).Draw(t, "cepoch")
			b.NextOffset = off + 1
		} else {
			b.Data = rapid.SliceOfN(rapid.Byte(), 1, 200).Draw(t, "data")
			b.NextOffset = off + rapid.Int64Range(1, 50).Draw(t, "count")
		}
		out = append(out, b)
		off = b.NextOffset
	}
	return out
}

// TestObjectRoundTrip: what EncodeObject writes, DecodeObject reads back
// unchanged, and a reader that goes footer → index → one frame by range
// finds every batch.
func TestObjectRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		batches := genBatches(t)
		obj, err := EncodeObject(batches)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(batches) {
			t.Fatalf("%d batches back, %d in", len(got), len(batches))
		}
		for i := range got {
			if !equalBatch(got[i], batches[i]) {
				t.Fatalf("batch %d: %+v, want %+v", i, got[i], batches[i])
			}
		}
		footer := obj[len(obj)-FooterBytes:]
		f, err := DecodeFooter(footer, int64(len(obj)))
		if err != nil {
			t.Fatal(err)
		}
		index, err := DecodeIndex(f, footer, obj[f.IndexPos:len(obj)-FooterBytes])
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range batches {
			for _, off := range []int64{b.BaseOffset, b.NextOffset - 1} {
				j := Seek(index, off)
				if j != i {
					t.Fatalf("seek %d: frame %d, want %d", off, j, i)
				}
				pos := index[j].Position
				n, err := FrameLen(obj[pos : pos+4])
				if err != nil {
					t.Fatal(err)
				}
				fb, _, err := DecodeFrame(obj[pos : pos+int64(n)])
				if err != nil || !equalBatch(fb, b) {
					t.Fatalf("range read of frame %d: %+v %v", i, fb, err)
				}
			}
		}
		if len(batches) > 0 && Seek(index, batches[0].BaseOffset-1) != -1 {
			t.Fatal("seek below the first batch found one")
		}
	})
}

func equalBatch(a, b Batch) bool {
	return bytes.Equal(a.Data, b.Data) && a.BaseOffset == b.BaseOffset && a.NextOffset == b.NextOffset &&
		a.AppendTimeMs == b.AppendTimeMs && a.ProducerID == b.ProducerID && a.ProducerEpoch == b.ProducerEpoch &&
		a.BaseSequence == b.BaseSequence && a.Transactional == b.Transactional && a.Marker == b.Marker &&
		a.Commit == b.Commit && a.CoordinatorEpoch == b.CoordinatorEpoch && a.MaxTimeMs == b.MaxTimeMs
}

// TestObjectCorruptionDetected: any single flipped bit or cut makes the
// whole-object read fail with ErrCorrupt (never a different batch list).
func TestObjectCorruptionDetected(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		batches := genBatches(t)
		obj, err := EncodeObject(batches)
		if err != nil {
			t.Fatal(err)
		}
		bad := bytes.Clone(obj)
		if rapid.Bool().Draw(t, "cut") {
			bad = bad[:rapid.IntRange(0, len(bad)-1).Draw(t, "at")]
		} else {
			i := rapid.IntRange(0, len(bad)-1).Draw(t, "byte")
			bad[i] ^= 1 << rapid.IntRange(0, 7).Draw(t, "bit")
		}
		if _, err := DecodeObject(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("corrupted object decoded: %v", err)
		}
	})
}

func TestEncodeRefusesGapsAndBadBatches(t *testing.T) {
	for name, bs := range map[string][]Batch{
		"gap":            {{BaseOffset: 0, NextOffset: 2, Data: []byte{1}, MaxTimeMs: -1}, {BaseOffset: 3, NextOffset: 4, Data: []byte{1}, MaxTimeMs: -1}},
		"empty range":    {{BaseOffset: 5, NextOffset: 5, Data: []byte{1}}},
		"marker w/ data": {{BaseOffset: 0, NextOffset: 1, Marker: true, Data: []byte{1}}},
		"no data":        {{BaseOffset: 0, NextOffset: 1}},
	} {
		if _, err := EncodeObject(bs); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzDecodeObject: no input panics, and whatever decodes is canonical
// (encodes back to the same bytes).
func FuzzDecodeObject(f *testing.F) {
	obj, _ := EncodeObject([]Batch{
		{BaseOffset: 7, NextOffset: 9, AppendTimeMs: 5, ProducerID: -1, MaxTimeMs: 4, Data: []byte("batch")},
		{BaseOffset: 9, NextOffset: 10, ProducerID: 3, Transactional: true, Marker: true, Commit: true, MaxTimeMs: -1},
	})
	f.Add(obj)
	empty, _ := EncodeObject(nil)
	f.Add(empty)
	f.Fuzz(func(t *testing.T, b []byte) {
		batches, err := DecodeObject(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		again, err := EncodeObject(batches)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded object re-encodes differently: %v", err)
		}
	})
}

// FuzzDecodeFrame: a frame decodes or fails with ErrCorrupt, never panics.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(appendFrame(nil, Batch{BaseOffset: 1, NextOffset: 3, ProducerID: -1, MaxTimeMs: -1, Data: []byte("x")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		bt, n, err := DecodeFrame(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if !bytes.Equal(appendFrame(nil, bt), b[:n]) {
			t.Fatal("frame re-encodes differently")
		}
	})
}
