package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// Bounds of the pause test.
const (
	pauseTopic      = "pause"
	pausePartitions = 6
	pauseFor        = 6 * time.Second
	pauseRecordsMax = 200000
)

// pauseAck is one acknowledged record.
type pauseAck struct {
	partition int32
	offset    int64
	value     string
	at        time.Duration // since the test's start
}

// Three real processes; a keyless producer runs while the node leading
// partition 0 is SIGSTOPped for 6 s. During the pause, records are
// acknowledged within 3 s, on more than one partition, and at least a
// quarter as many as in the 6 s before it (the client gives up on the
// silent node after StallTimeout, re-routes through fresh metadata, and
// steers keyless records to partitions whose leaders answer); after
// SIGCONT every acknowledged record is read back at its offset. Before,
// produce requests to the paused node waited for the request timeout and
// keyless records stayed on its partitions: 4 records acknowledged
// cluster-wide in 6.7 s (issue 7, finding 11).
func TestPausedLeaderWritesContinue(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	client, err := clientlib.NewClient(clientlib.SeedAddresses(c.addrs...), clientlib.RandSeed(1),
		clientlib.MaxBufferedRecords(512))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := client.CreateTopic(ctx, pauseTopic, pausePartitions, 3, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, pauseTopic, pausePartitions) })
	leader := pauseLeader(t, ctx, client)

	var mu sync.Mutex
	var acks []pauseAck
	var stop atomic.Bool
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < pauseRecordsMax && !stop.Load(); i++ {
			if i%100 == 99 {
				time.Sleep(10 * time.Millisecond) // pacing: the pause must not outlast the writer
			}
			v := strconv.Itoa(i)
			client.Produce(ctx, &clientlib.Record{Topic: pauseTopic, Value: []byte(v)}, func(r *clientlib.Record, err error) {
				if err != nil {
					return // not acknowledged: nothing to check
				}
				mu.Lock()
				acks = append(acks, pauseAck{r.Partition, r.Offset, v, time.Since(start)})
				mu.Unlock()
			})
		}
	}()
	// count is the records acknowledged in [from, to) and their partitions.
	count := func(from, to time.Duration) (n int, parts map[int32]bool) {
		mu.Lock()
		defer mu.Unlock()
		parts = map[int32]bool{}
		for _, a := range acks {
			if a.at >= from && a.at < to {
				n++
				parts[a.partition] = true
			}
		}
		return n, parts
	}
	waitFor(t, "warm-up writes", 30*time.Second, func() error {
		if n, _ := count(0, time.Hour); n < 500 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	time.Sleep(pauseFor) // a fault-free baseline of the same length

	p := c.procs[leader-1].cmd.Process
	pausedAt := time.Since(start)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer p.Signal(syscall.SIGCONT)
	time.Sleep(pauseFor) // the fault's duration, not a synchronisation
	p.Signal(syscall.SIGCONT)
	before, _ := count(pausedAt-pauseFor, pausedAt)
	early, _ := count(pausedAt, pausedAt+3*time.Second)
	during, parts := count(pausedAt, pausedAt+pauseFor)
	t.Logf("node %d paused %v: %d records acknowledged (%d in the first 3 s) on partitions %v; %d in the %v before",
		leader, pauseFor, during, early, parts, before, pauseFor)
	if early == 0 || len(parts) < 2 || during < before/4 {
		t.Fatalf("writes stalled while node %d was paused: %d acknowledged (%d in the first 3 s) on %d partitions, %d before",
			leader, during, early, len(parts), before)
	}

	stop.Store(true)
	<-done
	if err := client.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	checkPauseAcks(t, ctx, client, acks)
}

// pauseLeader is the node leading partition 0 of the pause topic.
func pauseLeader(t *testing.T, ctx context.Context, client *clientlib.Client) uint64 {
	t.Helper()
	var leader uint64
	waitFor(t, "leader of partition 0", 30*time.Second, func() error {
		info, err := client.Metadata(ctx)
		if err != nil {
			return err
		}
		for _, tm := range info.Topics {
			if tm.Name == pauseTopic && len(tm.Partitions) > 0 && tm.Partitions[0].LeaderID != 0 {
				leader = tm.Partitions[0].LeaderID
				return nil
			}
		}
		return fmt.Errorf("no leader yet")
	})
	return leader
}

// checkPauseAcks reads every partition up to its high-water mark and
// checks that each acknowledged record is at its offset.
func checkPauseAcks(t *testing.T, ctx context.Context, client *clientlib.Client, acks []pauseAck) {
	t.Helper()
	ends, err := client.ListOffsets(ctx, pauseTopic, nil, clientlib.OffsetLatest())
	if err != nil {
		t.Fatal(err)
	}
	k := clientlib.NewConsumer(client, clientlib.FetchMaxWait(100*time.Millisecond))
	left := 0
	for _, e := range ends {
		if e.Err != nil {
			t.Fatalf("partition %d: %v", e.Partition, e.Err)
		}
		k.Assign(pauseTopic, e.Partition, clientlib.OffsetEarliest())
		left += int(e.Offset)
	}
	type at struct {
		p   int32
		off int64
	}
	log := map[at]string{}
	for left > 0 {
		if ctx.Err() != nil {
			t.Fatalf("%d records not read back before the deadline", left)
		}
		fs := k.Poll(ctx)
		if err := fs.FirstErr(); err != nil && !clientlib.IsRetriable(err) {
			t.Fatalf("poll: %v", err)
		}
		for _, r := range fs.Records() {
			if r.Offset < ends[r.Partition].Offset {
				if _, dup := log[at{r.Partition, r.Offset}]; !dup {
					left--
				}
				log[at{r.Partition, r.Offset}] = string(r.Value)
			}
		}
	}
	for _, a := range acks {
		if got, ok := log[at{a.partition, a.offset}]; !ok || got != a.value {
			t.Fatalf("acknowledged record %q at %d/%d: log holds %q", a.value, a.partition, a.offset, got)
		}
	}
	t.Logf("%d acknowledged records read back", len(acks))
}
