package linearizability

import (
	"errors"
	"strings"
	"testing"
)

// plantedBugSymptoms are the histories the simulator's planted bugs (issue 3,
// item 6; node.Bugs) leave behind, in miniature. Each must fail the report,
// with the anomalies listed and a model refusal.
var plantedBugSymptoms = []struct {
	bug   string
	kinds []AnomalyKind // must all be reported
	opts  Options
	build func(b *builder)
}{
	{"AckBeforeCommit: acknowledged entry lost in failover", []AnomalyKind{LostWrite}, Options{FinalDrain: true}, func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)  // acked when proposed by the old leader
		b.produceOK(2, "b", 20, 30, 0) // the new leader reuses offset 0
		b.fetch(3, 0, 40, 50, 1, "b")  // the drain
	}},
	{"SkipFsync: acknowledged entry gone after crash", []AnomalyKind{InconsistentOffsets, LostWrite, NonmonotonicHighWatermark}, Options{}, func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.fetch(3, 0, 20, 30, 1, "a")
		b.producePending(2, "b", 35) // after the crash, b lands at 0
		b.fetch(3, 0, 40, 50, 1, "b")
		b.list(3, OffsetLatest, 60, 70, 1)
		b.fetchRecords(3, 0, 80, 90, 0, 0, nil) // and the high-water mark went back on the way
	}},
	{"FetchBeyondHighMark: uncommitted record served, then replaced", []AnomalyKind{ReadBeyondHighWatermark, InconsistentOffsets}, Options{}, func(b *builder) {
		b.produceTimeout(1, "a", 0, 50) // proposed, never committed
		b.fetch(3, 0, 10, 20, 0, "a")   // served past hwm 0
		b.produceOK(2, "b", 30, 40, 0)
		b.fetch(3, 0, 60, 70, 1, "b")
	}},
	{"ReapplyAfterRestart: committed entries applied twice", []AnomalyKind{Duplicate}, Options{FinalDrain: true}, func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.produceOK(1, "b", 11, 20, 1)
		b.fetch(3, 0, 40, 50, 4, "a", "b", "a", "b")
	}},
}

// Every planted bug's symptom fails the report, naming the expected
// anomalies, and the model refuses the history too.
func TestPlantedBugSymptomsAreCaught(t *testing.T) {
	for _, tc := range plantedBugSymptoms {
		t.Run(strings.SplitN(tc.bug, ":", 2)[0], func(t *testing.T) {
			b := newBuilder()
			tc.build(b)
			r := Check(b.h, tc.opts)
			got := map[AnomalyKind]bool{}
			for _, a := range r.Errors() {
				got[a.Kind] = true
			}
			for _, k := range tc.kinds {
				if !got[k] {
					t.Errorf("%s: %s not reported; got %v", tc.bug, k, r.Anomalies)
				}
			}
			var nl *NotLinearizableError
			if !errors.As(r.Linearizable, &nl) {
				t.Errorf("%s: model did not refuse: %v", tc.bug, r.Linearizable)
			}
			if r.Err() == nil {
				t.Errorf("%s: report passed", tc.bug)
			}
		})
	}
}
