package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/internal/localcluster"
)

// Produce throughput of franz-go through the Kafka listener next to
// Strand's own client, in one run against one `strand dev` (3 nodes, RF 3,
// acks=all, idempotent, 1 KiB keyless records of random bytes, so
// franz-go's default snappy cannot shrink them, 16 KiB batches, 5 ms
// linger), alternating the two so load on the shared machine hits both
// alike. A measurement, not a check: it runs only with
// STRAND_KAFKA_BENCH=1 (seconds per round in STRAND_KAFKA_BENCH_SECONDS,
// default 5; rounds in STRAND_KAFKA_BENCH_ROUNDS, default 3) and logs
// msgs/s per round.
func TestKafkaProduceThroughputSideBySide(t *testing.T) {
	if os.Getenv("STRAND_KAFKA_BENCH") != "1" {
		t.Skip("measurement; run with STRAND_KAFKA_BENCH=1")
	}
	seconds, rounds := 5, 3
	if s, err := strconv.Atoi(os.Getenv("STRAND_KAFKA_BENCH_SECONDS")); err == nil && s > 0 {
		seconds = s
	}
	if r, err := strconv.Atoi(os.Getenv("STRAND_KAFKA_BENCH_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	port := freeConsecutivePorts(t, 3)
	dir := t.TempDir()
	dev := startProc(t, filepath.Join(dir, "dev.log"), nil, "dev", "--base-port", strconv.Itoa(port), "--quiet")
	defer dev.kill()
	native := []string{"127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)}
	kafka := []string{"127.0.0.1:" + strconv.Itoa(port)}
	env := []string{"STRAND_BROKERS=" + native[0]}
	waitFor(t, "strand dev", 30*time.Second, func() error {
		_, errOut, err := runCLIResult(t, env, "", "cluster", "--timeout", "2s")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	runCLI(t, env, "", "topic", "create", "bench", "--partitions", "6", "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(native, "bench", 6) })
	values := make([][]byte, 256)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range values {
		values[i] = make([]byte, 1024)
		for j := range values[i] {
			values[i][j] = byte(rng.Uint32())
		}
	}
	d := time.Duration(seconds) * time.Second
	for round := range rounds {
		n := benchNative(t, native, values, d)
		t.Logf("round %d  strand clientlib  %8.0f msgs/s", round+1, float64(n)/d.Seconds())
		k := benchKgo(t, kafka, values, d)
		t.Logf("round %d  franz-go (Kafka)  %8.0f msgs/s", round+1, float64(k)/d.Seconds())
	}
}

// benchNative produces for d with Strand's client and returns the records
// acknowledged.
func benchNative(t *testing.T, seeds []string, values [][]byte, d time.Duration) int64 {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(seeds...), clientlib.BatchBytes(16<<10), clientlib.Linger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var acked atomic.Int64
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		c.Produce(context.Background(), &clientlib.Record{Topic: "bench", Value: values[i%len(values)]}, func(_ *clientlib.Record, err error) {
			if err == nil && time.Now().Before(end) {
				acked.Add(1)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Flush(ctx)
	return acked.Load()
}

// benchKgo is benchNative with franz-go through the Kafka listener.
func benchKgo(t *testing.T, seeds []string, values [][]byte, d time.Duration) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(5*time.Millisecond),
		kgo.DefaultProduceTopic("bench"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var acked atomic.Int64
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		cl.Produce(context.Background(), &kgo.Record{Value: values[i%len(values)]}, func(_ *kgo.Record, err error) {
			if err == nil && time.Now().Before(end) {
				acked.Add(1)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl.Flush(ctx)
	return acked.Load()
}

// Consume throughput of franz-go through the Kafka listener: one `strand
// dev` (3 nodes, RF 3) per binary, a 6-partition topic holding
// STRAND_KAFKA_BENCH_RECORDS (default 100,000) 1 KiB records of random
// bytes produced by franz-go (16 KiB batches, uncompressed, so every
// stored batch is written as it is by a spliced fetch answer), then a
// franz-go consumer reading them all from the start, timed; rounds
// alternate the binaries so load on the shared machine hits both alike.
// The binaries are this tree's and, when STRAND_KAFKA_BENCH_OLD names
// one, that one (an earlier build, for a before/after). A measurement,
// not a check: it runs only with STRAND_KAFKA_BENCH=1 (rounds in
// STRAND_KAFKA_BENCH_ROUNDS, default 3) and logs msgs/s per round.
func TestKafkaConsumeThroughput(t *testing.T) {
	if os.Getenv("STRAND_KAFKA_BENCH") != "1" {
		t.Skip("measurement; run with STRAND_KAFKA_BENCH=1")
	}
	rounds, records := 3, 100_000
	if r, err := strconv.Atoi(os.Getenv("STRAND_KAFKA_BENCH_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	if n, err := strconv.Atoi(os.Getenv("STRAND_KAFKA_BENCH_RECORDS")); err == nil && n > 0 {
		records = n
	}
	type build struct{ name, path string }
	builds := []build{{"this tree", strandBinary(t)}}
	if old := os.Getenv("STRAND_KAFKA_BENCH_OLD"); old != "" {
		builds = append([]build{{"old", old}}, builds...)
	}
	values := make([][]byte, 256)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range values {
		values[i] = make([]byte, 1024)
		for j := range values[i] {
			values[i][j] = byte(rng.Uint32())
		}
	}
	seeds := make([][]string, len(builds))
	for i, b := range builds {
		port := freeConsecutivePorts(t, 3)
		dir := t.TempDir()
		p, err := localcluster.Start(b.path, filepath.Join(dir, "dev.log"), nil, "dev", "--base-port", strconv.Itoa(port), "--quiet")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill()
		native := []string{"127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)}
		env := []string{"STRAND_BROKERS=" + native[0]}
		waitFor(t, "strand dev", 30*time.Second, func() error {
			_, errOut, err := runCLIResult(t, env, "", "cluster", "--timeout", "2s")
			if err != nil {
				return fmt.Errorf("%v: %s", err, errOut)
			}
			return nil
		})
		runCLI(t, env, "", "topic", "create", "bench", "--partitions", "6", "--replication-factor", "3")
		waitFor(t, "topic", 30*time.Second, func() error { return topicReady(native, "bench", 6) })
		seeds[i] = []string{"127.0.0.1:" + strconv.Itoa(port)}
		produceKgo(t, seeds[i], values, records)
	}
	for round := range rounds {
		for i, b := range builds {
			d := consumeKgo(t, seeds[i], records)
			t.Logf("round %d  %-9s  consume %8.0f msgs/s (%d records in %v)", round+1, b.name, float64(records)/d.Seconds(), records, d.Round(time.Millisecond))
		}
	}
}

// produceKgo produces n records with franz-go (16 KiB batches,
// uncompressed, 5 ms linger) and fails unless all are acknowledged.
func produceKgo(t *testing.T, seeds []string, values [][]byte, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("bench"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var failed atomic.Int64
	for i := range n {
		cl.Produce(context.Background(), &kgo.Record{Value: values[i%len(values)]}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := cl.Flush(ctx); err != nil || failed.Load() > 0 {
		t.Fatalf("produce: %v, %d failed", err, failed.Load())
	}
}

// consumeKgo reads n records from the start with a new franz-go
// consumer and returns how long it took from its first poll.
func consumeKgo(t *testing.T, seeds []string, n int) time.Duration {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	got := 0
	for got < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		got += fs.NumRecords()
	}
	if got < n {
		t.Fatalf("consumed %d of %d records", got, n)
	}
	return time.Since(start)
}
