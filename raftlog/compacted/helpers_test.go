package compacted

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/memdisk"
	"github.com/strandlog/strand/raftlog/osdisk"
)

// diskKinds are the disks every behaviour test runs on.
var diskKinds = []struct {
	name string
	make func(t testing.TB) raftlog.Disk
}{
	{"memdisk", func(t testing.TB) raftlog.Disk { return memdisk.New() }},
	{"osdisk", func(t testing.TB) raftlog.Disk {
		d, err := osdisk.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}},
}

// testOpts are small, so a few batches span segments and index entries.
var testOpts = Options{SegmentBytes: 400, IndexIntervalBytes: 150}

// generation is what a pass emitted: batches in order, the prefix bounds
// and the digest.
type generation struct {
	gen        uint64
	start, end int64
	batches    [][]byte
	digest     [sha256.Size]byte
}

// makeGeneration builds n compacted batches from offset start, with gaps
// (offsets removed) between and inside them; tag makes generations differ.
func makeGeneration(t testing.TB, gen uint64, start int64, n int, tag string) generation {
	t.Helper()
	times := make([]int64, n)
	for i := range times {
		times[i] = 1000 + int64(i)
	}
	return makeGenerationAt(t, gen, start, times, tag)
}

// makeGenerationAt is makeGeneration with batch i's records at times[i].
func makeGenerationAt(t testing.TB, gen uint64, start int64, times []int64, tag string) generation {
	t.Helper()
	n := len(times)
	g := generation{gen: gen, start: start}
	sha := sha256.New()
	off := start + 1 // the first offset was removed
	for i := 0; i < n; i++ {
		b := compact.Batch{BaseOffset: off, LastOffsetDelta: 3, FirstTimestampMs: times[i],
			DeleteHorizonMs: compact.NoHorizon, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		for _, d := range []int64{0, 2} { // offsets off+1 and off+3 removed
			b.Records = append(b.Records, compact.Record{Offset: off + d, Record: recordbatch.Record{
				TimestampMs: times[i], Key: fmt.Appendf(nil, "k%d-%d", i, d), Value: fmt.Appendf(nil, "%s-%d", tag, i)}})
		}
		data, err := compact.AppendBatch(nil, &b)
		if err != nil {
			t.Fatal(err)
		}
		g.batches = append(g.batches, data)
		sha.Write(data)
		off += 4 + int64(i%3) // whole batches removed too
	}
	g.end = off + 2
	g.digest = [sha256.Size]byte(sha.Sum(nil))
	return g
}

// write writes g as the store's next generation: Begin, Append, Commit,
// Finish and RemoveStale, as a node would (Finish also after a failure).
func write(s *Store, g generation) error {
	w, err := s.Begin(g.gen, g.start)
	if err != nil {
		return err
	}
	for _, b := range g.batches {
		if err = w.Append(b); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Commit(g.end, g.digest)
	}
	if err := errors.Join(err, s.Finish(w)); err != nil {
		return err
	}
	return s.RemoveStale()
}

// mustOpen opens the store in "c".
func mustOpen(t testing.TB, disk raftlog.Disk) *Store {
	t.Helper()
	s, err := Open(disk, "c", testOpts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// holds reports whether s is exactly generation g: bounds, digest, every
// batch in order, Verify.
func holds(s *Store, g generation) error {
	if s.Generation() != g.gen || s.Start() != g.start || s.End() != g.end || s.Digest() != g.digest {
		return fmt.Errorf("store at generation %d [%d, %d), want %d [%d, %d)", s.Generation(), s.Start(), s.End(), g.gen, g.start, g.end)
	}
	i := 0
	for b, err := range s.Batches() {
		if err != nil {
			return err
		}
		if i >= len(g.batches) || !bytes.Equal(b, g.batches[i]) {
			return fmt.Errorf("batch %d differs", i)
		}
		i++
	}
	if i != len(g.batches) {
		return fmt.Errorf("%d batches, want %d", i, len(g.batches))
	}
	return s.Verify()
}

// batchRange is a compacted batch's base and last offset.
func batchRange(t testing.TB, b []byte) (int64, int64) {
	t.Helper()
	d, err := compact.DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	return d.BaseOffset, d.LastOffset()
}

// memdiskFor is a memdisk holding g in "c".
func memdiskFor(t testing.TB, g generation) *memdisk.Disk {
	t.Helper()
	disk := memdisk.New()
	if err := write(mustOpen(t, disk), g); err != nil {
		t.Fatal(err)
	}
	return disk
}
