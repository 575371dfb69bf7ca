package node

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/compacted"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// storedPrefix is the store's current generation as a pass's prefix input.
func storedPrefix(t *testing.T, s *compacted.Store) []compact.Input {
	t.Helper()
	var out []compact.Input
	for b, err := range s.Batches() {
		if err != nil {
			t.Fatal(err)
		}
		dec, err := compact.DecodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, compact.Input{BaseOffset: dec.BaseOffset, Data: slices.Clone(b)})
	}
	return out
}

// passInto runs writePass for d over the store's prefix and pp's raft
// entries from the prefix's end, commits and finishes the generation.
func passInto(t *testing.T, pp *passPartition, s *compacted.Store, d compact.Decision) compact.Result {
	t.Helper()
	first := s.End()
	w, err := s.Begin(d.Generation, pp.p.LogStartOffset())
	if err != nil {
		t.Fatal(err)
	}
	aborted := pp.p.AppendAbortedTxns(nil, 0, pp.p.HighWatermark())
	res, err := writePass(passLog(storeInputs(s), pp.dirty(t, first), first, aborted), d, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(res.CleanedTo, res.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(w); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestWritePassReplicasAgree shows two replicas with the same raft entries
// and decisions, each on its own disk, commit byte-identical generations
// (digest and end), a second pass reading each one's stored prefix agrees
// again, and a store reopened from its disk (a restart) holds the same
// generation with the survivors at their offsets.
func TestWritePassReplicasAgree(t *testing.T) {
	pp := newPassPartition()
	none := engine.Producer{ID: -1, Epoch: -1, BaseSequence: -1}
	pp.produce(t, none, false, "a", "1", "b", "1", "c", "1") // 0-2
	pp.produce(t, none, false, "a", "2", "b", "-")           // 3, 4
	disks := []raftlog.Disk{memdisk.New(), memdisk.New()}
	stores := make([]*compacted.Store, 2)
	for i, disk := range disks {
		s, err := compacted.Open(disk, "prefix", compacted.Options{SegmentBytes: 256, IndexIntervalBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	d1 := compact.Decision{Generation: 1, CleanableEnd: 5, TimeMs: 100, DeleteRetentionMs: 10, OffsetMapBytes: 1 << 12}
	r0, r1 := passInto(t, pp, stores[0], d1), passInto(t, pp, stores[1], d1)
	if r0.Digest != r1.Digest || stores[0].Digest() != stores[1].Digest() || stores[0].Digest() != r0.Digest || stores[0].End() != 5 {
		t.Fatalf("generation 1: digests %x %x, stores %x %x, end %d", r0.Digest[:4], r1.Digest[:4],
			stores[0].Digest(), stores[1].Digest(), stores[0].End())
	}
	pp.produce(t, none, false, "c", "2") // 5
	d2 := compact.Decision{Generation: 2, CleanableEnd: 6, TimeMs: 200, DeleteRetentionMs: 10, OffsetMapBytes: 1 << 12}
	r0, r1 = passInto(t, pp, stores[0], d2), passInto(t, pp, stores[1], d2)
	if r0.Digest != r1.Digest || r0.TombstonesRemoved != 1 || stores[0].Generation() != 2 {
		t.Fatalf("generation 2: %+v vs %+v", r0, r1)
	}
	if err := stores[0].Close(); err != nil {
		t.Fatal(err)
	}
	again, err := compacted.Open(disks[0], "prefix", compacted.Options{SegmentBytes: 256, IndexIntervalBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	if again.Generation() != 2 || again.End() != 6 || again.Digest() != r1.Digest {
		t.Fatalf("reopened: generation %d end %d digest %x", again.Generation(), again.End(), again.Digest())
	}
	if err := again.Verify(); err != nil {
		t.Fatal(err)
	}
	if got, want := dataRecords(t, storedPrefix(t, again)), []string{"a=2@3", "c=2@5"}; !slices.Equal(got, want) {
		t.Fatalf("reopened prefix %q, want %q", got, want)
	}
}

// writePass is a pass's write in one step (as queuePassStep's without a
// budget): it compacts log with decision d straight into w, a Writer of
// generation d.Generation from the store that holds the prefix log reads. Nothing is
// synced: the commit job (w.Commit with Result's CleanedTo and Digest)
// makes it durable and current; on an error the caller's Finish drops w
// and the old generation stays.
func writePass(log compact.Log, d compact.Decision, w *compacted.Writer) (compact.Result, error) {
	res, err := compact.Compact(log, d, w.Append)
	if err != nil {
		return res, fmt.Errorf("compaction pass of generation %d: %w", d.Generation, err)
	}
	return res, nil
}
