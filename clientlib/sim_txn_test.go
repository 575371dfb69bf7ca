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
