package linearizability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// concurrentIndefinite is linearizable only through its indefinite
// operations: b (pending forever) lands at 0 before a's ack at 1, d times
// out but is read at 2 much later, c times out and never takes effect.
func concurrentIndefinite() *builder {
	b := newBuilder()
	b.produceOK(1, "a", 0, 100, 1)
	b.producePending(2, "b", 10)
	b.produceTimeout(4, "c", 20, 200)
	b.produceTimeout(6, "d", 30, 40)
	b.fetch(3, 0, 50, 60, 1, "b")
	b.fetch(3, 0, 150, 160, 2, "b", "a")
	b.list(5, OffsetLatest, 170, 180, 2)
	b.fetch(3, 2, 300, 310, 3, "d")
	return b
}

// A concurrent history with pending and timed-out produces is accepted,
// with and without a final drain.
func TestModelAcceptsConcurrentIndefinite(t *testing.T) {
	for _, opts := range []Options{{}, {FinalDrain: true}} {
		b := concurrentIndefinite()
		if err := CheckLinearizable(b.h, opts); err != nil {
			t.Fatalf("opts %+v: %v", opts, err)
		}
		mustPass(t, b.h, opts)
	}
}

// notLinearizable are histories the log model must refuse; none of them
// breaks a single client's view, so only the model can catch them.
var notLinearizable = map[string]func(b *builder){
	"stale fetch: hwm back in real time": func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.fetch(2, 0, 20, 30, 1, "a")
		b.fetch(3, 0, 40, 50, 0)
	},
	"value read, then unwritten": func(b *builder) {
		b.producePending(1, "a", 0)
		b.producePending(2, "b", 0)
		b.fetch(3, 0, 10, 20, 1, "a")
		b.fetch(3, 0, 30, 40, 1, "a")
		b.list(4, OffsetLatest, 50, 60, 0)
	},
	"acknowledged offsets out of real-time order": func(b *builder) {
		b.producePending(3, "x", 0)
		b.produceOK(1, "a", 0, 10, 1)
		b.produceOK(2, "b", 20, 30, 0)
	},
	"acknowledged write absent from a later read": func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.list(2, OffsetLatest, 20, 30, 0)
	},
	"fetch sees a write before it was called": func(b *builder) {
		b.fetch(2, 0, 0, 10, 1, "a")
		b.produceOK(1, "a", 20, 30, 0)
	},
	"out of range below the high-water mark": func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		id := b.h.CallFetch(2, tp0, 0, 0, 20)
		b.h.ReturnOutOfRange(id, 0, 1, 30)
	},
	"a fetch of the partition alone answered empty below the high-water mark": func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		id := b.h.CallFetch(2, tp0, 0, 0, 20)
		b.h.Alone(id)
		b.h.ReturnFetch(id, nil, 1, 0, 30)
	},
	"more records than asked for": func(b *builder) {
		b.produceOK(1, "a", 0, 10, 0)
		b.produceOK(1, "b", 11, 20, 1)
		id := b.h.CallFetch(2, tp0, 0, 1, 30)
		b.h.ReturnFetch(id, records(0, "a", "b"), 2, 0, 40)
	},
}

// Each non-linearizable history is refused with a NotLinearizableError that
// names the partition, and the visualization is written where asked.
func TestModelRefusesNonLinearizable(t *testing.T) {
	for name, build := range notLinearizable {
		t.Run(name, func(t *testing.T) {
			b := newBuilder()
			build(b)
			viz := filepath.Join(t.TempDir(), "sub", "log.html")
			err := CheckLinearizable(b.h, Options{VizPath: viz})
			var nl *NotLinearizableError
			if !errors.As(err, &nl) {
				t.Fatalf("want NotLinearizableError, got %v", err)
			}
			if len(nl.Partitions) != 1 || nl.Partitions[0] != "t/0" {
				t.Errorf("partitions %v, want [t/0]", nl.Partitions)
			}
			if nl.VizPath != viz || !strings.Contains(err.Error(), viz) {
				t.Errorf("error %q does not carry the visualization path %s", err, viz)
			}
			if st, statErr := os.Stat(viz); statErr != nil || st.Size() == 0 {
				t.Errorf("visualization not written: %v", statErr)
			}
			if rerr := Check(b.h, Options{}).Err(); !errors.As(rerr, &nl) {
				t.Errorf("report error does not wrap the model's: %v", rerr)
			}
		})
	}
}

// With StaleFetch the stale read is accepted (hwm <= len), while a read of a
// record no produce could have appended is still refused.
func TestModelStaleFetchRelaxesOnlyFreshness(t *testing.T) {
	b := newBuilder()
	notLinearizable["stale fetch: hwm back in real time"](b)
	if err := CheckLinearizable(b.h, Options{StaleFetch: true}); err != nil {
		t.Fatalf("stale read refused under StaleFetch: %v", err)
	}
	b = newBuilder()
	notLinearizable["fetch sees a write before it was called"](b)
	if err := CheckLinearizable(b.h, Options{StaleFetch: true}); err == nil {
		t.Fatal("read from the future accepted under StaleFetch")
	}
}

// Partitions are independent: a history that would be illegal as one log is
// fine split across two partitions, and the failing one alone is named.
func TestModelPartitionsByTopicPartition(t *testing.T) {
	h := NewHistory()
	tp1 := TopicPartition{Topic: "t", Partition: 1}
	for i, tp := range []TopicPartition{tp0, tp1} {
		id := h.CallProduce(1, tp, "", []string{"a", "b"}[i], int64(10*i))
		h.ReturnProduce(id, 0, int64(10*i+5))
	}
	if err := CheckLinearizable(h, Options{}); err != nil {
		t.Fatalf("two partitions, offset 0 each: %v", err)
	}
	id := h.CallListOffsets(2, tp1, OffsetLatest, 100)
	h.ReturnOffset(id, 5, 110)
	var nl *NotLinearizableError
	if err := CheckLinearizable(h, Options{}); !errors.As(err, &nl) || len(nl.Partitions) != 1 || nl.Partitions[0] != "t/1" {
		t.Fatalf("want t/1 alone refused, got %v", err)
	}
}

// A batch takes effect atomically at consecutive offsets.
func TestModelBatch(t *testing.T) {
	h := NewHistory()
	id := h.CallProduceBatch(1, tp0, []Record{{Value: "a"}, {Value: "b"}}, 0)
	h.ReturnProduce(id, 0, 10)
	h.CallProduceBatch(2, tp0, []Record{{Value: "c"}, {Value: "d"}}, 20) // indefinite: all or nothing
	f := h.CallFetch(3, tp0, 1, 0, 30)
	h.ReturnFetch(f, records(1, "b", "c"), 3, 0, 40)
	if err := CheckLinearizable(h, Options{}); err == nil {
		t.Fatal("half a batch visible was accepted")
	}
	h2 := NewHistory()
	id = h2.CallProduceBatch(1, tp0, []Record{{Value: "a"}, {Value: "b"}}, 0)
	h2.ReturnProduce(id, 0, 10)
	h2.CallProduceBatch(2, tp0, []Record{{Value: "c"}, {Value: "d"}}, 20)
	f = h2.CallFetch(3, tp0, 1, 0, 30)
	h2.ReturnFetch(f, records(1, "b", "c", "d"), 4, 0, 40)
	if err := CheckLinearizable(h2, Options{}); err != nil {
		t.Fatalf("whole batch visible refused: %v", err)
	}
}

// Committed group offsets behave as one register per (group, partition);
// an indefinite commit may or may not land, but not land and then vanish.
func TestOffsetsModel(t *testing.T) {
	commit := func(h *History, c ClientID, g string, off, call, ret int64, ok bool) {
		id := h.CallCommitOffset(c, g, tp0, off, call)
		if ok {
			h.ReturnCommitted(id, ret)
		}
	}
	read := func(h *History, c ClientID, g string, call, ret, off int64) {
		id := h.CallFetchCommitted(c, g, tp0, call)
		h.ReturnOffset(id, off, ret)
	}
	h := NewHistory()
	read(h, 1, "g", 0, 5, -1)
	commit(h, 1, "g", 5, 10, 20, true)
	read(h, 2, "g", 30, 40, 5)
	read(h, 2, "h", 30, 40, -1) // another group is independent
	commit(h, 1, "g", 7, 50, 0, false)
	read(h, 2, "g", 60, 70, 5) // the indefinite commit not yet landed
	read(h, 2, "g", 80, 90, 7) // now it has
	if err := CheckLinearizable(h, Options{}); err != nil {
		t.Fatalf("valid offsets history refused: %v", err)
	}
	read(h, 3, "g", 100, 110, 5) // landed, then vanished
	viz := filepath.Join(t.TempDir(), "v.html")
	err := CheckLinearizable(h, Options{VizPath: viz})
	var nl *NotLinearizableError
	if !errors.As(err, &nl) || nl.Model != "group-offsets" || len(nl.Partitions) != 1 || nl.Partitions[0] != "g t/0" {
		t.Fatalf("want group-offsets refusal of g t/0, got %v", err)
	}
	if nl.VizPath != filepath.Join(filepath.Dir(viz), "v-offsets.html") {
		t.Fatalf("offsets visualization at %q", nl.VizPath)
	}
}

// A check that runs out of time is inconclusive, never a pass: a model whose
// step waits for the deadline makes Porcupine time out deterministically.
func TestTimeoutIsInconclusive(t *testing.T) {
	model := porcupine.Model{
		Init: func() interface{} { return 0 },
		StepContext: func(ctx context.Context, s, in, out interface{}) (bool, interface{}) {
			<-ctx.Done()
			return false, s
		},
	}
	history := []porcupine.Operation{{Input: 1, Call: 0, Output: 1, Return: 1}}
	err := checkModel("blocking", model, history, time.Millisecond, "")
	if !errors.Is(err, ErrInconclusive) {
		t.Fatalf("want ErrInconclusive, got %v", err)
	}
	if rerr := (Report{Linearizable: err}).Err(); !errors.Is(rerr, ErrInconclusive) {
		t.Fatalf("report hides inconclusive: %v", rerr)
	}
}

// The log state shares backings safely: diverging appends from one state
// never disturb each other, and equal logs built apart compare equal.
func TestLogStatePersistence(t *testing.T) {
	s0 := newLogState().appendValues([]string{"a"})
	s1 := s0.appendValues([]string{"b"})
	s2 := s0.appendValues([]string{"c", "d"})
	s3 := s0.appendValues([]string{"b"})
	if got := describeLogState(s1); got != "len=2 start=0 [a b]" {
		t.Fatalf("s1 = %s", got)
	}
	if got := describeLogState(s2); got != "len=3 start=0 [a c d]" {
		t.Fatalf("s2 = %s", got)
	}
	if !logStatesEqual(s1, s3) || s1.hash() != s3.hash() {
		t.Fatal("equal logs differ")
	}
	apart := newLogState().appendValues([]string{"a", "b"})
	if !logStatesEqual(s1, apart) || logStatesEqual(s1, s2) {
		t.Fatal("equality wrong across backings")
	}
	if logStatesEqual(newLogState().appendValues([]string{"ab"}), newLogState().appendValues([]string{"a", "b"})) {
		t.Fatal("value boundaries ignored")
	}
}

// Sixty produces pending for the whole history, 25 of which took effect
// unseen (acknowledged offsets skip over them), are checked conclusively:
// credits keep Porcupine from trying every order of every subset of them, so
// even the refusal, which must search everything, ends at once.
func TestModelManyUnseenIndefiniteStaysTractable(t *testing.T) {
	b := newBuilder()
	for i := 0; i < 60; i++ {
		b.producePending(ClientID(100+i), fmt.Sprintf("p%d", i), int64(i))
	}
	offset, now := int64(0), int64(100)
	for i := 0; i < 200; i++ {
		if i%8 == 3 {
			offset++ // a pending produce took effect here
		}
		b.produceOK(1, fmt.Sprintf("a%d", i), now, now+5, offset)
		offset++
		b.list(2, OffsetLatest, now+10, now+15, offset)
		now += 20
	}
	b.fetch(2, offset-1, now, now+5, offset, "a199")
	if err := CheckLinearizable(b.h, Options{Timeout: 20 * time.Second}); err != nil {
		t.Fatalf("tractable history not accepted: %v", err)
	}
	b.list(3, OffsetLatest, now+10, now+15, offset+36) // more than could ever have been written
	var nl *NotLinearizableError
	if err := CheckLinearizable(b.h, Options{Timeout: 20 * time.Second}); !errors.As(err, &nl) {
		t.Fatalf("want refusal, got %v", err)
	}
}

// An unseen indefinite produce may shift offsets only after its call: it
// can explain a gap in acknowledged offsets later, never earlier.
func TestModelUnseenProduceRespectsRealTime(t *testing.T) {
	ok := newBuilder()
	ok.produceOK(1, "a", 0, 100, 1)       // offset 0 went to x
	ok.list(2, OffsetLatest, 10, 20, 0)   // before x was called
	ok.produceTimeout(3, "x", 50, 60)     // never read
	ok.list(2, OffsetLatest, 110, 120, 2) // x and a
	if err := CheckLinearizable(ok.h, Options{}); err != nil {
		t.Fatalf("gap filled by a later-called unseen produce refused: %v", err)
	}
	bad := newBuilder()
	bad.produceOK(1, "a", 0, 100, 1)
	bad.list(2, OffsetLatest, 10, 20, 1) // offset 0 filled before 20
	bad.produceTimeout(3, "x", 50, 60)   // but the only candidate was called at 50
	if err := CheckLinearizable(bad.h, Options{}); err == nil {
		t.Fatal("unseen produce took effect before its call")
	}
	empty := newBuilder()
	empty.producePending(3, "x", 0)
	empty.fetch(2, 0, 10, 20, 1, "") // a record with no value cannot be x
	if err := CheckLinearizable(empty.h, Options{}); err == nil {
		t.Fatal("an empty read value matched an unseen produce")
	}
}

// Sixty batches of 1 to 8 records pending for the whole history, some of
// which took effect unseen, are checked at once: pooled credits give one
// state per length (counting batch sizes exactly gave one per sub-multiset
// of sizes, and a time-limited simulator seed ran Porcupine out of time).
func TestModelUnseenBatchesOfManySizesStayTractable(t *testing.T) {
	b := newBuilder()
	for i := 0; i < 60; i++ {
		vs := make([]Record, 1+i%8)
		for j := range vs {
			vs[j] = Record{Value: fmt.Sprintf("p%d.%d", i, j)}
		}
		b.h.CallProduceBatch(ClientID(100+i), tp0, vs, int64(i))
	}
	offset, now := int64(0), int64(100)
	for i := 0; i < 200; i++ {
		if i%8 == 3 {
			offset += int64(1 + i%5) // some pending records took effect here
		}
		b.produceOK(1, fmt.Sprintf("a%d", i), now, now+5, offset)
		offset++
		b.list(2, OffsetLatest, now+10, now+15, offset)
		now += 20
	}
	if err := CheckLinearizable(b.h, Options{Timeout: 20 * time.Second}); err != nil {
		t.Fatalf("tractable history not accepted: %v", err)
	}
	b.list(3, OffsetLatest, now+10, now+15, offset+300) // more than could ever have been written
	var nl *NotLinearizableError
	if err := CheckLinearizable(b.h, Options{Timeout: 20 * time.Second}); !errors.As(err, &nl) {
		t.Fatalf("want refusal, got %v", err)
	}
}

// TestOffsetsModelEpochs shows the member-epoch fence: a commit made in an
// epoch older than one the member was given by a heartbeat that returned
// before the commit began is refused (a zombie's commit landed); the same
// commit overlapping the heartbeat, a commit in the new epoch, another
// member's commit and a memberless commit are fine; an indefinite stale
// commit may only have had no effect.
func TestOffsetsModelEpochs(t *testing.T) {
	tp1 := TopicPartition{Topic: "t", Partition: 1}
	grant := func(h *History, member string, epoch int32, call, ret int64) {
		id := h.CallMemberEpoch(1, "g", member, call)
		h.ReturnMemberEpoch(id, epoch, ret)
	}
	commit := func(h *History, member string, epoch int32, tp TopicPartition, off, call, ret int64, ok bool) {
		id := h.CallCommitOffsetAs(2, "g", member, epoch, tp, off, call)
		if ok {
			h.ReturnCommitted(id, ret)
		} else {
			h.Indefinite(id, ret)
		}
	}
	read := func(h *History, tp TopicPartition, call, ret, off int64) {
		id := h.CallFetchCommitted(3, "g", tp, call)
		h.ReturnOffset(id, off, ret)
	}
	h := NewHistory()
	grant(h, "a", 1, 0, 10)
	commit(h, "a", 1, tp0, 5, 20, 30, true)
	commit(h, "a", 1, tp1, 6, 35, 60, true) // overlaps the grant of epoch 2: may come first
	grant(h, "a", 2, 40, 50)
	commit(h, "a", 2, tp0, 7, 70, 80, true)
	commit(h, "b", 1, tp1, 8, 90, 100, true) // b's own epochs
	commit(h, "", 0, tp1, 9, 110, 120, true) // no member: not fenced
	commit(h, "a", 1, tp0, 99, 130, 140, false)
	read(h, tp0, 150, 160, 7) // the stale indefinite commit did not land
	read(h, tp1, 150, 160, 9)
	if err := CheckLinearizable(h, Options{}); err != nil {
		t.Fatalf("valid fenced history refused: %v", err)
	}
	commit(h, "a", 1, tp0, 11, 170, 180, true) // a zombie's commit landed
	var nl *NotLinearizableError
	if err := CheckLinearizable(h, Options{}); !errors.As(err, &nl) || nl.Model != "group-offsets" {
		t.Fatalf("want group-offsets refusal of a's epoch-1 commit after epoch 2, got %v", err)
	}
}

// A partition never drained (a deleted topic's) is checked like any other:
// an indefinite produce called after every observation returned is left
// out, and a refusal names the partition.
func TestModelUndrainedPartition(t *testing.T) {
	tp1 := TopicPartition{Topic: "t", Partition: 1}
	h := NewHistory()
	h.MarkDrained(tp0)
	id := h.CallProduce(1, tp0, "", "a", 0)
	h.ReturnProduce(id, 0, 5)
	f := h.CallFetch(2, tp0, 0, 0, 10)
	h.ReturnFetch(f, records(0, "a"), 1, 0, 15)
	id = h.CallProduce(1, tp1, "", "b", 20)
	h.ReturnProduce(id, 0, 25)
	h.CallProduce(3, tp1, "", "late", 40) // indefinite, after every tp1 observation
	if err := Check(h, Options{}).Err(); err != nil {
		t.Fatalf("linearizable history: %v", err)
	}
	f = h.CallListOffsets(2, tp1, OffsetLatest, 30)
	h.ReturnOffset(f, 7, 35)
	var nl *NotLinearizableError
	if err := CheckLinearizable(h, Options{}); !errors.As(err, &nl) || len(nl.Partitions) != 1 || nl.Partitions[0] != "t/1" {
		t.Fatalf("want undrained t/1 refused, got %v", err)
	}
}

// An empty answer below the high-water mark is accepted for a fetch not
// marked Alone (a fetch of several partitions may leave one out once its
// byte budget is spent), and refused once marked (notLinearizable).
func TestModelEmptyFetchOnlyWhenNotAlone(t *testing.T) {
	b := newBuilder()
	b.produceOK(1, "a", 0, 10, 0)
	id := b.h.CallFetch(2, tp0, 0, 0, 20)
	b.h.ReturnFetch(id, nil, 1, 0, 30)
	if err := CheckLinearizable(b.h, Options{}); err != nil {
		t.Fatalf("empty answer of a fetch of several partitions refused: %v", err)
	}
}
