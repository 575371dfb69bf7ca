package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConsumersOfDeletedTopicExit runs `strand consume T` and `strand
// consume T --group G` against a `strand serve` process, deletes T, and
// checks that both exit non-zero with the error the README promises
// (topic ... was deleted while consuming), well before they would have
// sat silent for 30 s (issue 19, item 5). Re-created, the topic is read
// by the group from its start: the old offsets do not apply.
func TestConsumersOfDeletedTopicExit(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", "doomed", "--partitions", "2", "--replication-factor", "1")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, "doomed", 2) })
	runCLI(t, env, "a\nb\nc\nd\n", "produce", "doomed")
	dir := t.TempDir()
	plain := startProc(t, filepath.Join(dir, "plain.log"), env, "consume", "doomed")
	group := startProc(t, filepath.Join(dir, "group.log"), env, "consume", "doomed", "--group", "readers")
	defer plain.kill()
	defer group.kill()
	waitFor(t, "both consumers printed the records", 60*time.Second, func() error {
		for _, p := range []*proc{plain, group} {
			if b, _ := os.ReadFile(p.log); strings.Count(string(b), "\n") < 4 {
				return fmt.Errorf("%s: %q", filepath.Base(p.log), b)
			}
		}
		return nil
	})
	time.Sleep(2 * time.Second) // let the group commit what it printed (every 5 s, and on exit)
	runCLI(t, env, "", "topic", "delete", "doomed")
	for _, p := range []*proc{plain, group} {
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			b, _ := os.ReadFile(p.log)
			t.Fatalf("%s still running 20 s after the delete:\n%s", filepath.Base(p.log), b)
		}
		b, _ := os.ReadFile(p.log)
		if p.Err() == nil || !strings.Contains(string(b), "was deleted while consuming") {
			t.Fatalf("%s exited with %v, output:\n%s", filepath.Base(p.log), p.Err(), b)
		}
	}
	runCLI(t, env, "", "topic", "create", "doomed", "--partitions", "2", "--replication-factor", "1")
	waitFor(t, "re-created topic", 30*time.Second, func() error { return topicReady(c.addrs, "doomed", 2) })
	runCLI(t, env, "x\n", "produce", "doomed")
	out := runCLI(t, env, "", "consume", "doomed", "--group", "readers", "--until-end")
	if strings.TrimSpace(out) != "x" {
		t.Fatalf("the group read %q from the re-created topic, want its one record x", out)
	}
}
