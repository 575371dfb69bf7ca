package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/node"
)

// compactingTestConfig checkpoints every 16 entries and runs retention and
// compaction checks every 5 ticks, so a pass comes after a few records.
func compactingTestConfig(cfg *node.Config) {
	cfg.CheckpointEntries, cfg.RetentionCheckTicks = 16, 5
}

// TestKafkaCompactedTopicOverFranzGo shows a compacted topic read by a real
// franz-go consumer over a real node (issue 24): keyed updates over five
// keys, then filler until a pass has run; a consume from the start then
// gets each of the five keys once, with its latest value at the offset
// it was written at (the compacted batches served in Kafka's v2 form, a
// batch holding fewer records than its offset range), and every record
// after the prefix. Polls a readiness condition bounded by the context.
func TestKafkaCompactedTopicOverFranzGo(t *testing.T) {
	rt := startKafkaServerWith(t, compactingTestConfig)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	str := func(s string) *string { return &s }
	kafkaTopic(ctx, t, addr, "kv", 1, map[string]*string{"cleanup.policy": str("compact"), "segment.bytes": str("4096"),
		"min.cleanable.dirty.ratio": str("0.01")})
	pr, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("kv"))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	latest := map[string]int64{}
	for r := range 20 {
		for k := range 5 {
			key, value := fmt.Sprintf("k%d", k), fmt.Sprintf("k%d.r%d", k, r)
			res := pr.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)})
			if err := res.FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			latest[key] = res[0].Record.Offset
		}
	}
	// Filler of another key until a read from the start shows each of
	// the five keys once.
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			t.Fatalf("no compaction showed in a read from the start")
		}
		for range 20 {
			if err := pr.ProduceSync(ctx, &kgo.Record{Key: []byte("f"), Value: []byte(fmt.Sprintf("f.%d", i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		seen := readFromStart(ctx, t, addr, pr)
		done := true
		for k := range 5 {
			key := fmt.Sprintf("k%d", k)
			got := seen[key]
			if len(got) != 1 {
				done = false
				continue
			}
			if got[0] != fmt.Sprintf("%s.r19@%d", key, latest[key]) {
				t.Fatalf("key %s read as %v, want its latest value at offset %d", key, got, latest[key])
			}
		}
		if done {
			t.Logf("compacted after %d filler rounds; filler records read: %d", i+1, len(seen["f"]))
			return
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness condition, bounded by ctx
	}
}

// readFromStart consumes kv from the start up to its end offset and
// returns each key's "value@offset" in order.
func readFromStart(ctx context.Context, t *testing.T, addr string, pr *kgo.Client) map[string][]string {
	t.Helper()
	end := pr.ProduceSync(ctx, &kgo.Record{Key: []byte("end"), Value: []byte("end")})
	if err := end.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	last := end[0].Record.Offset
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("kv"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string][]string{}
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read did not reach offset %d: %v", last, out)
		}
		for _, e := range fetches.Errors() {
			t.Fatalf("fetch: %v", e.Err)
		}
		reached := false
		fetches.EachRecord(func(r *kgo.Record) {
			out[string(r.Key)] = append(out[string(r.Key)], fmt.Sprintf("%s@%d", r.Value, r.Offset))
			reached = reached || r.Offset >= last
		})
		if reached {
			return out
		}
	}
}
