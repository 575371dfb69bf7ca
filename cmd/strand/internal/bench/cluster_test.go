package bench

import (
	"strings"
	"testing"
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
