package clientlib_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/clientlib/fake"
	"github.com/strandlog/strand/proto/strandpb"
)

// orderedProducer produces n records "0".."n-1" to partition 0 of topic
// asynchronously and checks, as promises run, that they run in offset
// order; wait returns once every promise ran.
type orderedProducer struct {
	t       *testing.T
	mu      sync.Mutex
	offsets []int64
	errs    []error
	wg      sync.WaitGroup
}

func produceOrdered(t *testing.T, client *clientlib.Client, topic string, n int) *orderedProducer {
	op := &orderedProducer{t: t}
	op.wg.Add(n)
	ctx := t.Context()
	for i := 0; i < n; i++ {
		r := &clientlib.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprint(i))}
		client.Produce(ctx, r, func(r *clientlib.Record, err error) {
			defer op.wg.Done()
			op.mu.Lock()
			defer op.mu.Unlock()
			if err != nil {
				op.errs = append(op.errs, err)
				return
			}
			if k := len(op.offsets); k > 0 && r.Offset <= op.offsets[k-1] {
				t.Errorf("promise for offset %d after offset %d", r.Offset, op.offsets[k-1])
			}
			op.offsets = append(op.offsets, r.Offset)
		})
	}
	return op
}

// check waits for every promise and verifies the log holds the n records
// exactly once, in produce order, at the offsets the promises reported.
func (op *orderedProducer) check(cluster *fake.Cluster, topic string, n int) {
	op.t.Helper()
	op.wg.Wait()
	if len(op.errs) > 0 {
		op.t.Fatalf("%d records failed, first: %v", len(op.errs), op.errs[0])
	}
	log := cluster.Log(topic, 0)
	if len(log) != n {
		op.t.Fatalf("log holds %d records, produced %d (duplicates or losses)", len(log), n)
	}
	for i, r := range log {
		if string(r.Value) != fmt.Sprint(i) || r.Offset != int64(i) || op.offsets[i] != int64(i) {
			op.t.Fatalf("offset %d holds %q (promise said %d), want %q", r.Offset, r.Value, op.offsets[i], fmt.Sprint(i))
		}
	}
}

// smallBatches makes every record its own batch, so many batches of one
// partition are in flight at once.
var smallBatches = []clientlib.Opt{clientlib.ManualPartitioner(), clientlib.BatchBytes(1), clientlib.Linger(0)}

// Leadership moves to another node six times while 300 records stream to
// one partition (when the batches with sequences 20, 60, … first arrive,
// the fake isolates the leader until raft elects another): the old leader
// answers NOT_LEADER or TIMEOUT with a hint, and the client follows it
// without losing, duplicating or reordering a record.
func TestOrderKeptAcrossLeaderMoves(t *testing.T) {
	cluster, client, _ := setup(t, []fake.Opt{fake.Topic("t", 1)}, smallBatches...)
	var mu sync.Mutex
	moveAt := map[int32]bool{20: true, 60: true, 100: true, 150: true, 200: true, 250: true}
	moves := 0
	cluster.Control(func(node uint64, req *strandpb.Request) (fake.Action, bool) {
		parts := req.GetProduce().GetPartitions()
		if len(parts) != 1 {
			return fake.Action{}, false
		}
		mu.Lock()
		defer mu.Unlock()
		if seq := parts[0].GetBaseSequence(); moveAt[seq] {
			delete(moveAt, seq)
			moves++
			if _, err := cluster.MoveLeader("t", 0); err != nil {
				t.Error(err)
			}
		}
		return fake.Action{}, false
	})
	const n = 300
	produceOrdered(t, client, "t", n).check(cluster, "t", n)
	if moves != 6 {
		t.Fatalf("leadership moved %d times, want 6", moves)
	}
}

// Batch 1 (sequence 1) fails with a retriable error while the batches
// after it are already in flight (the control sees sequence 3 arrive
// before batch 1 is answered). The server refuses the later ones as out of
// order; the client resends 1, 2, 3… in order and the log keeps produce
// order with no duplicate.
func TestOrderKeptWhenBatchFailsWithLaterInFlight(t *testing.T) {
	cluster, client, _ := setup(t, []fake.Opt{fake.Topic("t", 1)}, smallBatches...)
	hold := make(chan struct{})
	var failed, released atomic.Bool
	cluster.Control(func(node uint64, req *strandpb.Request) (fake.Action, bool) {
		parts := req.GetProduce().GetPartitions()
		if len(parts) != 1 {
			return fake.Action{}, false
		}
		switch seq := parts[0].GetBaseSequence(); {
		case seq == 1 && failed.CompareAndSwap(false, true):
			return fake.Action{Hold: hold, Error: &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS}}, true
		case seq == 3 && failed.Load() && released.CompareAndSwap(false, true):
			close(hold) // batch 3 is in flight behind the held batch 1
		}
		return fake.Action{}, false
	})
	const n = 40
	produceOrdered(t, client, "t", n).check(cluster, "t", n)
	if !released.Load() {
		t.Fatal("batch 3 was never in flight while batch 1 was held")
	}
}

// The fake applies batch 2 and drops the connection without answering,
// and later applies a produce twice. The client resends what it cannot
// know; the server's producer-id/sequence check answers the resends as
// duplicates with the original offsets: every record is in the log once.
func TestNoDuplicatesWhenAnswerLost(t *testing.T) {
	cluster, client, _ := setup(t, []fake.Opt{fake.Topic("t", 1)}, smallBatches...)
	var dropped, duplicated atomic.Bool
	cluster.Control(func(node uint64, req *strandpb.Request) (fake.Action, bool) {
		parts := req.GetProduce().GetPartitions()
		if len(parts) != 1 {
			return fake.Action{}, false
		}
		switch parts[0].GetBaseSequence() {
		case 2:
			if dropped.CompareAndSwap(false, true) {
				return fake.Action{DropAfter: true}, true
			}
		case 9:
			if duplicated.CompareAndSwap(false, true) {
				return fake.Action{Duplicate: true}, true
			}
		}
		return fake.Action{}, false
	})
	const n = 30
	produceOrdered(t, client, "t", n).check(cluster, "t", n)
	if !dropped.Load() || !duplicated.Load() {
		t.Fatal("faults were not injected")
	}
}

// A produce answered with a retriable error three times, then every
// connection dropped, still succeeds once the faults stop.
func TestRetriesRetriableErrorsAndDroppedConnections(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)})
	remove := cluster.Control(fake.FailTimes(3, strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, fake.IsProduce))
	if err := client.ProduceSync(ctx, &clientlib.Record{Topic: "t", Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	remove()
	cluster.DropConnections(0)
	if err := client.ProduceSync(ctx, &clientlib.Record{Topic: "t", Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if n := len(cluster.Log("t", 0)); n != 2 {
		t.Fatalf("log holds %d records, want 2", n)
	}
}

// With MaxRetries 2, a batch refused retriably forever fails with a
// RetriesExhaustedError that wraps the last error and is not retriable.
func TestRetriesExhausted(t *testing.T) {
	cluster, client, ctx := setup(t, []fake.Opt{fake.Topic("t", 1)}, clientlib.MaxRetries(2))
	cluster.Control(fake.FailTimes(1000, strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS, fake.IsProduce))
	err := client.ProduceSync(ctx, &clientlib.Record{Topic: "t", Value: []byte("a")}).FirstErr()
	var re *clientlib.RetriesExhaustedError
	if !asRetriesExhausted(err, &re) || re.Attempts != 3 || clientlib.IsRetriable(err) {
		t.Fatalf("got %v, want RetriesExhaustedError after 3 attempts", err)
	}
	if !re.MaybeWritten {
		t.Fatal("NOT_ENOUGH_REPLICAS should leave the outcome unknown")
	}
}

func asRetriesExhausted(err error, re **clientlib.RetriesExhaustedError) bool {
	e, ok := err.(*clientlib.RetriesExhaustedError)
	*re = e
	return ok
}
