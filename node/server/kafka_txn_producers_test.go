package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/node"
)

// Over a real node and franz-go's kadm (KIP-664, rpk cluster txn
// describe-producers): while a transaction is open on partition 0, kadm's
// DescribeProducers shows its producer there with the producer id and
// epoch InitProducerId gave, its last sequence and the transaction's first
// offset (what holds the last stable offset back), and partition 1 with
// nobody; after the commit the producer is still listed, with no open
// transaction and its last marker's coordinator epoch. A partition of an
// unknown topic is answered UNKNOWN_TOPIC_OR_PARTITION beside a known one.
func TestKafkaDescribeProducersOverFranzGo(t *testing.T) {
	rt := startKafkaTxnServer(t, node.PartitionMarkers{})
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kafkaTopic(ctx, t, addr, txnDataTopic, 2, nil)
	cl := txnProducer(t, addr)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	both := kadm.TopicsSet{txnDataTopic: {0: {}, 1: {}}}
	described, err := adm.DescribeProducers(ctx, both)
	if err != nil {
		t.Fatalf("describe producers: %v", err)
	}
	p0, p1 := described[txnDataTopic].Partitions[0], described[txnDataTopic].Partitions[1]
	if p0.Err != nil || p1.Err != nil || len(p0.ActiveProducers) != 1 || len(p1.ActiveProducers) != 0 {
		t.Fatalf("described %+v / %+v", p0, p1)
	}
	got := p0.ActiveProducers[id]
	if got.ProducerID != id || got.ProducerEpoch != epoch || got.LastSequence != 1 || got.CurrentTxnStartOffset != 0 ||
		got.CoordinatorEpoch != -1 || got.LastTimestamp <= 0 {
		t.Fatalf("open transaction's producer %+v (id %d epoch %d)", got, id, epoch)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	for ctx.Err() == nil { // the marker is written after EndTxn is answered
		if described, err = adm.DescribeProducers(ctx, both); err == nil &&
			described[txnDataTopic].Partitions[0].ActiveProducers[id].CurrentTxnStartOffset == -1 {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the marker's apply, bounded by ctx
	}
	if got := described[txnDataTopic].Partitions[0].ActiveProducers[id]; got.CurrentTxnStartOffset != -1 || got.CoordinatorEpoch < 1 {
		t.Fatalf("committed producer %+v", got)
	}

	raw, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "nope", Partitions: []int32{0}}, {Topic: txnDataTopic, Partitions: []int32{0}}}
	resp, err := req.RequestWith(ctx, raw.Broker(1))
	if err != nil || len(resp.Topics) != 2 {
		t.Fatalf("raw describe: %v %+v", err, resp)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", p)
	}
	if p := resp.Topics[1].Partitions[0]; p.ErrorCode != 0 || len(p.ActiveProducers) != 1 {
		t.Fatalf("known partition beside it: %+v", p)
	}
}
