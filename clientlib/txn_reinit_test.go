package clientlib_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
	"google.golang.org/protobuf/proto"
)

// txnTrace records, for one transactional id, its InitProducerId
// requests' expected ids (nil: a fresh start), its EndTxn requests'
// producers and the producer of every batch it produced.
type txnTrace struct {
	mu       sync.Mutex
	inits    []*strandpb.TxnProducer
	ends     []*strandpb.TxnProducer
	batchIDs []int64
	epochs   []int32
}

// trace installs a control on cluster recording id's requests.
func trace(cluster *fake.Cluster, id string) *txnTrace {
	tr := &txnTrace{}
	cluster.Control(func(_ uint64, req *strandpb.Request) (fake.Action, bool) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		switch {
		case req.GetTxnInitProducerId().GetTransactionalId() == id:
			tr.inits = append(tr.inits, req.GetTxnInitProducerId().GetExpected())
		case req.GetEndTxn().GetTransactionalId() == id:
			tr.ends = append(tr.ends, req.GetEndTxn().GetProducer())
		case req.GetProduce().GetTransactionalId() == id:
			for _, b := range req.GetProduce().GetPartitions() {
				tr.batchIDs = append(tr.batchIDs, b.GetProducerId())
				tr.epochs = append(tr.epochs, b.GetProducerEpoch())
			}
		}
		return fake.Action{}, false
	})
	return tr
}

// isTxnProduce matches the produce requests of transactional id id.
func isTxnProduce(id string) func(uint64, *strandpb.Request) bool {
	return func(_ uint64, req *strandpb.Request) bool { return req.GetProduce().GetTransactionalId() == id }
}

// A record refused UNKNOWN_PRODUCER_ID inside a transaction fails (it is
// not renumbered under the transaction's epoch) and makes the transaction
// abortable; AbortTransaction then re-initializes the producer with the
// ids it holds (KIP-360's expected producer id and epoch), so the next
// transaction runs under the same producer id at a newer epoch and
// commits.
func TestTxnSequenceLossReinitKeepsProducerID(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	tr := trace(cluster, "tx-reinit")
	c := txnClient(t, cluster, "tx-reinit")
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	cluster.Control(fake.FailTimes(1, strandpb.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID, isTxnProduce("tx-reinit")))
	if errs := produceTxn(t, ctx, c, "out", "lost"); !errors.Is(errs[0], clientlib.ErrUnknownProducerID) {
		t.Fatalf("record refused UNKNOWN_PRODUCER_ID: %v", errs[0])
	}
	var ae *clientlib.TransactionAbortableError
	if err := c.CommitTransaction(ctx); !errors.As(err, &ae) {
		t.Fatalf("commit: %v, want TransactionAbortableError", err)
	}
	if err := c.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	inits, ends := slices.Clone(tr.inits), slices.Clone(tr.ends)
	tr.mu.Unlock()
	// A re-init answered CONCURRENT_TRANSACTIONS (the abort's markers
	// still being written) is resent as it was.
	if len(inits) < 2 || inits[0] != nil || len(ends) != 1 ||
		slices.ContainsFunc(inits[1:], func(p *strandpb.TxnProducer) bool { return !proto.Equal(p, inits[1]) }) {
		t.Fatalf("InitProducerId expected ids %v, EndTxn producers %v: want a fresh init, one abort, then a re-init", inits, ends)
	}
	held := inits[1]
	if held.GetProducerId() != ends[0].GetProducerId() || held.GetEpoch() <= ends[0].GetEpoch() {
		t.Fatalf("re-init expected %v after the abort at %v: want the same producer id at the epoch the abort answered", held, ends[0])
	}
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, err := range produceTxn(t, ctx, c, "out", "kept1", "kept2") {
		if err != nil {
			t.Fatalf("record %d after the re-init: %v", i, err)
		}
	}
	if err := c.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	ids, epochs := slices.Clone(tr.batchIDs), slices.Clone(tr.epochs)
	tr.mu.Unlock()
	last := len(ids) - 1
	if ids[last] != held.GetProducerId() || epochs[last] <= held.GetEpoch() {
		t.Fatalf("batch after the re-init: producer %d epoch %d, want producer %d above epoch %d", ids[last], epochs[last], held.GetProducerId(), held.GetEpoch())
	}
	k := txnConsumer(plain, "out", clientlib.ReadCommitted)
	got, err := pollUntil(t, ctx, k, 2)
	got = append(got, pollRounds(t, ctx, k, 3)...)
	if err != nil || !slices.Equal(values(got), []string{"kept1", "kept2"}) {
		t.Fatalf("read_committed: %v, %v; want kept1, kept2 only", values(got), err)
	}
}

// A fenced producer stays fenced even when its transaction needed a
// re-init: its abort answers PRODUCER_FENCED, it sends no InitProducerId
// (a re-init must never take the id back from the newer producer), and
// the newer producer's transactions commit.
func TestTxnFencedProducerIsNotReinitialized(t *testing.T) {
	cluster, plain, ctx := setup(t, []fake.Opt{fake.Topic("out", 2)})
	tr := trace(cluster, "tx-zombie")
	old := txnClient(t, cluster, "tx-zombie")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	cluster.Control(fake.FailTimes(1, strandpb.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID, isTxnProduce("tx-zombie")))
	produceTxn(t, ctx, old, "out", "lost")
	fresh := txnClient(t, cluster, "tx-zombie")
	if err := fresh.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	initsBefore := len(tr.inits)
	tr.mu.Unlock()
	err := old.AbortTransaction(ctx)
	var pf *clientlib.ProducerFencedError
	if !errors.As(err, &pf) {
		t.Fatalf("fenced abort: %v, want ProducerFencedError", err)
	}
	if err := old.BeginTransaction(); !errors.As(err, &pf) {
		t.Fatalf("begin after fencing: %v, want ProducerFencedError", err)
	}
	tr.mu.Lock()
	initsAfter := len(tr.inits)
	tr.mu.Unlock()
	if initsAfter != initsBefore {
		t.Fatalf("the fenced producer sent %d InitProducerId after its fence", initsAfter-initsBefore)
	}
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, ctx, fresh, "out", "new1", "new2")
	if err := fresh.CommitTransaction(ctx); err != nil {
		t.Fatalf("the newer producer's commit: %v", err)
	}
	got, err := pollUntil(t, ctx, txnConsumer(plain, "out", clientlib.ReadCommitted), 2)
	if err != nil || !slices.Equal(values(got), []string{"new1", "new2"}) {
		t.Fatalf("read_committed: %v, %v", values(got), err)
	}
}
