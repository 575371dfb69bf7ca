package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// sessionCluster is a cluster with topics in and out of two partitions
// each, whose group coordinators ask for heartbeats every 20 ms (so a
// rebalance takes a fraction of a second), and a plain client.
func sessionCluster(t *testing.T) (*fake.Cluster, *clientlib.Client, context.Context) {
	t.Helper()
	return setup(t, []fake.Opt{fake.Topic("in", 2), fake.Topic("out", 2), fake.GroupHeartbeat(20 * time.Millisecond)},
		clientlib.ManualPartitioner())
}

// newSession is a TransactSession of group g on topic in, through a new
// transactional client with id id.
func newSession(t *testing.T, cluster *fake.Cluster, id string) *clientlib.TransactSession {
	t.Helper()
	s, err := clientlib.NewTransactSession(txnClient(t, cluster, id), "g", []string{"in"},
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(10*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// step polls s once and produces, in its transaction, "out:" + value of
// each record read to the same partition of out (an abort may fail those
// not sent yet). It returns the values read.
func step(t *testing.T, ctx context.Context, s *clientlib.TransactSession) []string {
	t.Helper()
	fs := s.Poll(ctx)
	if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
		t.Fatalf("poll: %v", err)
	}
	var read []string
	for _, r := range fs.Records() {
		read = append(read, string(r.Value))
		s.Produce(ctx, &clientlib.Record{Topic: "out", Partition: r.Partition, Value: []byte("out:" + string(r.Value))},
			func(_ *clientlib.Record, err error) {
				if err != nil && !errors.Is(err, clientlib.ErrTransactionAborted) {
					t.Errorf("output of %s: %v", r.Value, err)
				}
			})
	}
	slices.Sort(read)
	return read
}

// stepUntil steps s until it read n values (bounded by ctx).
func stepUntil(t *testing.T, ctx context.Context, s *clientlib.TransactSession, n int) []string {
	t.Helper()
	var read []string
	for len(read) < n {
		if ctx.Err() != nil {
			t.Fatalf("read %v, want %d values", read, n)
		}
		read = append(read, step(t, ctx, s)...)
	}
	slices.Sort(read)
	return read
}

// inputs are the values produceSpread writes: p-i for each partition p
// below parts and i in [from, from+n).
func inputs(parts int32, from, n int) []string {
	var out []string
	for p := range parts {
		for i := from; i < from+n; i++ {
			out = append(out, fmt.Sprintf("%d-%d", p, i))
		}
	}
	slices.Sort(out)
	return out
}

// committedOutput reads out at read_committed until it has n records,
// then a few more rounds, and returns the inputs the outputs name, sorted
// (duplicates kept).
func committedOutput(t *testing.T, ctx context.Context, plain *clientlib.Client, n int) []string {
	t.Helper()
	k := txnConsumer(plain, "out", clientlib.ReadCommitted)
	got, err := pollUntil(t, ctx, k, n)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, pollRounds(t, ctx, k, 3)...)
	var out []string
	for _, v := range values(got) {
		out = append(out, v[len("out:"):])
	}
	return out
}

// An aborted transaction's input is delivered again: End(false) puts the
// positions back at the group's committed offsets, the next Poll reads
// the same records, and their committed output appears exactly once, with
// the group's offsets after them.
func TestTransactSessionAbortRedeliversInput(t *testing.T) {
	cluster, plain, ctx := sessionCluster(t)
	produceSpread(t, ctx, plain, "in", 2, 0, 3)
	s := newSession(t, cluster, "ts-redeliver")
	first := stepUntil(t, ctx, s, 6)
	if committed, err := s.End(ctx, false); committed || err != nil {
		t.Fatalf("End(abort): committed %v, %v", committed, err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	again := stepUntil(t, short, s, 6)
	if !slices.Equal(first, again) || !slices.Equal(first, inputs(2, 0, 3)) {
		t.Fatalf("read %v, then after the abort %v: want the same input twice", first, again)
	}
	if committed, err := s.End(ctx, true); !committed || err != nil {
		t.Fatalf("End(commit): committed %v, %v", committed, err)
	}
	if got := committedOutput(t, ctx, plain, 6); !slices.Equal(got, inputs(2, 0, 3)) {
		t.Fatalf("committed output of %v, want each input once", got)
	}
	for p := int32(0); p < 2; p++ {
		if off := fetchOffset(t, ctx, plain, "g", p); off != 3 {
			t.Fatalf("in/%d committed at %d, want 3", p, off)
		}
	}
}

// A rebalance that revokes a partition from a member mid-transaction
// makes its End abort: the partition's new owner reads its input again
// from the committed offset and commits the output, and none of the
// first member's output for it is ever committed; the first member reads
// its remaining partition's input again and commits it. Each input's
// output is committed exactly once.
func TestTransactSessionRevokeAbortsTransaction(t *testing.T) {
	cluster, plain, ctx := sessionCluster(t)
	produceSpread(t, ctx, plain, "in", 2, 0, 3)
	a := newSession(t, cluster, "ts-a")
	if read := stepUntil(t, ctx, a, 6); !slices.Equal(read, inputs(2, 0, 3)) {
		t.Fatalf("a read %v", read)
	}
	b := newSession(t, cluster, "ts-b")
	var bRead []string
	for len(bRead) < 3 || len(a.GroupConsumer().Assigned()) != 1 {
		if ctx.Err() != nil {
			t.Fatalf("a owns %v, b owns %v and read %v", a.GroupConsumer().Assigned(), b.GroupConsumer().Assigned(), bRead)
		}
		if extra := step(t, ctx, a); len(extra) > 0 {
			t.Fatalf("a read %v again inside its transaction", extra)
		}
		if read := step(t, ctx, b); len(read) > 0 {
			bRead = append(bRead, read...)
			if committed, err := b.End(ctx, true); !committed || err != nil {
				t.Fatalf("b's End(commit): committed %v, %v", committed, err)
			}
		}
	}
	if committed, err := a.End(ctx, true); committed || err != nil {
		t.Fatalf("a's End(commit) after losing a partition: committed %v, %v; want an abort", committed, err)
	}
	if got := committedOutput(t, ctx, plain, 3); !slices.Equal(got, bRead) {
		t.Fatalf("committed output %v, want only b's %v", got, bRead)
	}
	aRead := stepUntil(t, ctx, a, 3)
	if committed, err := a.End(ctx, true); !committed || err != nil {
		t.Fatalf("a's second End(commit): committed %v, %v", committed, err)
	}
	both := append(slices.Clone(aRead), bRead...)
	slices.Sort(both)
	if !slices.Equal(both, inputs(2, 0, 3)) {
		t.Fatalf("a read %v, b read %v: want the input split between them", aRead, bRead)
	}
	if got := committedOutput(t, ctx, plain, 6); !slices.Equal(got, inputs(2, 0, 3)) {
		t.Fatalf("committed output of %v, want each input once", got)
	}
}

// Exactly once across a rebalance and a member closed mid-transaction:
// input keeps arriving while a processes it and b joins (the revoke lands
// inside one of a's transactions, after it read input); then a
// closes with a transaction open (Close aborts it) and b takes every
// partition over. The committed output names each input exactly once.
func TestTransactSessionExactlyOnceAcrossRebalance(t *testing.T) {
	cluster, plain, ctx := sessionCluster(t)
	produceSpread(t, ctx, plain, "in", 2, 0, 5)
	next := 5 // the index of the next input per partition
	a := newSession(t, cluster, "ts-eo-a")
	stepUntil(t, ctx, a, 1)
	end := func(s *clientlib.TransactSession) {
		t.Helper()
		if _, err := s.End(ctx, true); err != nil {
			t.Fatalf("End: %v", err)
		}
	}
	end(a)
	b := newSession(t, cluster, "ts-eo-b")
	for len(b.GroupConsumer().Assigned()) == 0 {
		if ctx.Err() != nil {
			t.Fatal("b was never assigned a partition")
		}
		produceSpread(t, ctx, plain, "in", 2, next, 1)
		next++
		step(t, ctx, a)
		step(t, ctx, b)
		end(b)
		for i := 0; i < 5 && len(a.GroupConsumer().Assigned()) == 2; i++ {
			step(t, ctx, a) // b joined: a's next heartbeats revoke one of its partitions
		}
		end(a)
	}
	produceSpread(t, ctx, plain, "in", 2, next, 5)
	next += 5
	stepUntil(t, ctx, a, 1) // a's transaction stays open, with output in the log
	if err := a.Client().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatalf("close a: %v", err)
	}
	for len(b.GroupConsumer().Assigned()) != 2 || lagging(t, ctx, plain, int64(next)) {
		if ctx.Err() != nil {
			t.Fatalf("b owns %v", b.GroupConsumer().Assigned())
		}
		step(t, ctx, b)
		end(b)
	}
	if got := committedOutput(t, ctx, plain, 2*next); !slices.Equal(got, inputs(2, 0, next)) {
		t.Fatalf("committed output of %v, want each input once", got)
	}
}

// lagging: the group's committed offsets are not yet at end in both
// input partitions.
func lagging(t *testing.T, ctx context.Context, plain *clientlib.Client, end int64) bool {
	t.Helper()
	return fetchOffset(t, ctx, plain, "g", 0) != end || fetchOffset(t, ctx, plain, "g", 1) != end
}

// Misuse: a session needs a transactional client; End without a
// transaction is ErrNoTransaction.
func TestTransactSessionMisuse(t *testing.T) {
	cluster, plain, ctx := sessionCluster(t)
	if _, err := clientlib.NewTransactSession(plain, "g", []string{"in"}); !errors.Is(err, clientlib.ErrNotTransactional) {
		t.Fatalf("session on a plain client: %v", err)
	}
	s := newSession(t, cluster, "ts-misuse")
	if _, err := s.End(ctx, true); !errors.Is(err, clientlib.ErrNoTransaction) {
		t.Fatalf("End before Poll: %v", err)
	}
}

// A member starts a partition only once its committed offset is stable
// (KIP-447): while another producer's transaction holds offsets of the
// group pending, the session reads nothing there, and once that
// transaction commits it starts at the offsets committed with it.
func TestTransactSessionWaitsForPendingOffsets(t *testing.T) {
	cluster, plain, ctx := sessionCluster(t)
	produceSpread(t, ctx, plain, "in", 2, 0, 3)
	prev := txnClient(t, cluster, "ts-prev")
	if err := prev.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, ctx, prev, "out", "out:0-0", "out:1-0")
	done := map[clientlib.TopicPartition]int64{{Topic: "in", Partition: 0}: 3, {Topic: "in", Partition: 1}: 3}
	if err := prev.SendOffsetsToTransaction(ctx, done, clientlib.GroupMetadata{Group: "g"}); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cluster, "ts-next")
	for i := 0; i < 30; i++ {
		if read := step(t, ctx, s); len(read) > 0 {
			t.Fatalf("read %v while the group's offsets were pending in a transaction", read)
		}
	}
	if err := prev.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	produceSpread(t, ctx, plain, "in", 2, 3, 2)
	if read := stepUntil(t, ctx, s, 4); !slices.Equal(read, inputs(2, 3, 2)) {
		t.Fatalf("read %v after the commit, want only the records after its offsets", read)
	}
	if committed, err := s.End(ctx, true); !committed || err != nil {
		t.Fatalf("End(commit): committed %v, %v", committed, err)
	}
}

// An End whose EndTxn outcome is unknown (its answer did not come before
// ctx ended) leaves the transaction open: End answers a retriable
// *SessionEndPendingError, a Poll meanwhile answers it again, and once
// the coordinator answers, the next Poll finishes the same commit
// (resending EndTxn only: the held one was decided, and the offsets are
// not sent again at the epoch it fenced); the output is committed once.
func TestTransactSessionEndRetriedAfterUnknownOutcome(t *testing.T) {
	cluster, plain, ctx := sessionCluster(t)
	produceSpread(t, ctx, plain, "in", 2, 0, 2)
	s := newSession(t, cluster, "ts-unknown")
	stepUntil(t, ctx, s, 4)
	release := make(chan struct{})
	var held atomic.Bool
	remove := cluster.Control(func(_ uint64, req *strandpb.Request) (fake.Action, bool) {
		if req.GetEndTxn().GetTransactionalId() != "ts-unknown" || !held.CompareAndSwap(false, true) {
			return fake.Action{}, false
		}
		return fake.Action{Hold: release}, true
	})
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	committed, err := s.End(short, true)
	cancel()
	var pending *clientlib.SessionEndPendingError
	if committed || !errors.As(err, &pending) || !pending.Commit || !clientlib.IsRetriable(err) {
		t.Fatalf("End with its EndTxn held: committed %v, %v; want a SessionEndPendingError", committed, err)
	}
	short, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = s.Poll(short).FirstErr()
	cancel()
	if !errors.Is(err, clientlib.ErrSessionEndPending) {
		t.Fatalf("Poll while the EndTxn is held: %v", err)
	}
	close(release)
	remove()
	if err := s.Poll(ctx).FirstErr(); err != nil {
		t.Fatalf("Poll once the EndTxn is answered: %v", err)
	}
	if got := committedOutput(t, ctx, plain, 4); !slices.Equal(got, inputs(2, 0, 2)) {
		t.Fatalf("committed output of %v, want each input once", got)
	}
	for p := int32(0); p < 2; p++ {
		if off := fetchOffset(t, ctx, plain, "g", p); off != 2 {
			t.Fatalf("in/%d committed at %d, want 2", p, off)
		}
	}
}

// A rewind that cannot read the committed offsets (End's error says so)
// is done by the next Poll before it fetches: the aborted input still
// comes again.
func TestTransactSessionPollFinishesFailedRewind(t *testing.T) {
	cluster, plain, ctx := sessionCluster(t)
	produceSpread(t, ctx, plain, "in", 2, 0, 2)
	s := newSession(t, cluster, "ts-rewind")
	first := stepUntil(t, ctx, s, 4)
	cluster.Control(fake.FailTimes(1, strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
		func(_ uint64, req *strandpb.Request) bool { return req.GetOffsetFetch().GetRequireStable() }))
	if committed, err := s.End(ctx, false); committed || !errors.Is(err, clientlib.ErrInvalidRequest) {
		t.Fatalf("End(abort) with the offsets unreadable: committed %v, %v", committed, err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if again := stepUntil(t, short, s, 4); !slices.Equal(again, first) {
		t.Fatalf("read %v, then %v after the abort: want the same input", first, again)
	}
}

// A definitive refusal of EndTxn is End's error as it is, not a pending
// End the next Poll would retry forever.
func TestTransactSessionEndRefusalIsNotPending(t *testing.T) {
	cluster, plain, ctx := sessionCluster(t)
	produceSpread(t, ctx, plain, "in", 2, 0, 1)
	s := newSession(t, cluster, "ts-refused")
	stepUntil(t, ctx, s, 2)
	cluster.Control(fake.FailTimes(1, strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE,
		func(_ uint64, req *strandpb.Request) bool { return req.GetEndTxn() != nil }))
	committed, err := s.End(ctx, true)
	if committed || err == nil || errors.Is(err, clientlib.ErrSessionEndPending) || clientlib.IsRetriable(err) {
		t.Fatalf("End refused INVALID_TXN_STATE: committed %v, %v; want the refusal, not retriable", committed, err)
	}
}
