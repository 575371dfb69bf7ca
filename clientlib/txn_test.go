package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// txnClient is a transactional client of cluster with transactional id id.
func txnClient(t *testing.T, cluster *fake.Cluster, id string, opts ...clientlib.Opt) *clientlib.Client {
	t.Helper()
	base := []clientlib.Opt{
		clientlib.SeedAddresses(cluster.Addrs()...),
		clientlib.RetryBackoff(time.Millisecond, 10*time.Millisecond),
		clientlib.RandSeed(1),
		clientlib.ManualPartitioner(),
		clientlib.TransactionalID(id),
	}
	c, err := clientlib.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// txnConsumer reads partitions 0 and 1 of topic from the start at level.
func txnConsumer(client *clientlib.Client, topic string, level clientlib.IsolationLevel) *clientlib.Consumer {
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(10*time.Millisecond), clientlib.FetchIsolation(level))
	k.Assign(topic, 0, clientlib.OffsetEarliest())
	k.Assign(topic, 1, clientlib.OffsetEarliest())
	return k
}

// values are the records' values, sorted.
func values(rs []*clientlib.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	slices.Sort(out)
	return out
}

// produceTxn produces one record per value, alternating partitions 0 and
// 1, and waits for them (Flush): they are in the log, not yet committed.
func produceTxn(t *testing.T, ctx context.Context, c *clientlib.Client, topic string, vals ...string) []error {
	t.Helper()
	errs := make([]error, len(vals))
	for i, v := range vals {
		c.Produce(ctx, &clientlib.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(v)},
			func(_ *clientlib.Record, err error) { errs[i] = err })
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return errs
}

// pollRounds polls a fixed number of times and returns what it read.
func pollRounds(t *testing.T, ctx context.Context, k *clientlib.Consumer, rounds int) []*clientlib.Record {
	t.Helper()
	var out []*clientlib.Record
	for i := 0; i < rounds; i++ {
		fs := k.Poll(ctx)
		if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
			t.Fatal(err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// A transaction's records on two partitions are in the log before the
// commit (read_uncommitted reads them) but a read_committed consumer
// reads none of them until CommitTransaction returns, then all.
func TestTxnCommitVisibleOnlyAfterCommit(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	c := txnClient(t, cluster, "tx-commit")
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, err := range produceTxn(t, ctx, c, "out", "a", "b", "c", "d") {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	raw, err := pollUntil(t, ctx, txnConsumer(plain, "out", clientlib.ReadUncommitted), 4)
	if err != nil || len(raw) != 4 {
		t.Fatalf("read_uncommitted before the commit: %d records, %v", len(raw), err)
	}
	committed := txnConsumer(plain, "out", clientlib.ReadCommitted)
	if got := pollRounds(t, ctx, committed, 5); len(got) != 0 {
		t.Fatalf("read_committed saw %v before the commit", values(got))
	}
	if err := c.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := pollUntil(t, ctx, committed, 4)
	if err != nil || !slices.Equal(values(got), []string{"a", "b", "c", "d"}) {
		t.Fatalf("read_committed after the commit: %v, %v", values(got), err)
	}
	parts := map[int32]bool{}
	for _, r := range got {
		parts[r.Partition] = true
	}
	if len(parts) != 2 {
		t.Fatalf("the transaction spanned partitions %v, want 0 and 1", parts)
	}
}

// An aborted transaction's records are never read at read_committed: a
// later committed transaction's records are, past them.
func TestTxnAbortNeverVisible(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	c := txnClient(t, cluster, "tx-abort")
	for round, vals := range [][]string{{"x1", "x2", "x3"}, {"ok1", "ok2"}} {
		if err := c.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i, err := range produceTxn(t, ctx, c, "out", vals...) {
			if err != nil {
				t.Fatalf("round %d record %d: %v", round, i, err)
			}
		}
		end := c.AbortTransaction
		if round == 1 {
			end = c.CommitTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	got, err := pollUntil(t, ctx, txnConsumer(plain, "out", clientlib.ReadCommitted), 2)
	got = append(got, pollRounds(t, ctx, txnConsumer(plain, "out", clientlib.ReadCommitted), 3)...)
	if err != nil || slices.ContainsFunc(got, func(r *clientlib.Record) bool { return r.Value[0] == 'x' }) {
		t.Fatalf("read_committed read %v, %v; want only ok1, ok2", values(got), err)
	}
}

// AbortTransaction fails records still unsent with ErrTransactionAborted
// (here: waiting for a linger that never passes).
func TestTxnAbortFailsUnsentRecords(t *testing.T) {
	cluster, _, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	c := txnClient(t, cluster, "tx-abort-unsent", clientlib.Linger(time.Hour))
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	c.Produce(ctx, &clientlib.Record{Topic: "out", Partition: 0, Value: []byte("v")},
		func(_ *clientlib.Record, err error) { done <- err })
	if err := c.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, clientlib.ErrTransactionAborted) {
		t.Fatalf("unsent record: %v, want ErrTransactionAborted", err)
	}
}

// A second client with the same transactional id fences the first: its
// commit fails with a ProducerFencedError (matching ErrProducerFenced),
// every later transaction call too, and its records are never read at
// read_committed, while the new client's are.
func TestTxnSecondClientFencesFirst(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	old := txnClient(t, cluster, "tx-fence")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, err := range produceTxn(t, ctx, old, "out", "zombie1", "zombie2") {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	fresh := txnClient(t, cluster, "tx-fence")
	if err := fresh.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	err := old.CommitTransaction(ctx)
	var pf *clientlib.ProducerFencedError
	if !errors.As(err, &pf) || !errors.Is(err, clientlib.ErrProducerFenced) || pf.TransactionalID != "tx-fence" {
		t.Fatalf("fenced commit: %v, want ProducerFencedError", err)
	}
	if err := old.BeginTransaction(); !errors.As(err, &pf) {
		t.Fatalf("begin after fencing: %v, want ProducerFencedError", err)
	}
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, ctx, fresh, "out", "new1", "new2")
	if err := fresh.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := pollUntil(t, ctx, txnConsumer(plain, "out", clientlib.ReadCommitted), 2)
	got = append(got, pollRounds(t, ctx, txnConsumer(plain, "out", clientlib.ReadCommitted), 3)...)
	if err != nil || slices.ContainsFunc(got, func(r *clientlib.Record) bool { return r.Value[0] == 'z' }) {
		t.Fatalf("read_committed read %v, %v; want only new1, new2", values(got), err)
	}
}

// fetchOffset is group's committed offset of in/partition (-1: none).
func fetchOffset(t *testing.T, ctx context.Context, c *clientlib.Client, group string, partition int32) int64 {
	t.Helper()
	offs, err := c.FetchOffsets(ctx, group, clientlib.TopicPartition{Topic: "in", Partition: partition})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if o.Partition == partition && o.Offset >= 0 {
			return o.Offset
		}
	}
	return -1
}

// waitOffset polls the group's offset until it is want, bounded.
func waitOffset(t *testing.T, ctx context.Context, c *clientlib.Client, group string, partition int32, want int64) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if got := fetchOffset(t, ctx, c, group, partition); got == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("offset of in/%d never became %d (now %d)", partition, want, fetchOffset(t, ctx, c, group, partition))
}

// SendOffsetsToTransaction: the group's offsets move when the transaction
// commits, not before, and never when it aborts.
func TestTxnSendOffsetsMoveOnCommit(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("in", 2), fake.Topic("out", 2)})
	c := txnClient(t, cluster, "tx-offsets")
	meta := clientlib.GroupMetadata{Group: "g"}
	in0 := clientlib.TopicPartition{Topic: "in", Partition: 0}
	in1 := clientlib.TopicPartition{Topic: "in", Partition: 1}
	// send runs a transaction with the offset of one partition, checking
	// that the group's offset there is still before until it ends.
	send := func(tp clientlib.TopicPartition, offset, before int64, commit bool) {
		t.Helper()
		offsets := map[clientlib.TopicPartition]int64{tp: offset}
		if err := c.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produceTxn(t, ctx, c, "out", "v")
		if err := c.SendOffsetsToTransaction(ctx, offsets, meta); err != nil {
			t.Fatal(err)
		}
		if got := fetchOffset(t, ctx, plain, "g", tp.Partition); got != before {
			t.Fatalf("offset of %v is %d before the transaction ended, want %d", tp, got, before)
		}
		end := c.AbortTransaction
		if commit {
			end = c.CommitTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
	}
	send(in0, 5, -1, true)
	waitOffset(t, ctx, plain, "g", 0, 5)
	send(in0, 9, 5, false)
	send(in1, 3, -1, true) // after the abort's marker
	waitOffset(t, ctx, plain, "g", 1, 3)
	if got := fetchOffset(t, ctx, plain, "g", 0); got != 5 {
		t.Fatalf("aborted offset commit took effect: in/0 at %d, want 5", got)
	}
}

// A record that fails inside a transaction makes CommitTransaction fail
// with a TransactionAbortableError; AbortTransaction then ends it and a
// new transaction commits.
func TestTxnFailedRecordMakesCommitAbortable(t *testing.T) {
	cluster, _, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	c := txnClient(t, cluster, "tx-abortable")
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	errs := produceTxn(t, ctx, c, "out", "fine")
	bad := c.ProduceSync(ctx, &clientlib.Record{Topic: "out", Partition: 7, Value: []byte("no such partition")}).FirstErr()
	if errs[0] != nil || bad == nil {
		t.Fatalf("records: %v, %v", errs[0], bad)
	}
	var ae *clientlib.TransactionAbortableError
	if err := c.CommitTransaction(ctx); !errors.As(err, &ae) {
		t.Fatalf("commit after a failed record: %v, want TransactionAbortableError", err)
	}
	if err := c.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, ctx, c, "out", "again")
	if err := c.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// Misuse fails at once with a typed error naming what to do.
func TestTxnMisuse(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	if err := plain.BeginTransaction(); !errors.Is(err, clientlib.ErrNotTransactional) {
		t.Fatalf("begin on a plain client: %v", err)
	}
	c := txnClient(t, cluster, "tx-misuse")
	if err := c.CommitTransaction(ctx); !errors.Is(err, clientlib.ErrNoTransaction) {
		t.Fatalf("commit without begin: %v", err)
	}
	if err := c.AbortTransaction(ctx); !errors.Is(err, clientlib.ErrNoTransaction) {
		t.Fatalf("abort without begin: %v", err)
	}
	err := c.ProduceSync(ctx, &clientlib.Record{Topic: "out", Value: []byte("v")}).FirstErr()
	if !errors.Is(err, clientlib.ErrNoTransaction) {
		t.Fatalf("produce outside a transaction: %v", err)
	}
	if err := c.SendOffsetsToTransaction(ctx, nil, clientlib.GroupMetadata{Group: "g"}); !errors.Is(err, clientlib.ErrNoTransaction) {
		t.Fatalf("send offsets outside a transaction: %v", err)
	}
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginTransaction(); !errors.Is(err, clientlib.ErrTransactionOpen) {
		t.Fatalf("begin twice: %v", err)
	}
	if err := c.CommitTransaction(ctx); err != nil { // nothing produced: ends locally
		t.Fatal(err)
	}
	for _, opt := range []clientlib.Opt{clientlib.DisableIdempotence(), clientlib.TransactionTimeout(0)} {
		_, err := clientlib.NewClient(clientlib.TransactionalID("x"), opt)
		var oe *clientlib.OptionError
		if !errors.As(err, &oe) {
			t.Fatalf("bad transactional options: %v, want OptionError", err)
		}
	}
}

// A group member's GroupMetadata carries its member id and epoch to
// TxnOffsetCommit (KIP-447): offsets sent with it commit with the
// transaction; sent with a stale epoch they are refused, and the
// transaction can then only abort.
func TestTxnSendOffsetsWithGroupMember(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("in", 1), fake.Topic("out", 2)})
	produceValues(t, ctx, plain, "in", 0, 3)
	g, err := clientlib.NewGroupConsumer(plain, "g", []string{"in"}, clientlib.AutoCommitInterval(0),
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(10*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	var read []*clientlib.Record
	for i := 0; i < 500 && len(read) < 3; i++ {
		read = append(read, g.Poll(ctx).Records()...)
	}
	meta := g.GroupMetadata()
	if len(read) != 3 || meta.MemberID == "" || meta.Epoch <= 0 || meta.Group != "g" {
		t.Fatalf("member read %d records, metadata %+v", len(read), meta)
	}
	c := txnClient(t, cluster, "tx-member")
	in0 := clientlib.TopicPartition{Topic: "in", Partition: 0}
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, ctx, c, "out", "A", "B", "C")
	if err := c.SendOffsetsToTransaction(ctx, map[clientlib.TopicPartition]int64{in0: 3}, meta); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	waitOffset(t, ctx, plain, "g", 0, 3)

	stale := meta
	stale.Epoch--
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := c.SendOffsetsToTransaction(ctx, map[clientlib.TopicPartition]int64{in0: 1}, stale); err == nil {
		t.Fatal("offsets sent with a stale member epoch were taken")
	}
	var ae *clientlib.TransactionAbortableError
	if err := c.CommitTransaction(ctx); !errors.As(err, &ae) {
		t.Fatalf("commit after refused offsets: %v, want TransactionAbortableError", err)
	}
	if err := c.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fetchOffset(t, ctx, plain, "g", 0); got != 3 {
		t.Fatalf("offset %d after the refused commit, want 3", got)
	}
}

// The coordinator's retriable refusals (NOT_COORDINATOR at
// InitProducerId, CONCURRENT_TRANSACTIONS at AddPartitionsToTxn,
// COORDINATOR_NOT_AVAILABLE at EndTxn) are retried: the transaction
// commits.
func TestTxnRetriesCoordinatorRefusals(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	cluster.Control(fake.FailTimes(2, strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR,
		func(_ uint64, req *strandpb.Request) bool { return req.GetTxnInitProducerId() != nil }))
	cluster.Control(fake.FailTimes(2, strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS,
		func(_ uint64, req *strandpb.Request) bool { return req.GetAddPartitionsToTxn() != nil }))
	cluster.Control(fake.FailTimes(2, strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE,
		func(_ uint64, req *strandpb.Request) bool { return req.GetEndTxn() != nil }))
	c := txnClient(t, cluster, "tx-retry")
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, err := range produceTxn(t, ctx, c, "out", "r1", "r2") {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := c.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := pollUntil(t, ctx, txnConsumer(plain, "out", clientlib.ReadCommitted), 2)
	if err != nil || !slices.Equal(values(got), []string{"r1", "r2"}) {
		t.Fatalf("read_committed: %v, %v", values(got), err)
	}
}

// Every transactional batch says so and names the transactional id; each
// transaction writes at the epoch the previous EndTxn answered, and each
// partition's batches of a new epoch start at sequence 0 (the engine
// refuses a new epoch starting elsewhere).
func TestTxnBatchesCarryEpochAndSequence(t *testing.T) {
	cluster, _, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	type key struct {
		partition int32
		epoch     int32
	}
	var mu sync.Mutex
	first := map[key]int32{} // first base sequence seen per partition and epoch
	var bad []string
	cluster.Control(func(_ uint64, req *strandpb.Request) (fake.Action, bool) {
		p := req.GetProduce()
		if p == nil {
			return fake.Action{}, false
		}
		mu.Lock()
		defer mu.Unlock()
		for _, b := range p.GetPartitions() {
			if !b.GetTransactional() || p.GetTransactionalId() != "tx-seq" {
				bad = append(bad, fmt.Sprintf("batch of %s/%d: transactional=%v id=%q", b.GetTopic(), b.GetPartition(), b.GetTransactional(), p.GetTransactionalId()))
			}
			k := key{b.GetPartition(), b.GetProducerEpoch()}
			if _, ok := first[k]; !ok {
				first[k] = b.GetBaseSequence()
			}
		}
		return fake.Action{}, false
	})
	c := txnClient(t, cluster, "tx-seq")
	for round := 0; round < 3; round++ {
		if err := c.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i, err := range produceTxn(t, ctx, c, "out", "a", "b", "c", "d") {
			if err != nil {
				t.Fatalf("round %d record %d: %v", round, i, err)
			}
		}
		if err := c.CommitTransaction(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	epochs := map[int32]bool{}
	for k, seq := range first {
		epochs[k.epoch] = true
		if seq != 0 {
			bad = append(bad, fmt.Sprintf("partition %d epoch %d starts at sequence %d", k.partition, k.epoch, seq))
		}
	}
	if len(epochs) != 3 || len(first) != 6 {
		bad = append(bad, fmt.Sprintf("batches of epochs %v, first sequences %v: want 3 epochs on 2 partitions", epochs, first))
	}
	if len(bad) > 0 {
		t.Fatal(strings.Join(bad, "\n"))
	}
}

// Close aborts the open transaction: read_committed readers are not held
// at its first offset until the coordinator's timeout (a minute here),
// and read the next transaction's records but never its own.
func TestTxnCloseAbortsOpenTransaction(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	closing := txnClient(t, cluster, "tx-close", clientlib.TransactionTimeout(time.Minute))
	if err := closing.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, err := range produceTxn(t, ctx, closing, "out", "open1", "open2") {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	closing.Close()
	next := txnClient(t, cluster, "tx-after-close")
	if err := next.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, ctx, next, "out", "after1", "after2")
	if err := next.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	k := txnConsumer(plain, "out", clientlib.ReadCommitted)
	var got []*clientlib.Record
	for len(got) < 2 && short.Err() == nil {
		got = append(got, k.Poll(short).Records()...)
	}
	got = append(got, pollRounds(t, ctx, k, 3)...)
	if !slices.Equal(values(got), []string{"after1", "after2"}) {
		t.Fatalf("read_committed after Close read %v, want after1, after2 (the closed client's transaction aborted)", values(got))
	}
}

// A coordinator refusing AddPartitionsToTxn CONCURRENT_TRANSACTIONS (the
// previous transaction's markers are still being written) is retried
// after 20 ms, whatever the client's general backoff: here an hour, so a
// retry paced by it would outlast the test's context. Before, the refusal
// came back as the answer's error, txnCall retried it on the general
// backoff (100 ms by default), and make bench-txn's producers waited about
// 75 of every 77 ms per transaction (12 commits/s).
func TestTxnConcurrentTransactionsRetriedSoon(t *testing.T) {
	cluster, _, ctx := setup(t, []fake.Opt{fake.Topic("out", 1)})
	// A client on the usual backoff first waits out the coordinator's
	// start (COORDINATOR_NOT_AVAILABLE), which the hour would not.
	if err := txnClient(t, cluster, "tx-soon").InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	cluster.Control(fake.FailTimes(2, strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS,
		func(_ uint64, req *strandpb.Request) bool { return req.GetAddPartitionsToTxn() != nil }))
	c := txnClient(t, cluster, "tx-soon", clientlib.RetryBackoff(time.Hour, time.Hour))
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, err := range produceTxn(t, ctx, c, "out", "r1") {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := c.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// A consumer at either isolation level reaches the high-water mark of
// partitions that end in a transaction marker (a committed transaction,
// then an aborted one: record 0, commit marker 1, aborted record 2,
// abort marker 3), so its lag comes to 0, as a Kafka consumer moves past
// a control batch: it fetches with include_markers and steps over the
// marker batches served. A guard: it passed before the node's native
// fetch moved next_offset past skipped markers (the consumer does not
// skip them). Checked to fail: with decodeBatches not stepping over a
// served marker, read_uncommitted stayed at 1 on both partitions.
func TestTxnConsumerReachesEndPastMarkers(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	c := txnClient(t, cluster, "tx-tail")
	for round, vals := range [][]string{{"ok1", "ok2"}, {"x1", "x2"}} {
		if err := c.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i, err := range produceTxn(t, ctx, c, "out", vals...) {
			if err != nil {
				t.Fatalf("round %d record %d: %v", round, i, err)
			}
		}
		end := c.CommitTransaction
		if round == 1 {
			end = c.AbortTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	for _, level := range []clientlib.IsolationLevel{clientlib.ReadCommitted, clientlib.ReadUncommitted} {
		k := txnConsumer(plain, "out", level)
		var got []*clientlib.Record
		at := func() (int64, int64) {
			p0, _ := k.Position("out", 0)
			p1, _ := k.Position("out", 1)
			return p0, p1
		}
		for range 100 {
			if p0, p1 := at(); p0 == 4 && p1 == 4 {
				break
			}
			got = append(got, pollRounds(t, ctx, k, 1)...)
		}
		want := []string{"ok1", "ok2"}
		if level == clientlib.ReadUncommitted {
			want = []string{"ok1", "ok2", "x1", "x2"}
		}
		if p0, p1 := at(); p0 != 4 || p1 != 4 || !slices.Equal(values(got), want) {
			t.Fatalf("level %v: positions %d and %d, read %v; want 4 and 4 after %v", level, p0, p1, values(got), want)
		}
	}
}
