package server

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/node"
)

// timeoutClient is a franz-go transactional producer with a 1 s
// transaction.timeout.ms writing to txnDataTopic's partition 0.
func timeoutClient(t *testing.T, addr, tid string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(tid), kgo.TransactionTimeout(time.Second),
		kgo.DefaultProduceTopic(txnDataTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// waitTxnState polls kadm's DescribeTransactions until id is in state.
func waitTxnState(ctx context.Context, t *testing.T, adm *kadm.Client, id, state string) kadm.DescribedTransaction {
	t.Helper()
	for ctx.Err() == nil {
		if d, err := adm.DescribeTransactions(ctx, id); err == nil && d[id].State == state {
			return d[id]
		}
		time.Sleep(50 * time.Millisecond) // polling the coordinator's sweep, bounded by ctx
	}
	t.Fatalf("%s never reached %s", id, state)
	return kadm.DescribedTransaction{}
}

// A transaction left past its transaction.timeout.ms, over a real node and
// franz-go, answered as Kafka's coordinator answers it (KIP-588 as
// implemented: Kafka's timeout abort is an epoch fence that clears the
// last epoch, TransactionMetadata.prepareFenceProducerEpoch and
// endTransaction's isEpochFence branch): the coordinator aborts it at the
// next epoch; the producer's next produce is INVALID_PRODUCER_EPOCH (the
// abort marker's epoch is newer), which franz-go treats as recoverable
// (its abort returns nil and the id is flagged for reload); its reload,
// InitProducerId with its old producer id and epoch, is PRODUCER_FENCED,
// as Kafka answers an epoch neither current nor the last one granted, so
// the same client cannot go on. A new client under the same transactional
// id continues at once, and a read_committed reader sees only its commit.
func TestKafkaTxnTimeoutFencesAsKafka(t *testing.T) {
	rt := startKafkaTxnServer(t, node.PartitionMarkers{})
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kafkaTopic(ctx, t, addr, txnDataTopic, 2, nil)
	cl := timeoutClient(t, addr, "timed")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("timed-out")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	_, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := waitTxnState(ctx, t, adm, "timed", "CompleteAbort"); d.ProducerEpoch != epoch+1 {
		t.Fatalf("timed-out transaction aborted at epoch %d, want %d", d.ProducerEpoch, epoch+1)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("late")}).FirstErr(); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("produce after the timeout: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("abort after INVALID_PRODUCER_EPOCH: %v, want nil (franz-go reloads the producer id)", err)
	}
	if err := cl.BeginTransaction(); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("begin after the timeout: %v, want PRODUCER_FENCED (Kafka's answer to the old epoch's InitProducerId)", err)
	}

	next := timeoutClient(t, addr, "timed")
	if err := next.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := next.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("next")}).FirstErr(); err != nil {
		t.Fatalf("new client's produce: %v", err)
	}
	if err := next.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("new client's commit: %v", err)
	}
	if got, _ := consumeUntil(ctx, t, addr, kgo.ReadCommitted(), "next"); !slices.Equal(got[0], []string{"next"}) {
		t.Fatalf("read_committed partition 0: %q, want only the new client's commit", got[0])
	}
}
