package compacted

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/raftlog/memdisk"
)

// TestBitFlipsAreCaught flips every bit of every segment byte in turn and
// requires a read of the damaged batch, Batches and Verify to fail with
// ErrCorrupt (never to return other bytes), while reads of the batches
// before it still work.
func TestBitFlipsAreCaught(t *testing.T) {
	base := memdisk.New()
	g := makeGeneration(t, 1, 0, 6, "a")
	must(t, write(mustOpen(t, base), g))
	name := "c/" + segmentName(1, 0)
	data, _ := base.ReadFile(name)
	first := len(g.batches[0])
	for pos := range data {
		for bit := uint(0); bit < 8; bit += 3 {
			disk := base.Clone()
			disk.FlipBit(name, int64(pos), bit)
			s := mustOpen(t, disk)
			if err := s.Verify(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d bit %d: Verify: %v", pos, bit, err)
			}
			var batchErr error
			for _, err := range s.Batches() {
				batchErr = err
			}
			if !errors.Is(batchErr, ErrCorrupt) {
				t.Fatalf("flip at %d bit %d: Batches: %v", pos, bit, batchErr)
			}
			if pos < first {
				if _, err := s.Read(nil, 0, 1<<20); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("flip at %d bit %d: Read: %v", pos, bit, err)
				}
			} else if got, err := s.Read(nil, 0, first); err != nil || len(got) != first {
				t.Fatalf("flip at %d bit %d: read of the first batch: %d bytes, %v", pos, bit, len(got), err)
			}
		}
	}
}

// TestDamagedFilesRefused shows Open refuses, with ErrCorrupt, a manifest
// with a flipped bit, a segment of the wrong size, and a missing segment.
func TestDamagedFilesRefused(t *testing.T) {
	base := memdisk.New()
	g := makeGeneration(t, 1, 0, 20, "a")
	must(t, write(mustOpen(t, base), g))
	manifestBytes, _ := base.ReadFile("c/manifest")
	for pos := range manifestBytes {
		disk := base.Clone()
		disk.FlipBit("c/manifest", int64(pos), uint(pos%8))
		if _, err := Open(disk, "c", testOpts); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("manifest flip at %d: %v", pos, err)
		}
	}
	seg := "c/" + segmentName(1, 1)
	short := base.Clone()
	f, err := short.Open(seg)
	must(t, err)
	must(t, f.Truncate(10))
	if _, err := Open(short, "c", testOpts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short segment: %v", err)
	}
	missing := base.Clone()
	must(t, missing.Remove(seg))
	if _, err := Open(missing, "c", testOpts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("missing segment: %v", err)
	}
}

// TestReadFailureIsReturned shows a failing read of a segment comes back
// as an error, not as a short or empty answer.
func TestReadFailureIsReturned(t *testing.T) {
	disk := memdisk.New()
	g := makeGeneration(t, 1, 0, 3, "a")
	must(t, write(mustOpen(t, disk), g))
	s := mustOpen(t, disk)
	disk.FailReads("c/"+segmentName(1, 0), true)
	if _, err := s.Read(nil, 0, 1<<20); !errors.Is(err, memdisk.ErrInjected) {
		t.Fatalf("Read: %v", err)
	}
	if err := s.Verify(); !errors.Is(err, memdisk.ErrInjected) {
		t.Fatalf("Verify: %v", err)
	}
}

// TestManifestRulesRefused breaks each rule of a valid manifest in turn,
// with a correct CRC, and requires the decoder to refuse it.
func TestManifestRulesRefused(t *testing.T) {
	s := mustOpen(t, memdiskFor(t, makeGeneration(t, 2, 1, 30, "a")))
	if len(s.m.segments) < 3 || len(s.m.segments[1].index) < 2 {
		t.Fatalf("sample too small: %d segments", len(s.m.segments))
	}
	for name, breakIt := range map[string]func(m *manifest){
		"generation 0":               func(m *manifest) { m.generation = 0 },
		"end before start":           func(m *manifest) { m.end = m.start - 1 },
		"negative start":             func(m *manifest) { m.start = -1 },
		"segment before start":       func(m *manifest) { m.start = m.segments[0].base + 1 },
		"segments overlap":           func(m *manifest) { m.segments[1].base = m.segments[0].end - 1 },
		"segment past end":           func(m *manifest) { m.end = m.segments[len(m.segments)-1].end - 1 },
		"empty segment":              func(m *manifest) { m.segments[1].bytes = 0 },
		"no index":                   func(m *manifest) { m.segments[1].index = nil },
		"index not at first batch":   func(m *manifest) { m.segments[1].index[0].position = 1 },
		"index offset not base":      func(m *manifest) { m.segments[1].index[0].offset++ },
		"index positions not rising": func(m *manifest) { m.segments[1].index[1].position = 0 },
		"index past the segment":     func(m *manifest) { m.segments[1].index[1].position = m.segments[1].bytes },
		"index offset past the end":  func(m *manifest) { m.segments[1].index[1].offset = m.segments[1].end },
		"running time falls":         func(m *manifest) { m.segments[1].index[1].maxTimestampMs = m.segments[1].index[0].maxTimestampMs - 1 },
		"running time falls across":  func(m *manifest) { m.segments[2].index[0].maxTimestampMs = 0 },
	} {
		m := s.m
		m.segments = make([]segment, len(s.m.segments))
		for i, seg := range s.m.segments {
			m.segments[i] = seg
			m.segments[i].index = append([]indexEntry(nil), seg.index...)
		}
		breakIt(&m)
		if _, err := decodeManifest(appendManifest(nil, &m)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decoded with %v", name, err)
		}
	}
	if _, err := decodeManifest(appendManifest(nil, &s.m)); err != nil {
		t.Fatalf("the unbroken manifest: %v", err)
	}
}
