package compacted

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeManifest feeds arbitrary bytes to the manifest decoder: it
// returns ErrCorrupt or a manifest that keeps every rule and encodes back
// to exactly the input (so nothing it accepts is ambiguous).
func FuzzDecodeManifest(f *testing.F) {
	g := makeGeneration(f, 3, 2, 30, "a")
	s := mustOpen(f, memdiskFor(f, g))
	f.Add(appendManifest(nil, &s.m))
	empty := manifest{generation: 1, start: 4, end: 9}
	f.Add(appendManifest(nil, &empty))
	f.Add([]byte("SCM1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeManifest(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if err := m.check(); err != nil {
			t.Fatalf("accepted a manifest that breaks a rule: %v", err)
		}
		if again := appendManifest(nil, &m); !bytes.Equal(again, data) {
			t.Fatalf("accepted bytes re-encode differently")
		}
	})
}

// FuzzReadSegment puts arbitrary bytes in a segment of a valid store (its
// size kept, so Open accepts it) and reads it every way: no panic, and
// every failure is ErrCorrupt; Verify never passes on damaged bytes.
func FuzzReadSegment(f *testing.F) {
	g := makeGeneration(f, 1, 0, 4, "a")
	disk := memdiskFor(f, g)
	name := "c/" + segmentName(1, 0)
	good, _ := disk.ReadFile(name)
	f.Add(good)
	flipped := bytes.Clone(good)
	flipped[70] ^= 1
	f.Add(flipped)
	f.Fuzz(func(t *testing.T, data []byte) {
		d := disk.Clone()
		content := make([]byte, len(good))
		copy(content, data)
		file, err := d.Open(name)
		must(t, err)
		_, err = file.WriteAt(content, 0)
		must(t, err)
		s := mustOpen(t, d)
		typed := func(what string, err error) {
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: %v is not ErrCorrupt", what, err)
			}
		}
		for offset := int64(0); offset <= g.end; offset++ {
			_, err := s.Read(nil, offset, 200)
			typed("Read", err)
		}
		for _, err := range s.Batches() {
			typed("Batches", err)
		}
		_, _, err = s.OffsetForTimestamp(1002)
		typed("OffsetForTimestamp", err)
		err = s.Verify()
		if !bytes.Equal(content, good) && err == nil {
			t.Fatalf("Verify passed damaged bytes")
		}
		if !errors.Is(err, ErrDigestMismatch) {
			typed("Verify", err)
		}
	})
}
