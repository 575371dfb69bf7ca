package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `strand dev` as `make run` starts it (./bin/strand dev): the banner
// prints the commands as they run from there, says "ready" only once a
// metadata leader exists (a client command right after it succeeds), and
// at the default log level prints no connection or shutdown noise.
func TestDevBannerReadyAndQuiet(t *testing.T) {
	skipShort(t)
	bin := strandBinary(t)
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "strand")); err != nil {
		t.Fatal(err)
	}
	port := freeConsecutivePorts(t, 3)
	logPath := filepath.Join(dir, "dev.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// Path relative to Dir, as a shell in the repository runs ./bin/strand.
	cmd := &exec.Cmd{Path: "./strand", Args: []string{"./strand", "dev", "--base-port", strconv.Itoa(port)},
		Dir: dir, Stdout: out, Stderr: out, Env: os.Environ()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	var log string
	waitFor(t, "ready banner", 30*time.Second, func() error {
		b, _ := os.ReadFile(logPath)
		log = string(b)
		if !strings.Contains(log, "\nready") {
			return fmt.Errorf("no ready line yet; output so far:\n%s", log)
		}
		return nil
	})
	env := []string{"STRAND_BROKERS=127.0.0.1:" + strconv.Itoa(port+devNativePortOffset)}
	runCLI(t, env, "", "topic", "create", "ready", "--partitions", "1", "--replication-factor", "3")
	if want := "  ./strand topic create hello"; !strings.Contains(log, want) {
		t.Errorf("banner lacks %q:\n%s", want, log)
	}
	if want := fmt.Sprintf("  console http://127.0.0.1:%d/", port+devAdminPortOffset); !strings.Contains(log, want) {
		t.Errorf("banner lacks %q:\n%s", want, log)
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("strand dev after SIGINT: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("strand dev did not stop within 20s of SIGINT")
	}
	b, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "level=") && !strings.Contains(line, `msg="became leader"`) {
			t.Errorf("unexpected log line at the default level: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", b)
	}
}

// freeConsecutivePorts returns a base port such that every port strand dev
// with n nodes listens on is free on 127.0.0.1 right now: base-port,
// base-port+1, ... (one per node), the same +devNativePortOffset, and the
// admin listener at +devAdminPortOffset. A test that checked only the first
// n found, now and then, a later one taken, and dev failed to start.
func freeConsecutivePorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		base := freePorts(t, 1)[0]
		var want []int
		for i := range n {
			want = append(want, base+i, base+devNativePortOffset+i)
		}
		want = append(want, base+devAdminPortOffset)
		var lns []net.Listener
		for _, port := range want {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if len(lns) == len(want) {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports found", n)
	return 0
}
