package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBlock returns the first ```sh block after heading in README.md.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no heading %q", heading)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	if start < 0 {
		t.Fatalf("README.md: no ```sh block after %q", heading)
	}
	s = s[start+len("```sh\n"):]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatalf("README.md: the block after %q never ends", heading)
	}
	return s[:end]
}

// The README's "Secure a cluster" block, pasted into a shell as written
// (only its ports, data directory and binary path replaced), runs without
// a sleep: serve goes to the background and every later command succeeds,
// except bob's produce, refused as the README says. Before, the commands
// after `serve … &` raced the node's start and its bootstrap
// administrator's creation and failed with an error that read like a
// wrong password (issue 19, item 9). A refused login names the user and
// says it may not exist yet.
func TestReadmeSecureBlock(t *testing.T) {
	skipShort(t)
	ports := freePorts(t, 2)
	dir := t.TempDir()
	block := readmeBlock(t, "### Secure a cluster")
	for old, new := range map[string]string{
		"127.0.0.1:9500":     "127.0.0.1:" + strconv.Itoa(ports[0]),
		"127.0.0.1:9501":     "127.0.0.1:" + strconv.Itoa(ports[1]),
		"/tmp/strand-secure": filepath.Join(dir, "data"),
		"./bin/strand":       strandBinary(t),
	} {
		if !strings.Contains(block, old) {
			t.Fatalf("the README block no longer mentions %q; update this test:\n%s", old, block)
		}
		block = strings.ReplaceAll(block, old, new)
	}
	script := "serve_log=" + filepath.Join(dir, "serve.log") + "\n" +
		strings.Replace(block, " &\n", " 2>>\"$serve_log\" &\n", 1) +
		"STRAND_SASL_USER=carol STRAND_SASL_PASSWORD=nope " + strandBinary(t) + " topic list\n" +
		"kill $!; wait $!\n"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	cmd.Wait()
	out, errOut := stdout.String(), stderr.String()
	logs, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
	for _, want := range []string{"ready: 1 node, metadata leader 1", "created topic orders: 1 partition, replication factor 1",
		"created user alice", "created user bob", "1 binding added",
		"User:alice  allow       write      topic     orders", "quota of User:alice: produce 1048576 B/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	wantErrs := []string{
		`strand: User:bob may not describe topic "orders" (no ACL allows it, or one denies it)`,
		"strand: sasl: authentication failed for user carol: wrong password, or the user does not exist (yet",
	}
	if !strings.Contains(errOut, "produced 1 record to orders") { // produce reports on stderr
		t.Errorf("stderr lacks alice's %q", "produced 1 record to orders")
	}
	var lines []string
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, "strand: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(wantErrs) {
		t.Errorf("stderr has %d errors, want %d (bob's refusal, carol's)", len(lines), len(wantErrs))
	}
	for i, want := range wantErrs {
		if i >= len(lines) || !strings.HasPrefix(lines[i], want) {
			t.Errorf("stderr line %d does not start with %q", i+1, want)
		}
	}
	if t.Failed() {
		t.Logf("script:\n%s\nstdout:\n%s\nstderr:\n%s\nserve's log:\n%s", script, out, errOut, logs)
	}
}
