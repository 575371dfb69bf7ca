package linearizability

import (
	"sort"
	"testing"
)

var tp0 = TopicPartition{Topic: "t", Partition: 0}

// builder writes hand-made histories on partition tp0 tersely.
type builder struct{ h *History }

func newBuilder() *builder { return &builder{h: NewHistory()} }

func (b *builder) produceOK(c ClientID, value string, call, ret, offset int64) OpID {
	id := b.h.CallProduce(c, tp0, "", value, call)
	b.h.ReturnProduce(id, offset, ret)
	return id
}

func (b *builder) produceKeyOK(c ClientID, key, value string, call, ret, offset int64) OpID {
	id := b.h.CallProduce(c, tp0, key, value, call)
	b.h.ReturnProduce(id, offset, ret)
	return id
}

func (b *builder) produceFailed(c ClientID, value string, call, ret int64) OpID {
	id := b.h.CallProduce(c, tp0, "", value, call)
	b.h.Fail(id, ret)
	return id
}

// producePending leaves the produce without a return (indefinite).
func (b *builder) producePending(c ClientID, value string, call int64) OpID {
	return b.h.CallProduce(c, tp0, "", value, call)
}

func (b *builder) produceTimeout(c ClientID, value string, call, ret int64) OpID {
	id := b.h.CallProduce(c, tp0, "", value, call)
	b.h.Indefinite(id, ret)
	return id
}

// records numbers values densely from offset.
func records(offset int64, values ...string) []Record {
	rs := make([]Record, len(values))
	for i, v := range values {
		rs[i] = Record{Offset: offset + int64(i), Value: v}
	}
	return rs
}

func (b *builder) fetch(c ClientID, offset, call, ret, hwm int64, values ...string) OpID {
	id := b.h.CallFetch(c, tp0, offset, 0, call)
	b.h.ReturnFetch(id, records(offset, values...), hwm, 0, ret)
	return id
}

func (b *builder) fetchRecords(c ClientID, offset, call, ret, hwm, start int64, rs []Record) OpID {
	id := b.h.CallFetch(c, tp0, offset, 0, call)
	b.h.ReturnFetch(id, rs, hwm, start, ret)
	return id
}

func (b *builder) poll(c ClientID, position, call, ret, hwm int64, values ...string) OpID {
	id := b.h.CallPoll(c, tp0, position, 0, call)
	b.h.ReturnFetch(id, records(position, values...), hwm, 0, ret)
	return id
}

func (b *builder) list(c ClientID, spec OffsetSpec, call, ret, offset int64) OpID {
	id := b.h.CallListOffsets(c, tp0, spec, call)
	b.h.ReturnOffset(id, offset, ret)
	return id
}

func kindsOf(as []Anomaly, warnings bool) []AnomalyKind {
	set := map[AnomalyKind]bool{}
	for _, a := range as {
		if a.Warning == warnings {
			set[a.Kind] = true
		}
	}
	var out []AnomalyKind
	for k := range set {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sameKinds(a, b []AnomalyKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mustPass(t *testing.T, h *History, opts Options) {
	t.Helper()
	if err := Check(h, opts).Err(); err != nil {
		t.Fatalf("valid history refused: %v", err)
	}
}

// TestMoveProduceRefilesPending: a produce called on one partition and
// moved to another before it returns is checked as the other's: a fetch
// there that sees it is linearizable, and the first partition's log stays
// empty. Without the move the value read on tp1 was never produced there.
func TestMoveProduceRefilesPending(t *testing.T) {
	tp1 := TopicPartition{Topic: "t#1", Partition: 0}
	h := NewHistory()
	id := h.CallProduce(1, tp0, "", "a", 0)
	h.MoveProduce(id, tp1)
	h.ReturnProduce(id, 0, 10)
	f := h.CallFetch(2, tp1, 0, 0, 20)
	h.ReturnFetch(f, records(0, "a"), 1, 0, 30)
	if err := CheckLinearizable(h, Options{}); err != nil {
		t.Fatalf("moved produce: %v", err)
	}
	if ops := h.Ops(); ops[id].TP != tp1 {
		t.Fatalf("op filed under %v, want %v", ops[id].TP, tp1)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("MoveProduce of a returned op did not panic")
		}
	}()
	h.MoveProduce(id, tp0)
}
