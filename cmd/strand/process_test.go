package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/internal/localcluster"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// Helpers for the end-to-end tests: build the strand binary once, run real
// processes on 127.0.0.1 with free ports, poll readiness with deadlines.

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
	binaryDir  string
)

func TestMain(m *testing.M) {
	flag.Parse()
	// A developer's own profile file (~/.config/strand/config.yaml) must
	// not reach the commands tests run, in process or as children: the
	// tests see a profile file of their own that does not exist.
	// (The file is never created, so its name alone does: children that
	// re-run this binary inherit it, and a killed child leaves nothing.)
	os.Setenv(configFileEnv, filepath.Join(os.TempDir(), "strand-tests-have-no-profile", "config.yaml"))
	os.Unsetenv("STRAND_PROFILE")
	// Every temporary file of the run, the processes' own included (a
	// `strand dev` killed by its test never removes its strand-dev-* data
	// directory), goes under one directory that the run removes: children
	// inherit TMPDIR. A child that re-runs this binary (a group member)
	// finds it set and makes none of its own.
	own := ""
	if os.Getenv(testTmpEnv) == "" {
		dir, err := os.MkdirTemp("", "strand-cmd-tests-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		own = dir
		os.Setenv(testTmpEnv, dir)
		os.Setenv("TMPDIR", dir)
	}
	code := m.Run()
	stopS3Server()
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	if own != "" {
		os.RemoveAll(own)
	}
	os.Exit(code)
}

// testTmpEnv names the directory a test run keeps its temporary files in
// (TestMain).
const testTmpEnv = "STRAND_TEST_TMPDIR"

// strandBinary builds cmd/strand once per test run.
func strandBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		binaryDir, binaryErr = os.MkdirTemp("", "strand-e2e-bin-")
		if binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "strand")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// skipShort skips end-to-end tests under -short.
func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with real processes; skipped with -short")
	}
}

// freePorts returns n distinct ports free on 127.0.0.1 right now, below
// the ephemeral range (localcluster.FreePorts says why).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := localcluster.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// proc is one running strand process (localcluster.Proc, which bench
// cluster starts its servers with too) under the tests' names.
type proc struct {
	*localcluster.Proc
	cmd  *exec.Cmd
	log  string
	done <-chan struct{}
}

// startProc starts the binary with args and extra environment, its
// output appended to logPath.
func startProc(t *testing.T, logPath string, env []string, args ...string) *proc {
	t.Helper()
	p, err := localcluster.Start(strandBinary(t), logPath, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return &proc{Proc: p, cmd: p.Cmd, log: p.Log, done: p.Done()}
}

// kill sends SIGKILL and waits for the process to exit.
func (p *proc) kill() { p.Kill() }

// stop sends sig and waits (bounded) for the exit; it returns the exit
// error, or an error when the process did not exit in time.
func (p *proc) stop(sig os.Signal, within time.Duration) error { return p.Stop(sig, within) }

// runCLI runs one client command to completion (bounded) and returns its
// stdout; a non-zero exit fails the test with the output.
func runCLI(t *testing.T, env []string, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := runCLIResult(t, env, stdin, args...)
	if err != nil {
		t.Fatalf("strand %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func runCLIResult(t *testing.T, env []string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strandBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// waitFor polls cond until it holds or the deadline passes (then fails).
func waitFor(t *testing.T, what string, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready within %v: %v", what, within, err)
		}
		<-ticker.C
	}
}

// clusterReady is nil once every node of addrs answers metadata listing
// nodes registered nodes and a metadata leader (so a create with
// replication factor nodes can place its replicas). It speaks the protocol directly, so
// readiness does not depend on the client library's retries.
func clusterReady(addrs []string, nodes int) error {
	for _, addr := range addrs {
		m, err := rawMetadata(addr)
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		registered := 0
		for _, n := range m.GetNodes() {
			if n.GetRegistered() {
				registered++
			}
		}
		if len(m.GetNodes()) != nodes || registered != nodes || m.GetControllerId() == 0 {
			return fmt.Errorf("%s: %d nodes (%d registered), metadata leader %d", addr, len(m.GetNodes()), registered,
				m.GetControllerId())
		}
	}
	return nil
}

// rawMetadata asks one node for metadata over a fresh connection.
func rawMetadata(addr string) (*strandpb.MetadataResponse, error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(3 * time.Second))
	br := bufio.NewReader(nc)
	for i, req := range []*strandpb.Request{
		{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: 1, VersionMax: 1}}},
		{CorrelationId: 1, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}},
	} {
		b, err := frame.Append(nil, req)
		if err != nil {
			return nil, err
		}
		if _, err := nc.Write(b); err != nil {
			return nil, err
		}
		var resp strandpb.Response
		if _, err := frame.Decode(br, nil, frame.BytesMaxDefault, &resp); err != nil {
			return nil, err
		}
		if resp.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
			return nil, fmt.Errorf("%v: %s", resp.GetError().GetCode(), resp.GetError().GetMessage())
		}
		if i == 1 {
			return resp.GetMetadata(), nil
		}
	}
	return nil, nil
}

// topicReady is nil once every partition of topic has a leader that
// answers ListOffsets.
func topicReady(addrs []string, topic string, partitions int) error {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.DialTimeout(time.Second),
		clientlib.RequestTimeout(2*time.Second), clientlib.MaxRetries(1))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := c.ListOffsets(ctx, topic, nil, clientlib.OffsetLatest())
	if err != nil {
		return err
	}
	if len(offs) != partitions {
		return fmt.Errorf("%d partitions known", len(offs))
	}
	for _, o := range offs {
		if o.Err != nil {
			return fmt.Errorf("partition %d: %w", o.Partition, o.Err)
		}
	}
	return nil
}

// testCluster is n `strand serve` processes on free loopback ports.
type testCluster struct {
	t     *testing.T
	dir   string
	addrs []string
	peers string
	procs []*proc
}

func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	c := &testCluster{t: t, dir: t.TempDir(), procs: make([]*proc, n)}
	c.addrs = localcluster.Addrs(freePorts(t, n))
	c.peers = localcluster.Peers(c.addrs)
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			if p != nil {
				p.kill()
			}
		}
		if t.Failed() {
			c.dumpLogs()
		}
	})
	waitFor(t, "cluster", 30*time.Second, func() error { return clusterReady(c.addrs, n) })
	return c
}

// start starts node i+1; STRAND_DATA_DIR checks the environment binding.
func (c *testCluster) start(i int) {
	id := i + 1
	c.procs[i] = startProc(c.t, filepath.Join(c.dir, fmt.Sprintf("node-%d.log", id)),
		[]string{"STRAND_DATA_DIR=" + filepath.Join(c.dir, fmt.Sprintf("data-%d", id))},
		"serve", "--id", strconv.Itoa(id), "--listen", c.addrs[i], "--peers", c.peers)
}

func (c *testCluster) dumpLogs() {
	for i := range c.procs {
		b, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("node-%d.log", i+1)))
		const tail = 4000
		if len(b) > tail {
			b = b[len(b)-tail:]
		}
		c.t.Logf("node %d log (tail):\n%s", i+1, b)
	}
}

// pollRecorder records polls of one topic into a linearizability history,
// for the real-process tests that check what their readers saw.
type pollRecorder struct {
	h     *linearizability.History
	now   func() int64
	start time.Time // the history's time 0: now() is time.Since(start)
	topic string
	// value is a record's value as the history knows it (a test may pad
	// values it wrote); nil: the value as read.
	value func(*clientlib.Record) string
	// seen, when set, counts the records polls returned.
	seen *atomic.Int64
}

// record records one poll's outcome for partition p, read from pos (its
// position before the Poll); it says whether the partition is read up to
// the high-water mark the poll reported. The read is an operation from the
// moment its fetch was sent (FetchedAt: the Consumer keeps fetches in
// flight across Polls, so that may precede this Poll) to now; a Poll
// without an entry for p read nothing of it and records nothing.
func (r pollRecorder) record(client linearizability.ClientID, p int32, fetches clientlib.Fetches, pos int64) bool {
	tp := linearizability.TopicPartition{Topic: r.topic, Partition: p}
	for _, fp := range fetches {
		if fp.Partition != p || fp.Topic != r.topic {
			continue
		}
		call := r.now()
		if !fp.FetchedAt.IsZero() {
			call = min(call, int64(fp.FetchedAt.Sub(r.start)))
		}
		op := r.h.CallPoll(client, tp, pos, 0, call)
		if fp.Err != nil {
			r.h.Indefinite(op, r.now())
			return false
		}
		recs := make([]linearizability.Record, len(fp.Records))
		for i, rec := range fp.Records {
			value := string(rec.Value)
			if r.value != nil {
				value = r.value(rec)
			}
			recs[i] = linearizability.Record{Offset: rec.Offset, Key: string(rec.Key), Value: value}
		}
		r.h.ReturnFetch(op, recs, fp.HighWatermark, fp.LogStartOffset, r.now())
		if r.seen != nil {
			r.seen.Add(int64(len(recs)))
		}
		return pos+int64(len(recs)) >= fp.HighWatermark
	}
	return false
}

// drain reads partitions 0..partitions-1 from offset 0 to their
// high-water marks with a fresh client as reader, recording each poll,
// and marks each drained; it fails the test past timeout.
func (r pollRecorder) drain(t *testing.T, addrs []string, reader linearizability.ClientID, partitions int32, timeout time.Duration) {
	t.Helper()
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.RequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for p := int32(0); p < partitions; p++ {
		tp := linearizability.TopicPartition{Topic: r.topic, Partition: p}
		k := clientlib.NewConsumer(c, clientlib.FetchMaxWait(50*time.Millisecond))
		k.Assign(r.topic, p, clientlib.OffsetExact(0))
		for done := false; !done; {
			if ctx.Err() != nil {
				t.Fatalf("drain of %v: %v", tp, ctx.Err())
			}
			pos, _ := k.Position(r.topic, p)
			done = r.record(reader, p, k.Poll(ctx), pos)
		}
		r.h.MarkDrained(tp)
	}
}
