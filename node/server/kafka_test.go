package server

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/node"
)

// startKafkaServer starts a one-node runtime with a Kafka listener, both
// on free loopback ports.
func startKafkaServer(t *testing.T) *Server {
	t.Helper()
	return startKafkaServerWith(t, nil)
}

// startKafkaServerWith is startKafkaServer with set (when not nil)
// changing the node's configuration first.
func startKafkaServerWith(t *testing.T, set func(*node.Config)) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: ln.Addr().String()}}}
	if set != nil {
		set(&cfg)
	}
	rt, err := Start(Config{
		Core:        cfg,
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
	rt := startKafkaServer(t)
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
	ft.Topic, ft.TopicID = "pf", created.ID // kgo sends the newest version, v13: by id
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

// kadm's topic administration and offset listing over the Kafka listener:
// a second create is TOPIC_ALREADY_EXISTS, configs are described, offsets
// listed earliest, latest and by timestamp, a delete removes the topic and
// a second delete is UNKNOWN_TOPIC_OR_PARTITION. A consumer group reads
// the produced record.
func TestKafkaAdminCalls(t *testing.T) {
	rt := startKafkaServer(t)
	addr := rt.KafkaAddr().String()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	created, err := kafkaCreateWhenReady(ctx, adm, 2, 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("1048576")}, "adm")
	if err != nil || created.Err != nil || created.NumPartitions != 2 || created.ReplicationFactor != 1 {
		t.Fatalf("create: %v / %+v", err, created)
	}
	if again, err := adm.CreateTopic(ctx, 2, 1, nil, "adm"); !errors.Is(again.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v / %v", err, again.Err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On("adm", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs: %v / %v", err, rc.Err)
	}
	if v := configValue(rc.Configs, "max.message.bytes"); v != "1048576" {
		t.Fatalf("max.message.bytes described as %q; configs %+v", v, rc.Configs)
	}
	before := time.Now().UnixMilli()
	var produced *kgo.Record
	for ctx.Err() == nil { // the partitions elect their leaders
		if produced, err = cl.ProduceSync(ctx, &kgo.Record{Topic: "adm", Partition: 0, Value: []byte("v")}).First(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	// The other partition may still be electing its leader: that answer is
	// retriable (LEADER_NOT_AVAILABLE), so ask until none is, within ctx.
	var ends, byTime kadm.ListedOffsets
	for ctx.Err() == nil {
		if ends, err = adm.ListEndOffsets(ctx, "adm"); err == nil && ends.Error() == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
	if err != nil || ends.Error() != nil {
		t.Fatalf("end offsets: %v / %v", err, ends.Error())
	}
	if e, _ := ends.Lookup("adm", produced.Partition); e.Offset != produced.Offset+1 {
		t.Fatalf("end offset %d after producing offset %d", e.Offset, produced.Offset)
	}
	byTime, err = adm.ListOffsetsAfterMilli(ctx, before-1000, "adm")
	if err != nil || byTime.Error() != nil {
		t.Fatalf("offsets by time: %v / %v", err, byTime.Error())
	}
	if o, _ := byTime.Lookup("adm", produced.Partition); o.Offset != produced.Offset {
		t.Fatalf("offset after %d ms: %d, want %d", before-1000, o.Offset, produced.Offset)
	}

	group, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("adm"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	gctx, gcancel := context.WithTimeout(ctx, 20*time.Second)
	defer gcancel()
	var got *kgo.Record
	for got == nil && gctx.Err() == nil {
		fs := group.PollFetches(gctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("consumer group: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got = r })
	}
	if got == nil || string(got.Value) != "v" {
		t.Fatalf("a consumer group read %v within 20s, want the produced record", got)
	}

	deleted, err := adm.DeleteTopic(ctx, "adm")
	if err != nil || deleted.Err != nil {
		t.Fatalf("delete: %v / %v", err, deleted.Err)
	}
	if again, err := adm.DeleteTopic(ctx, "adm"); !errors.Is(again.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("second delete: %v / %v", err, again.Err)
	}
}

func configValue(configs []kadm.Config, name string) string {
	for _, c := range configs {
		if c.Key == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}
