package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
)

// Bounds of the catch-up test.
const (
	catchupTopic       = "catchup"
	catchupPartitions  = 6
	catchupWriters     = 4
	catchupInFlight    = 64               // records a writer has outstanding
	catchupValueBytes  = 2000             // padding per record, so the writes are heavy
	catchupDown        = 10 * time.Second // how long the first victim stays down
	catchupCaughtUpMax = 7 * time.Second  // a restarted node must be in step within this (before the fix: 10.5-11 s)
	catchupAfterKill   = 300              // acknowledged records required after the second kill
)

// catchupWorkload is the writers' shared state and the recorded history;
// the history holds each value without its padding.
type catchupWorkload struct {
	h       *linearizability.History
	start   time.Time
	acked   atomic.Int64
	failed  atomic.Int64
	stopped atomic.Bool
}

func (w *catchupWorkload) now() int64 { return int64(time.Since(w.start)) }

// Three real `strand serve` processes under writes at full speed: node 3
// is killed for 10 s and restarted, and must catch up (its leaders report
// no lagging replica in their stats) within catchupCaughtUpMax; then node 1
// is killed, and writes must go on with nodes 2 and 3. Every acknowledged
// record must be read back at the end. It fails when a restarted node
// cannot take its catch-up (raft frames over the receive limit closed the
// connection again and again), so the second kill stalls every partition.
func TestRestartedNodeCatchesUpUnderLoad(t *testing.T) {
	skipShort(t)
	t.Setenv("STRAND_STATS_INTERVAL", "200ms")
	t.Setenv("STRAND_LOG_FORMAT", "json")
	c := startCluster(t, 3)
	runCLI(t, []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}, "",
		"topic", "create", catchupTopic, "--partitions", strconv.Itoa(catchupPartitions), "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, catchupTopic, catchupPartitions) })

	w := &catchupWorkload{h: linearizability.NewHistory(), start: time.Now()}
	var wg sync.WaitGroup
	for i := range catchupWriters {
		wg.Go(func() { w.write(t, c.addrs, linearizability.ClientID(i)) })
	}
	defer func() { w.stopped.Store(true); wg.Wait() }()
	waitFor(t, "writes before the first kill", 20*time.Second, w.ackedAtLeast(1000))

	c.procs[2].kill()
	ackedAtKill := w.acked.Load()
	time.Sleep(catchupDown) // the fault's duration, not a synchronisation
	whileDown := w.acked.Load() - ackedAtKill
	offsets := c.logSizes()
	c.start(2)
	restarted := time.Now()
	waitFor(t, "node 3 caught up", catchupCaughtUpMax, func() error { return c.noLaggingReplicas(offsets) })
	t.Logf("node 3 caught up %v after its restart (%d records acknowledged while it was down)",
		time.Since(restarted).Round(10*time.Millisecond), whileDown)

	c.procs[0].kill()
	target := w.acked.Load() + catchupAfterKill
	waitFor(t, "writes after killing node 1", 20*time.Second, w.ackedAtLeast(target))
	w.stopped.Store(true)
	wg.Wait()
	t.Logf("%d records acknowledged, %d failed or unknown", w.acked.Load(), w.failed.Load())
	w.polls().drain(t, c.addrs[1:], linearizability.ClientID(catchupWriters), catchupPartitions, 30*time.Second)
	report := linearizability.Check(w.h, linearizability.Options{FinalDrain: true, Timeout: 20 * time.Second})
	if err := report.Err(); err != nil {
		t.Fatal(err)
	}
}

// ackedAtLeast is a waitFor condition: n records acknowledged.
func (w *catchupWorkload) ackedAtLeast(n int64) func() error {
	return func() error {
		if got := w.acked.Load(); got < n {
			return fmt.Errorf("%d acknowledged, want %d", got, n)
		}
		return nil
	}
}

// write produces keyed, padded records with acks=all through one client,
// keeping catchupInFlight outstanding, until stopped.
func (w *catchupWorkload) write(t *testing.T, addrs []string, id linearizability.ClientID) {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.ManualPartitioner(),
		clientlib.Linger(time.Millisecond), clientlib.DialTimeout(time.Second), clientlib.RequestTimeout(5*time.Second),
		clientlib.DeliveryTimeout(20*time.Second), clientlib.RetryBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	padding := "|" + strings.Repeat("x", catchupValueBytes)
	slots := make(chan struct{}, catchupInFlight)
	for seq := 0; !w.stopped.Load(); seq++ {
		slots <- struct{}{}
		key := fmt.Sprintf("k%d", (int(id)*7+seq)%16)
		partition := clientlib.KeyPartition([]byte(key), catchupPartitions)
		value := fmt.Sprintf("c%d-%d", id, seq)
		tp := linearizability.TopicPartition{Topic: catchupTopic, Partition: partition}
		op := w.h.CallProduce(id, tp, key, value, w.now())
		r := &clientlib.Record{Topic: catchupTopic, Partition: partition, Key: []byte(key), Value: []byte(value + padding)}
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Flush(ctx)
}

// polls records the drain's polls of catchupTopic, with the padding cut
// off each value.
func (w *catchupWorkload) polls() pollRecorder {
	return pollRecorder{h: w.h, now: w.now, start: w.start, topic: catchupTopic, value: func(r *clientlib.Record) string {
		value, _, _ := strings.Cut(string(r.Value), "|")
		return value
	}}
}

// logSizes is the size of each node's log file now.
func (c *testCluster) logSizes() []int64 {
	sizes := make([]int64, len(c.procs))
	for i := range c.procs {
		if st, err := os.Stat(c.logPath(i)); err == nil {
			sizes[i] = st.Size()
		}
	}
	return sizes
}

func (c *testCluster) logPath(i int) string {
	return filepath.Join(c.dir, fmt.Sprintf("node-%d.log", i+1))
}

// noLaggingReplicas is nil once every node's latest "loop stats" record
// written after offsets (JSON logs, --stats-interval) reports no lagging
// replica: every follower of every partition it leads is in step.
func (c *testCluster) noLaggingReplicas(offsets []int64) error {
	for i := range c.procs {
		f, err := os.Open(c.logPath(i))
		if err != nil {
			return err
		}
		f.Seek(offsets[i], 0)
		lagging := -1
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Msg     string `json:"msg"`
				Lagging *int   `json:"replicas_lagging"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "loop stats" && rec.Lagging != nil {
				lagging = *rec.Lagging
			}
		}
		f.Close()
		if lagging != 0 {
			return fmt.Errorf("node %d: %d replicas lagging in its latest stats (-1: none yet)", i+1, lagging)
		}
	}
	return nil
}
