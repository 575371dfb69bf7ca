package compacted

import (
	"fmt"
	"iter"
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// rawLog is raft batches of keyed updates from offset 0, as a pass reads
// them after the compacted prefix.
type rawLog struct {
	inputs []compact.Input
	next   int64
}

// add appends a raft batch of n updates of keys k0..k4.
func (l *rawLog) add(t *testing.T, round, n int) {
	t.Helper()
	var recs []recordbatch.Record
	for i := 0; i < n; i++ {
		recs = append(recs, recordbatch.Record{TimestampMs: int64(round), Key: fmt.Appendf(nil, "k%d", (round+i)%5),
			Value: fmt.Appendf(nil, "v%d-%d", round, i)})
	}
	data, err := recordbatch.Encode(nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	l.inputs = append(l.inputs, compact.Input{BaseOffset: l.next, Data: data, Producer: compact.Producer{ID: -1}})
	l.next += int64(n)
}

// runPass compacts (the store's prefix, then l's raft batches from its
// end) with a decision of generation gen up to end, writes the output as
// the store's next generation and returns the pass's result.
func runPass(t *testing.T, s *Store, l *rawLog, gen uint64, end int64) compact.Result {
	t.Helper()
	batches := func() iter.Seq2[compact.Input, error] {
		return func(yield func(compact.Input, error) bool) {
			for b, err := range s.Batches() {
				var base int64
				if err == nil {
					base, _ = batchRange(t, b)
				}
				if !yield(compact.Input{BaseOffset: base, Data: slices.Clone(b)}, err) || err != nil {
					return
				}
			}
			for _, in := range l.inputs {
				if in.BaseOffset >= s.End() && !yield(in, nil) {
					return
				}
			}
		}
	}
	w, err := s.Begin(gen, s.Start())
	must(t, err)
	d := compact.Decision{Generation: gen, CleanableEnd: end, TimeMs: 1, DeleteRetentionMs: 10, OffsetMapBytes: 1 << 16}
	res, err := compact.Compact(compact.Log{Batches: batches, FirstDirty: s.End()}, d, w.Append)
	must(t, err)
	must(t, w.Commit(res.CleanedTo, res.Digest))
	must(t, s.Finish(w))
	must(t, s.RemoveStale())
	return res
}

// TestStoresWhatAPassEmits runs two passes of engine/compact, each over
// the prefix the store holds and the raft batches after it, and shows the
// store takes the output, its digest matches the pass's, and the prefix
// holds one record per key.
func TestStoresWhatAPassEmits(t *testing.T) {
	disk := memdisk.New()
	s := mustOpen(t, disk)
	var l rawLog
	for round := 0; round < 20; round++ {
		l.add(t, round, 3)
	}
	first := runPass(t, s, &l, 1, 45)
	for round := 20; round < 30; round++ {
		l.add(t, round, 3)
	}
	second := runPass(t, s, &l, 2, l.next)
	s = mustOpen(t, disk)
	if err := s.Verify(); err != nil || s.End() != second.CleanedTo || s.Digest() != second.Digest || first.CleanedTo != 45 {
		t.Fatalf("after two passes: %v, end %d (pass %d), first pass to %d", err, s.End(), second.CleanedTo, first.CleanedTo)
	}
	keys := map[string]int{}
	for b, err := range s.Batches() {
		must(t, err)
		d, err := compact.DecodeBatch(b)
		must(t, err)
		for _, r := range d.Records {
			keys[string(r.Key)]++
		}
	}
	if len(keys) != 5 {
		t.Fatalf("keys in the prefix: %v, want k0..k4 once each", keys)
	}
	for k, n := range keys {
		if n != 1 {
			t.Fatalf("key %s %d times in the prefix", k, n)
		}
	}
}
