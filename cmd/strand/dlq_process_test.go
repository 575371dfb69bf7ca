package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// The dead-letter kill test's sizes.
const (
	dlTopic      = "poison"
	dlPartitions = 3
	dlPerPart    = 120
	dlMembers    = 2
	dlKills      = 6
	dlBadEvery   = 13 // record i of a partition is bad when i%dlBadEvery == 5
)

// dlHandler is the members' --exec command: a bad record fails every
// attempt, a good one is appended to $DL_OUT as "processed VALUE.". An
// empty stdin is refused: a command whose member was killed before it
// wrote the value reads nothing, and must not count as processing it.
const dlHandler = `v=$(cat); [ -n "$v" ] || exit 2; case "$v" in *bad) echo "cannot parse $v" >&2; exit 1;; esac; echo "processed $v." >> "$DL_OUT"`

// TestDeadLetterMembersAndLeadersKilledMidRetry runs three `strand serve`
// processes, a replicated topic whose records include a chosen bad set,
// and two `strand consume --group --exec` members whose command fails on
// the bad records. Members are SIGKILLed in turn while they retry, and a
// node (leading some partitions) is killed and restarted; members restart
// with their instance ids. Every good record must be processed and every
// bad one dead-lettered (at least once each), with its source coordinates
// and the command's error, no good record dead-lettered, every partition
// committed to its end; `dlq redrive --to` a fresh topic then writes
// exactly the bad set, each once, and a second redrive writes nothing.
// group describe counts each bad record once as dead-lettered (the count
// travels in the committed offsets' metadata).
func TestDeadLetterMembersAndLeadersKilledMidRetry(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", dlTopic, "--partitions", strconv.Itoa(dlPartitions), "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, dlTopic, dlPartitions) })
	good, bad := produceDeadLetterRecords(t, c.addrs)

	dir := t.TempDir()
	members := make([]*proc, dlMembers)
	var outs []string
	start := func(i int) {
		out := filepath.Join(dir, fmt.Sprintf("member-%d-%d.out", i, len(outs)))
		outs = append(outs, out)
		if err := os.WriteFile(out, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		members[i] = startProc(t, out+".log", append(env, "DL_OUT="+out),
			"consume", dlTopic, "--group", "dlqers", "--instance-id", fmt.Sprintf("m%d", i), "--exec", dlHandler,
			"--max-attempts", "3", "--retry-backoff", "150ms")
	}
	t.Cleanup(func() {
		for _, p := range members {
			if p != nil {
				p.kill()
			}
		}
		if t.Failed() {
			logMemberTails(t, outs)
		}
	})
	for i := range dlMembers {
		start(i)
	}
	waitFor(t, "first records processed", 60*time.Second, func() error {
		if n := len(readProcessed(t, outs)); n < 30 {
			return fmt.Errorf("%d records processed", n)
		}
		return nil
	})
	for k := range dlKills {
		time.Sleep(400 * time.Millisecond) // a bad record holds its partition ~450 ms: kills land mid-retry
		if k == dlKills/2 {
			c.procs[1].kill() // node 2 leads some partitions (and maybe the group's coordinator)
			time.Sleep(time.Second)
			c.start(1)
		}
		i := k % dlMembers
		members[i].kill()
		start(i)
	}
	waitFor(t, "every good record processed, every bad one dead-lettered", 120*time.Second, func() error {
		return deadLetterOutcome(t, c.addrs, outs, good, bad)
	})
	waitFor(t, "the group committed every partition to its end", 60*time.Second, func() error {
		return committedToEnd(c.addrs, "dlqers", dlTopic)
	})
	if out := runCLI(t, env, "", "group", "describe", "dlqers"); !strings.Contains(out, "dead-lettered: "+plural(len(bad), "record")+" (") {
		t.Fatalf("group describe does not count the %d bad records as dead-lettered:\n%s", len(bad), out)
	}
	checkRedriveOnce(t, env, c.addrs, bad)
	describe := runCLI(t, env, "", "dlq", "describe", dlTopic+".dlq")
	t.Logf("%d good records processed, %d bad dead-lettered and redriven once after %d member kills and a node kill\n%s",
		len(good), len(bad), dlKills, describe)
}

// checkRedriveOnce redrives the dead letters to a fresh topic twice: the
// topic must hold exactly the bad records, each once.
func checkRedriveOnce(t *testing.T, env, addrs []string, bad map[string]bool) {
	t.Helper()
	runCLI(t, env, "", "topic", "create", "redriven", "--partitions", strconv.Itoa(dlPartitions), "--replication-factor", "3")
	out := runCLI(t, env, "", "dlq", "redrive", dlTopic+".dlq", "--to", "redriven")
	if !strings.Contains(out, "redrove "+plural(len(bad), "dead letter")+" ") {
		t.Fatalf("redrive: %s; want %d redriven", out, len(bad))
	}
	out = runCLI(t, env, "", "dlq", "redrive", dlTopic+".dlq", "--to", "redriven")
	if !strings.Contains(out, "redrove 0 dead letters") {
		t.Fatalf("second redrive: %s; want nothing written", out)
	}
	got := readAll(t, addrs, "redriven")
	if len(got) != len(bad) {
		t.Fatalf("redriven topic holds %d records, want the %d dead-lettered ones", len(got), len(bad))
	}
	for v, n := range got {
		if !bad[v] || n != 1 {
			t.Fatalf("redriven %q %d times (bad: %v)", v, n, bad[v])
		}
	}
}

// logMemberTails logs the end of each member incarnation's log.
func logMemberTails(t *testing.T, outs []string) {
	for _, out := range outs {
		b, _ := os.ReadFile(out + ".log")
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("member log %s (tail):\n%s", filepath.Base(out), b)
	}
}

// produceDeadLetterRecords writes dlPerPart records to each partition,
// every dlBadEvery-th one ending in "bad", and returns the good and bad
// values.
func produceDeadLetterRecords(t *testing.T, addrs []string) (good, bad map[string]bool) {
	t.Helper()
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.ManualPartitioner())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	good, bad = map[string]bool{}, map[string]bool{}
	var rs []*clientlib.Record
	for p := range int32(dlPartitions) {
		for i := range dlPerPart {
			v := fmt.Sprintf("p%d-%d", p, i)
			if i%dlBadEvery == 5 {
				v += "-bad"
				bad[v] = true
			} else {
				good[v] = true
			}
			rs = append(rs, &clientlib.Record{Topic: dlTopic, Partition: p, Value: []byte(v)})
		}
	}
	if err := c.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return good, bad
}

// deadLetterOutcome is nil once every good record was processed and every
// bad one dead-lettered with its coordinates and error, and no good one.
func deadLetterOutcome(t *testing.T, addrs, outs []string, good, bad map[string]bool) error {
	processed := readProcessed(t, outs)
	for v := range good {
		if processed[v] == 0 {
			return fmt.Errorf("good record %s not processed yet", v)
		}
	}
	for v := range processed {
		if !good[v] {
			return fmt.Errorf("processed %q, which is not a good record", v)
		}
	}
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	entries, err := c.ReadDeadLetters(ctx, dlTopic+".dlq")
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, e := range entries {
		v := string(e.Record.Value)
		if e.Err != nil || !bad[v] {
			t.Fatalf("dead letter %q (%v): not one of the bad records", v, e.Err)
		}
		if want := fmt.Sprintf("p%d-", e.Info.Source.Partition); !strings.HasPrefix(v, want) || e.Info.Source.Topic != dlTopic ||
			e.Info.Attempts != 3 || !strings.Contains(e.Info.Err, "cannot parse "+v) || e.Info.Group != "dlqers" {
			t.Fatalf("dead letter %q: %+v", v, e.Info)
		}
		seen[v] = true
	}
	if len(seen) < len(bad) {
		return fmt.Errorf("%d of %d bad records dead-lettered (%d dead letters)", len(seen), len(bad), len(entries))
	}
	return nil
}

// committedToEnd is nil once group's committed offset of every partition
// of topic is its high-water mark.
func committedToEnd(addrs []string, group, topic string) error {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lag, err := c.GroupLag(ctx, group, time.Now())
	if err != nil {
		return err
	}
	if len(lag) != dlPartitions {
		return fmt.Errorf("lag of %d partitions, want %d", len(lag), dlPartitions)
	}
	for _, l := range lag {
		if l.Lag != 0 {
			return fmt.Errorf("%s/%d: lag %d", l.Topic, l.Partition, l.Lag)
		}
	}
	return nil
}

// readAll counts the values of every record of topic.
func readAll(t *testing.T, addrs []string, topic string) map[string]int {
	t.Helper()
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entries, err := c.ReadDeadLetters(ctx, topic) // reads any topic to its end; these records are not dead letters
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range entries {
		out[string(e.Record.Value)]++
	}
	return out
}

// The README's "Poison records and dead letters" block, run as written
// against a one-node cluster (only the binary's path replaced), books the
// good lines, dead-letters "oops" with its coordinates and error,
// describes it, redrives it once, and the second redrive writes nothing.
func TestReadmeDeadLetterBlock(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	block := readmeBlock(t, "### Poison records and dead letters")
	if !strings.Contains(block, "./bin/strand") {
		t.Fatalf("the README block no longer runs ./bin/strand; update this test:\n%s", block)
	}
	block = strings.ReplaceAll(block, "./bin/strand", strandBinary(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", block)
	cmd.Env = append(os.Environ(), "STRAND_BROKERS="+strings.Join(c.addrs, ","))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out, errOut := stdout.String(), stderr.String()
	if err != nil {
		t.Fatalf("README block: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	for _, want := range []string{"booked 10\nbooked 20\nbooked 40\n", "dead-lettered: 1 record (payments/0: 1)", "dead-letter topic payments.dlq: 1 dead letter, 0 redriven",
		"payments/0  1      0         ledger  2               exit status 1: not an amount: oops",
		"redrove 1 dead letter from payments.dlq;", "redrove 0 dead letters from payments.dlq; 1 redriven before"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	for _, want := range []string{"strand: payments/0@2 attempt 1 of 2 failed: exit status 1: not an amount: oops",
		"strand: dead-lettered payments/0@2 to payments.dlq/0@0 after 2 attempts"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

// consume --exec --retry-topic keeps the partition flowing: the record
// after a failing one is handled before the failing one's retries, which
// come from the retry topic with STRAND_ATTEMPT counting on; after
// --max-attempts it is dead-lettered, and --until-end waits for that.
func TestConsumeExecRetryTopic(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", "flow", "--partitions", "1", "--replication-factor", "1")
	runCLI(t, env, "1\nx\n3\n", "produce", "flow")
	log := filepath.Join(t.TempDir(), "handled")
	runCLI(t, append(env, "LOG="+log), "", "consume", "flow", "--group", "g", "--until-end", "--retry-topic", "flow.retry",
		"--retry-backoff", "200ms", "--exec",
		`v=$(cat); case "$v" in x) echo "fail $v $STRAND_ATTEMPT" >> "$LOG"; exit 1;; esac; echo "ok $v" >> "$LOG"`)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "ok 1\nfail x 1\nok 3\nfail x 2\nfail x 3\n"; string(b) != want {
		t.Fatalf("handled, in order:\n%s\nwant:\n%s", b, want)
	}
	out := runCLI(t, env, "", "dlq", "describe", "flow.dlq")
	if !strings.Contains(out, "1 dead letter, 0 redriven") || !regexp.MustCompile(`flow/0 +1 +0 +g +1 +exit status 1`).MatchString(out) {
		t.Fatalf("dlq describe:\n%s", out)
	}
}

// A dead letter consume --exec cannot write (the --dlq-topic lacks the
// record's partition) stops it with exit 1 and a message saying what to
// do, with nothing from that record on committed: after the dead-letter
// topic gets its partition, the next run dead-letters it.
func TestConsumeExecUnwritableDeadLetterLosesNothing(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", "src", "--partitions", "2", "--replication-factor", "1")
	runCLI(t, env, "", "topic", "create", "narrow", "--partitions", "1", "--replication-factor", "1")
	runCLI(t, env, "ok\nbad\nok\n", "produce", "src", "-p", "1")
	args := []string{"consume", "src", "--group", "g", "--until-end", "--max-attempts", "1", "--dlq-topic", "narrow",
		"--exec", `[ "$(cat)" = ok ]`}
	_, errOut, err := runCLIResult(t, env, "", args...)
	if err == nil || !strings.Contains(errOut, "could not dead-letter src/1@1 to narrow: it has no partition 1") ||
		!strings.Contains(errOut, "nothing from that record on was committed") {
		t.Fatalf("consume: %v\n%s", err, errOut)
	}
	if out := runCLI(t, env, "", "group", "describe", "g"); !regexp.MustCompile(`src +1 +1 +3 +2 `).MatchString(out) {
		t.Fatalf("group describe: want src/1 committed at 1 (the bad record), lag 2:\n%s", out)
	}
	runCLI(t, env, "", "topic", "add-partitions", "narrow", "--partitions", "2")
	runCLI(t, env, "", args...)
	if out := runCLI(t, env, "", "dlq", "describe", "narrow"); !regexp.MustCompile(`src/1 +1 +0 +g +1 `).MatchString(out) {
		t.Fatalf("dlq describe:\n%s", out)
	}
}
