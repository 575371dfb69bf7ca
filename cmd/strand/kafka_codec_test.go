package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kcCodecs are franz-go's codecs, in produce order, with the attribute
// value each sets in a batch.
var kcCodecs = []struct {
	name  string
	codec kgo.CompressionCodec
	attr  int16
}{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

// kcPerCodec records are produced with each codec, in one batch.
const kcPerCodec = 3

// franz-go producers with each codec (none, gzip, snappy, lz4, zstd) write
// to a real `strand serve --kafka-listen`; then a kgo consumer reads every
// record back identical (key, value, header, offset: N records take N
// offsets), a raw Kafka Fetch shows each batch served with the compression
// attribute its producer set (compressed batches are served as sent, not
// inflated), and Strand's own consumer (`strand consume`, the native
// protocol) prints the same records. Before compressed batches were
// stored as sent, the raw fetch saw attribute 0 on every batch.
func TestKafkaCompressedBatchesServedAsSent(t *testing.T) {
	skipShort(t)
	c := startKafkaCluster(t, 1)
	adm := kafkaAdmin(t, c.kafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "codecs"
	createKafkaTopics(ctx, t, adm, 1, 1, topic)
	var want []string
	for _, kc := range kcCodecs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.ProducerBatchCompression(kc.codec),
			kgo.ProducerLinger(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range kcPerCodec {
			// Repetitive values so that compression shrinks them
			// (franz-go sends a batch uncompressed otherwise).
			v := fmt.Sprintf("%s-%d-%s", kc.name, i, strings.Repeat("abcdefgh", 40))
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(kc.name), Value: []byte(v),
				Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(kc.name)}}})
			want = append(want, fmt.Sprintf("%d %s=%s", len(want), kc.name, v))
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", kc.name, err)
		}
		cl.Close()
	}
	if got := kgoReadAll(ctx, t, c.kafka, topic, len(want)); !slices.Equal(got, want) {
		t.Fatalf("kgo consumer read\n%q\nwant\n%q", got, want)
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td.Error() != nil {
		t.Fatalf("list topics: %v / %v", err, td.Error())
	}
	checkRawFetchCodecs(ctx, t, c.kafka, topic, td[topic].ID)
	env := []string{"STRAND_BROKERS=" + c.addrs[0]}
	out := runCLI(t, env, "", "consume", topic, "--until-end", "--format", `%o %k=%v\n`)
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); !slices.Equal(got, want) {
		t.Fatalf("strand consume printed\n%q\nwant\n%q", got, want)
	}
}

// kgoReadAll reads n records of a one-partition topic from its start with
// a kgo consumer, as "offset key=value", checking each record's header.
func kgoReadAll(ctx context.Context, t *testing.T, seeds []string, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("kgo consumer read %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Headers) != 1 || r.Headers[0].Key != "codec" || string(r.Headers[0].Value) != string(r.Key) {
				t.Errorf("record at %d has headers %v", r.Offset, r.Headers)
			}
			got = append(got, fmt.Sprintf("%d %s=%s", r.Offset, r.Key, r.Value))
		})
	}
	return got
}

// checkRawFetchCodecs sends one Kafka Fetch from offset 0 (at the version
// kgo negotiates: 13, naming the topic by id) and checks every served
// batch: its compression attribute is its producer's codec (told
// by its records' keys), and the batches hold every record at offsets
// counted densely.
func checkRawFetchCodecs(ctx context.Context, t *testing.T, seeds []string, topic string, id kadm.TopicID) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.SessionEpoch, req.MaxBytes = -1, -1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = 1<<20, -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch answer %+v", resp)
	}
	raw := resp.Topics[0].Partitions[0].RecordBatches
	seen := map[string]bool{}
	next := int64(0)
	for len(raw) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			t.Fatalf("served batch at %d: %v", next, err)
		}
		raw = raw[12+int(b.Length):]
		if b.FirstOffset != next {
			t.Fatalf("batch at offset %d, want %d", b.FirstOffset, next)
		}
		next += int64(b.NumRecords)
		recs, err := kgoRecords(b)
		if err != nil {
			t.Fatalf("batch at %d: %v", b.FirstOffset, err)
		}
		name := string(recs[0].Key)
		for _, kc := range kcCodecs {
			if kc.name == name && b.Attributes&7 != kc.attr {
				t.Errorf("%s batch at offset %d served with compression attribute %d, want %d", name, b.FirstOffset, b.Attributes&7, kc.attr)
			}
		}
		seen[name] = true
	}
	if next != int64(len(kcCodecs)*kcPerCodec) || len(seen) != len(kcCodecs) {
		t.Fatalf("fetch served offsets up to %d from codecs %v", next, seen)
	}
}

// kgoRecords decodes a fetched batch's records with franz-go's own
// decompressors and record parser.
func kgoRecords(b kmsg.RecordBatch) ([]kmsg.Record, error) {
	raw, err := kgo.DefaultDecompressor().Decompress(b.Records, kgo.CompressionCodecType(b.Attributes&7))
	if err != nil {
		return nil, err
	}
	var out []kmsg.Record
	for range b.NumRecords {
		var r kmsg.Record
		length, n := binary.Varint(raw)
		if n <= 0 || int(length)+n > len(raw) {
			return nil, fmt.Errorf("record framing")
		}
		if err := r.ReadFrom(raw[:n+int(length)]); err != nil {
			return nil, err
		}
		out = append(out, r)
		raw = raw[n+int(length):]
	}
	return out, nil
}
