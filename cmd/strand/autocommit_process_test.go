package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// The auto-commit kill test's sizes: members process one record per
// millisecond, so a Poll's batch takes long enough that kills land inside
// batches.
const (
	acTopic      = "autocommitted"
	acPartitions = 4
	acPerPart    = 500
	acMembers    = 2
	acKills      = 6
	acHelperEnv  = "STRAND_TEST_AUTOCOMMIT_MEMBER" // instance id of a helper process
)

// TestAutoCommitMembersKilledMidBatch runs a `strand serve` process, a
// topic of 2000 acknowledged records, and two group members in separate
// processes (this test binary as a helper) that use the default style of
// consumption, auto-commit (every 20 ms here), and process each record
// slowly, writing it out once processed. Members are SIGKILLed in turn,
// mid-batch, and restarted with their instance ids. Every acknowledged
// record must be processed at least once: auto-commit commits only what
// earlier Polls returned (issue 19, item 1; before the fix a member killed
// mid-batch had committed the whole batch, and its rest was never
// processed).
func TestAutoCommitMembersKilledMidBatch(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", acTopic, "--partitions", strconv.Itoa(acPartitions), "--replication-factor", "1")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, acTopic, acPartitions) })
	acked := produceAutoCommitRecords(t, c.addrs)

	dir := t.TempDir()
	procs := make([]*exec.Cmd, acMembers)
	var outs []string
	start := func(i int) {
		out := filepath.Join(dir, fmt.Sprintf("member-%d-%d.out", i, len(outs)))
		outs = append(outs, out)
		procs[i] = startAutoCommitMember(t, c.addrs, fmt.Sprintf("m%d", i), out)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			killMember(p)
		}
	})
	for i := range acMembers {
		start(i)
	}
	// Kill only once records flow, then one member every 700 ms.
	waitFor(t, "first records processed", 60*time.Second, func() error {
		if n := len(readProcessed(t, outs)); n < 50 {
			return fmt.Errorf("%d records processed", n)
		}
		return nil
	})
	for k := range acKills {
		time.Sleep(700 * time.Millisecond)
		i := k % acMembers
		killMember(procs[i])
		start(i)
	}
	var seen map[string]int
	waitFor(t, "every acknowledged record processed", 90*time.Second, func() error {
		seen = readProcessed(t, outs)
		missing := 0
		for v := range acked {
			if seen[v] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acknowledged records never processed", missing, len(acked))
		}
		return nil
	})
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("%d records acknowledged, all processed; %d re-processed after %d kills", len(acked), dups, acKills)
}

// produceAutoCommitRecords writes acPerPart records to each partition in
// batches of 50 and returns the acknowledged values.
func produceAutoCommitRecords(t *testing.T, addrs []string) map[string]bool {
	t.Helper()
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.ManualPartitioner())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acked := map[string]bool{}
	for from := 0; from < acPerPart; from += 50 {
		var rs []*clientlib.Record
		for p := range int32(acPartitions) {
			for i := from; i < from+50; i++ {
				rs = append(rs, &clientlib.Record{Topic: acTopic, Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))})
			}
		}
		if err := c.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			acked[string(r.Value)] = true
		}
	}
	return acked
}

// startAutoCommitMember starts this test binary as a group member with
// instance id, writing the records it processed to out.
func startAutoCommitMember(t *testing.T, addrs []string, instance, out string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAutoCommitMemberHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), acHelperEnv+"="+instance, "STRAND_BROKERS="+strings.Join(addrs, ","))
	cmd.Stdout = f
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// killMember SIGKILLs a member process and reaps it.
func killMember(cmd *exec.Cmd) {
	if cmd == nil || cmd.ProcessState != nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// readProcessed counts the processed values in the members' outputs
// (lines "processed VALUE"; a line cut by a kill is not counted).
func readProcessed(t *testing.T, outs []string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, out := range outs {
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "processed "); ok && strings.HasSuffix(v, ".") {
				seen[strings.TrimSuffix(v, ".")]++
			}
		}
	}
	return seen
}

// TestAutoCommitMemberHelper is not a test: it is a group member process
// of TestAutoCommitMembersKilledMidBatch, run only with acHelperEnv set.
// It polls with auto-commit every 20 ms, "processes" each record for a
// millisecond and writes "processed VALUE." once done, until it is killed
// (or two minutes pass).
func TestAutoCommitMemberHelper(t *testing.T) {
	instance := os.Getenv(acHelperEnv)
	if instance == "" {
		t.Skip("helper process of TestAutoCommitMembersKilledMidBatch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := clientlib.NewClient(clientlib.SeedAddresses(strings.Split(os.Getenv("STRAND_BROKERS"), ",")...),
		clientlib.RetryBackoff(20*time.Millisecond, 200*time.Millisecond), clientlib.MaxRetries(500))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := clientlib.NewGroupConsumer(c, "autocommitters", []string{acTopic}, clientlib.InstanceID(instance),
		clientlib.AutoCommitInterval(20*time.Millisecond),
		clientlib.GroupConsumerOpts(clientlib.FetchMaxWait(100*time.Millisecond), clientlib.FetchMaxPartitionBytes(4<<10)))
	if err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		for _, r := range g.Poll(ctx).Records() {
			time.Sleep(time.Millisecond) // the application's work
			os.Stdout.WriteString("processed " + string(r.Value) + ".\n")
		}
	}
}
