package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Three real nodes whose disks fall below their free-space floor
// (--min-free-bytes far above any real disk's free space, an injected
// floor): produce fails with the typed, retriable not_enough_space and no
// node exits; every record written before is still read back; with the
// floor lifted writes resume. Before, the refusal did not exist: a full
// disk stopped the node at the first failed write.
func TestFreeSpaceFloorRefusesProduceKeepsReads(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", "full", "--partitions", "2", "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "full", 2) })
	var lines strings.Builder
	for i := range 50 {
		fmt.Fprintf(&lines, "before-%d\n", i)
	}
	runCLI(t, env, lines.String(), "produce", "full")

	restartAll := func(extra ...string) {
		for i := range c.procs {
			c.procs[i].kill()
		}
		for _, kv := range extra {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		for i := range c.procs {
			c.start(i)
		}
		waitFor(t, "cluster", 30*time.Second, func() error { return clusterReady(c.addrs, 3) })
		waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "full", 2) })
	}
	restartAll("STRAND_MIN_FREE_BYTES=" + fmt.Sprint(int64(1)<<60))
	_, stderr, err := runCLIResult(t, env, "refused\n", "produce", "full", "--timeout", "3s")
	if err == nil || !strings.Contains(stderr, "not_enough_space") {
		t.Fatalf("produce below the floor: err %v, stderr %q; want not_enough_space", err, stderr)
	}
	for i, p := range c.procs {
		select {
		case <-p.done:
			t.Fatalf("node %d exited on a full disk", i+1)
		default:
		}
	}
	if out := runCLI(t, env, "", "cluster"); strings.Count(out, "DISK FULL") != 3 {
		t.Fatalf("strand cluster does not show the three full disks:\n%s", out)
	}
	out := runCLI(t, env, "", "consume", "full", "--from", "earliest", "--until-end")
	if got := strings.Count(out, "before-"); got != 50 || strings.Contains(out, "refused") {
		t.Fatalf("read back %d of 50 records on full disks (output %q)", got, out)
	}
	restartAll("STRAND_MIN_FREE_BYTES=0")
	runCLI(t, env, "after\n", "produce", "full", "--timeout", "20s")
	out = runCLI(t, env, "", "consume", "full", "--from", "earliest", "--until-end")
	if strings.Count(out, "before-") != 50 || !strings.Contains(out, "after") {
		t.Fatalf("after the floor was lifted: %q", out)
	}
	if out := runCLI(t, env, "", "cluster"); strings.Contains(out, "DISK FULL") {
		t.Fatalf("strand cluster shows a full disk after the floor was lifted:\n%s", out)
	}
	t.Logf("refused with: %s", strings.TrimSpace(stderr))
}
