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
