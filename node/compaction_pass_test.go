package node

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/compact"
	"github.com/strandlog/strand/engine/recordbatch"
)

// passPartition is an engine partition fed real entries, keeping each
// entry's Data by raft index as a raft log would.
type passPartition struct {
	p       *engine.Partition
	entries map[uint64][]byte
	index   uint64
}

func newPassPartition() *passPartition {
	return &passPartition{p: engine.NewPartition(), entries: map[uint64][]byte{}}
}

func (pp *passPartition) apply(t *testing.T, data []byte) {
	t.Helper()
	pp.index++
	pp.entries[pp.index] = data
	if res := pp.p.Apply(pp.index, data); res.Err != nil {
		t.Fatalf("entry %d: %v", pp.index, res.Err)
	}
}

func (pp *passPartition) produce(t *testing.T, producer engine.Producer, txn bool, kv ...string) {
	t.Helper()
	var recs []recordbatch.Record
	for i := 0; i < len(kv); i += 2 {
		r := recordbatch.Record{TimestampMs: 50, Key: []byte(kv[i])}
		if kv[i+1] != "-" {
			r.Value = []byte(kv[i+1])
		}
		recs = append(recs, r)
	}
	batch, err := recordbatch.Encode(nil, recs)
	if err != nil {
		t.Fatal(err)
	}
	encode := engine.EncodeProduceEntry
	if txn {
		encode = engine.EncodeTransactionalProduceEntry
	}
	pp.apply(t, encode(nil, 10*int64(pp.index+1), pp.index+1, producer, batch))
}

// inputsOf yields prefix as a pass's prefix input.
func inputsOf(prefix []compact.Input) prefixInputs {
	return func(from int64) iter.Seq2[compact.Input, error] {
		return func(yield func(compact.Input, error) bool) {
			for _, in := range prefix {
				if in.BaseOffset >= from && !yield(in, nil) {
					return
				}
			}
		}
	}
}

// dirty is every indexed batch from offset with its entry's Data.
func (pp *passPartition) dirty(t *testing.T, offset int64) []dirtyEntry {
	t.Helper()
	locs, err := pp.p.AppendLocations(nil, offset, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]dirtyEntry, len(locs))
	for i, l := range locs {
		out[i] = dirtyEntry{loc: l, data: pp.entries[l.RaftIndex]}
	}
	return out
}

// runPass compacts prefix + the dirty section from firstDirty with d.
func (pp *passPartition) runPass(t *testing.T, prefix []compact.Input, firstDirty int64, d compact.Decision) (compact.Result, []compact.Input) {
	t.Helper()
	aborted := pp.p.AppendAbortedTxns(nil, 0, pp.p.HighWatermark())
	var out []compact.Input
	res, err := compact.Compact(passLog(inputsOf(prefix), pp.dirty(t, firstDirty), firstDirty, aborted), d, func(b []byte) error {
		dec, err := compact.DecodeBatch(b)
		if err != nil {
			return err
		}
		out = append(out, compact.Input{BaseOffset: dec.BaseOffset, Data: slices.Clone(b)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, out
}

// dataRecords is "key=value@offset" ("-" for a tombstone) of every data
// record of compacted batches.
func dataRecords(t *testing.T, batches []compact.Input) []string {
	t.Helper()
	var out []string
	for _, in := range batches {
		b, err := compact.DecodeBatch(in.Data)
		if err != nil {
			t.Fatal(err)
		}
		if b.Control {
			continue
		}
		for _, r := range b.Records {
			v := string(r.Value)
			if r.Value == nil {
				v = "-"
			}
			out = append(out, fmt.Sprintf("%s=%s@%d", r.Key, v, r.Offset))
		}
	}
	return out
}

// TestPassOverEngineLog shows a pass over a real partition's entries read
// through passLog: produce entries in Strand's form, an idempotent
// producer, an aborted transaction and its marker. The first pass keeps
// the latest value per key at its offset, drops the aborted record and
// keeps the tombstone (stamped); the same pass again gives the same
// digest; a later pass over its prefix past the horizon removes the
// tombstone and the marker and reports the aborted transaction forgotten.
func TestPassOverEngineLog(t *testing.T) {
	pp := newPassPartition()
	none := engine.Producer{ID: -1, Epoch: -1, BaseSequence: -1}
	pp.produce(t, none, false, "a", "1", "b", "1")                                   // 0, 1
	pp.apply(t, engine.EncodeTxnBeginEntry(nil, 30, 2, 5, 0))                        // no offset
	pp.produce(t, engine.Producer{ID: 5, Epoch: 0, BaseSequence: 0}, true, "a", "x") // 2, aborted
	pp.apply(t, engine.EncodeTxnMarkerEntry(nil, 50, 4, engine.Marker{ProducerID: 5, ProducerEpoch: 1}))
	pp.produce(t, engine.Producer{ID: 9, Epoch: 0, BaseSequence: 0}, false, "a", "2", "b", "-") // 4, 5
	pp.produce(t, none, false, "c", "1")                                                        // 6
	if lso := pp.p.LastStableOffset(); lso != 7 {
		t.Fatalf("last stable offset %d, want 7", lso)
	}
	d := compact.Decision{Generation: 1, CleanableEnd: 7, TimeMs: 100, DeleteRetentionMs: 0, OffsetMapBytes: 1 << 12}
	res, prefix := pp.runPass(t, nil, 0, d)
	if got, want := dataRecords(t, prefix), []string{"a=2@4", "b=-@5", "c=1@6"}; !slices.Equal(got, want) {
		t.Fatalf("first pass %q, want %q", got, want)
	}
	if res.CleanedTo != 7 || res.AbortedRemoved != 1 || res.RecordsSuperseded != 2 {
		t.Fatalf("first pass %+v", res)
	}
	if again, _ := pp.runPass(t, nil, 0, d); again.Digest != res.Digest {
		t.Fatalf("the same pass gave digest %x then %x", res.Digest[:8], again.Digest[:8])
	}
	pp.produce(t, none, false, "c", "2") // 7
	res2, prefix2 := pp.runPass(t, prefix, 7, compact.Decision{Generation: 2, CleanableEnd: 8, TimeMs: 101, OffsetMapBytes: 1 << 12})
	if got, want := dataRecords(t, prefix2), []string{"a=2@4", "c=2@7"}; !slices.Equal(got, want) {
		t.Fatalf("second pass %q, want %q", got, want)
	}
	if res2.TombstonesRemoved != 1 || res2.MarkersRemoved != 1 || len(res2.AbortedForgotten) != 1 ||
		res2.AbortedForgotten[0] != (compact.AbortedTxn{ProducerID: 5, FirstOffset: 2, LastOffset: 3}) {
		t.Fatalf("second pass %+v", res2)
	}
}

// TestPassInputRefusesOtherEntries shows an indexed location whose entry
// holds no batch or marker (a broken log) is ErrStorage naming the entry,
// and the pass stops on it.
func TestPassInputRefusesOtherEntries(t *testing.T) {
	loc := engine.BatchLocation{BaseOffset: 3, RecordCount: 1, RaftIndex: 8}
	_, err := passInput(dirtyEntry{loc: loc, data: engine.EncodeTrimEntry(nil, 1, 1, 2)})
	if !errors.Is(err, ErrStorage) || !strings.Contains(fmt.Sprint(err), "entry 8") {
		t.Fatalf("trim entry at an indexed location: %v", err)
	}
	if _, err := passInput(dirtyEntry{loc: loc, data: []byte{1, 2, 3}}); !errors.Is(err, ErrStorage) {
		t.Fatalf("garbage entry: %v", err)
	}
	log := passLog(inputsOf(nil), []dirtyEntry{{loc: loc, data: []byte{1}}}, 3, nil)
	if _, err := compact.Compact(log, compact.Decision{Generation: 1, CleanableEnd: 4, OffsetMapBytes: 1 << 12},
		func([]byte) error { return nil }); !errors.Is(err, ErrStorage) {
		t.Fatalf("pass over a broken entry: %v", err)
	}
}

// TestDecideCompaction shows the leader's trigger: the cleanable end is
// the least of its bounds (LSO, checkpoint, open segment, and the first
// batch younger than min.compaction.lag.ms by the clock); no pass while
// one is decided and unreported, none that would not move the prefix (a
// pass its map or its input bound stopped short of its cleanable end is
// followed by one over the rest),
// none below min.cleanable.dirty.ratio unless max.compaction.lag.ms has
// passed; a due one is the next generation stamped with the clock.
func TestDecideCompaction(t *testing.T) {
	cfg := compact.DefaultConfig()
	cfg.Policy = compact.PolicyCompact
	dirty := []engine.BatchLocation{
		{BaseOffset: 10, RecordCount: 5, AppendTimeMs: 1000},
		{BaseOffset: 15, RecordCount: 5, AppendTimeMs: 2000},
		{BaseOffset: 20, RecordCount: 5, AppendTimeMs: 3000},
	}
	base := compactionFacts{
		state:      engine.CompactionState{Decision: compact.Decision{Generation: 2, CleanableEnd: 10}, DoneGeneration: 2, CleanedTo: 10},
		lastStable: 25, checkpointed: 25, activeSegment: 25, highWatermark: 25, dirty: dirty,
		cleanBytes: 100, dirtyBytes: 100, offsetMapBytes: 1 << 20,
	}
	d, ok := decideCompaction(cfg, base, 5000)
	want := compact.Decision{Generation: 3, CleanableEnd: 25, TimeMs: 5000, DeleteRetentionMs: cfg.DeleteRetentionMs, OffsetMapBytes: 1 << 20}
	if !ok || d != want {
		t.Fatalf("due: %+v %v, want %+v", d, ok, want)
	}
	for name, tc := range map[string]struct {
		mutate func(*compactionFacts, *compact.Config)
		end    int64 // 0: no pass
	}{
		"LSO bounds":             {func(f *compactionFacts, _ *compact.Config) { f.lastStable = 17 }, 17},
		"checkpoint bounds":      {func(f *compactionFacts, _ *compact.Config) { f.checkpointed = 20 }, 20},
		"open segment bounds":    {func(f *compactionFacts, _ *compact.Config) { f.activeSegment = 15 }, 15},
		"min lag bounds":         {func(_ *compactionFacts, c *compact.Config) { c.MinCompactionLagMs = 2500 }, 20},
		"all too young":          {func(_ *compactionFacts, c *compact.Config) { c.MinCompactionLagMs = 4500 }, 0},
		"pending decision":       {func(f *compactionFacts, _ *compact.Config) { f.state.Decision.Generation = 3 }, 0},
		"delete policy":          {func(_ *compactionFacts, c *compact.Config) { c.Policy = compact.PolicyDelete }, 0},
		"nothing dirty":          {func(f *compactionFacts, _ *compact.Config) { f.dirty = nil }, 0},
		"end at the prefix":      {func(f *compactionFacts, _ *compact.Config) { f.lastStable = 10 }, 0},
		"a stopped pass goes on": {func(f *compactionFacts, _ *compact.Config) { f.state.Decision.CleanableEnd = 25 }, 25},
		"ratio not reached":      {func(f *compactionFacts, _ *compact.Config) { f.cleanBytes = 1000 }, 0},
		"max lag forces a pass":  {func(f *compactionFacts, c *compact.Config) { f.cleanBytes, c.MaxCompactionLagMs = 1000, 4000 }, 25},
	} {
		f, c := base, cfg
		tc.mutate(&f, &c)
		d, ok := decideCompaction(c, f, 5000)
		if ok != (tc.end != 0) || ok && d.CleanableEnd != tc.end {
			t.Errorf("%s: %+v %v, want end %d", name, d, ok, tc.end)
		}
	}
}
