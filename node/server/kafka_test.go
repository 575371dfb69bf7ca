package server

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/node"
)

// startKafkaRuntime starts a one-node runtime with a Kafka listener, both
// on free loopback ports.
func startKafkaRuntime(t *testing.T) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Start(Config{
		Core:        node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: ln.Addr().String()}}},
		DataDir:     t.TempDir(),
		Listener:    ln,
		KafkaListen: "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return rt
}

// A franz-go idempotent producer's batch is served back by a Kafka fetch
// with the producer id, epoch and base sequence it was produced with (they
// travel in the raft entry beside Strand's batch), and the node's Metadata
// names its own Kafka listener as the broker, with the topic's id.
func TestKafkaFetchServesProducerFields(t *testing.T) {
	rt := startKafkaRuntime(t)
	addr := rt.KafkaAddr().String()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	var created kadm.CreateTopicResponse
	for ctx.Err() == nil { // the metadata group elects its leader first: retriable until then
		if created, err = adm.CreateTopic(ctx, 1, 1, nil, "pf"); err == nil && created.Err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
	if err != nil || created.Err != nil {
		t.Fatalf("create: %v / %v", err, created.Err)
	}
	var rec *kgo.Record
	for ctx.Err() == nil { // the partition elects its leader
		var err error
		if rec, err = cl.ProduceSync(ctx, &kgo.Record{Topic: "pf", Value: []byte("v")}).First(); err == nil {
			break
		}
	}
	if rec == nil || rec.ProducerID < 0 {
		t.Fatalf("produce: %+v", rec)
	}
	meta, err := adm.Metadata(ctx, "pf")
	if err != nil {
		t.Fatal(err)
	}
	if b := meta.Brokers; len(b) != 1 || net.JoinHostPort(b[0].Host, strconv.Itoa(int(b[0].Port))) != addr {
		t.Fatalf("brokers %+v, want the Kafka listener %s", meta.Brokers, addr)
	}
	if meta.Topics["pf"].ID != created.ID {
		t.Fatalf("metadata topic id %v, create answered %v", meta.Topics["pf"].ID, created.ID)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 100, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "pf"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(p.RecordBatches); err != nil || p.ErrorCode != 0 {
		t.Fatalf("fetch: code %d, %v", p.ErrorCode, err)
	}
	if rb.ProducerID != rec.ProducerID || rb.ProducerEpoch != rec.ProducerEpoch || rb.FirstSequence != 0 {
		t.Fatalf("served producer %d/%d/%d, produced %d/%d/0", rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence,
			rec.ProducerID, rec.ProducerEpoch)
	}
}
