package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// txnFixture applies transactional entries to a partition and fails the
// test on an unexpected outcome.
type txnFixture struct {
	t   *testing.T
	p   *Partition
	seq map[Producer]int32 // next sequence per (id, epoch)
}

func newTxnFixture(t *testing.T) *txnFixture {
	return &txnFixture{t: t, p: NewPartition(), seq: map[Producer]int32{}}
}

// begin applies a TXN_BEGIN of id at epoch.
func (f *txnFixture) begin(id int64, epoch int32) Result {
	return applyNext(f.p, EncodeTxnBeginEntry(nil, 1, 0, id, epoch))
}

// write applies a batch of count records from id at epoch at its next
// sequence, transactional or plain.
func (f *txnFixture) write(id int64, epoch int32, count int, transactional bool) Result {
	key := Producer{ID: id, Epoch: epoch}
	producer := Producer{ID: id, Epoch: epoch, BaseSequence: f.seq[key]}
	data := EncodeProduceEntry(nil, 1, 0, producer, batchOf(f.t, count, 100))
	if transactional {
		data = EncodeTransactionalProduceEntry(nil, 1, 0, producer, batchOf(f.t, count, 100))
	}
	r := applyNext(f.p, data)
	if r.Err == nil && !r.Duplicate {
		f.seq[key] += int32(count)
	}
	return r
}

// marker applies a commit or abort marker.
func (f *txnFixture) marker(id int64, epoch, coordinatorEpoch int32, commit bool) Result {
	m := Marker{ProducerID: id, ProducerEpoch: epoch, CoordinatorEpoch: coordinatorEpoch, Commit: commit}
	return applyNext(f.p, EncodeTxnMarkerEntry(nil, 2, 0, m))
}

// want fails unless r renders as outcome.
func (f *txnFixture) want(r Result, want string) {
	f.t.Helper()
	if got := outcome(r); got != want {
		f.t.Fatalf("got %s, want %s", got, want)
	}
	mustCheck(f.t, f.p)
}

// TestTxnWriteNeedsBegin shows KIP-890's rule: a transactional batch is
// refused until a TXN_BEGIN of its producer and epoch, and accepted after.
func TestTxnWriteNeedsBegin(t *testing.T) {
	f := newTxnFixture(t)
	f.want(f.write(1, 0, 2, true), "invalid-txn-state")
	f.want(f.begin(1, 0), "ok base=0 count=0")
	f.want(f.write(1, 0, 2, true), "ok base=0 count=2")
	f.want(f.begin(1, 0), "ok base=0 count=0") // a resent begin changes nothing
	f.want(f.write(1, 0, 1, true), "ok base=2 count=1")
	if epoch, open := f.p.TxnOpen(1); !open || epoch != 0 {
		t.Fatalf("TxnOpen = %d, %v", epoch, open)
	}
	f.want(f.marker(1, 1, 0, true), "ok base=3 count=1")
	f.want(f.write(1, 1, 1, true), "invalid-txn-state") // the next transaction needs its own begin
	f.want(f.begin(1, 1), "ok base=0 count=0")
	f.want(f.write(1, 1, 1, true), "ok base=4 count=1")
	if r := applyNext(f.p, EncodeTransactionalProduceEntry(nil, 1, 0, NoProducer, batchOf(t, 1, 0))); !errors.Is(r.Err, ErrInvalidEntry) {
		t.Fatalf("transactional batch without a producer id: %v", r.Err)
	}
}

// TestTxnStaleEpochsFenced shows writes, begins and markers of an epoch
// older than the partition knows are PRODUCER_FENCED, and that a marker at
// the bumped epoch (KIP-890) fences the transaction's own epoch.
func TestTxnStaleEpochsFenced(t *testing.T) {
	f := newTxnFixture(t)
	f.want(f.begin(1, 3), "ok base=0 count=0")
	f.want(f.write(1, 2, 1, true), "fenced")
	f.want(f.write(1, 3, 1, true), "ok base=0 count=1")
	f.want(f.marker(1, 2, 0, true), "fenced")
	f.want(f.marker(1, 4, 0, true), "ok base=1 count=1")
	f.want(f.begin(1, 3), "fenced")
	f.want(f.write(1, 3, 1, false), "fenced")
	f.want(f.marker(1, 3, 0, false), "fenced")
	f.want(f.begin(1, 4), "ok base=0 count=0")
	f.want(f.write(1, 4, 1, true), "ok base=2 count=1")
}

// TestTxnStateRefusals shows INVALID_TXN_STATE for a write at another
// epoch than the open transaction's, a plain write while it is open, and a
// begin of a new epoch before the old transaction's marker.
func TestTxnStateRefusals(t *testing.T) {
	f := newTxnFixture(t)
	f.want(f.begin(1, 0), "ok base=0 count=0")
	f.want(f.write(1, 1, 1, true), "invalid-txn-state")
	f.want(f.write(1, 0, 1, false), "invalid-txn-state")
	f.want(f.begin(1, 1), "invalid-txn-state")
	f.want(f.marker(1, 1, 0, false), "ok base=0 count=0") // it wrote nothing here: no offset
	f.want(f.write(1, 1, 1, false), "ok base=0 count=1")  // no transaction open any more
}

// TestMarkerCoordinatorFenced shows a marker from an older coordinator
// epoch is refused and changes nothing.
func TestMarkerCoordinatorFenced(t *testing.T) {
	f := newTxnFixture(t)
	f.want(f.begin(1, 0), "ok base=0 count=0")
	f.want(f.write(1, 0, 1, true), "ok base=0 count=1")
	f.want(f.marker(1, 1, 5, true), "ok base=1 count=1")
	f.want(f.begin(1, 1), "ok base=0 count=0")
	f.want(f.write(1, 1, 1, true), "ok base=2 count=1")
	before := f.p.Snapshot()
	f.want(f.marker(1, 2, 4, false), "coordinator-fenced")
	if f.p.LastStableOffset() != 2 || len(f.p.AppendAbortedTxns(nil, 0, 10)) != 0 {
		t.Fatalf("a fenced marker ended the transaction")
	}
	q, _ := RestorePartition(before)
	q.ApplyEmpty(q.AppliedIndex() + 1)
	if !bytes.Equal(q.Snapshot(), f.p.Snapshot()) {
		t.Fatalf("a fenced marker changed the state")
	}
	f.want(f.marker(1, 2, 5, false), "ok base=3 count=1")
}

// TestLastStableOffset shows the LSO is the oldest open transaction's first
// offset, that plain writes after it do not move it, that it moves to the
// next open transaction or the high-water mark at each marker, and that a
// read_committed read stops at it while read_uncommitted reads on.
func TestLastStableOffset(t *testing.T) {
	f := newTxnFixture(t)
	f.want(f.write(9, 0, 2, false), "ok base=0 count=2")
	f.want(f.begin(1, 0), "ok base=0 count=0")
	f.want(f.begin(2, 0), "ok base=0 count=0")
	if f.p.LastStableOffset() != 2 {
		t.Fatalf("begun transactions that wrote nothing hold the LSO at %d", f.p.LastStableOffset())
	}
	f.want(f.write(1, 0, 3, true), "ok base=2 count=3")
	f.want(f.write(2, 0, 1, true), "ok base=5 count=1")
	f.want(f.write(9, 0, 1, false), "ok base=6 count=1")
	f.want(f.write(1, 0, 1, true), "ok base=7 count=1")
	lso := func(want int64) {
		t.Helper()
		if got := f.p.LastStableOffset(); got != want || f.p.ReadLimit(ReadCommitted) != want {
			t.Fatalf("LSO %d, want %d", got, want)
		}
	}
	lso(2)
	if got := f.p.AppendOpenTxns(nil); fmt.Sprint(got) != "[{1 0 2} {2 0 5}]" {
		t.Fatalf("open transactions %v", got)
	}
	readable := func(offset int64, iso Isolation) string {
		locs, err := f.p.AppendReadable(nil, offset, 10, iso)
		out := fmt.Sprint(err)
		for _, l := range locs {
			out += fmt.Sprintf(" %d+%d", l.BaseOffset, l.RecordCount)
		}
		return out
	}
	if got := readable(0, ReadCommitted); got != "<nil> 0+2" {
		t.Fatalf("read_committed from 0: %s", got)
	}
	if got := readable(5, ReadCommitted); got != "<nil>" {
		t.Fatalf("read_committed from 5 (past the LSO, below the high-water mark): %s", got)
	}
	if got := readable(5, ReadUncommitted); got != "<nil> 5+1 6+1 7+1" {
		t.Fatalf("read_uncommitted from 5: %s", got)
	}
	if _, err := f.p.AppendReadable(nil, 9, 10, ReadCommitted); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read_committed past the high-water mark: %v", err)
	}
	f.want(f.marker(1, 1, 0, true), "ok base=8 count=1")
	lso(5)
	f.want(f.marker(2, 1, 0, false), "ok base=9 count=1")
	lso(10)
	if f.p.HighWatermark() != 10 || readable(5, ReadCommitted) != "<nil> 5+1 6+1 7+1 8+1 9+1" {
		t.Fatalf("after both markers: hwm %d, read %s", f.p.HighWatermark(), readable(5, ReadCommitted))
	}
}

// TestAbortedIndex shows an abort enters the index with its first offset
// and marker, a commit does not, and AppendAbortedTxns lists exactly the
// aborted transactions overlapping [from, to).
func TestAbortedIndex(t *testing.T) {
	f := newTxnFixture(t)
	f.want(f.begin(1, 0), "ok base=0 count=0")
	f.want(f.write(1, 0, 2, true), "ok base=0 count=2") // 0-1, marker 4
	f.want(f.begin(2, 0), "ok base=0 count=0")
	f.want(f.write(2, 0, 2, true), "ok base=2 count=2") // 2-3, marker 5 (commit)
	f.want(f.marker(1, 1, 0, false), "ok base=4 count=1")
	f.want(f.marker(2, 1, 0, true), "ok base=5 count=1")
	f.want(f.begin(2, 1), "ok base=0 count=0")
	f.want(f.write(2, 1, 1, true), "ok base=6 count=1") // 6, marker 7
	f.want(f.marker(2, 2, 0, false), "ok base=7 count=1")
	for _, c := range []struct {
		from, to int64
		want     string
	}{
		{0, 8, "[{1 0 4} {2 6 7}]"},
		{0, 1, "[{1 0 4}]"},
		{4, 6, "[{1 0 4}]"},
		{5, 6, "[]"},
		{5, 7, "[{2 6 7}]"},
		{7, 8, "[{2 6 7}]"},
		{8, 9, "[]"},
	} {
		if got := fmt.Sprint(f.p.AppendAbortedTxns(nil, c.from, c.to)); got != c.want {
			t.Errorf("aborted in [%d, %d) = %s, want %s", c.from, c.to, got, c.want)
		}
	}
}

// TestTrimWithTransactions shows Kafka's choices: the log start may pass an
// open transaction's first offset, and the LSO is then the log start; an
// aborted entry leaves the index once the log start passes its marker; a
// producer with an open transaction is never forgotten, and an idle
// transactional record goes with its idempotence record a day later.
func TestTrimWithTransactions(t *testing.T) {
	f := newTxnFixture(t)
	f.want(f.begin(1, 0), "ok base=0 count=0")
	f.want(f.write(1, 0, 2, true), "ok base=0 count=2")
	f.want(f.marker(1, 1, 0, false), "ok base=2 count=1") // aborted [0, 2]
	f.want(f.begin(2, 0), "ok base=0 count=0")
	f.want(f.write(2, 0, 2, true), "ok base=3 count=2")
	f.want(f.write(9, 0, 1, false), "ok base=5 count=1")
	trim := func(offset, now int64) {
		applyNext(f.p, EncodeTrimEntry(nil, now, 0, offset))
		mustCheck(t, f.p)
	}
	trim(2, 0)
	if got := fmt.Sprint(f.p.AppendAbortedTxns(nil, 0, 10)); got != "[{1 0 2}]" {
		t.Fatalf("an abort whose marker is retained left the index: %s", got)
	}
	trim(4, ProducerExpirationMs+10)
	if f.p.LastStableOffset() != 4 || f.p.LogStartOffset() != 4 {
		t.Fatalf("LSO %d with log start %d past the open transaction at 3", f.p.LastStableOffset(), f.p.LogStartOffset())
	}
	if got := f.p.AppendAbortedTxns(nil, 0, 10); len(got) != 0 {
		t.Fatalf("an abort below the log start stayed: %v", got)
	}
	if _, open := f.p.TxnOpen(2); !open || f.p.producers[2] == nil {
		t.Fatalf("a producer with an open transaction was forgotten")
	}
	if f.p.txns[1] != nil || f.p.producers[1] != nil {
		t.Fatalf("an idle producer a day old was kept")
	}
	f.want(f.write(2, 0, 1, true), "ok base=6 count=1")
	f.want(f.marker(2, 1, 0, false), "ok base=7 count=1")
	if got := fmt.Sprint(f.p.AppendAbortedTxns(nil, 4, 8)); got != "[{2 3 7}]" {
		t.Fatalf("aborted straddling the log start: %s", got)
	}
}

// txnSample builds a partition holding every kind of transactional state.
func txnSample(t *testing.T) *Partition {
	f := newTxnFixture(t)
	f.begin(1, 0)
	f.write(1, 0, 2, true)
	f.marker(1, 1, 3, false)
	f.begin(2, 0)
	f.write(2, 0, 1, true)
	f.begin(3, 0)
	f.write(4, 0, 1, false)
	f.begin(1, 1)
	f.write(1, 1, 1, true)
	mustCheck(t, f.p)
	return f.p
}

// TestTxnSnapshotRoundTrip shows both snapshot forms carry the records,
// the open transactions and the aborted index: the restored partition has
// the same bytes, digests, LSO and answers, and decides the next entries
// as the original does.
func TestTxnSnapshotRoundTrip(t *testing.T) {
	for _, indexedForm := range []bool{false, true} {
		p := txnSample(t)
		start, _ := p.IndexOrdinals()
		q, err := RestorePartition(p.Snapshot())
		if indexedForm {
			q, err = RestorePartitionIndexed(p.StateSnapshot(), slices.Clone(p.IndexSince(start)))
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(q.Snapshot(), p.Snapshot()) || q.Digest() != p.Digest() || q.TailDigest() != p.TailDigest() {
			t.Fatalf("restored state differs")
		}
		if q.LastStableOffset() != p.LastStableOffset() || fmt.Sprint(q.AppendOpenTxns(nil)) != fmt.Sprint(p.AppendOpenTxns(nil)) ||
			fmt.Sprint(q.AppendAbortedTxns(nil, 0, 100)) != fmt.Sprint(p.AppendAbortedTxns(nil, 0, 100)) {
			t.Fatalf("restored reads differ")
		}
		for _, data := range [][]byte{
			EncodeTxnMarkerEntry(nil, 5, 0, Marker{ProducerID: 2, ProducerEpoch: 1, CoordinatorEpoch: 3}),
			EncodeTxnMarkerEntry(nil, 5, 0, Marker{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 2}),
			EncodeTxnBeginEntry(nil, 5, 0, 3, 1),
		} {
			if a, b := outcome(applyNext(q, data)), outcome(applyNext(p, data)); a != b {
				t.Fatalf("restored partition decides %s, original %s", a, b)
			}
		}
	}
}

// TestNoTransactionsKeepsFormat shows a partition that never saw a
// transaction writes no transactional field and keeps the digest formula
// it had before transactions existed.
func TestNoTransactionsKeepsFormat(t *testing.T) {
	p := fuzzBase(t)
	var snap strandpb.PartitionSnapshot
	if err := proto.Unmarshal(p.Snapshot(), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.GetTxnProducers()) != 0 || len(snap.GetAbortedTxns()) != 0 {
		t.Fatalf("transactional fields in a plain snapshot")
	}
	old := digestChain(digestTagPartition, p.appliedIndex, uint64(p.logStartOffset), uint64(p.nextOffset),
		uint64(len(p.batches)-p.head), p.indexSum, uint64(len(p.producers)), p.producerSum)
	if p.Digest() != old {
		t.Fatalf("digest of a plain partition changed")
	}
	data := EncodeProduceEntry(nil, 1, 2, Producer{ID: 3, Epoch: 4, BaseSequence: 5}, []byte("x"))
	if bytes.Contains(data, []byte{fieldTransactional << 3}) {
		t.Fatalf("a plain produce entry carries the transactional field: %x", data)
	}
}

// TestEntryMarker shows a stored marker entry reads back as its marker and
// other kinds are refused.
func TestEntryMarker(t *testing.T) {
	m := Marker{ProducerID: 7, ProducerEpoch: 3, CoordinatorEpoch: 2, Commit: true}
	got, err := EntryMarker(EncodeTxnMarkerEntry(nil, 1, 2, m))
	if err != nil || got != m {
		t.Fatalf("EntryMarker = %+v, %v", got, err)
	}
	if _, err := EntryMarker(EncodeTxnBeginEntry(nil, 1, 2, 7, 3)); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("EntryMarker of a begin: %v", err)
	}
}
