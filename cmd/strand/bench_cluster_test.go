package main

import (
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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

// TestBenchClusterTxnSmoke runs the txn phase briefly: plain idempotent
// produce and transactions of 1 and 10 records on one partition, then the
// transactions read back at read_uncommitted and read_committed (to their
// ends, though the last offset is a commit marker, which no record has),
// two rounds each, every run without errors, and the ranges.
func TestBenchClusterTxnSmoke(t *testing.T) {
	skipShort(t)
	bin := strandBinary(t)
	out := runCLI(t, nil, "", "bench", "cluster", "--binary", bin, "--data-dir", t.TempDir(), "--phases", "txn",
		"--txn-sizes", "1,10", "--txn-partitions", "1", "--txn-rounds", "2", "--txn-duration", "1s")
	for _, want := range []string{"txn phase, min–max over the rounds", "commits/s", "(2 rounds)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	runs := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		for _, run := range []string{"idempotent ", "txn x", "read_uncommitted ", "read_committed "} {
			if strings.HasPrefix(line, run) {
				runs[run]++
				if strings.Contains(line, "errors") {
					t.Errorf("a run had errors: %s", line)
				}
			}
		}
	}
	// Two rounds of each run in the table, then one range line per run.
	want := map[string]int{"idempotent ": 3, "txn x": 2*2 + 2, "read_uncommitted ": 3, "read_committed ": 3}
	if !maps.Equal(runs, want) {
		t.Errorf("table and range lines of the txn runs %v, want %v:\n%s", runs, want, out)
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
