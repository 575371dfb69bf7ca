package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A franz-go consumer reads, over the node's Kafka listener on TCP, fetch
// answers whose stored Kafka batches are written from where the node
// holds them (kafkaproto's spliced fetch answer, writev): batches of
// 64 records of 1 KiB, uncompressed on partition 0 and zstd on partition
// 1 (random values, so well over kafkaproto.SpliceBytesMin either way),
// and single small records between them, every record at its offset with
// its value, in order, over several fetches per partition.
func TestKafkaSplicedFetchOverFranzGo(t *testing.T) {
	rt := startKafkaServer(t)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafkaTopic(ctx, t, addr, "ks", 2, nil)
	r := rand.New(rand.NewPCG(5, 6))
	value := func(n int) []byte {
		v := make([]byte, n)
		for i := range v {
			v[i] = byte(r.IntN(256))
		}
		return v
	}
	const rounds, per = 6, 64
	want := [2][][]byte{}
	for p, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for round := range rounds {
			var recs []*kgo.Record
			for range per {
				recs = append(recs, &kgo.Record{Topic: "ks", Partition: int32(p), Value: value(1 << 10)})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			small := &kgo.Record{Topic: "ks", Partition: int32(p), Value: []byte(fmt.Sprintf("small %d", round))}
			if err := cl.ProduceSync(ctx, small).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			for _, rec := range append(recs, small) {
				want[p] = append(want[p], rec.Value)
			}
		}
		cl.Close()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("ks"), kgo.FetchMaxPartitionBytes(100<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := [2]int{}
	for (got[0] < len(want[0]) || got[1] < len(want[1])) && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			p := rec.Partition
			if rec.Offset != int64(got[p]) || got[p] >= len(want[p]) || string(rec.Value) != string(want[p][got[p]]) {
				t.Fatalf("partition %d: record at offset %d (%d bytes), want offset %d", p, rec.Offset, len(rec.Value), got[p])
			}
			got[p]++
		})
	}
	if got[0] != len(want[0]) || got[1] != len(want[1]) {
		t.Fatalf("read %v of %d, %d records", got, len(want[0]), len(want[1]))
	}
}
