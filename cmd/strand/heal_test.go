//go:build faultinject

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// Run with: go test -tags faultinject ./cmd/strand -run TestHealPartition
// The binary is built with the same tag: node/server's fault switch
// (STRAND_FAULT_ISOLATE_FILE) cuts a node off from its peers while a file
// exists.

// Bounds of the heal test.
const (
	healTopic       = "heal"
	healPartitions  = 12
	healRate        = 800 // records per second, as in the measurement
	healRecordBytes = 4096
	healCycles      = 3
	healIsolated    = 10 * time.Second // how long a node stays cut off
	healObserve     = 5 * time.Second  // writes watched after each heal
	// healStallMax is the longest a heal may stop all writes: about one
	// election (1-2 s at the default 10 ms tick) and a client retry.
	healStallMax = 2500 * time.Millisecond
)

var (
	faultBinaryOnce sync.Once
	faultBinaryPath string
	faultBinaryErr  error
)

// faultBinary builds cmd/strand with -tags faultinject, once.
func faultBinary(t *testing.T) string {
	t.Helper()
	faultBinaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strand-fault-bin-")
		if err != nil {
			faultBinaryErr = err
			return
		}
		faultBinaryPath = filepath.Join(dir, "strand")
		out, err := exec.Command("go", "build", "-tags", "faultinject", "-o", faultBinaryPath, ".").CombinedOutput()
		if err != nil {
			faultBinaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if faultBinaryErr != nil {
		t.Fatal(faultBinaryErr)
	}
	return faultBinaryPath
}

// Three real nodes take writes at 800 records/s of 4 KiB; each node in turn
// is cut off from its peers for 10 s and the partition healed. The healed
// node's catch-up must never be sent in frames its peers refuse (before
// frames were bounded: 2-3 refusals of 9.9-13.6 MB frames per heal), and
// after each heal no window of healStallMax may pass without an
// acknowledged write. STRAND_HEAL_MODE=stall isolates by stalling the peer
// connections instead of dropping frames. Each node writes a CPU profile
// (cpu-N.prof) and the logs to $STRAND_HEAL_PROFILE_DIR when set.
func TestHealPartitionDoesNotStallWrites(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	addrs, procs := startFaultCluster(t, dir, os.Getenv("STRAND_HEAL_PROFILE_DIR"))
	waitFor(t, "cluster", 30*time.Second, func() error { return clusterReady(addrs, 3) })
	isolateAndHealEach(t, dir, addrs, procs)
}

// startFaultCluster starts three serve processes of the faultinject
// binary, logging to dir, each isolated by its own file in dir (and its
// disk stalled by another); they are
// stopped with SIGTERM at the end of the test.
func startFaultCluster(t *testing.T, dir, profDir string) (addrs []string, procs []*exec.Cmd) {
	bin := faultBinary(t)
	var parts []string
	for i, port := range freePorts(t, 3) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		addrs = append(addrs, addr)
		parts = append(parts, fmt.Sprintf("%d=%s", i+1, addr))
	}
	procs = make([]*exec.Cmd, 3)
	for i := range procs {
		args := []string{"serve", "--id", strconv.Itoa(i + 1), "--listen", addrs[i], "--peers", strings.Join(parts, ","),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("data-%d", i+1)), "--stats-interval", "200ms", "--log-format", "json"}
		if profDir != "" {
			args = append(args, "--cpuprofile", filepath.Join(profDir, fmt.Sprintf("cpu-%d.prof", i+1)))
		}
		out, err := os.Create(filepath.Join(dir, fmt.Sprintf("node-%d.log", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.Env = append(os.Environ(), "STRAND_FAULT_ISOLATE_FILE="+isolateFile(dir, i),
			"STRAND_FAULT_DISK_STALL_FILE="+diskStallFile(dir, i)) // diskstall_test.go
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM) // serve writes its CPU profile on a clean exit
			p.Wait()
		}
		if profDir != "" {
			exec.Command("cp", "-r", dir, filepath.Join(profDir, "logs")).Run()
		}
	})
	return addrs, procs
}

// isolateAndHealEach writes at healRate while it isolates and heals each
// node in turn, then checks the logs for refused frames and the
// acknowledgements for stalls after each heal.
func isolateAndHealEach(t *testing.T, dir string, addrs []string, procs []*exec.Cmd) {
	runCLI(t, []string{"STRAND_BROKERS=" + strings.Join(addrs, ",")}, "",
		"topic", "create", healTopic, "--partitions", strconv.Itoa(healPartitions), "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(addrs, healTopic, healPartitions) })

	acks := &ackTimes{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { produceAtRate(t, ctx, addrs, acks) })
	time.Sleep(2 * time.Second) // warm up: writes flowing before the first fault
	var heals []time.Time
	for cycle := range healCycles {
		victim := cycle % 3
		if err := os.WriteFile(isolateFile(dir, victim), []byte(os.Getenv("STRAND_HEAL_MODE")), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(healIsolated) // the partition's duration
		os.Remove(isolateFile(dir, victim))
		heals = append(heals, time.Now())
		time.Sleep(healObserve) // writes watched after the heal
	}
	stop()
	wg.Wait()
	for i := range procs {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("node-%d.log", i+1)))
		if n := strings.Count(string(b), "frame larger than the limit"); n > 0 {
			t.Errorf("node %d refused %d raft frames over the read limit (a catch-up sent in one frame)", i+1, n)
		}
	}
	for i, h := range heals {
		stall := acks.longestGap(h.Add(-200*time.Millisecond), h.Add(healObserve))
		t.Logf("heal %d (node %d): longest stretch without an acknowledged write %v", i+1, i%3+1, stall.Round(time.Millisecond))
		if stall > healStallMax {
			t.Errorf("heal %d (node %d) stopped all writes for %v, more than %v", i+1, i%3+1, stall.Round(time.Millisecond), healStallMax)
		}
	}
}

func isolateFile(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("isolate-%d", i+1)) }

// ackTimes records when writes were acknowledged.
type ackTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *ackTimes) add(t time.Time) {
	a.mu.Lock()
	a.times = append(a.times, t)
	a.mu.Unlock()
}

// longestGap is the longest stretch of [from, to] with no acknowledgement.
func (a *ackTimes) longestGap(from, to time.Time) time.Duration {
	a.mu.Lock()
	times := slices.Clone(a.times)
	a.mu.Unlock()
	slices.SortFunc(times, func(x, y time.Time) int { return x.Compare(y) })
	longest, last := time.Duration(0), from
	for _, at := range times {
		if at.Before(from) {
			continue
		}
		if at.After(to) {
			break
		}
		longest, last = max(longest, at.Sub(last)), at
	}
	return max(longest, to.Sub(last))
}

// produceAtRate writes healRate keyed records per second until ctx ends.
func produceAtRate(t *testing.T, ctx context.Context, addrs []string, acks *ackTimes) {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.DialTimeout(time.Second),
		clientlib.RequestTimeout(5*time.Second), clientlib.DeliveryTimeout(30*time.Second),
		clientlib.RetryBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	const perTick = healRate / 100
	value := make([]byte, healRecordBytes)
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for seq := 0; ctx.Err() == nil; {
		select {
		case <-ctx.Done():
		case <-ticker.C:
			for range perTick {
				r := &clientlib.Record{Topic: healTopic, Key: []byte(fmt.Sprintf("k%d", seq%64)), Value: value}
				seq++
				c.Produce(context.Background(), r, func(_ *clientlib.Record, err error) {
					if err == nil {
						acks.add(time.Now())
					}
				})
			}
		}
	}
	flush, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Flush(flush)
}
