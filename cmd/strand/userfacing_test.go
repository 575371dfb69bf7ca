package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cliOutcome is one finished strand command.
type cliOutcome struct {
	stdout, stderr string
	code           int
}

// runOutcome runs the binary with args (bounded) and returns its output
// and exit code.
func runOutcome(t *testing.T, stdin string, args ...string) cliOutcome {
	t.Helper()
	out, errOut, err := runCLIResult(t, nil, stdin, args...)
	o := cliOutcome{stdout: out, stderr: errOut}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		o.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("strand %s: %v", strings.Join(args, " "), err)
	}
	return o
}

// wantFailure checks a command failed with code and printed exactly one
// line, "strand: " followed by want, on stderr.
func (o cliOutcome) wantFailure(t *testing.T, code int, want string) {
	t.Helper()
	if o.code != code || o.stderr != "strand: "+want+"\n" {
		t.Errorf("exit %d, stderr %.300q; want exit %d and %q", o.code, o.stderr, code, "strand: "+want+"\n")
	}
}

// What a new user meets against a real one-node cluster: the values
// printed are the ones the server applied, every error is one clean line
// with a non-zero exit, a too-large line is reported by number and size
// (never echoed, even past bufio's buffer) with the count of records
// written before it, an offset past the end fails the same way with and
// without --until-end, and configs the node does not enforce are refused.
func TestUserFacingErrors(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	b := "--brokers=" + c.addrs[0]

	o := runOutcome(t, "", "topic", "create", "hello", "-p", "2", b)
	if o.code != 0 || o.stdout != "created topic hello: 2 partitions, replication factor 1\n" {
		t.Fatalf("create: %+v", o)
	}
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "hello", 2) })
	runOutcome(t, "", "topic", "create", "hello", "-p", "2", b).wantFailure(t, 1, `topic "hello" already exists`)
	runOutcome(t, "", "topic", "describe", "nosuch", b).wantFailure(t, 1,
		`topic "nosuch" does not exist (create it with: strand topic create nosuch --partitions N)`)
	runOutcome(t, "", "topic", "delete", "nosuch", b).wantFailure(t, 1,
		`topic "nosuch" does not exist (create it with: strand topic create nosuch --partitions N)`)
	o = runOutcome(t, "", "topic", "describe", "hello", b)
	if o.code != 0 || !strings.Contains(o.stdout, "config retention.ms=604800000\n") ||
		!strings.Contains(o.stdout, "config max.message.bytes=1048576\n") {
		t.Errorf("describe: %+v", o)
	}
	runOutcome(t, "", "consume", "nosuch", "-e", b).wantFailure(t, 1,
		`topic "nosuch" does not exist (create it with: strand topic create nosuch --partitions N)`)
	runOutcome(t, "", "topic", "list", "--brokers", "127.0.0.1:1").wantFailure(t, 1,
		"cannot reach the cluster at 127.0.0.1:1: connection refused (is a cluster running there? 'strand dev' starts one on 127.0.0.1:9192)")

	o = runOutcome(t, "", "topic", "create", "cfg", "-c", "cleanup.policy=compact,delete", b)
	if o.code != 0 {
		t.Errorf("create compact,delete: %+v", o)
	}
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "cfg", 1) })
	if o = runOutcome(t, "", "topic", "describe", "cfg", b); o.code != 0 || !strings.Contains(o.stdout, "config cleanup.policy=compact,delete\n") {
		t.Errorf("describe compact,delete (shown as enforced): %+v", o)
	}
	checkRetentionCommands(t, b)

	big := strings.Repeat("x", 1<<20+1)
	runOutcome(t, "a\nb\n"+big+"\nc\n", "produce", "hello", "-p", "0", b).wantFailure(t, 1,
		"line 3 is 1048577 bytes, over the 1048576-byte (1 MiB) record limit; stopped there after writing 2 records to hello")
	huge := strings.Repeat("y", 3<<20)
	runOutcome(t, "d\n"+huge+"\n", "produce", "hello", "-p", "0", b).wantFailure(t, 1,
		"line 2 is 3145728 bytes, over the 1048576-byte (1 MiB) record limit; stopped there after writing 1 record to hello")

	runOutcome(t, "e\n", "produce", "hello", "-p", "7", b).wantFailure(t, 1, "hello has no partition 7 (it has 2: 0 to 1)")
	runOutcome(t, "", "consume", "hello", "-p", "7", b).wantFailure(t, 1, "hello has no partition 7 (it has 2: 0 to 1)")
	pastEnd := "offset 50 is past the end of hello/0 (high-water mark 3); use --from latest or a smaller offset"
	runOutcome(t, "", "consume", "hello", "-p", "0", "--from", "50", "--until-end", b).wantFailure(t, 1, pastEnd)
	runOutcome(t, "", "consume", "hello", "-p", "0", "--from", "50", b).wantFailure(t, 1, pastEnd)
	o = runOutcome(t, "", "consume", "-t", "hello", "-p", "0", "-o", "1", "-e", "-f", `%p/%o %v\n`, b)
	if o.code != 0 || o.stdout != "0/1 b\n0/2 d\n" {
		t.Errorf("consume from 1: %+v", o)
	}
}

// serve refuses, at once and before listening, an --id its --peers list
// lacks, and a --listen port different from its own --peers entry.
func TestServeRefusesInconsistentAddresses(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	peers := "--peers=1=127.0.0.1:1,2=127.0.0.1:2,3=127.0.0.1:3"
	for _, args := range [][]string{
		{"serve", "--id", "4", peers, "--data-dir", filepath.Join(dir, "4")},
		{"serve", "--id", "2", "--listen", "127.0.0.1:1", peers, "--data-dir", filepath.Join(dir, "2")},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, strandBinary(t), args...)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.HasPrefix(string(out), "strand: --") {
			t.Errorf("strand %v: %v, output %q; want exit 2 with a message about the flags", args, err, out)
		}
		if _, err := os.Stat(args[len(args)-1]); err == nil {
			t.Errorf("strand %v created its data directory", args)
		}
	}
}

// checkRetentionCommands shows topic alter printing the configuration the
// server applied (and refusing a bad value in one line), delete-records
// moving the log start, a consume from an offset below it failing with the
// explained error, and describe showing the new log start.
func checkRetentionCommands(t *testing.T, b string) {
	t.Helper()
	if o := runOutcome(t, "", "topic", "create", "ret", b); o.code != 0 {
		t.Fatalf("create ret: %+v", o)
	}
	o := runOutcome(t, "", "topic", "alter", "ret", "--config", "retention.ms=60000", "--delete-config", "segment.ms", b)
	if o.code != 0 || !strings.Contains(o.stdout, "altered topic ret:\n") || !strings.Contains(o.stdout, "  config retention.ms=60000\n") {
		t.Fatalf("alter: %+v", o)
	}
	runOutcome(t, "", "topic", "alter", "ret", "-c", "retention.ms=soon", b).wantFailure(t, 1,
		`invalid topic config: retention.ms="soon": want an integer in [-1, 4611686018427387904]`)
	// A local retention on a topic that is not tiered is printed with
	// what it means there: nothing, never as applied.
	o = runOutcome(t, "", "topic", "alter", "ret", "--config", "local.retention.ms=1000", b)
	if o.code != 0 || !strings.Contains(o.stdout, "  config local.retention.ms=1000  (no effect: the topic is not tiered (remote.storage.enable=false), so the whole log stays local and retention.* alone deletes)\n") {
		t.Fatalf("alter of a local retention on a topic not tiered: %+v", o)
	}
	runOutcome(t, "", "topic", "alter", "ret", "-c", "remote.storage.enable=true", b).wantFailure(t, 1,
		"invalid topic config: remote.storage.enable=true: no object store configured on this node (strand serve --tier-dir, or --s3-endpoint and --s3-bucket); leave remote.storage.enable unset")
	if o := runOutcome(t, "a\nb\nc\nd\n", "produce", "ret", "-p", "0", b); o.code != 0 {
		t.Fatalf("produce: %+v", o)
	}
	o = runOutcome(t, "", "topic", "delete-records", "ret", "--partition", "0", "--before", "2", b)
	if o.code != 0 || o.stdout != "deleted records of ret partition 0: log start is now 2\n" {
		t.Fatalf("delete-records: %+v", o)
	}
	runOutcome(t, "", "consume", "ret", "-p", "0", "-o", "0", "-e", b).wantFailure(t, 1,
		"offset 0 is before the start of ret/0 (log start 2); use --from earliest or a larger offset")
	o = runOutcome(t, "", "consume", "ret", "-o", "earliest", "-e", b)
	if o.code != 0 || o.stdout != "c\nd\n" {
		t.Errorf("consume from earliest after delete-records: %+v", o)
	}
	o = runOutcome(t, "", "topic", "describe", "ret", b)
	if o.code != 0 || !strings.Contains(o.stdout, "OLDEST RECORD") {
		t.Errorf("describe: %+v", o)
	}
}
