package clientlib

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestSimulatedTransactionCommits: a transactional Client on the
// simulated transport runs a whole transaction in virtual time: the
// producer adds the partition with AddPartitionsToTxn (through the
// coordinator FindCoordinator named) before its produce, and
// CommitTransaction's Flush waits as a task for the record's answer
// instead of blocking the simulator's thread. Before the fix the
// AddPartitionsToTxn was refused locally ("transactions are not supported
// on the simulator's transport") and Flush blocked on a channel.
func TestSimulatedTransactionCommits(t *testing.T) {
	kinds, offset, finished, commitErr := runSimulatedCommit(t, 10000, true)
	if !finished || commitErr != nil {
		t.Fatalf("task finished=%v, commit error %v; want a committed transaction", finished, commitErr)
	}
	if offset != 41 {
		t.Fatalf("record offset %d, want 41", offset)
	}
	want := []string{"find", "init", "add", "produce", "end"}
	if len(kinds) != len(want) {
		t.Fatalf("requests %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("requests %v, want %v", kinds, want)
		}
	}
}

// runSimulatedCommit runs InitTransactions, BeginTransaction, one Produce
// and CommitTransaction as one task in a scripted world that accepts
// every request; it returns the kinds of the requests in the order they
// were sent, the record's offset, whether the task finished and
// CommitTransaction's error. Events still due after limit are left
// unfired when quiet is false (else the test fails).
func runSimulatedCommit(t *testing.T, limit int, quiet bool) (kinds []string, offset int64, finished bool, commitErr error) {
	t.Helper()
	w := &scriptedWorld{}
	w.answer = func(_ string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetFindCoordinator() != nil:
			kinds = append(kinds, "find")
			return coordinatorAt(2, "n2")
		case req.GetTxnInitProducerId() != nil:
			kinds = append(kinds, "init")
			return &strandpb.Response{Body: &strandpb.Response_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdResponse{ProducerId: 7}}}
		case req.GetAddPartitionsToTxn() != nil:
			kinds = append(kinds, "add")
			return &strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{
				Results: []*strandpb.AddPartitionsToTxnResponse_Result{{Topic: "t", Partition: 0}}}}}
		case req.GetProduce() != nil:
			kinds = append(kinds, "produce")
			return &strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{
				Partitions: []*strandpb.ProduceResponse_Partition{{Topic: "t", Partition: 0, BaseOffset: 41}}}}}
		case req.GetEndTxn() != nil:
			kinds = append(kinds, "end")
			return &strandpb.Response{Body: &strandpb.Response_EndTxn{EndTxn: &strandpb.EndTxnResponse{ProducerId: 7, ProducerEpoch: 1}}}
		}
		t.Fatalf("unexpected request %v", req)
		return nil
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(1), TransactionalID("tx"), ManualPartitioner())
	if err != nil {
		t.Fatal(err)
	}
	offset = -1
	c.SimRun(func(ctx context.Context) {
		if commitErr = c.InitTransactions(ctx); commitErr != nil {
			return
		}
		if commitErr = c.BeginTransaction(); commitErr != nil {
			return
		}
		c.Produce(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("v")}, func(r *Record, err error) {
			if err == nil {
				offset = r.Offset
			}
		})
		commitErr = c.CommitTransaction(ctx)
	}, func() { finished = true })
	if quiet {
		w.run(t, limit)
	} else {
		w.fire(limit)
	}
	return kinds, offset, finished, commitErr
}

// TestSimulatedTransactionalLookupAsksAnotherNode: a node that cannot name
// the transactional id's coordinator (COORDINATOR_NOT_AVAILABLE: a removed
// node that still runs, its metadata stale) or names one that refuses
// (NOT_COORDINATOR) is asked last at the producer's next lookup, so
// InitTransactions reaches the coordinator another node names. Before, the
// lookup asked the candidates in the same order every time, and a client
// whose order started at such a node asked it alone until its retries ran
// out (as the group coordinator's lookup did until seed 59 of the
// simulator's sample).
func TestSimulatedTransactionalLookupAsksAnotherNode(t *testing.T) {
	for _, refusal := range []strandpb.ErrorCode{strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR} {
		for seed := uint64(1); seed <= 10; seed++ {
			w := &scriptedWorld{}
			var finds []string // the node each FindCoordinator went to
			w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
				switch {
				case req.GetMetadata() != nil:
					return twoNodeMetadata()
				case req.GetFindCoordinator() != nil:
					finds = append(finds, addr)
					if addr == "n1" && refusal == strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE {
						return &strandpb.Response{Error: &strandpb.Error{Code: refusal, Message: "coordinator not available yet"}}
					}
					if addr == "n1" {
						return coordinatorAt(1, "n1")
					}
					return coordinatorAt(2, "n2")
				case req.GetTxnInitProducerId() != nil && addr == "n1":
					return &strandpb.Response{Error: &strandpb.Error{Code: refusal, Message: "not the coordinator"}}
				case req.GetTxnInitProducerId() != nil:
					return &strandpb.Response{Body: &strandpb.Response_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdResponse{ProducerId: 7}}}
				}
				t.Fatalf("unexpected request %v", req)
				return nil
			}
			c, err := NewClient(Simulated(w), SeedAddresses("n1", "n2"), RandSeed(seed), TransactionalID("tx"),
				RetryBackoff(5*time.Millisecond, 160*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			var initErr error
			c.SimRun(func(ctx context.Context) { initErr = c.InitTransactions(ctx) }, func() {})
			w.run(t, 1000000)
			requireN1NotAskedTwiceInARow(t, seed, finds, refusal.String()+" from n1")
			if initErr != nil {
				t.Fatalf("%v, seed %d: InitTransactions: %v (lookups %v)", refusal, seed, initErr, finds)
			}
		}
	}
}

// A transaction coordinator that never answers (its process gone without
// closing the connection: a power loss) is looked up again after the
// client's own deadline: InitTransactions reaches the coordinator
// FindCoordinator names next. Before, a TIMEOUT did not forget the
// coordinator, and every retry went to the silent node until the retries
// ran out (simnet seed 202: three transactional producers spent 12-24 s
// that way after the heal).
func TestSimulatedTransactionalTimeoutFindsCoordinatorAgain(t *testing.T) {
	w := &scriptedWorld{}
	var inits []string // the node each InitProducerId went to
	finds := 0
	w.silent = func(addr string, req *strandpb.Request) bool {
		return addr == "n1" && req.GetTxnInitProducerId() != nil
	}
	w.answer = func(addr string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetFindCoordinator() != nil:
			finds++
			if finds == 1 {
				return coordinatorAt(1, "n1") // before its process died
			}
			return coordinatorAt(2, "n2")
		case req.GetTxnInitProducerId() != nil:
			inits = append(inits, addr)
			return &strandpb.Response{Body: &strandpb.Response_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdResponse{ProducerId: 7}}}
		}
		t.Fatalf("unexpected request %v", req)
		return nil
	}
	c, err := NewClient(Simulated(w), SeedAddresses("n1", "n2"), RandSeed(1), TransactionalID("tx"),
		RequestTimeout(800*time.Millisecond), RetryBackoff(5*time.Millisecond, 160*time.Millisecond), MaxRetries(20))
	if err != nil {
		t.Fatal(err)
	}
	var initErr error
	c.SimRun(func(ctx context.Context) { initErr = c.InitTransactions(ctx) }, func() {})
	w.run(t, 1000000)
	if initErr != nil {
		t.Fatalf("InitTransactions: %v (FindCoordinator asked %d times)", initErr, finds)
	}
	if !slices.Equal(inits, []string{"n2"}) || finds != 2 {
		t.Fatalf("InitProducerId answered by %v after %d lookups, want by n2 after the second lookup", inits, finds)
	}
}

// coordinatorWorld is a scripted world whose node n2 plays a transaction
// coordinator: an AddPartitionsToTxn answered with addResult (nil: the
// answer is lost) opens the transaction when applied; an EndTxn of a
// transaction not open is refused INVALID_TXN_STATE, as engine/txn's
// EndTxn refuses it. ends counts EndTxn requests and endsBeforeAdd those
// that arrived while an AddPartitionsToTxn was unanswered.
type coordinatorWorld struct {
	*scriptedWorld
	addResult               *strandpb.Error // nil: added
	loseAdd, lostAddApplied bool
	addLatency              time.Duration
	open                    bool
	adds, addsPending       int
	ends, endsBeforeAdd     int
}

func newCoordinatorWorld(t *testing.T) *coordinatorWorld {
	cw := &coordinatorWorld{scriptedWorld: &scriptedWorld{}, addLatency: 2 * time.Millisecond}
	w := cw.scriptedWorld
	w.latency = func(req *strandpb.Request) time.Duration {
		if req.GetAddPartitionsToTxn() != nil {
			return cw.addLatency
		}
		return 2 * time.Millisecond
	}
	w.answer = func(_ string, req *strandpb.Request) *strandpb.Response {
		switch {
		case req.GetMetadata() != nil:
			return twoNodeMetadata()
		case req.GetFindCoordinator() != nil:
			return coordinatorAt(2, "n2")
		case req.GetTxnInitProducerId() != nil:
			return &strandpb.Response{Body: &strandpb.Response_TxnInitProducerId{TxnInitProducerId: &strandpb.TxnInitProducerIdResponse{ProducerId: 7}}}
		case req.GetAddPartitionsToTxn() != nil:
			cw.adds++
			if cw.loseAdd {
				cw.loseAdd = false
				cw.open = cw.open || cw.lostAddApplied
				return nil
			}
			cw.addsPending++
			w.After(cw.addLatency, func() {
				cw.addsPending--
				cw.open = cw.open || cw.addResult == nil
			})
			return &strandpb.Response{Body: &strandpb.Response_AddPartitionsToTxn{AddPartitionsToTxn: &strandpb.AddPartitionsToTxnResponse{
				Results: []*strandpb.AddPartitionsToTxnResponse_Result{{Topic: "t", Partition: 0, Error: cw.addResult}}}}}
		case req.GetProduce() != nil:
			return &strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{
				Partitions: []*strandpb.ProduceResponse_Partition{{Topic: "t", Partition: 0, BaseOffset: 41}}}}}
		case req.GetEndTxn() != nil:
			cw.ends++
			if cw.addsPending > 0 {
				cw.endsBeforeAdd++
			}
			if !cw.open {
				return &strandpb.Response{Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE, Message: "no transaction open"}}
			}
			cw.open = false
			return &strandpb.Response{Body: &strandpb.Response_EndTxn{EndTxn: &strandpb.EndTxnResponse{ProducerId: 7, ProducerEpoch: 1}}}
		}
		t.Fatalf("unexpected request %v", req)
		return nil
	}
	return cw
}

// abortAfterProduce runs InitTransactions, BeginTransaction, one Produce
// and, without waiting for it, AbortTransaction, then (when the abort
// succeeded) a second transaction that commits; it returns the abort's
// and the commit's errors.
func (cw *coordinatorWorld) abortAfterProduce(t *testing.T) (abortErr, commitErr error) {
	t.Helper()
	c, err := NewClient(Simulated(cw.scriptedWorld), SeedAddresses("n1"), RandSeed(1), TransactionalID("tx"), ManualPartitioner(),
		RetryBackoff(5*time.Millisecond, 40*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	finished := false
	c.SimRun(func(ctx context.Context) {
		if abortErr = c.InitTransactions(ctx); abortErr != nil {
			return
		}
		if abortErr = c.BeginTransaction(); abortErr != nil {
			return
		}
		c.Produce(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("v")}, func(*Record, error) {})
		for i := 0; i < 100 && cw.adds == 0; i++ {
			c.sleep(ctx, time.Millisecond) // until the AddPartitionsToTxn is sent
		}
		if abortErr = c.AbortTransaction(ctx); abortErr != nil {
			return
		}
		cw.addResult, cw.addLatency = nil, 2*time.Millisecond
		if commitErr = c.BeginTransaction(); commitErr != nil {
			return
		}
		c.Produce(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("w")}, func(*Record, error) {})
		commitErr = c.CommitTransaction(ctx)
	}, func() { finished = true })
	cw.fire(100000)
	if !finished {
		t.Fatalf("the task did not finish (abort %v, commit %v)", abortErr, commitErr)
	}
	return abortErr, commitErr
}

// An abort while the transaction's AddPartitionsToTxn is unanswered waits
// for that answer before its EndTxn: the coordinator must not take the
// EndTxn first (it would refuse an abort of a transaction it has not
// opened, and then open one nobody ends). Before, the abort failed the
// queued record and sent EndTxn at once (TestTransactSessionAbort-
// RedeliversInput failed so once in CI: "no transaction open (Empty)").
func TestSimulatedAbortWaitsForAddPartitions(t *testing.T) {
	cw := newCoordinatorWorld(t)
	cw.addLatency = 200 * time.Millisecond
	abortErr, commitErr := cw.abortAfterProduce(t)
	if abortErr != nil || commitErr != nil || cw.endsBeforeAdd != 0 || cw.open {
		t.Fatalf("abort %v, commit %v, %d of %d EndTxn before the add's answer, left open %v; want both ended, none early",
			abortErr, commitErr, cw.endsBeforeAdd, cw.ends, cw.open)
	}
}

// An abort of a transaction the coordinator never opened ends it: every
// AddPartitionsToTxn was refused (retriably, before the abort), or the one
// whose answer was lost was not applied, so the EndTxn's INVALID_TXN_STATE
// says there is nothing to end (Kafka's producer skips the EndTxn when
// nothing was added). Before, Abort returned that refusal and the client
// could never end the transaction. When the lost add was applied, the
// EndTxn ends the transaction the coordinator opened.
func TestSimulatedAbortOfUnopenedTransaction(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(cw *coordinatorWorld)
	}{
		{"add refused", func(cw *coordinatorWorld) {
			cw.addResult = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS}
		}},
		{"add answer lost, not applied", func(cw *coordinatorWorld) { cw.loseAdd = true }},
		{"add answer lost, applied", func(cw *coordinatorWorld) { cw.loseAdd, cw.lostAddApplied = true, true }},
	} {
		cw := newCoordinatorWorld(t)
		tc.setup(cw)
		abortErr, commitErr := cw.abortAfterProduce(t)
		if abortErr != nil || commitErr != nil || cw.open {
			t.Errorf("%s: abort %v, commit %v, left open %v; want both ended", tc.name, abortErr, commitErr, cw.open)
		}
	}
}
