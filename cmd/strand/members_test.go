package main

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestJoinFourthNode starts 3 nodes, joins a 4th with `strand serve
// --join`, sees it registered and a metadata voter in `strand cluster`,
// sees a topic created afterwards place replicas on it, then restarts the
// joined node without --join and sees it come back a voter. Also checks
// decommission --dry-run and rebalance --dry-run print plans and change
// nothing, `cluster leaders --balance` answers, and once node 4 holds no
// replica `node decommission 4` removes it for good.
func TestJoinFourthNode(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	port := freePorts(t, 1)[0]
	addr4 := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	start4 := func(args ...string) *proc {
		return startProc(t, filepath.Join(c.dir, "node-4.log"), nil, append([]string{"serve", "--id", "4",
			"--listen", addr4, "--data-dir", filepath.Join(c.dir, "data-4")}, args...)...)
	}
	p4 := start4("--join", c.addrs[1])
	c.procs = append(c.procs, p4)
	all := append(append([]string(nil), c.addrs...), addr4)
	waitFor(t, "node 4 registered everywhere", 30*time.Second, func() error { return clusterReady(all, 4) })
	voter := func() error {
		out, errOut, err := runCLIResult(t, env, "", "cluster")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		if !strings.Contains(out, "  4  "+addr4+"  active  up  metadata voter") {
			return fmt.Errorf("node 4 not an active voter:\n%s", out)
		}
		return nil
	}
	waitFor(t, "node 4 a metadata voter", 30*time.Second, voter)

	runCLI(t, env, "", "topic", "create", "after-join", "--partitions", "4", "--replication-factor", "3")
	waitFor(t, "topic after-join", 30*time.Second, func() error { return topicReady(all, "after-join", 4) })
	md, err := rawMetadata(addr4)
	if err != nil {
		t.Fatal(err)
	}
	on4 := 0
	for _, tm := range md.GetTopics() {
		for _, p := range tm.GetPartitions() {
			if tm.GetName() == "after-join" && slices.Contains(p.GetReplicas(), 4) {
				on4++
			}
		}
	}
	if on4 == 0 {
		t.Fatalf("no replica of after-join on node 4: %v", md.GetTopics())
	}

	// Restart node 4 without --join: same membership.
	if err := p4.stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatalf("stop node 4: %v", err)
	}
	c.procs[3] = start4()
	waitFor(t, "node 4 back", 30*time.Second, func() error { return clusterReady(all, 4) })
	waitFor(t, "node 4 a metadata voter after restart", 30*time.Second, voter)

	plan := runCLI(t, env, "", "node", "decommission", "1", "--dry-run")
	if !strings.Contains(plan, "decommission node 1 (dry run, nothing changed)") {
		t.Fatalf("decommission --dry-run:\n%s", plan)
	}
	runCLI(t, env, "", "cluster", "rebalance", "--dry-run")
	if out := runCLI(t, env, "", "cluster", "leaders", "--balance"); !strings.Contains(out, "leadership transfer") {
		t.Fatalf("cluster leaders --balance:\n%s", out)
	}
	if out := runCLI(t, env, "", "cluster"); strings.Contains(out, "decommissioning") {
		t.Fatalf("a dry run changed the cluster:\n%s", out)
	}

	// With its topic gone node 4 holds nothing: decommission needs no
	// move and takes it out of the metadata group.
	runCLI(t, env, "", "topic", "delete", "after-join")
	if out := runCLI(t, env, "", "node", "decommission", "4"); !strings.Contains(out, "node 4 removed") {
		t.Fatalf("node decommission 4:\n%s", out)
	}
	if out := runCLI(t, env, "", "cluster"); !strings.Contains(out, "  4  "+addr4+"  removed  metadata none") {
		t.Fatalf("node 4 not shown removed:\n%s", out)
	}
	if _, errOut, err := runCLIResult(t, env, "", "node", "add", "--id", "4", "--address", addr4); err == nil ||
		!strings.Contains(errOut, "node removed") {
		t.Fatalf("re-adding a removed node: err %v, stderr %s", err, errOut)
	}
}
