package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/clientlib"
)

// A compacted topic's state is visible where an operator looks (issue 24):
// once a pass has run on a real node, DescribePartitionLogs (what
// `strand topic describe` prints) carries the generation done, its
// cleaned-to offset and decision time, the prefix's and the dirty bytes;
// /metrics has the same figures per partition (the dirty ratio among them)
// and the node's pass counter; /api/topics (the console) has them too. A
// topic that does not compact has none of it.
func TestCompactionVisible(t *testing.T) {
	rt := startKafkaServerWith(t, compactingTestConfig)
	a := startTestAdmin(t, rt)
	addr := rt.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	str := func(s string) *string { return &s }
	kafkaTopic(ctx, t, addr, "kv", 1, map[string]*string{"cleanup.policy": str("compact"), "segment.bytes": str("4096"),
		"min.cleanable.dirty.ratio": str("0.01")})
	kafkaTopic(ctx, t, addr, "plain", 1, nil)
	pr, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.ProduceSync(ctx, &kgo.Record{Topic: "plain", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	c := newTestClient(t, rt)
	var pc *clientlib.PartitionCompaction
	for round := 0; pc == nil || pc.Done == 0; round++ {
		if ctx.Err() != nil {
			t.Fatalf("no compaction reported done: %+v", pc)
		}
		for k := range 20 {
			rec := &kgo.Record{Topic: "kv", Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte(fmt.Sprintf("r%d", round))}
			if err := pr.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		logs, err := c.DescribePartitionLogs(ctx, "kv", []int32{0})
		if err != nil || logs[0].Err != nil {
			t.Fatalf("describe: %v %v", err, logs)
		}
		if pc = logs[0].Compaction; pc == nil {
			t.Fatalf("a compacted topic's partition describes without compaction state: %+v", logs[0])
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, bounded by ctx
	}
	if !pc.Compacts || pc.CleanedTo <= 0 || pc.DecidedTimeMs <= 0 || pc.PrefixBytes <= 0 || pc.PrefixEnd != pc.CleanedTo && pc.PrefixGeneration == pc.Done {
		t.Errorf("compaction state after a pass: %+v", pc)
	}
	if r := pc.DirtyRatio(); r < 0 || r > 1 {
		t.Errorf("dirty ratio %v", r)
	}
	// The leader's last pass read and wrote something (not "in ≥ out": a
	// compacted batch is stored uncompressed, and its header is longer, so
	// a first pass that removes little writes more than it read).
	if pc.LastPassBytesIn <= 0 || pc.LastPassBytesOut <= 0 || pc.LastPassDuration < 0 {
		t.Errorf("last pass figures after a pass: %+v", pc)
	}
	plain, err := c.DescribePartitionLogs(ctx, "plain", []int32{0})
	if err != nil || plain[0].Err != nil || plain[0].Compaction != nil {
		t.Errorf("a topic that does not compact describes with compaction state: %+v %v", plain, err)
	}

	// /metrics: the same record, per partition, only for kv.
	fams := scrape(t, a)
	for _, name := range []string{"strand_partition_compaction_dirty_ratio", "strand_partition_compaction_dirty_bytes",
		"strand_partition_compaction_clean_bytes", "strand_partition_compaction_generation",
		"strand_partition_compaction_cleaned_to_offset", "strand_partition_compaction_last_decision_timestamp_seconds",
		"strand_partition_compaction_in_progress", "strand_partition_compaction_stuck",
		"strand_partition_compaction_last_pass_bytes_in", "strand_partition_compaction_last_pass_bytes_out",
		"strand_partition_compaction_last_pass_seconds"} {
		if n := len(fams[name].GetMetric()); n != 1 {
			t.Errorf("%s: %d series, want 1 (kv/0 only)", name, n)
			continue
		}
		if got := label(fams[name].GetMetric()[0], "topic"); got != "kv" {
			t.Errorf("%s: topic %q", name, got)
		}
	}
	// Later passes may have run since the describe: figures only grow.
	if g := sum(fams, "strand_partition_compaction_generation"); g < float64(pc.Done) {
		t.Errorf("generation metric %v, describe said %d", g, pc.Done)
	}
	if o := sum(fams, "strand_partition_compaction_cleaned_to_offset"); o < float64(pc.CleanedTo) {
		t.Errorf("cleaned-to metric %v, describe said %d", o, pc.CleanedTo)
	}
	if b := sum(fams, "strand_partition_compaction_clean_bytes"); b <= 0 {
		t.Errorf("clean bytes metric %v", b)
	}
	if r := sum(fams, "strand_partition_compaction_dirty_ratio"); r < 0 || r > 1 {
		t.Errorf("dirty ratio metric %v", r)
	}
	if in, out := sum(fams, "strand_compaction_bytes_in_total"), sum(fams, "strand_compaction_bytes_out_total"); in < float64(pc.LastPassBytesIn) || out < float64(pc.LastPassBytesOut) {
		t.Errorf("bytes in %v out %v, the last pass alone read %d and wrote %d", in, out, pc.LastPassBytesIn, pc.LastPassBytesOut)
	}
	if p := sum(fams, "strand_compaction_passes_total"); p < float64(pc.Done) {
		t.Errorf("passes %v, want at least %d", p, pc.Done)
	}

	// /api/topics: what the console draws.
	var topics apiTopics
	getJSONInto(t, a.URL()+"api/topics", &topics)
	i := slices.IndexFunc(topics.Topics, func(at apiTopic) bool { return at.Name == "kv" })
	if i < 0 || topics.Topics[i].Partitions[0].Compaction == nil {
		t.Fatalf("/api/topics lacks kv's compaction: %+v", topics)
	}
	// The last pass's figures are the describe's unless a pass decided,
	// running or done after it may have replaced them (CI: decided 2, done
	// 1 at the describe; pass 2 had run by the /api/topics read).
	ac := topics.Topics[i].Partitions[0].Compaction
	later := pc.Decided > pc.Done || ac.Generation > pc.Done || ac.InProgress
	if ac.Generation < pc.Done || ac.CleanedTo < pc.CleanedTo || ac.CleanBytes <= 0 || ac.LastPassBytesIn <= 0 || ac.LastPassMs < 0 ||
		!later && (ac.LastPassBytesIn != pc.LastPassBytesIn || ac.LastPassBytesOut != pc.LastPassBytesOut) {
		t.Errorf("/api/topics compaction %+v, describe said %+v", ac, pc)
	}
	j := slices.IndexFunc(topics.Topics, func(at apiTopic) bool { return at.Name == "plain" })
	if j < 0 || topics.Topics[j].Partitions[0].Compaction != nil {
		t.Errorf("/api/topics: plain has compaction state: %+v", topics)
	}
	t.Logf("after the first pass: %s", strconv.Quote(fmt.Sprintf("%+v", *pc)))
}
