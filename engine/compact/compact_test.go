package compact

import (
	"errors"
	"slices"
	"testing"

	"github.com/strandlog/strand/engine/recordbatch"
)

// wantRead fails unless a full read of l gives exactly want ("key=value@offset",
// "marker@offset").
func wantRead(t *testing.T, l *testLog, want ...string) {
	t.Helper()
	if got := keysAt(readAll(t, l.inputs)); !slices.Equal(got, want) {
		t.Fatalf("read %q\nwant %q", got, want)
	}
}

// TestLatestValueSurvives shows the latest value of each key survives at
// its own offset and timestamp, older ones go, and the stats count it.
func TestLatestValueSurvives(t *testing.T) {
	var l testLog
	l.produce(t, noProducer, false, rec("a", "1", 10), rec("b", "1", 11))
	l.produce(t, noProducer, false, rec("a", "2", 12), rec("c", "1", 13), rec("a", "3", 14))
	res, out := l.compact(t, decision(5, 100, 0))
	wantRead(t, out, "b=1@1", "c=1@3", "a=3@4")
	if got := readAll(t, out.inputs); got[2].ts != 14 {
		t.Fatalf("timestamp %d, want 14", got[2].ts)
	}
	if res.CleanedTo != 5 || res.RecordsIn != 5 || res.RecordsOut != 3 || res.RecordsSuperseded != 2 || res.BatchesOut != 2 {
		t.Fatalf("result %+v", res)
	}
}

// TestCleanableEndBounds shows nothing at or past the cleanable end is
// touched: the older value below it goes only if the newer one is below it.
func TestCleanableEndBounds(t *testing.T) {
	var l testLog
	l.produce(t, noProducer, false, rec("a", "1", 10))
	l.produce(t, noProducer, false, rec("a", "2", 11))
	l.produce(t, noProducer, false, rec("a", "3", 12))
	res, out := l.compact(t, decision(2, 100, 0))
	wantRead(t, out, "a=2@1", "a=3@2")
	if res.CleanedTo != 2 || out.firstDirty != 2 {
		t.Fatalf("cleaned to %d", res.CleanedTo)
	}
	_, out = out.compact(t, decision(3, 100, 0))
	wantRead(t, out, "a=3@2")
}

// TestTombstoneHorizon shows a tombstone removes its key's older values at
// once, is stamped with the first pass's time plus delete.retention.ms,
// stays through passes up to that horizon and goes in the first pass after.
func TestTombstoneHorizon(t *testing.T) {
	var l testLog
	l.produce(t, noProducer, false, rec("a", "1", 10), rec("b", "1", 10))
	l.produce(t, noProducer, false, rec("a", "-", 11))
	_, out := l.compact(t, decision(3, 1000, 500))
	wantRead(t, out, "b=1@1", "a=-@2")
	_, out = out.compact(t, decision(3, 1500, 0))
	wantRead(t, out, "b=1@1", "a=-@2")
	res, out := out.compact(t, decision(3, 1501, 0))
	wantRead(t, out, "b=1@1")
	if res.TombstonesRemoved != 1 {
		t.Fatalf("tombstones removed %d", res.TombstonesRemoved)
	}
}

// TestTombstoneHorizonFromFirstPass shows the horizon counts from the pass
// that first keeps the tombstone, not from its write: a tombstone written
// long before still gets delete.retention.ms.
func TestTombstoneHorizonFromFirstPass(t *testing.T) {
	var l testLog
	l.produce(t, noProducer, false, rec("a", "-", 10))
	_, out := l.compact(t, decision(1, 1_000_000, 100))
	wantRead(t, out, "a=-@0")
	_, out = out.compact(t, decision(1, 1_000_100, 100))
	wantRead(t, out, "a=-@0")
}

// TestKeylessDropped shows a record without a key (in the log from before
// the topic was altered to compact) goes, as Kafka's cleaner drops it: it
// hides no value (a keyless record between two values of a key leaves the
// key's latest), its producer's last batch stays (empty) for idempotence,
// and one past the cleanable end is not touched.
func TestKeylessDropped(t *testing.T) {
	var l testLog
	keyless := recordbatch.Record{TimestampMs: 10, Value: []byte("x")}
	l.produce(t, noProducer, false, rec("a", "1", 10), keyless)
	l.produce(t, noProducer, false, rec("a", "2", 10), keyless)
	l.produce(t, Producer{ID: 7, Epoch: 0, BaseSequence: 0}, false, keyless)
	l.produce(t, noProducer, false, keyless)
	res, out := l.compact(t, decision(5, 100, 0))
	wantRead(t, out, "a=2@2", "=x@5")
	if res.KeylessRemoved != 3 || res.CleanedTo != 5 {
		t.Fatalf("stats %+v, want 3 keyless removed, cleaned to 5", res)
	}
	var producerKept bool
	for _, in := range out.inputs {
		if IsCompacted(in.Data) {
			b, err := DecodeBatch(in.Data)
			if err != nil {
				t.Fatal(err)
			}
			producerKept = producerKept || b.ProducerID == 7 && len(b.Records) == 0 && b.BaseOffset == 4
		}
	}
	if !producerKept {
		t.Fatalf("producer 7's last batch (all keyless) was not kept empty")
	}
}

// TestAbortedRemoved shows an aborted transaction's records go without
// hiding the key's older committed value, its marker stays until its
// horizon and then goes, and the pass reports the aborted transaction it
// forgot.
func TestAbortedRemoved(t *testing.T) {
	var l testLog
	p := Producer{ID: 4, Epoch: 1}
	l.produce(t, noProducer, false, rec("a", "1", 10))
	first := l.produce(t, p, true, rec("a", "aborted", 11), rec("z", "aborted", 11))
	l.marker(p, false, first, 12)
	l.produce(t, noProducer, false, rec("b", "1", 13))
	res, out := l.compact(t, decision(5, 1000, 10))
	wantRead(t, out, "a=1@0", "marker@3", "b=1@4")
	if res.AbortedRemoved != 2 {
		t.Fatalf("aborted removed %d", res.AbortedRemoved)
	}
	res, out = out.compact(t, decision(5, 1011, 10))
	wantRead(t, out, "a=1@0", "b=1@4")
	if want := []AbortedTxn{{ProducerID: 4, FirstOffset: 1, LastOffset: 3}}; !slices.Equal(res.AbortedForgotten, want) || res.MarkersRemoved != 1 {
		t.Fatalf("forgotten %v, markers removed %d", res.AbortedForgotten, res.MarkersRemoved)
	}
}

// TestAbortedSpansCleanableEnd shows an aborted transaction whose marker
// lies past the cleanable end (known from the aborted index) still loses
// its records below it.
func TestAbortedSpansCleanableEnd(t *testing.T) {
	var l testLog
	p := Producer{ID: 4, Epoch: 1}
	l.produce(t, noProducer, false, rec("a", "1", 10))
	first := l.produce(t, p, true, rec("a", "aborted", 11))
	l.produce(t, noProducer, false, rec("b", "1", 12))
	l.marker(p, false, first, 13)
	_, out := l.compact(t, decision(3, 1000, 10))
	wantRead(t, out, "a=1@0", "b=1@2", "marker@3")
}

// TestCommitMarkerKeptWhileRecordsRemain shows a commit marker stays past
// its horizon while a record of its transaction remains, and goes once the
// last one is superseded and the horizon has passed.
func TestCommitMarkerKeptWhileRecordsRemain(t *testing.T) {
	var l testLog
	p := Producer{ID: 4, Epoch: 1}
	first := l.produce(t, p, true, rec("a", "1", 10), rec("b", "1", 10))
	l.marker(p, true, first, 11)
	l.produce(t, noProducer, false, rec("a", "2", 12))
	_, out := l.compact(t, decision(4, 1000, 10))
	wantRead(t, out, "b=1@1", "marker@2", "a=2@3")
	_, out = out.compact(t, decision(4, 2000, 10))
	wantRead(t, out, "b=1@1", "marker@2", "a=2@3")
	out.produce(t, noProducer, false, rec("b", "2", 13))
	_, out = out.compact(t, decision(5, 3000, 10))
	wantRead(t, out, "a=2@3", "b=2@4")
}

// TestLastBatchOfProducerKept shows a producer's last data batch stays,
// empty, with its offset range, epoch and sequence when all its records
// are superseded, while its earlier emptied batch goes.
func TestLastBatchOfProducerKept(t *testing.T) {
	var l testLog
	p := Producer{ID: 9, Epoch: 3, BaseSequence: 0}
	l.produce(t, p, false, rec("a", "1", 10))
	p.BaseSequence = 1
	l.produce(t, p, false, rec("a", "2", 11), rec("b", "2", 11))
	l.produce(t, noProducer, false, rec("a", "3", 12), rec("b", "3", 12))
	_, out := l.compact(t, decision(5, 100, 0))
	wantRead(t, out, "a=3@3", "b=3@4")
	if len(out.inputs) != 2 {
		t.Fatalf("%d batches, want the producer's empty last one and the plain one", len(out.inputs))
	}
	b, err := DecodeBatch(out.inputs[0].Data)
	if err != nil || b.BaseOffset != 1 || b.LastOffsetDelta != 1 || b.ProducerID != 9 || b.ProducerEpoch != 3 ||
		b.BaseSequence != 1 || len(b.Records) != 0 || b.MaxTimestampMs != 11 {
		t.Fatalf("kept batch %+v, %v", b, err)
	}
}

// TestMapFullPartialPass shows a map too small for the dirty section stops
// the pass at a batch boundary (MapFull, CleanedTo below the cleanable
// end), and passes continue from there to the same result as one pass
// with a map that fits.
func TestMapFullPartialPass(t *testing.T) {
	var l testLog
	for i := range 6 {
		l.produce(t, noProducer, false, rec("k"+string(rune('a'+i)), "1", 10), rec("a", "v"+string(rune('0'+i)), 10))
	}
	_, whole := l.compact(t, decision(12, 100, 0))
	small := decision(12, 100, 0)
	small.OffsetMapBytes = 6 * SlotBytes // 5 entries: "a" and three other keys fit
	res, part := l.compact(t, small)
	if !res.MapFull || res.CleanedTo != 6 {
		t.Fatalf("first pass %+v", res)
	}
	for range 10 {
		if res, part = part.compact(t, small); !res.MapFull {
			break
		}
	}
	if res.CleanedTo != 12 || res.MapFull {
		t.Fatalf("last pass %+v", res)
	}
	if got, want := keysAt(readAll(t, part.inputs)), keysAt(readAll(t, whole.inputs)); !slices.Equal(got, want) {
		t.Fatalf("partial passes %q\none pass %q", got, want)
	}
}

// TestOffsetMapTooSmall shows a batch with more records than the map
// holds is an error, not a pass that never advances.
func TestOffsetMapTooSmall(t *testing.T) {
	var l testLog
	l.produce(t, noProducer, false, rec("a", "1", 1), rec("b", "1", 1), rec("c", "1", 1))
	d := decision(3, 100, 0)
	d.OffsetMapBytes = 3 * SlotBytes
	if _, err := Compact(l.log(), d, func([]byte) error { return nil }); !errors.Is(err, ErrOffsetMapTooSmall) {
		t.Fatalf("err %v", err)
	}
}

// TestInputContract shows a log out of order, with a gap, or with a raft
// batch below the first dirty offset is refused with ErrInput, and a
// decision below the compacted prefix with ErrInvalidDecision.
func TestInputContract(t *testing.T) {
	var l testLog
	l.produce(t, noProducer, false, rec("a", "1", 1))
	l.produce(t, noProducer, false, rec("a", "2", 1))
	run := func(l testLog, d Decision) error {
		_, err := Compact(l.log(), d, func([]byte) error { return nil })
		return err
	}
	swapped := l
	swapped.inputs = []Input{l.inputs[1], l.inputs[0]}
	gap := l
	gap.inputs = []Input{l.inputs[0], {BaseOffset: 5, Data: l.inputs[1].Data}}
	below := l
	below.firstDirty = 1
	for name, err := range map[string]error{
		"order": run(swapped, decision(2, 1, 0)), "gap": run(gap, decision(6, 1, 0)), "below": run(below, decision(2, 1, 0)),
	} {
		if !errors.Is(err, ErrInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := run(below, decision(0, 1, 0)); !errors.Is(err, ErrInvalidDecision) {
		t.Errorf("decision below the prefix: %v", err)
	}
}

// TestKafkaFormInput shows a raft batch stored in the Kafka form is read
// through recordbatch's iterator like Strand's: offsets from its position,
// timestamps and headers kept, the producer identity carried over.
func TestKafkaFormInput(t *testing.T) {
	var l testLog
	p := Producer{ID: 5, Epoch: 1, BaseSequence: 0}
	records := []recordbatch.Record{rec("a", "1", 100), rec("b", "1", 90), rec("a", "2", 120)}
	records[1].Headers = []recordbatch.Header{{Key: "h", Value: []byte("v")}}
	data := kafkaBatch(p, false, records)
	if _, err := recordbatch.Validate(data); err != nil {
		t.Fatalf("test batch invalid: %v", err)
	}
	l.inputs = append(l.inputs, Input{BaseOffset: 0, Data: data, Producer: p})
	l.next = 3
	_, out := l.compact(t, decision(3, 1000, 0))
	got := readAll(t, out.inputs)
	wantRead(t, out, "b=1@1", "a=2@2")
	if got[0].ts != 90 || got[0].headers != `h="v";` || got[1].ts != 120 {
		t.Fatalf("read %+v", got)
	}
	b, _ := DecodeBatch(out.inputs[0].Data)
	if b.ProducerID != 5 || b.ProducerEpoch != 1 || b.FirstTimestampMs != 100 || b.LastOffsetDelta != 2 {
		t.Fatalf("batch %+v", b)
	}
}

// TestBelowLogStartDropped shows rule 8: a pass drops every batch wholly
// below its decision's log start, from the compacted prefix and from the
// raft log alike (a producer's kept last batch and an abort's marker too,
// the abort then forgotten), keeps a batch the log start falls inside
// whole, puts no key of a dropped batch in the map, and a second pass with
// the same decision changes nothing.
func TestBelowLogStartDropped(t *testing.T) {
	var l testLog
	p, q := Producer{ID: 9, Epoch: 1}, Producer{ID: 4, Epoch: 1}
	l.produce(t, p, false, rec("a", "1", 10), rec("b", "1", 10))
	first := l.produce(t, q, true, rec("x", "aborted", 11))
	l.marker(q, false, first, 12)
	l.produce(t, noProducer, false, rec("a", "2", 13), rec("c", "1", 13))
	l.produce(t, noProducer, false, rec("d", "1", 14))
	_, out := l.compact(t, decision(7, 100, 0))
	wantRead(t, out, "b=1@1", "marker@3", "a=2@4", "c=1@5", "d=1@6")

	cut := decision(7, 100, 0)
	cut.LogStart = 5
	res, out := out.compact(t, cut)
	wantRead(t, out, "a=2@4", "c=1@5", "d=1@6")
	if want := []AbortedTxn{{ProducerID: 4, FirstOffset: 2, LastOffset: 3}}; !slices.Equal(res.AbortedForgotten, want) || res.RetentionRemoved != 2 {
		t.Fatalf("forgotten %v, removed below the log start %d", res.AbortedForgotten, res.RetentionRemoved)
	}
	again, out2 := out.compact(t, cut)
	if again.Digest != res.Digest || len(out2.inputs) != len(out.inputs) {
		t.Fatalf("a second pass changed the prefix: %+v", again)
	}

	// From the raft log: the dropped batches' keys hide nothing (a=1 at 0
	// is gone with its batch, not by a newer value), the producer's last
	// batch below the log start is not kept.
	var r testLog
	r.produce(t, p, false, rec("a", "1", 10), rec("b", "1", 10))
	r.produce(t, noProducer, false, rec("c", "1", 11))
	r.produce(t, noProducer, false, rec("b", "2", 12))
	cut = decision(4, 100, 0)
	cut.LogStart = 2
	res, out = r.compact(t, cut)
	wantRead(t, out, "c=1@2", "b=2@3")
	if res.RetentionRemoved != 2 || res.BatchesOut != 2 {
		t.Fatalf("result %+v", res)
	}
}

// TestExpiredProducerLastBatchDropped shows rule 6 bounded by producer
// expiry: a producer's last batch with no survivor is kept while the
// producer is younger than ProducerExpirationMs at the decision, and goes
// once it expired (its newest timestamp that much before the decision's
// time), as Kafka forgets an expired producer; a last batch with a
// survivor stays either way, and a second pass changes nothing.
func TestExpiredProducerLastBatchDropped(t *testing.T) {
	var l testLog
	p, q := Producer{ID: 9, Epoch: 3}, Producer{ID: 7, Epoch: 1}
	l.produce(t, p, false, rec("a", "1", 10))
	l.produce(t, q, false, rec("c", "1", 11))
	l.produce(t, noProducer, false, rec("a", "2", 12))
	_, young := l.compact(t, decision(3, 10+ProducerExpirationMs-1, 0))
	wantRead(t, young, "c=1@1", "a=2@2")
	if len(young.inputs) != 3 {
		t.Fatalf("%d batches before expiry, want producer 9's empty last one kept", len(young.inputs))
	}
	res, expired := l.compact(t, decision(3, 10+ProducerExpirationMs, 0))
	wantRead(t, expired, "c=1@1", "a=2@2")
	if len(expired.inputs) != 2 || res.BatchesOut != 2 {
		t.Fatalf("%d batches once expired, want producer 9's empty last one gone", len(expired.inputs))
	}
	if b, err := DecodeBatch(expired.inputs[0].Data); err != nil || b.ProducerID != 7 {
		t.Fatalf("producer 7's batch with a survivor: %+v, %v", b, err)
	}
	again, _ := expired.compact(t, decision(3, 10+ProducerExpirationMs, 0))
	if again.Digest != res.Digest {
		t.Fatal("a second pass changed the prefix")
	}
}
