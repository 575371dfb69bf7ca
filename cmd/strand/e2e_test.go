package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// Bounds of the kill test.
const (
	killTopic          = "kill"
	killPartitions     = 4
	killWriters        = 4
	killCycles         = 3
	killRecordsMax     = 4000 // records attempted in all
	killWriterInFlight = 16   // records a writer has outstanding
	killKeys           = 16
	killProgressStep   = 300 // acknowledged records between fault steps
)

// killWorkload is the writers' shared state and the recorded history.
type killWorkload struct {
	h       *linearizability.History
	start   time.Time
	acked   atomic.Int64
	failed  atomic.Int64
	seen    atomic.Int64 // records returned by polls
	budget  atomic.Int64 // records still to attempt
	stopped atomic.Bool
}

func (w *killWorkload) now() int64 { return int64(time.Since(w.start)) }

// Three real `strand serve` processes; writers produce with acks=all
// while nodes are SIGKILLed and restarted three times; then every partition
// is read back whole and the linearizability checkers must find no lost
// acknowledged record, no per-key reordering and no offset served twice
// with different records.
func TestKillRestartKeepsAcknowledgedRecords(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	runCLI(t, []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}, "",
		"topic", "create", killTopic, "--partitions", strconv.Itoa(killPartitions), "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, killTopic, killPartitions) })

	w := &killWorkload{h: linearizability.NewHistory(), start: time.Now()}
	w.budget.Store(killRecordsMax)
	var wg sync.WaitGroup
	for i := range killWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.write(t, c.addrs, linearizability.ClientID(i))
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.read(t, c.addrs, linearizability.ClientID(killWriters+1))
	}()
	faultsErr := w.faults(c)
	w.stopped.Store(true)
	wg.Wait()
	if faultsErr != nil {
		t.Fatal(faultsErr)
	}
	t.Logf("%d records acknowledged, %d failed or unknown, %d read while writing", w.acked.Load(), w.failed.Load(), w.seen.Load())
	if w.acked.Load() < killProgressStep*killCycles {
		t.Fatalf("only %d records acknowledged: the cluster made too little progress", w.acked.Load())
	}
	w.polls().drain(t, c.addrs, linearizability.ClientID(killWriters), killPartitions, 60*time.Second)
	report := linearizability.Check(w.h, linearizability.Options{FinalDrain: true, Timeout: 60 * time.Second})
	if err := report.Err(); err != nil {
		t.Fatal(err)
	}
}

// write produces keyed records with acks=all through one client, keeping
// killWriterInFlight outstanding, until stopped or the budget is spent.
func (w *killWorkload) write(t *testing.T, addrs []string, id linearizability.ClientID) {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.ManualPartitioner(),
		clientlib.Linger(time.Millisecond), clientlib.DialTimeout(time.Second), clientlib.RequestTimeout(5*time.Second),
		clientlib.DeliveryTimeout(20*time.Second), clientlib.RetryBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	slots := make(chan struct{}, killWriterInFlight)
	for seq := 0; !w.stopped.Load() && w.budget.Add(-1) >= 0; seq++ {
		slots <- struct{}{}
		key := fmt.Sprintf("k%d", (int(id)*7+seq)%killKeys)
		partition := clientlib.KeyPartition([]byte(key), killPartitions)
		value := fmt.Sprintf("c%d-%d", id, seq)
		tp := linearizability.TopicPartition{Topic: killTopic, Partition: partition}
		op := w.h.CallProduce(id, tp, key, value, w.now())
		r := &clientlib.Record{Topic: killTopic, Partition: partition, Key: []byte(key), Value: []byte(value)}
		c.Produce(context.Background(), r, func(r *clientlib.Record, err error) {
			if err != nil {
				w.h.Indefinite(op, w.now())
				w.failed.Add(1)
			} else {
				w.h.ReturnProduce(op, r.Offset, w.now())
				w.acked.Add(1)
			}
			<-slots
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	c.Flush(ctx)
}

// read polls every partition while the writers run and the faults happen,
// recording each partition's part of each poll, so reads served during
// leader changes are checked too.
func (w *killWorkload) read(t *testing.T, addrs []string, id linearizability.ClientID) {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.DialTimeout(time.Second),
		clientlib.RequestTimeout(5*time.Second), clientlib.RetryBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	k := clientlib.NewConsumer(c, clientlib.FetchMaxWait(100*time.Millisecond), clientlib.FetchMaxPartitionBytes(64<<10))
	for p := int32(0); p < killPartitions; p++ {
		k.Assign(killTopic, p, clientlib.OffsetExact(0))
	}
	for polls := 0; !w.stopped.Load() && polls < 100000; polls++ {
		positions := make(map[int32]int64, killPartitions)
		for p := int32(0); p < killPartitions; p++ {
			positions[p], _ = k.Position(killTopic, p)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		fetches := k.Poll(ctx)
		cancel()
		for p := int32(0); p < killPartitions; p++ {
			w.polls().record(id, p, fetches, positions[p])
		}
	}
}

// faults kills and restarts nodes, each step waiting for the writers to
// make progress (acknowledged records) so the faults hit live traffic.
func (w *killWorkload) faults(c *testCluster) error {
	progress := func(what string) error {
		target := w.acked.Load() + killProgressStep
		deadline := time.Now().Add(30 * time.Second)
		for w.acked.Load() < target {
			if w.budget.Load() <= 0 {
				return nil // spent: nothing more will be acknowledged
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no progress %s: %d acknowledged, want %d", what, w.acked.Load(), target)
			}
			time.Sleep(20 * time.Millisecond) // polling a readiness condition
		}
		return nil
	}
	if err := progress("before the first fault"); err != nil {
		return err
	}
	for cycle := range killCycles {
		victim := cycle % len(c.procs)
		c.procs[victim].kill()
		if err := progress(fmt.Sprintf("with node %d down", victim+1)); err != nil {
			return err
		}
		c.start(victim)
		if err := progress(fmt.Sprintf("after restarting node %d", victim+1)); err != nil {
			return err
		}
	}
	return nil
}

// polls records the readers' and the drain's polls of killTopic.
func (w *killWorkload) polls() pollRecorder {
	return pollRecorder{h: w.h, now: w.now, start: w.start, topic: killTopic, seen: &w.seen}
}

// A new user's path from the README, in one test: `strand dev --nodes 1`,
// then topic create, produce lines, consume --until-end gives them back;
// cluster answers; Ctrl-C (SIGINT) stops the dev cluster cleanly. The
// environment variables STRAND_BROKERS and STRAND_BASE_PORT stand in for
// the default address so the test can use a free port.
func TestDevSmoke(t *testing.T) {
	skipShort(t)
	port := freePorts(t, 1)[0]
	dir := t.TempDir()
	native := "127.0.0.1:" + strconv.Itoa(port+devNativePortOffset) // Kafka gets base-port
	env := []string{"STRAND_BROKERS=" + native}
	dev := startProc(t, filepath.Join(dir, "dev.log"), []string{"STRAND_BASE_PORT=" + strconv.Itoa(port)},
		"dev", "--nodes", "1")
	defer dev.kill()
	waitFor(t, "strand dev", 30*time.Second, func() error {
		_, errOut, err := runCLIResult(t, env, "", "cluster", "--timeout", "2s")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	if out := runCLI(t, env, "", "topic", "create", "hello", "--partitions", "3"); !strings.Contains(out, "created topic hello") {
		t.Fatalf("topic create printed %q", out)
	}
	lines := []string{"first", "second", "third", "a:keyed line"}
	runCLI(t, env, strings.Join(lines, "\n")+"\n", "produce", "hello", "--key-separator", ":")
	out := runCLI(t, env, "", "consume", "hello", "--from", "earliest", "--until-end", "--format", `%k=%v\n`)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{"=first", "=second", "=third", "a=keyed line"}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("consume printed %q, want %q in any order", got, want)
	}
	if out := runCLI(t, env, "", "topic", "list"); strings.TrimSpace(out) != "hello" {
		t.Fatalf("topic list printed %q", out)
	}
	if out := runCLI(t, env, "", "cluster"); !strings.Contains(out, "topic hello: 3 partitions") {
		t.Fatalf("cluster printed %q", out)
	}
	if got := readmeGoClient(t, native); got != "read greeting=hi from Go" {
		t.Fatalf("the README's Go client read %q", got)
	}
	if err := dev.stop(syscall.SIGINT, 20*time.Second); err != nil {
		b, _ := os.ReadFile(dev.log)
		t.Fatalf("strand dev after SIGINT: %v\n%s", err, b)
	}
	if _, errOut, err := runCLIResult(t, env, "", "cluster", "--timeout", "2s"); err == nil {
		t.Fatalf("strand cluster succeeded with no cluster running: %s", errOut)
	}
}

// A malformed frame sent to a real node closes only that connection: a
// client connected before keeps being answered, and SIGTERM then stops the
// node cleanly (exit status 0).
func TestServeMalformedFrameAndCleanShutdown(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1)
	good := rawHello(t, c.addrs[0])
	bad := rawHello(t, c.addrs[0])
	bad.nc.Write([]byte{0, 0, 0, 2, 0xff, 0xff})
	if _, err := bad.read(); err == nil {
		t.Fatal("connection with a malformed frame was not closed")
	}
	for id := uint64(1); id <= 3; id++ {
		good.write(&strandpb.Request{CorrelationId: id, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}})
		resp, err := good.read()
		if err != nil || resp.GetCorrelationId() != id || resp.GetMetadata() == nil {
			t.Fatalf("request %d after the bad connection: %v, %v", id, resp, err)
		}
	}
	if err := c.procs[0].stop(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	c.procs[0] = nil
}

// rawConn is a protocol connection without the client library.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func rawHello(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	c := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
	c.write(&strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: 1, VersionMax: 1}}})
	if resp, err := c.read(); err != nil || resp.GetHello().GetVersion() != 1 {
		t.Fatalf("hello: %v, %v", resp, err)
	}
	return c
}

func (c *rawConn) write(m *strandpb.Request) {
	b, err := frame.Append(nil, m)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) read() (*strandpb.Response, error) {
	var resp strandpb.Response
	_, err := frame.Decode(c.br, nil, frame.BytesMaxDefault, &resp)
	return &resp, err
}

// readmeGoClient is the README's Go client example, line for line but for
// the seed address and returning instead of printing what it read back.
func readmeGoClient(t *testing.T, addr string) string {
	ctx := context.Background()
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addr)) // README: NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := &clientlib.Record{Topic: "hello", Key: []byte("greeting"), Value: []byte("hi from Go")}
	if err := c.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	k := clientlib.NewConsumer(c)
	k.Assign("hello", rec.Partition, clientlib.OffsetExact(rec.Offset))
	var read []string
	for _, r := range k.Poll(ctx).Records() {
		read = append(read, fmt.Sprintf("read %s=%s", r.Key, r.Value))
	}
	return strings.Join(read, "; ")
}
