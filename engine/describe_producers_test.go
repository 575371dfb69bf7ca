package engine

import (
	"fmt"
	"testing"
)

// TestAppendProducers shows DescribeProducers' view of a partition: an
// idempotent producer, a transactional one with a transaction open (its
// start offset holds the LSO), and one whose transaction a marker ended
// (coordinator epoch set), in producer id order.
func TestAppendProducers(t *testing.T) {
	f := newTxnFixture(t)
	if got := f.p.AppendProducers(nil); len(got) != 0 {
		t.Fatalf("empty partition: %v", got)
	}
	f.want(f.write(9, 0, 2, false), "ok base=0 count=2")
	f.want(f.begin(3, 1), "ok base=0 count=0")
	f.want(f.write(3, 1, 3, true), "ok base=2 count=3")
	f.want(f.begin(5, 0), "ok base=0 count=0")
	f.want(f.write(5, 0, 1, true), "ok base=5 count=1")
	f.want(f.marker(5, 1, 7, true), "ok base=6 count=1")
	got := f.p.AppendProducers(nil)
	for i := range got {
		got[i].LastTimestampMs = 0 // the fixture's append times are not the point
	}
	want := "[{3 1 2 0 -1 2} {5 1 0 0 7 -1} {9 0 1 0 -1 -1}]"
	if fmt.Sprint(got) != want {
		t.Fatalf("producers %v, want %v", got, want)
	}
	f.want(f.begin(7, 0), "ok base=0 count=0")
	got = f.p.AppendProducers(nil)
	if a := got[2]; a.ProducerID != 7 || a.Epoch != 0 || a.LastSequence != -1 || a.CoordinatorEpoch != -1 || a.TxnStartOffset != -1 {
		t.Fatalf("a begun transaction that wrote nothing: %+v", a)
	}
}
