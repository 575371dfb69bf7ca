package server

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tests of clients nobody here wrote, unchanged, against the Kafka
// listener (issue 20): each pins an answer a client turned into a failure.

// kafkaTopic creates topic with partitions over addr once the metadata
// group has a leader, waits until every partition has a leader, and
// returns an admin client. (A client that fetched metadata during the
// election, a few milliseconds since a new partition's preferred replica
// campaigns at once, may keep that answer: franz-go's sharded requests,
// such as ListOffsets, reuse it for up to MetadataMinAge and fail
// LEADER_NOT_AVAILABLE without asking the broker.)
func kafkaTopic(ctx context.Context, t *testing.T, addr, topic string, partitions int32, configs map[string]*string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	if created, err := kafkaCreateWhenReady(ctx, adm, partitions, 1, configs, topic); err != nil || created.Err != nil {
		t.Fatalf("create %s: %v / %v", topic, err, created.Err)
	}
	for ctx.Err() == nil && !kafkaLeadersKnown(ctx, cl, topic) {
		time.Sleep(10 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
	return adm
}

// kafkaCreateWhenReady creates topic on a node that may still be starting:
// until the metadata group has a leader the answer is retriable, and until
// the node's own registration applies there it is INVALID_REPLICATION_FACTOR
// ("0 nodes available", as Kafka answers before brokers register), which
// franz-go counts as definite. Both are retried until ctx ends; any other
// answer is returned at once.
func kafkaCreateWhenReady(ctx context.Context, adm *kadm.Client, partitions int32, rf int16, configs map[string]*string, topic string) (kadm.CreateTopicResponse, error) {
	for {
		created, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
		cause := created.Err // kadm returns the topic's error as err too
		if cause == nil {
			cause = err
		}
		starting := cause != nil && (kerr.IsRetriable(cause) || errors.Is(cause, kerr.InvalidReplicationFactor))
		if !starting || ctx.Err() != nil {
			return created, err
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
}

// kafkaLeadersKnown tells whether every partition of topic has a leader
// in a metadata answer asked of the seed broker itself (the client's own
// metadata requests may be answered from its cache).
func kafkaLeadersKnown(ctx context.Context, cl *kgo.Client, topic string) bool {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) == 0 {
		return false
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 {
			return false
		}
	}
	return true
}

// kafkaGoWrite writes msgs with a segmentio/kafka-go writer, retrying
// for up to 20s while the partitions elect their leaders. Only the
// messages whose write failed are sent again: resending the whole slice
// after one partition failed wrote the others' twice (the group test then
// read a record five times).
func kafkaGoWrite(ctx context.Context, t *testing.T, w *kafka.Writer, msgs []kafka.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		if err = w.WriteMessages(ctx, msgs...); err == nil {
			return
		}
		var failed kafka.WriteErrors
		if errors.As(err, &failed) && len(failed) == len(msgs) {
			var again []kafka.Message
			for i, e := range failed {
				if e != nil {
					again = append(again, msgs[i])
				}
			}
			msgs = again
		}
		time.Sleep(100 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
	t.Fatalf("kafka-go write: %v", err)
}

// segmentio/kafka-go's consumer group joins (its subscription metadata
// declares v1 but carries no owned partitions, which a strict reading
// refused with INCONSISTENT_GROUP_PROTOCOL), reads every record of a
// three-partition topic once, and commits. DescribeGroups names the
// member's client id and host, and the group's committed offsets add up.
func TestKafkaGoConsumerGroup(t *testing.T) {
	rt := startKafkaServer(t)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kafkaTopic(ctx, t, addr, "kg", 3, nil)
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "kg", Balancer: &kafka.RoundRobin{}, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	const n = 30
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil, "r%d", i)})
	}
	kafkaGoWrite(ctx, t, w, msgs)

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, GroupID: "kgg", Topic: "kg",
		StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond, HeartbeatInterval: time.Second,
		Dialer: &kafka.Dialer{ClientID: "kg-reader", Timeout: 10 * time.Second},
		Logger: kafka.LoggerFunc(t.Logf), ErrorLogger: kafka.LoggerFunc(t.Logf)})
	defer r.Close()
	seen := map[string]int{}
	for len(seen) < n && ctx.Err() == nil {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go group fetch after %d records: %v", len(seen), err)
		}
		seen[string(m.Value)]++
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("kafka-go commit: %v", err)
		}
	}
	for v, c := range seen {
		if c != 1 {
			t.Fatalf("record %s read %d times", v, c)
		}
	}
	if len(seen) != n {
		t.Fatalf("kafka-go group read %d of %d records", len(seen), n)
	}
	described, err := adm.DescribeGroups(ctx, "kgg")
	if err != nil || described.Error() != nil {
		t.Fatalf("describe: %v / %v", err, described.Error())
	}
	if ms := described["kgg"].Members; len(ms) != 1 || ms[0].ClientID != "kg-reader" || ms[0].ClientHost != "127.0.0.1" {
		t.Fatalf("described members %+v, want one with client id kg-reader from 127.0.0.1", ms)
	}
	offs, err := adm.FetchOffsets(ctx, "kgg")
	if err != nil || offs.Error() != nil {
		t.Fatalf("fetch offsets: %v / %v", err, offs.Error())
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != n {
		t.Fatalf("committed offsets add up to %d, want %d", committed, n)
	}
}

// segmentio/kafka-go's zstd batches declare an 8 MiB window whatever they
// hold; they are accepted by what they inflate to (a strict window bound
// refused them MESSAGE_TOO_LARGE), and read back byte for byte.
func TestKafkaGoZstdBatches(t *testing.T) {
	rt := startKafkaServer(t)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafkaTopic(ctx, t, addr, "kz", 1, nil)
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "kz", Compression: kafka.Zstd, BatchSize: 100,
		BatchBytes: 4 << 20, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	const batches, per = 5, 100
	for b := range batches {
		var msgs []kafka.Message
		for i := range per {
			msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil, "%02d-%03d-%01990d", b, i, i)}) // 2 KB each
		}
		kafkaGoWrite(ctx, t, w, msgs)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("kz"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := 0
	for got < batches*per && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("%02d-%03d-%01990d", got/per, got%per, got%per); string(r.Value) != want {
				t.Fatalf("record %d: %.20q, want %.20q", got, r.Value, want)
			}
			got++
		})
	}
	if got != batches*per {
		t.Fatalf("read %d of %d records", got, batches*per)
	}
}

// Answers that differed from Kafka's and that clients turned into wrong
// results (issue 20, items 3, 4 and 8), over one node's Kafka listener with
// franz-go and raw kmsg requests.
func TestKafkaAnswersAsKafka(t *testing.T) {
	rt := startKafkaServer(t)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kafkaTopic(ctx, t, addr, "ak", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var last *kgo.Record
	for i := 0; i < 3 && ctx.Err() == nil; {
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ak", Value: []byte("v")}).First()
		if err == nil {
			last, i = r, i+1
		}
	}
	if last == nil {
		t.Fatal("produce failed")
	}

	t.Run("ListOffsetsAfterLastRecord", func(t *testing.T) {
		// Raw: kadm's ListOffsetsAfterMilli itself turns -1 into the end.
		req := kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "ak"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = last.Timestamp.Add(time.Hour).UnixMilli()
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 {
			t.Fatalf("offset after the last record: code %d, %d at %d, want -1 at -1 (no such record)", p.ErrorCode, p.Offset, p.Timestamp)
		}
		lp.Timestamp = last.Timestamp.UnixMilli()
		req.Topics[0].Partitions[0] = lp
		if resp, err = req.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].Offset > last.Offset {
			t.Fatalf("offset at the last record's timestamp: %v / %+v", err, resp.Topics[0].Partitions[0])
		}
	})

	t.Run("CommitEarliestAndLatest", func(t *testing.T) {
		for _, tc := range []struct{ commit, want int64 }{{-2, 0}, {-1, last.Offset + 1}} {
			offs := kadm.Offsets{}
			offs.Add(kadm.Offset{Topic: "ak", Partition: 0, At: tc.commit, LeaderEpoch: -1})
			resp, err := adm.CommitOffsets(ctx, "reset", offs)
			if err != nil || resp.Error() != nil {
				t.Fatalf("commit %d: %v / %v", tc.commit, err, resp.Error())
			}
			fetched, err := adm.FetchOffsets(ctx, "reset")
			if err != nil || fetched.Error() != nil {
				t.Fatalf("fetch offsets: %v / %v", err, fetched.Error())
			}
			if o, _ := fetched.Lookup("ak", 0); o.At != tc.want {
				t.Fatalf("after committing %d: %d, want %d", tc.commit, o.At, tc.want)
			}
		}
	})

	t.Run("RaftHeldConfigs", func(t *testing.T) {
		for _, tc := range []struct {
			name, key, value string
			want             error
		}{
			{"cp", "compression.type", "producer", nil},
			{"mir", "min.insync.replicas", "1", nil},
			{"cz", "compression.type", "zstd", kerr.InvalidConfig},
			{"mir2", "min.insync.replicas", "2", kerr.InvalidConfig}, // replication factor 1
		} {
			got, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{tc.key: kmsg.StringPtr(tc.value)}, tc.name)
			if tc.want != nil && errors.Is(err, tc.want) {
				err = nil // kadm returns the topic's error too
			}
			if err != nil || !errors.Is(got.Err, tc.want) || (tc.want != nil && got.ErrMessage == "") {
				t.Errorf("create with %s=%s: %v / %v %q, want %v", tc.key, tc.value, err, got.Err, got.ErrMessage, tc.want)
			}
		}
	})

	t.Run("BrokerConfigs", func(t *testing.T) {
		rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe broker 1: %v / %+v", err, rcs)
		}
		got := map[string]kadm.Config{}
		for _, c := range rcs[0].Configs {
			got[c.Key] = c
		}
		if c := got["message.max.bytes"]; c.Value == nil || *c.Value != "1048576" || c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("message.max.bytes %+v, want 1048576 from DEFAULT_CONFIG", c)
		}
		if c := got["broker.id"]; c.Value == nil || *c.Value != "1" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
			t.Errorf("broker.id %+v, want 1 from STATIC_BROKER_CONFIG", c)
		}
	})

	t.Run("MaxMessageBytes", func(t *testing.T) {
		kafkaTopic(ctx, t, addr, "small", 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("51200")})
		p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("small"), kgo.ProducerBatchMaxBytes(1<<20),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var small error
		for i := 0; i < 50 && ctx.Err() == nil; i++ { // the partition elects its leader
			if small = p.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 40<<10)}).FirstErr(); small == nil {
				break
			}
			time.Sleep(100 * time.Millisecond) // polling a readiness condition, bounded by count and ctx
		}
		if small != nil {
			t.Fatalf("40 KiB record under max.message.bytes 51200: %v", small)
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 60<<10)}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
			t.Fatalf("60 KiB record over max.message.bytes 51200: %v, want MESSAGE_TOO_LARGE", err)
		}
	})

	t.Run("CompressedBatchInflates", func(t *testing.T) {
		// Three 1 MiB records of zeros, gzip'd to a few KiB: sizes are
		// checked on the batch as sent and per record; inflation has its
		// own, larger bound (recordbatch.InflatedBytesMax).
		p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("ak"), kgo.ProducerBatchMaxBytes(4<<20),
			kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.ProducerLinger(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		big := make([]byte, 1<<20)
		if err := p.ProduceSync(ctx, &kgo.Record{Value: big}, &kgo.Record{Value: big}, &kgo.Record{Value: big}).FirstErr(); err != nil {
			t.Fatalf("gzip batch of 3 MiB of zeros: %v", err)
		}
	})

	t.Run("AcksLeaderOffsets", func(t *testing.T) {
		kafkaTopic(ctx, t, addr, "a1", 1, nil)
		p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("a1"), kgo.RequiredAcks(kgo.LeaderAck()),
			kgo.DisableIdempotentWrite())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var got []int64
		for i := 0; len(got) < 3 && i < 100 && ctx.Err() == nil; i++ {
			r, err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).First()
			if err != nil {
				time.Sleep(50 * time.Millisecond) // the partition elects its leader; bounded by count and ctx
				continue
			}
			got = append(got, r.Offset)
		}
		if !slices.Equal(got, []int64{0, 1, 2}) {
			t.Fatalf("acks=1 offsets %v, want [0 1 2]", got)
		}
	})

	t.Run("OffsetsTopicInternal", func(t *testing.T) {
		meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl) // all topics
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]bool{}
		for _, mt := range meta.Topics {
			internal[*mt.Topic] = mt.IsInternal
		}
		if in, ok := internal["__strand_offsets"]; !ok || !in || internal["ak"] {
			t.Fatalf("metadata's internal flags %v, want __strand_offsets internal and ak not", internal)
		}
	})

	t.Run("ErrorCodes", func(t *testing.T) {
		create := kmsg.NewPtrCreateTopicsRequest()
		for name, n := range map[string]int32{"bad name!": 1, "zero": 0} {
			ct := kmsg.NewCreateTopicsRequestTopic()
			ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, n, 1
			create.Topics = append(create.Topics, ct)
		}
		cr, err := create.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int16{"bad name!": kerr.InvalidTopicException.Code, "zero": kerr.InvalidPartitions.Code}
		for _, ot := range cr.Topics {
			if ot.ErrorCode != want[ot.Topic] {
				t.Errorf("create %q: code %d, want %d", ot.Topic, ot.ErrorCode, want[ot.Topic])
			}
		}
		meta := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("bad name!")
		meta.Topics = append(meta.Topics, mt)
		mr, err := meta.RequestWith(ctx, cl)
		if err != nil || len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
			t.Errorf("metadata of an illegal name: %v / %+v", err, mr)
		}
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "missing", Partition: 0, At: 1, LeaderEpoch: -1})
		offs.Add(kadm.Offset{Topic: "ak", Partition: 0, At: 1, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, "codes", offs)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := resp.Lookup("missing", 0); !errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("commit to a missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", o.Err)
		}
		if o, _ := resp.Lookup("ak", 0); o.Err != nil {
			t.Errorf("commit beside it to an existing topic: %v", o.Err)
		}
	})
}

// On a node without a transaction marker writer, a transactional producer
// fails at once rather than retrying until its timeout: its producer id is
// given, but AddPartitionsToTxn comes back as the definite
// UNSUPPORTED_VERSION, in franz-go and in librdkafka (kcat). kcat's part
// skips when kcat is not installed (.ci/run installs it).
func TestKafkaTransactionsRefusedFatally(t *testing.T) {
	rt := startKafkaServer(t)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafkaTopic(ctx, t, addr, "tx", 1, nil)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tid"), kgo.DefaultProduceTopic("tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// franz-go initializes its producer id as the transaction begins.
	err = cl.BeginTransaction()
	if err == nil {
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		defer pcancel()
		err = cl.ProduceSync(pctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	}
	if !errors.Is(err, kerr.UnsupportedVersion) {
		t.Fatalf("franz-go transaction: %v, want UNSUPPORTED_VERSION", err)
	}

	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed: the librdkafka half of this test needs it")
	}
	kctx, kcancel := context.WithTimeout(ctx, 30*time.Second)
	defer kcancel()
	cmd := exec.CommandContext(kctx, kcat, "-P", "-b", addr, "-t", "tx", "-X", "transactional.id=tid",
		"-X", "transaction.timeout.ms=20000")
	cmd.Stdin = strings.NewReader("v\n")
	out, err := cmd.CombinedOutput()
	if kctx.Err() != nil {
		t.Fatalf("kcat with a transactional id still running after 30s:\n%s", out)
	}
	t.Logf("kcat: %v\n%s", err, out)
	if err == nil || !strings.Contains(string(out), "UNSUPPORTED_VERSION") {
		t.Fatalf("kcat with a transactional id: %v, want a fatal error, UNSUPPORTED_VERSION:\n%s", err, out)
	}
}
