package bench

import (
	"strings"
	"testing"
	"time"
)

// compactGaugesOf takes the compacted topic's partition 0 from a /metrics
// answer, not another topic's or partition's, and says when it is absent.
func TestCompactGaugesOf(t *testing.T) {
	const metrics = `# TYPE strand_partition_leader gauge
strand_partition_leader{node="2",partition="0",topic="bench-compact"} 2
strand_partition_leader{node="2",partition="1",topic="bench-compact"} 3
strand_partition_leader{node="2",partition="0",topic="other"} 1
# TYPE strand_partition_size_bytes gauge
strand_partition_size_bytes{node="2",partition="0",topic="bench-compact"} 4096
strand_partition_size_bytes{node="2",partition="0",topic="other"} 1
# TYPE strand_partition_compaction_generation gauge
strand_partition_compaction_generation{node="2",partition="0",topic="bench-compact"} 3
# TYPE strand_partition_compaction_cleaned_to_offset gauge
strand_partition_compaction_cleaned_to_offset{node="2",partition="0",topic="bench-compact"} 1200
# TYPE strand_partition_compaction_in_progress gauge
strand_partition_compaction_in_progress{node="2",partition="0",topic="bench-compact"} 1
`
	g, ok := compactGaugesOf([]byte(metrics), "bench-compact")
	if !ok || g.leader != 2 || g.size != 4096 || g.generation != 3 || g.cleanedTo != 1200 || g.inProgress != 1 || !g.hasCompaction {
		t.Fatalf("compactGaugesOf = %+v, %v", g, ok)
	}
	if g, ok := compactGaugesOf([]byte(metrics), "other"); !ok || g.hasCompaction || g.leader != 1 {
		t.Fatalf("a topic without compaction gauges: %+v, %v", g, ok)
	}
	if _, ok := compactGaugesOf([]byte(metrics), "missing"); ok {
		t.Fatal("a topic not in the answer was found")
	}
}

// printCompact's figures: produce with compaction against without over
// the same records, a pass's input (prefix re-read plus the records the
// cleaned-to offset advanced over) over its time, and disk use over the
// live set, raft log included and prefix alone.
func TestPrintCompact(t *testing.T) {
	res := func(mib int64, secs int) *benchResult {
		return &benchResult{bytes: mib << 20, records: mib << 10, elapsed: time.Duration(secs) * time.Second, latency: &histogram{}}
	}
	rows := []clusterRow{
		{phase: "compact on", result: res(30, 3), span: 3 * time.Second, serverCPU: 1},
		{phase: "compact off", result: res(30, 2), span: 2 * time.Second, serverCPU: 1},
		{phase: "compact settle", span: 2 * time.Second, serverCPU: 0.5},
	}
	p := &compactPoll{passes: []compactPass{
		{generation: 1, decided: time.Unix(100, 0), done: time.Unix(101, 0), cleanBefore: 0, cleanedFrom: 0, end: 1024},
		{generation: 2, decided: time.Unix(110, 0), done: time.Unix(111, 0), cleanBefore: 1 << 20, cleanedFrom: 1024, end: 2048},
	}}
	p.lastSeen[0] = compactGauges{size: 4 << 20, clean: 1 << 20, generation: 2, cleanedTo: 2048, hwm: 4096}
	p.lastSeen[1] = compactGauges{size: 4 << 20, hwm: 4096}
	f := &compactFigures{keys: 1024, updates: 4096, valueBytes: 1000, batchBytes: 16384, segmentBytes: 1 << 20}
	p.finish(f)
	var b strings.Builder
	printCompact(&b, rows, f)
	for _, want := range []string{
		"produce: compaction running 10.0 MiB/s (runs 10.0), without 15.0 MiB/s (runs 15.0): 67%",
		"compaction: 2 passes on the leader, 3.0 MiB in (2.0 MiB from the raft log, the rest prefix re-read) in 2s: 1.5 MiB/s a replica",
		"compaction CPU ≈ 2.0 s of the servers' (compacted runs 3.0 s − delete runs 2.0 s + settle 1.0 s)",
		"raft log 4.0 MiB + prefix 1.0 MiB = 5.0x the live set (1.0 MiB: 1024 keys x 1024 B stored a record); prefix alone 1.00x",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printCompact lacks %q:\n%s", want, b.String())
		}
	}
}
