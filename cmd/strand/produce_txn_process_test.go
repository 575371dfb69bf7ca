package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// `strand produce --transactional-id` writes a run's records in one
// transaction: a run that succeeds is committed and read_committed readers
// see every record; a run that fails part way (here a line over the record
// limit after a good one) is aborted, its good record is in the log but no
// read_committed reader ever sees it, and the command says so and exits 1.
// --acks other than all is refused before anything is sent.
func TestProduceTransactionalID(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", "ledger", "--partitions", "1", "--replication-factor", "1")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "ledger", 1) })

	if _, stderr, err := runCLIResult(t, env, "debit\ncredit\n", "produce", "ledger", "--transactional-id", "transfer-1"); err != nil ||
		!strings.Contains(stderr, "produced 2 records to ledger in one committed transaction") {
		t.Fatalf("committed run: %v\n%s", err, stderr)
	}
	big := strings.Repeat("x", 1<<20+1)
	_, stderr, err := runCLIResult(t, env, "lost\n"+big+"\n", "produce", "ledger", "--transactional-id", "transfer-2")
	if err == nil || !strings.Contains(stderr, "aborted the transaction") || !strings.Contains(stderr, "line 2 is") {
		t.Fatalf("failing run: %v\n%s", err, stderr)
	}
	if _, stderr, err := runCLIResult(t, env, "x\n", "produce", "ledger", "--transactional-id", "t", "--acks", "1"); err == nil ||
		!strings.Contains(stderr, "needs --acks all") {
		t.Fatalf("--acks 1 with a transactional id: %v\n%s", err, stderr)
	}

	read := func(level string) string {
		t.Helper()
		var out string
		waitFor(t, "consume "+level, 30*time.Second, func() error {
			stdout, stderr, err := runCLIResult(t, env, "", "consume", "ledger", "--until-end", "--isolation", level, "--timeout", "10s")
			if err != nil {
				return errors.New(stderr)
			}
			out = strings.Join(strings.Fields(stdout), " ")
			return nil
		})
		return out
	}
	// The commit's marker is written after EndTxn answers: poll until the
	// committed records show.
	waitFor(t, "committed records", 30*time.Second, func() error {
		if got := read("read_committed"); got != "debit credit" {
			return errors.New(got)
		}
		return nil
	})
	if got := read("read_uncommitted"); got != "debit credit lost" {
		t.Fatalf("read_uncommitted printed %q, want the aborted record too", got)
	}
	if out := runCLI(t, env, "", "txn", "describe", "transfer-2"); !strings.Contains(out, "CompleteAbort") {
		t.Fatalf("txn describe transfer-2:\n%s", out)
	}
}
