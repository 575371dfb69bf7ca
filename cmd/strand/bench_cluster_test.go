package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBenchClusterSmoke runs `strand bench cluster` briefly against the
// binary under test: it starts three servers, produces, consumes and
// prints the table with the servers' CPU and memory, then stops them.
func TestBenchClusterSmoke(t *testing.T) {
	skipShort(t)
	bin := strandBinary(t)
	dir := t.TempDir()
	out := runCLI(t, nil, "", "bench", "cluster", "--binary", bin, "--data-dir", dir,
		"--phases", "produce,consume", "--duration", "1s")
	for _, want := range []string{"phase", "produce", "consume", "srv-cpu", "RSS MiB per node", "from the Produce call"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "produce ") && strings.Contains(line, "errors") {
			t.Errorf("produce had errors: %s", line)
		}
	}
}

// The many-partition phase after another phase runs on a fresh cluster
// and states the memory an idle replica costs from the servers' live heap
// (forced GCs through their admin listeners), not from RSS, which the
// earlier phase's freed heap inflates: a positive figure for every node.
func TestBenchClusterManyMemory(t *testing.T) {
	skipShort(t)
	bin := strandBinary(t)
	out := runCLI(t, nil, "", "bench", "cluster", "--binary", bin, "--data-dir", t.TempDir(),
		"--phases", "produce,many", "--duration", "1s", "--many-partitions", "100", "--idle", "1s", "--idle-settle", "0s", "--many-produce=false")
	if n := strings.Count(out, "bench cluster: 3 servers"); n != 2 {
		t.Errorf("%d clusters started, want a fresh one for the many-partition phase:\n%s", n, out)
	}
	const prefix = "memory per idle replica (growth of the live Go heap and stacks after GCs / replicas gained, per node): "
	i := strings.Index(out, prefix)
	if i < 0 {
		t.Fatalf("no live-heap memory line:\n%s", out)
	}
	line, _, _ := strings.Cut(out[i+len(prefix):], "\n")
	for _, f := range strings.Split(strings.TrimSuffix(line, " KiB"), " / ") {
		if v, err := strconv.ParseFloat(f, 64); err != nil || v <= 0 {
			t.Errorf("memory per idle replica %q in %q: want positive KiB", f, line)
		}
	}
}

// TestReadProcSample reads this process's CPU time and resident memory
// the way bench cluster reads its servers'.
func TestReadProcSample(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	deadline := time.Now().Add(5 * time.Second)
	s := readProcSample(os.Getpid())
	for s.cpu == 0 && time.Now().Before(deadline) { // burn a little CPU until a clock tick is counted
		for i := 0; i < 1e6; i++ {
			_ = strings.Repeat("x", i%3)
		}
		s = readProcSample(os.Getpid())
	}
	if s.cpu <= 0 || s.rssBytes <= 0 {
		t.Fatalf("readProcSample(self) = %+v: want positive CPU time and RSS", s)
	}
}

// TestBenchClusterFanoutSmoke runs the fan-out phase briefly: produce with
// no group and with two groups tailing, the readers' line under the
// second.
func TestBenchClusterFanoutSmoke(t *testing.T) {
	skipShort(t)
	bin := strandBinary(t)
	out := runCLI(t, nil, "", "bench", "cluster", "--binary", bin, "--readers-binary", bin, "--data-dir", t.TempDir(),
		"--phases", "fanout", "--fanout-groups", "0,2", "--fanout-rounds", "1", "--duration", "1s")
	for _, want := range []string{"fanout 0", "fanout 2", "readers: 2 groups delivered"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchClusterTLSSmoke runs `strand bench cluster --tls` briefly: the
// servers start with TLS (their log says tls=true) and the benches run
// over it.
func TestBenchClusterTLSSmoke(t *testing.T) {
	skipShort(t)
	bin := strandBinary(t)
	dir := t.TempDir()
	out := runCLI(t, nil, "", "bench", "cluster", "--tls", "--binary", bin, "--data-dir", dir,
		"--phases", "produce,consume", "--duration", "1s")
	if !strings.Contains(out, "produce ") || !strings.Contains(out, "consume ") {
		t.Errorf("output lacks the produce and consume rows:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "node1.log")); !strings.Contains(string(b), "tls=true") {
		t.Errorf("node 1 did not start with TLS:\n%s", b)
	}
}

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
