package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
)

// TestOperateClusterUnderKill is issue 12's real-process proof, with the
// operator's own commands: three `strand serve` nodes, topic kill (4
// partitions, RF 3) written continuously with acks=all; a fourth node joins
// with `serve --join`; `strand cluster rebalance` moves replicas onto it;
// `strand node decommission 1` moves every replica off node 1 and node 1 is
// SIGKILLed while one of those moves is in progress (the node being drained
// is the harder victim: it may be a partition leader, the metadata leader,
// and it must still end up holding nothing), then restarted. The
// decommission must finish, the checkers must find no lost acknowledged
// record, `strand cluster` must show node 1 removed and out of the metadata
// group, and node 1's data directory must keep no log file of any
// partition: only the replica directories' `deleted` tombstones remain
// (they stop a replay of an old metadata checkpoint from re-creating the
// replica; see node's doc: versioned tombstones); node 1 must log that it
// was removed.
func TestOperateClusterUnderKill(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", killTopic, "--partitions", strconv.Itoa(killPartitions), "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, killTopic, killPartitions) })
	admin, err := clientlib.NewClient(clientlib.SeedAddresses(c.addrs...), clientlib.RequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	w := &killWorkload{h: linearizability.NewHistory(), start: time.Now()}
	w.budget.Store(moveRecordsMax)
	var wg sync.WaitGroup
	defer func() { w.stopped.Store(true); wg.Wait() }()
	for i := range killWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.write(t, c.addrs, linearizability.ClientID(i))
		}()
	}
	waitFor(t, "writes before the join", 30*time.Second, func() error { return ackedAtLeast(w, killProgressStep) })

	// Node 4 joins through node 2.
	addr4 := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePorts(t, 1)[0]))
	start4 := func(args ...string) *proc {
		return startProc(t, filepath.Join(c.dir, "node-4.log"), nil, append([]string{"serve", "--id", "4",
			"--listen", addr4, "--data-dir", filepath.Join(c.dir, "data-4")}, args...)...)
	}
	c.procs = append(c.procs, start4("--join", c.addrs[1]))
	all := append(slices.Clone(c.addrs), addr4)
	env = []string{"STRAND_BROKERS=" + strings.Join(all, ",")}
	waitFor(t, "node 4 a metadata voter", 30*time.Second, func() error {
		return clusterShows(t, env, "  4  "+addr4+"  active  up  metadata voter")
	})

	out := runCLI(t, env, "", "cluster", "rebalance")
	if !strings.Contains(out, "rebalanced") {
		t.Fatalf("cluster rebalance:\n%s", out)
	}
	t.Logf("strand cluster rebalance:\n%s", out)
	if on4 := replicasOn(t, admin, 4); on4 == 0 {
		t.Fatalf("rebalance placed no replica on node 4")
	}
	acked := w.acked.Load()
	waitFor(t, "writes after the rebalance", 30*time.Second, func() error { return ackedAtLeast(w, acked+killProgressStep) })

	// Decommission node 1; kill it while one of its moves is in progress.
	type result struct {
		out, errOut string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		o, e, err := runCLIResult(t, env, "", "node", "decommission", "1")
		done <- result{o, e, err}
	}()
	var moving string
	waitFor(t, "a move off node 1 in progress", 30*time.Second, func() error {
		select {
		case res := <-done: // it ended before any move was seen in progress
			t.Fatalf("strand node decommission 1 ended before a move off node 1 was seen: %v\nstdout:\n%s\nstderr:\n%s", res.err, res.out, res.errOut)
		default:
		}
		moving = moveOffNode(admin, 1)
		if moving == "" {
			return fmt.Errorf("no move off node 1 in progress")
		}
		return nil
	})
	c.procs[0].kill()
	t.Logf("node 1 killed while %s", moving)
	acked = w.acked.Load()
	waitFor(t, "writes with node 1 down", 30*time.Second, func() error { return ackedAtLeast(w, acked+killProgressStep) })
	c.start(0)

	var res result
	select {
	case res = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("strand node decommission 1 did not finish within 90 s")
	}
	if res.err != nil || !strings.Contains(res.out, "node 1 removed") {
		t.Fatalf("strand node decommission 1: %v\nstdout:\n%s\nstderr:\n%s", res.err, res.out, res.errOut)
	}
	t.Logf("strand node decommission 1:\n%s", res.out)
	acked = w.acked.Load()
	waitFor(t, "writes after the decommission", 30*time.Second, func() error { return ackedAtLeast(w, acked+killProgressStep) })
	w.stopped.Store(true)
	wg.Wait()
	t.Logf("%d records acknowledged, %d failed or unknown", w.acked.Load(), w.failed.Load())

	w.polls().drain(t, all[1:], linearizability.ClientID(killWriters), killPartitions, 60*time.Second)
	report := linearizability.Check(w.h, linearizability.Options{FinalDrain: true, Timeout: 60 * time.Second})
	if err := report.Err(); err != nil {
		t.Fatal(err)
	}
	// Node 1 is out of the metadata group and may answer from what it
	// applied before; ask the others.
	rest, err := clientlib.NewClient(clientlib.SeedAddresses(all[1:]...), clientlib.RequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer rest.Close()
	if n := replicasOn(t, rest, 1); n != 0 {
		t.Fatalf("node 1 still listed in %d replica sets", n)
	}
	env = []string{"STRAND_BROKERS=" + strings.Join(all[1:], ",")}
	if err := clusterShows(t, env, "  1  "+c.addrs[0]+"  removed  metadata none"); err != nil {
		t.Fatal(err)
	}
	// Node 1 itself learned it was removed (it was kept in the metadata
	// group until it had caught up) and tells its operator.
	waitFor(t, "node 1 to log its removal", 30*time.Second, func() error {
		if b, _ := os.ReadFile(filepath.Join(c.dir, "node-1.log")); !strings.Contains(string(b), "this node was removed from the cluster") {
			return fmt.Errorf("node 1 has not logged its removal")
		}
		return nil
	})
	data1 := filepath.Join(c.dir, "data-1", "p")
	waitFor(t, "node 1 to drop its replicas", 30*time.Second, func() error { return noSegments(data1) })
	t.Logf("left in node 1's replica directories: %v", leftFiles(t, data1))
}

// clusterShows is nil once `strand cluster` prints line.
func clusterShows(t *testing.T, env []string, line string) error {
	out, errOut, err := runCLIResult(t, env, "", "cluster")
	if err != nil {
		return fmt.Errorf("%v: %s", err, errOut)
	}
	if !strings.Contains(out, line) {
		return fmt.Errorf("strand cluster does not show %q:\n%s", line, out)
	}
	return nil
}

// replicasOn counts the partitions whose replica list or move target
// names node id.
func replicasOn(t *testing.T, admin *clientlib.Client, id uint64) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := admin.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tm := range info.Topics {
		for _, p := range tm.Partitions {
			if slices.Contains(p.Replicas, id) || slices.Contains(p.TargetReplicas, id) {
				n++
			}
		}
	}
	return n
}

// moveOffNode names a partition moving away from node id ("" if none).
func moveOffNode(admin *clientlib.Client, id uint64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := admin.Metadata(ctx)
	if err != nil {
		return ""
	}
	for _, tm := range info.Topics {
		for _, p := range tm.Partitions {
			if p.TargetReplicas != nil && slices.Contains(p.Replicas, id) && !slices.Contains(p.TargetReplicas, id) {
				return fmt.Sprintf("%s/%d moved %v -> %v", tm.Name, p.Partition, p.Replicas, p.TargetReplicas)
			}
		}
	}
	return ""
}

// leftFiles lists the files under dir, relative to it.
func leftFiles(t *testing.T, dir string) []string {
	var files []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, rel)
		}
		return nil
	})
	return files
}
