package main

import (
	"os"
	"path/filepath"
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
