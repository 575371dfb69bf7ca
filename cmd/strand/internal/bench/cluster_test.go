package bench

import (
	"strings"
	"testing"
	"time"
)

// TestLiveBytesOf reads the live heap and stacks out of a /metrics answer
// with Prometheus' own text parser, and refuses an answer lacking either.
func TestLiveBytesOf(t *testing.T) {
	const metrics = `# HELP go_memstats_heap_alloc_bytes Number of heap bytes allocated and currently in use.
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 1.2345e+06
# HELP go_memstats_stack_inuse_bytes Number of bytes obtained from system for stack allocator.
# TYPE go_memstats_stack_inuse_bytes gauge
go_memstats_stack_inuse_bytes 65536
# TYPE strand_partition_high_watermark gauge
strand_partition_high_watermark{partition="0",topic="a"} 7
`
	if got, ok := liveBytesOf([]byte(metrics)); !ok || got != 1234500+65536 {
		t.Fatalf("liveBytesOf = %d, %v; want %d", got, ok, 1234500+65536)
	}
	lacking := strings.ReplaceAll(metrics, "go_memstats_stack_inuse_bytes", "go_memstats_other")
	if got, ok := liveBytesOf([]byte(lacking)); ok {
		t.Fatalf("liveBytesOf without the stack gauge = %d, want refused", got)
	}
}

// TestPrintTxnRanges prints the txn phase's runs as min–max over their
// rounds, commits and commit latency only for the transactional ones.
func TestPrintTxnRanges(t *testing.T) {
	commitLatency := func(ds ...time.Duration) *histogram {
		h := &histogram{}
		for _, d := range ds {
			h.record(d)
		}
		return h
	}
	rows := []clusterRow{
		{phase: "idempotent", partitions: 1, result: &benchResult{records: 5000, elapsed: time.Second}},
		{phase: "txn x10", partitions: 1, result: &benchResult{records: 120, commits: 12, elapsed: time.Second,
			commitLatency: commitLatency(time.Millisecond, 2*time.Millisecond)}},
		{phase: "idempotent", partitions: 1, result: &benchResult{records: 7000, elapsed: time.Second}},
		{phase: "txn x10", partitions: 1, result: &benchResult{records: 150, commits: 15, elapsed: time.Second,
			commitLatency: commitLatency(time.Millisecond, 4*time.Millisecond)}},
		{phase: "create topic", partitions: 9, note: "not a txn row"},
	}
	var out strings.Builder
	printTxnRanges(&out, rows)
	for _, want := range []string{"idempotent       1       5000–7000  (2 rounds)",
		"txn x10          1         120–150         12–15", "(2 rounds)"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("printTxnRanges printed\n%s\nwant a line with %q", out.String(), want)
		}
	}
	if strings.Contains(out.String(), "create topic") {
		t.Fatalf("printTxnRanges printed a row of another phase:\n%s", out.String())
	}
}
