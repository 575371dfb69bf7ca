package linearizability

import (
	"fmt"
	"strings"
	"testing"
)

// anomalyCases are hand-built histories, each holding exactly one kind of
// log anomaly; name is the kind they must produce and nothing else.
var anomalyCases = []struct {
	kind  AnomalyKind
	opts  Options
	build func(b *builder)
}{
	{LostWrite, Options{}, func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.producePending(2, "b", 0)
		b.fetch(3, 0, 20, 30, 1, "b") // offset 0 acknowledged as a, read as b
	}},
	{Duplicate, Options{}, func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.fetch(3, 0, 20, 30, 2, "a", "a") // a written twice (re-applied)
	}},
	{InconsistentOffsets, Options{}, func(b *builder) {
		b.producePending(1, "a", 0)
		b.producePending(2, "b", 0)
		b.fetch(3, 0, 10, 20, 1, "a")
		b.fetch(4, 0, 10, 20, 1, "b")
	}},
	{NonmonotonicSend, Options{}, func(b *builder) {
		b.producePending(2, "x", 0)
		b.produceOK(1, "a", 0, 10, 1)
		b.produceOK(1, "b", 20, 30, 0)
	}},
	{NonmonotonicSend, Options{}, func(b *builder) { // the same offset twice
		b.produceOK(1, "a", 0, 10, 0)
		b.produceOK(1, "b", 20, 30, 0)
	}},
	{PollSkip, Options{}, func(b *builder) { // inside one fetch
		b.produceOK(1, "a", 0, 10, 0)
		b.produceOK(1, "b", 11, 20, 1)
		b.produceOK(1, "c", 21, 30, 2)
		b.fetchRecords(3, 0, 40, 50, 3, 0, []Record{{Offset: 0, Value: "a"}, {Offset: 2, Value: "c"}})
	}},
	{PollSkip, Options{}, func(b *builder) { // between polls
		b.produceOK(1, "a", 0, 10, 0)
		b.produceOK(1, "b", 11, 20, 1)
		b.produceOK(1, "c", 21, 30, 2)
		b.fetch(3, 0, 40, 50, 3, "a")
		b.poll(3, 2, 60, 70, 3, "c") // position after the fetch was 1
	}},
	{NonmonotonicPoll, Options{}, func(b *builder) { // inside one fetch
		b.produceOK(1, "a", 0, 10, 0)
		b.produceOK(1, "b", 11, 20, 1)
		b.fetchRecords(3, 1, 40, 50, 2, 0, []Record{{Offset: 0, Value: "a"}})
	}},
	{NonmonotonicPoll, Options{}, func(b *builder) { // between polls
		b.produceOK(1, "a", 0, 10, 0)
		b.produceOK(1, "b", 11, 20, 1)
		b.fetch(3, 0, 40, 50, 2, "a", "b")
		b.poll(3, 1, 60, 70, 2, "b") // position after the fetch was 2
	}},
	{G1a, Options{}, func(b *builder) {
		b.produceFailed(1, "a", 0, 10)
		b.fetch(3, 0, 20, 30, 1, "a")
	}},
	{Unseen, Options{FinalDrain: true}, func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.produceOK(1, "b", 11, 20, 1)
		b.fetch(3, 0, 40, 50, 1, "a") // the drain ends before b
	}},
	{KeyOrder, Options{}, func(b *builder) {
		b.producePending(3, "x", 0)
		b.produceKeyOK(1, "k", "a", 0, 10, 1)
		b.produceKeyOK(2, "k", "b", 20, 30, 0) // called after a was acknowledged
	}},
	{ReadBeyondHighWatermark, Options{}, func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.producePending(1, "b", 11)
		b.fetch(3, 0, 20, 30, 1, "a", "b")
	}},
	{NonmonotonicHighWatermark, Options{}, func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.fetch(3, 0, 20, 30, 1, "a")
		b.list(3, OffsetLatest, 40, 50, 0)
	}},
	{NonmonotonicLogStart, Options{}, func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.fetchRecords(3, 1, 20, 30, 1, 1, nil)
		b.list(3, OffsetEarliest, 40, 50, 0)
	}},
}

// Each hand-built anomalous history is reported with exactly its anomaly
// kind, and the combined report fails.
func TestCheckLogFindsEachAnomaly(t *testing.T) {
	covered := map[AnomalyKind]bool{}
	for i, tc := range anomalyCases {
		t.Run(fmt.Sprintf("%d-%s", i, tc.kind), func(t *testing.T) {
			b := newBuilder()
			tc.build(b)
			as := CheckLog(b.h, tc.opts)
			got := kindsOf(as, false)
			if !sameKinds(got, []AnomalyKind{tc.kind}) {
				t.Fatalf("got kinds %v, want exactly [%s]; anomalies: %v", got, tc.kind, as)
			}
			for _, a := range as {
				if a.TP != tp0 || len(a.Ops) == 0 || a.Detail == "" {
					t.Errorf("anomaly lacks evidence: %v", a)
				}
			}
			if Check(b.h, tc.opts).Err() == nil {
				t.Fatal("report passed a history with an anomaly")
			}
		})
		covered[tc.kind] = true
	}
	for _, k := range []AnomalyKind{LostWrite, Duplicate, InconsistentOffsets, NonmonotonicSend, PollSkip,
		NonmonotonicPoll, G1a, Unseen, KeyOrder, ReadBeyondHighWatermark, NonmonotonicHighWatermark, NonmonotonicLogStart} {
		if !covered[k] {
			t.Errorf("no case for %s", k)
		}
	}
}

// validHistory is a concurrent history with keys, polls, an indefinite
// produce that took effect, one that did not, a definite failure and a final
// drain: it has no anomaly and is linearizable.
func validHistory() *builder {
	b := newBuilder()
	b.produceKeyOK(1, "k", "a", 0, 10, 0)
	b.produceKeyOK(2, "k", "b", 5, 15, 1)
	b.produceTimeout(4, "c", 12, 40) // took effect: read at 2
	b.producePending(5, "d", 13)     // never took effect
	b.produceFailed(6, "e", 14, 16)
	b.fetch(3, 0, 20, 30, 2, "a", "b")
	b.poll(3, 2, 31, 35, 2)
	b.poll(3, 2, 50, 55, 3, "c")
	b.list(3, OffsetLatest, 56, 57, 3)
	b.list(3, OffsetEarliest, 56, 57, 0)
	b.fetch(7, 0, 100, 110, 3, "a", "b", "c") // the final drain
	return b
}

// A valid history passes every check, with and without the final drain.
func TestCheckLogValidHistoryPasses(t *testing.T) {
	for _, opts := range []Options{{}, {FinalDrain: true}, {StaleFetch: true}} {
		b := validHistory()
		if as := CheckLog(b.h, opts); len(as) != 0 {
			t.Fatalf("opts %+v: anomalies in a valid history: %v", opts, as)
		}
		mustPass(t, b.h, opts)
	}
}

// MarkDrained enables the unseen check on one partition only.
func TestMarkDrainedPerPartition(t *testing.T) {
	h := NewHistory()
	tp1 := TopicPartition{Topic: "t", Partition: 1}
	for _, tp := range []TopicPartition{tp0, tp1} {
		id := h.CallProduce(1, tp, "", "a"+tp.String(), 0)
		h.ReturnProduce(id, 0, 10)
	}
	h.MarkDrained(tp1) // drained, yet nothing read: a/1 unseen; t/0 not drained
	as := CheckLog(h, Options{})
	if len(as) != 1 || as[0].Kind != Unseen || as[0].TP != tp1 {
		t.Fatalf("want one unseen on t/1, got %v", as)
	}
}

// Intervals are closed, as in Porcupine: an op returning at the instant
// another is called is concurrent with it, so the real-time checks (key
// order, a client's high-water mark) do not order them.
func TestRealTimeChecksUseClosedIntervals(t *testing.T) {
	b := newBuilder()
	b.producePending(3, "x", 0)
	b.produceKeyOK(1, "k", "a", 0, 10, 1)
	b.produceKeyOK(2, "k", "b", 10, 20, 0) // called as a returned: concurrent
	b.fetch(4, 0, 30, 40, 2, "b", "a")
	b.list(4, OffsetLatest, 40, 50, 2)
	if as := CheckLog(b.h, Options{}); len(as) != 0 {
		t.Fatalf("concurrent ops ordered: %v", as)
	}
	mustPass(t, b.h, Options{})
}

// With StaleFetch, a client seeing the high-water mark go back is a warning:
// reported, but the report passes.
func TestStaleFetchDowngradesRegressionToWarning(t *testing.T) {
	b := newBuilder()
	b.produceOK(1, "a", 0, 10, 0)
	b.fetch(3, 0, 20, 30, 1, "a")
	b.list(3, OffsetLatest, 40, 50, 0)
	r := Check(b.h, Options{StaleFetch: true})
	if got := kindsOf(r.Anomalies, true); !sameKinds(got, []AnomalyKind{NonmonotonicHighWatermark}) {
		t.Fatalf("warnings %v, want [nonmonotonic-hwm]", got)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("stale-fetch report failed: %v", err)
	}
	if err := Check(b.h, Options{}).Err(); err == nil {
		t.Fatal("strict report passed a regressing high-water mark")
	}
}

// The report is deterministic: the same history checked twice renders the
// same text, anomalies sorted by partition and kind.
func TestReportDeterministic(t *testing.T) {
	build := func() *History {
		h := NewHistory()
		for p := int32(3); p >= 0; p-- {
			tp := TopicPartition{Topic: "t", Partition: p}
			for i := 0; i < 3; i++ {
				id := h.CallProduce(ClientID(i), tp, "k", fmt.Sprintf("v%d-%d", p, i), int64(10*i))
				h.ReturnProduce(id, int64(2-i), int64(10*i+5)) // offsets go down: send and key order
			}
			id := h.CallFetch(9, tp, 0, 0, 100)
			h.ReturnFetch(id, records(0, fmt.Sprintf("v%d-0", p), fmt.Sprintf("v%d-0", p)), 2, 0, 110)
		}
		return h
	}
	r1, r2 := Check(build(), Options{}), Check(build(), Options{})
	if r1.Err() == nil || r1.Err().Error() != r2.Err().Error() {
		t.Fatalf("reports differ or pass:\n%v\n---\n%v", r1.Err(), r2.Err())
	}
	for i := 1; i < len(r1.Anomalies); i++ {
		a, b := r1.Anomalies[i-1], r1.Anomalies[i]
		if b.TP.less(a.TP) || (a.TP == b.TP && b.Kind < a.Kind) {
			t.Fatalf("anomalies out of order: %v before %v", a, b)
		}
	}
	if !strings.Contains(r1.Err().Error(), "t/0") {
		t.Fatalf("report does not name partitions: %v", r1.Err())
	}
}

// Recording misuse is a caller bug and panics: a value produced twice, a
// double return, a return before the call.
func TestHistoryPreconditionsPanic(t *testing.T) {
	cases := map[string]func(h *History){
		"duplicate value": func(h *History) {
			h.CallProduce(1, tp0, "", "a", 0)
			h.CallProduce(2, tp0, "", "a", 1)
		},
		"double return": func(h *History) {
			id := h.CallProduce(1, tp0, "", "a", 0)
			h.ReturnProduce(id, 0, 1)
			h.Fail(id, 2)
		},
		"return before call": func(h *History) {
			id := h.CallFetch(1, tp0, 0, 0, 10)
			h.Indefinite(id, 5)
		},
		"wrong kind": func(h *History) {
			id := h.CallFetch(1, tp0, 0, 0, 10)
			h.ReturnProduce(id, 0, 11)
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f(NewHistory())
		})
	}
}

// A consumer whose position fell below the log start gets out of range
// naming the log start and may go on from exactly there (R22: an explicit
// reset, not a skip); going on past it is still a poll skip.
func TestPollAfterLogStartMoved(t *testing.T) {
	for _, c := range []struct {
		name     string
		resumeAt int64
		want     []AnomalyKind
	}{
		{"from the log start", 2, nil},
		{"past the log start", 3, []AnomalyKind{PollSkip}},
	} {
		b := newBuilder()
		b.produceOK(1, "a", 0, 10, 0)
		b.produceOK(1, "b", 11, 20, 1)
		b.produceOK(1, "c", 21, 30, 2)
		b.produceOK(1, "d", 31, 40, 3)
		id := b.h.CallPoll(3, tp0, 0, 0, 50)
		b.h.ReturnOutOfRange(id, 2, 4, 60) // trimmed below 2
		values := map[int64][]string{2: {"c", "d"}, 3: {"d"}}[c.resumeAt]
		rs := records(c.resumeAt, values...)
		pid := b.h.CallPoll(3, tp0, c.resumeAt, 0, 70)
		b.h.ReturnFetch(pid, rs, 4, 2, 80)
		got := kindsOf(CheckLog(b.h, Options{}), false)
		if !sameKinds(got, c.want) {
			t.Errorf("%s: anomalies %v, want %v", c.name, got, c.want)
		}
	}
}
