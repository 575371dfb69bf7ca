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
