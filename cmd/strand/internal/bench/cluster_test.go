package bench

import (
	"errors"
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
// rounds, commits and commit latency only for the transactional ones, and
// the consumes at each isolation level beside them.
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
		{phase: "read_uncommitted", partitions: 6, result: &benchResult{records: 90000, elapsed: time.Second}},
		{phase: "read_committed", partitions: 6, result: &benchResult{records: 80000, elapsed: time.Second}},
		{phase: "read_committed", partitions: 6, result: &benchResult{records: 85000, elapsed: time.Second}},
		{phase: "consume", partitions: 6, result: &benchResult{records: 1, elapsed: time.Second}},
	}
	var out strings.Builder
	printTxnRanges(&out, rows)
	for _, want := range []string{"idempotent           1       5000–7000  (2 rounds)",
		"txn x10              1         120–150         12–15", "(2 rounds)",
		"read_uncommitted     6           90000  (1 rounds)", "read_committed       6     80000–85000  (2 rounds)"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("printTxnRanges printed\n%s\nwant a line with %q", out.String(), want)
		}
	}
	for _, other := range []string{"create topic", "consume "} {
		if strings.Contains(out.String(), other) {
			t.Fatalf("printTxnRanges printed a row of another phase (%q):\n%s", other, out.String())
		}
	}
}

// TestCheckIsolation accepts --isolation's two levels (and none, as bench
// cluster's produce runs leave it) and refuses anything else as a usage
// error.
func TestCheckIsolation(t *testing.T) {
	for _, level := range []string{"", "read_uncommitted", "read_committed"} {
		b := Settings{clients: 1, recordBytes: 1024, isolation: level}
		if err := b.Check("consume"); err != nil {
			t.Errorf("Check with --isolation %q: %v", level, err)
		}
	}
	b := Settings{clients: 1, recordBytes: 1024, isolation: "read_comitted"}
	var ue *UsageError
	if err := b.Check("consume"); !errors.As(err, &ue) || !strings.Contains(err.Error(), "read_comitted") {
		t.Errorf("Check with --isolation read_comitted = %v, want a usage error naming it", err)
	}
}
