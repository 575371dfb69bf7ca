package compacted

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/strandlog/strand/raftlog/memdisk"
)

// TestReadByOffset writes a generation over several segments and index
// entries and shows Read returns, for every offset, whole batches from the
// one holding it (or the next, where records were removed) within the
// byte bound but at least one, on both disks and after a reopen.
func TestReadByOffset(t *testing.T) {
	for _, kind := range diskKinds {
		t.Run(kind.name, func(t *testing.T) {
			disk := kind.make(t)
			s := mustOpen(t, disk)
			g := makeGeneration(t, 1, 10, 40, "a")
			if err := write(s, g); err != nil {
				t.Fatal(err)
			}
			if len(s.m.segments) < 3 || len(s.m.segments[0].index) < 2 {
				t.Fatalf("%d segments, %d index entries in the first: the test covers too little", len(s.m.segments), len(s.m.segments[0].index))
			}
			checkReads(t, s, g)
			must(t, s.Close())
			s = mustOpen(t, disk)
			if err := holds(s, g); err != nil {
				t.Fatal(err)
			}
			checkReads(t, s, g)
		})
	}
}

// checkReads compares Read at every offset of the prefix and around it,
// with several byte bounds, against the batches g holds.
func checkReads(t *testing.T, s *Store, g generation) {
	t.Helper()
	size := len(g.batches[0])
	for offset := int64(0); offset <= g.end+1; offset++ {
		for _, maxBytes := range []int{0, size, 3*size - 1, 1 << 20} {
			got, err := s.Read(nil, offset, maxBytes)
			if err != nil {
				t.Fatalf("Read(%d, %d): %v", offset, maxBytes, err)
			}
			var want []byte
			for _, b := range g.batches {
				if _, last := batchRange(t, b); last < offset || offset >= g.end {
					continue
				}
				if len(want) > 0 && len(want)+len(b) > maxBytes {
					break
				}
				want = append(want, b...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Read(%d, %d): %d bytes, want %d (or other batches)", offset, maxBytes, len(got), len(want))
			}
			for _, maxBatches := range []int{1, 2} {
				checkReadBatches(t, s, g, offset, maxBytes, maxBatches)
			}
		}
		var from, want []byte
		for b, err := range s.BatchesFrom(offset) {
			if err != nil {
				t.Fatalf("BatchesFrom(%d): %v", offset, err)
			}
			from = append(from, b...)
		}
		for _, b := range g.batches {
			if _, last := batchRange(t, b); last >= offset {
				want = append(want, b...)
			}
		}
		if !bytes.Equal(from, want) {
			t.Fatalf("BatchesFrom(%d): %d bytes, want %d (every batch from the one holding it)", offset, len(from), len(want))
		}
	}
}

// checkReadBatches compares ReadBatches against g: the batches Read
// returns, at most maxBatches (at least one), and the offset covered: the
// prefix end when no batch at or after offset was left out, else the
// offset after the last batch returned.
func checkReadBatches(t *testing.T, s *Store, g generation, offset int64, maxBytes, maxBatches int) {
	t.Helper()
	got, to, err := s.ReadBatches(nil, offset, maxBytes, maxBatches)
	if err != nil {
		t.Fatalf("ReadBatches(%d, %d, %d): %v", offset, maxBytes, maxBatches, err)
	}
	var want, prev []byte
	n, wantTo := 0, max(offset, g.end)
	for _, b := range g.batches {
		if _, last := batchRange(t, b); last < offset || offset >= g.end {
			continue
		}
		if n > 0 && (len(want)+len(b) > maxBytes || n >= maxBatches) {
			_, last := batchRange(t, prev)
			wantTo = last + 1
			break
		}
		want, prev = append(want, b...), b
		n++
	}
	if !bytes.Equal(got, want) || to != wantTo {
		t.Fatalf("ReadBatches(%d, %d, %d): %d bytes to %d, want %d bytes to %d", offset, maxBytes, maxBatches, len(got), to, len(want), wantTo)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSwitchReplacesGeneration shows a commit makes the new generation
// current and removes the old one's files, an empty generation (every
// record removed) is a generation too, and Begin refuses a generation not
// above the current one or a second writer.
func TestSwitchReplacesGeneration(t *testing.T) {
	disk := memdisk.New()
	s := mustOpen(t, disk)
	g1, g2 := makeGeneration(t, 1, 0, 20, "a"), makeGeneration(t, 2, 0, 7, "b")
	must(t, write(s, g1))
	must(t, write(s, g2))
	if err := holds(s, g2); err != nil {
		t.Fatal(err)
	}
	for _, name := range disk.Files() {
		if !strings.HasPrefix(name, "c/00000000000000000002-") && name != "c/manifest" {
			t.Fatalf("file %s left after the switch: %v", name, disk.Files())
		}
	}
	empty := makeGeneration(t, 3, 5, 0, "")
	must(t, write(s, empty))
	if err := holds(mustOpen(t, disk), empty); err != nil || len(disk.Files()) != 1 {
		t.Fatalf("empty generation: %v, files %v", err, disk.Files())
	}
	for _, gen := range []uint64{2, 3} {
		if _, err := s.Begin(gen, 0); !errors.Is(err, ErrGeneration) {
			t.Fatalf("Begin(%d) at generation 3: %v", gen, err)
		}
	}
	w, err := s.Begin(5, 0)
	must(t, err)
	if _, err := s.Begin(6, 0); !errors.Is(err, ErrGeneration) {
		t.Fatalf("a second writer: %v", err)
	}
	must(t, s.Finish(w))
	if _, err := s.Begin(4, 0); err != nil {
		t.Fatalf("Begin after a writer finished uncommitted: %v", err)
	}
}

// TestCommitChecksDigest shows a generation whose batches do not hash to
// the decision's digest never becomes current, and Append refuses batches
// out of order, below the prefix start, or not canonical.
func TestCommitChecksDigest(t *testing.T) {
	disk := memdisk.New()
	s := mustOpen(t, disk)
	g1 := makeGeneration(t, 1, 0, 10, "a")
	must(t, write(s, g1))
	bad := makeGeneration(t, 2, 0, 10, "b")
	bad.digest[0] ^= 1
	if err := write(s, bad); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("commit with a wrong digest: %v", err)
	}
	if err := holds(s, g1); err != nil {
		t.Fatal(err)
	}
	if err := holds(mustOpen(t, disk), g1); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	g2 := makeGeneration(t, 2, 0, 10, "b")
	second, _ := batchRange(t, g2.batches[1])
	w, err := s.Begin(2, second) // start past the first batch
	must(t, err)
	if err := w.Append(g2.batches[0]); !errors.Is(err, ErrInput) {
		t.Fatalf("batch below the start: %v", err)
	}
	must(t, s.Finish(w))
	w, err = s.Begin(2, 0)
	must(t, err)
	must(t, w.Append(g2.batches[1]))
	if err := w.Append(g2.batches[0]); !errors.Is(err, ErrInput) {
		t.Fatalf("batch out of order: %v", err)
	}
	broken := slices.Clone(g2.batches[2])
	broken[len(broken)-1] ^= 1
	if err := w.Append(broken); !errors.Is(err, ErrInput) {
		t.Fatalf("batch with a bad crc: %v", err)
	}
	if err := w.Commit(0, g2.digest); !errors.Is(err, ErrInput) {
		t.Fatalf("commit end below the batches: %v", err)
	}
	must(t, s.Finish(w))
	if err := holds(s, g1); err != nil {
		t.Fatal(err)
	}
}

// TestReadsOldGenerationUntilFinish shows a committed generation is not
// read before Finish (so Commit may run off the store's goroutine), the
// old generation's files stay until RemoveStale, and both work in turn.
func TestReadsOldGenerationUntilFinish(t *testing.T) {
	disk := memdisk.New()
	s := mustOpen(t, disk)
	g1, g2 := makeGeneration(t, 1, 0, 8, "a"), makeGeneration(t, 2, 0, 8, "b")
	must(t, write(s, g1))
	w, err := s.Begin(2, 0)
	must(t, err)
	for _, b := range g2.batches {
		must(t, w.Append(b))
	}
	must(t, w.Commit(g2.end, g2.digest))
	if err := holds(s, g1); err != nil {
		t.Fatalf("before Finish: %v", err)
	}
	if err := w.Append(g2.batches[0]); !errors.Is(err, ErrInput) {
		t.Fatalf("Append after Commit: %v", err)
	}
	must(t, s.Finish(w))
	if err := holds(s, g2); err != nil {
		t.Fatalf("after Finish: %v", err)
	}
	if _, ok := disk.ReadFile("c/" + segmentName(1, 0)); !ok {
		t.Fatalf("the old generation's files went before RemoveStale")
	}
	must(t, s.RemoveStale())
	if _, ok := disk.ReadFile("c/" + segmentName(1, 0)); ok {
		t.Fatalf("the old generation's files stayed after RemoveStale")
	}
	if err := s.Finish(w); !errors.Is(err, ErrGeneration) {
		t.Fatalf("a second Finish: %v", err)
	}
}

// TestStaleRemovalSparesNextGeneration shows the removal of a replaced
// generation, bound after its Finish and run late (as the node's storage
// job may run, beside the next pass), removes only the generations below
// the current one: the next generation's segments being written and its
// manifest.tmp stay, its Commit succeeds and a reopened store reads it.
// Before, the job listed the directory when it ran and removed every file
// the current manifest did not name, the next generation's included.
func TestStaleRemovalSparesNextGeneration(t *testing.T) {
	disk := memdisk.New()
	s := mustOpen(t, disk)
	g1, g2, g3 := makeGeneration(t, 1, 0, 8, "a"), makeGeneration(t, 2, 0, 8, "b"), makeGeneration(t, 3, 0, 8, "c")
	must(t, write(s, g1))
	w, err := s.Begin(2, 0)
	must(t, err)
	for _, b := range g2.batches {
		must(t, w.Append(b))
	}
	must(t, w.Commit(g2.end, g2.digest))
	must(t, s.Finish(w))
	remove := s.StaleRemoval() // generation 1's files, bound now
	w, err = s.Begin(3, 0)
	must(t, err)
	for _, b := range g3.batches {
		must(t, w.Append(b))
	}
	must(t, w.writeManifest()) // as Commit does before its rename
	must(t, remove())          // the late job
	if _, ok := disk.ReadFile("c/" + segmentName(1, 0)); ok {
		t.Fatalf("generation 1's files stayed")
	}
	for _, name := range []string{segmentName(2, 0), segmentName(3, 0), manifestTmpName} {
		if _, ok := disk.ReadFile("c/" + name); !ok {
			t.Fatalf("the removal of generation 1 took %s", name)
		}
	}
	must(t, w.Commit(g3.end, g3.digest))
	must(t, s.Finish(w))
	if err := holds(mustOpen(t, disk), g3); err != nil {
		t.Fatalf("reopened: %v", err)
	}
}

// renameFails is a disk whose Rename fails, as a manifest switch whose
// outcome is unknown.
type renameFails struct{ *memdisk.Disk }

func (renameFails) Rename(from, to string) error { return errors.New("rename: i/o error") }

// TestFailedSwitchFailsStore shows a switch that fails from the rename on
// fails the store: reads, RemoveStale (which could delete the generation
// the durable manifest names) and Begin all refuse with ErrFailed until a
// reopen, which finds a whole generation.
func TestFailedSwitchFailsStore(t *testing.T) {
	mem := memdisk.New()
	g1, g2 := makeGeneration(t, 1, 0, 8, "a"), makeGeneration(t, 2, 0, 8, "b")
	must(t, write(mustOpen(t, mem), g1))
	s := mustOpen(t, renameFails{mem})
	if err := write(s, g2); !errors.Is(err, ErrFailed) {
		t.Fatalf("switch with a failing rename: %v", err)
	}
	if _, err := s.Read(nil, 0, 100); !errors.Is(err, ErrFailed) {
		t.Fatalf("Read of a failed store: %v", err)
	}
	if err := s.RemoveStale(); !errors.Is(err, ErrFailed) {
		t.Fatalf("RemoveStale of a failed store: %v", err)
	}
	if _, err := s.Begin(3, 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("Begin on a failed store: %v", err)
	}
	if err := holds(mustOpen(t, mem), g1); err != nil {
		t.Fatalf("reopened: %v", err)
	}
}

// TestOffsetForTimestamp shows the timestamp lookup answers, for every
// time around a generation's, the base offset of the first batch whose
// running maximum timestamp reaches it, with timestamps rising and with
// timestamps out of order, before and after a reopen.
func TestOffsetForTimestamp(t *testing.T) {
	var rising, jumbled []int64
	for i := 0; i < 40; i++ {
		rising = append(rising, 1000+int64(3*i))
		jumbled = append(jumbled, 1000+int64((i*37)%101))
	}
	for name, times := range map[string][]int64{"rising": rising, "jumbled": jumbled} {
		disk := memdisk.New()
		s := mustOpen(t, disk)
		g := makeGenerationAt(t, 1, 0, times, "a")
		must(t, write(s, g))
		for _, store := range []*Store{s, mustOpen(t, disk)} {
			for ts := int64(990); ts < 1110; ts++ {
				want, wantOK, running := int64(0), false, int64(-1<<63)
				for i, b := range g.batches {
					if running = max(running, times[i]); running >= ts {
						want, _ = batchRange(t, b)
						wantOK = true
						break
					}
				}
				got, ok, err := store.OffsetForTimestamp(ts)
				if err != nil || ok != wantOK || got != want {
					t.Fatalf("%s: OffsetForTimestamp(%d) = %d, %v, %v; want %d, %v", name, ts, got, ok, err, want, wantOK)
				}
			}
		}
	}
	if _, ok, err := mustOpen(t, memdisk.New()).OffsetForTimestamp(0); ok || err != nil {
		t.Fatalf("empty store: %v, %v", ok, err)
	}
}
