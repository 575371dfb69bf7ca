package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/clientlib"
)

// Dead-letter topics are plain topics: a Kafka client (franz-go) reads a
// dead letter `consume --exec` wrote, with the documented strand.dlq.*
// headers, and writes one of its own (as a Java application would) that
// `dlq describe` and `dlq redrive` handle like Strand's.
func TestKafkaClientsReadAndWriteDeadLetters(t *testing.T) {
	skipShort(t)
	c := startKafkaCluster(t, 1)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", "orders", "--partitions", "1", "--replication-factor", "1")
	runCLI(t, env, "a\nbad\n", "produce", "orders")
	runCLI(t, env, "", "consume", "orders", "--group", "g", "--until-end", "--max-attempts", "1",
		"--exec", `v=$(cat); [ "$v" != bad ] || { echo "no good: $v" >&2; exit 1; }`)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka...), kgo.ConsumeTopics("orders.dlq"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got *kgo.Record
	for got == nil && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = r })
	}
	if got == nil {
		t.Fatal("kgo read no dead letter from orders.dlq")
	}
	h := map[string]string{}
	for _, x := range got.Headers {
		h[x.Key] = string(x.Value)
	}
	want := map[string]string{clientlib.HeaderDLQTopic: "orders", clientlib.HeaderDLQPartition: "0", clientlib.HeaderDLQOffset: "1",
		clientlib.HeaderDLQGroup: "g", clientlib.HeaderDLQAttempts: "1", clientlib.HeaderDLQError: "exit status 1: no good: bad"}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("kgo sees header %s=%q, want %q (all: %v)", k, h[k], v, h)
		}
	}
	if string(got.Value) != "bad" || h[clientlib.HeaderDLQTimestamp] == "" {
		t.Errorf("kgo read value %q, headers %v", got.Value, h)
	}
	// A Kafka application's own dead letter, written with the same headers.
	mine := &kgo.Record{Topic: "orders.dlq", Partition: 0, Value: []byte("from-java"), Headers: []kgo.RecordHeader{
		{Key: clientlib.HeaderDLQTopic, Value: []byte("orders")}, {Key: clientlib.HeaderDLQPartition, Value: []byte("0")},
		{Key: clientlib.HeaderDLQOffset, Value: []byte("0")}, {Key: clientlib.HeaderDLQTimestamp, Value: []byte("1700000000000")},
		{Key: clientlib.HeaderDLQGroup, Value: []byte("java-app")}, {Key: clientlib.HeaderDLQAttempts, Value: []byte("5")},
		{Key: clientlib.HeaderDLQError, Value: []byte("NullPointerException")}}}
	if err := cl.ProduceSync(ctx, mine).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := runCLI(t, env, "", "dlq", "describe", "orders.dlq")
	if !strings.Contains(out, "2 dead letters") || !strings.Contains(out, "java-app") || !strings.Contains(out, "NullPointerException") {
		t.Fatalf("dlq describe:\n%s", out)
	}
	if out := runCLI(t, env, "", "dlq", "redrive", "orders.dlq"); !strings.Contains(out, "redrove 2 dead letters") {
		t.Fatalf("dlq redrive: %s", out)
	}
	if out := runCLI(t, env, "", "consume", "orders", "-e", "-f", "%o %v\n"); !strings.Contains(out, "2 bad\n3 from-java\n") {
		t.Fatalf("orders after redrive:\n%s", out)
	}
}
