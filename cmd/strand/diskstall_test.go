//go:build faultinject

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
)

// Bounds of the disk-stall test.
const (
	stallTopic      = "stall"
	stallPartitions = 6
	// stallMoveMax is how soon the stalled node's leaderships must be
	// elsewhere: an election timeout (1 s, the default stall threshold)
	// plus a second, plus a second of slack for a loaded machine.
	stallMoveMax = 3 * time.Second
)

// A real node whose disk stalls (every storage job waits while a file
// exists: node/server's faultinject STRAND_FAULT_DISK_STALL_FILE) hands
// every partition it leads to the other nodes within an election timeout
// plus a second, writes go on through them, its log names the stalled
// file, and once the disk answers it takes writes again. Before the
// watchdog the node kept its leaderships and those partitions took no
// write until the disk came back.
func TestDiskStallMovesLeaders(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	addrs, _ := startFaultCluster(t, dir, "")
	victim, acks, stop := startStallWorkload(t, addrs)
	defer stop()

	file := diskStallFile(dir, int(victim-1))
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file)
	stalled := time.Now()
	waitFor(t, "leaders off the stalled node", 15*time.Second, func() error {
		leaders, err := stallLeaders(addrs)
		for p, l := range leaders {
			if l == victim || l == 0 {
				return fmt.Errorf("partition %d led by %d (%v)", p, l, err)
			}
		}
		return err
	})
	moved := time.Since(stalled)
	t.Logf("node %d's leaderships moved %v after its disk stalled", victim, moved.Round(time.Millisecond))
	if moved > stallMoveMax {
		t.Errorf("node %d's leaderships moved %v after its disk stalled, more than %v", victim, moved, stallMoveMax)
	}
	time.Sleep(time.Second)
	if gap := acks.longestGap(time.Now().Add(-time.Second), time.Now()); gap > 500*time.Millisecond {
		t.Errorf("writes stopped for %v after the move, the disk still stalled", gap)
	}
	// `strand cluster` names the stalled disk (the members answer carries it).
	env := []string{"STRAND_BROKERS=" + strings.Join(addrs, ",")}
	waitFor(t, "strand cluster to show the stall", 5*time.Second, func() error {
		out := runCLI(t, env, "", "cluster")
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), strconv.FormatUint(victim, 10)+" ") && strings.Contains(line, "DISK STALLED") {
				return nil
			}
		}
		return fmt.Errorf("no DISK STALLED on node %d's line:\n%s", victim, out)
	})
	os.Remove(file)
	log := filepath.Join(dir, fmt.Sprintf("node-%d.log", victim))
	waitFor(t, "the node to see its disk again", 10*time.Second, func() error {
		b, _ := os.ReadFile(log)
		for _, want := range []string{"disk stalled", "/log", "disk responsive again"} {
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("no %q in node %d's log", want, victim)
			}
		}
		return nil
	})
}

// startStallWorkload creates the stall topic, finds partition 0's leader
// (the node whose disk the test stalls) and starts writing to the topic,
// noting each acknowledgement; stop ends the writes.
func startStallWorkload(t *testing.T, addrs []string) (victim uint64, acks *ackTimes, stop func()) {
	t.Helper()
	runCLI(t, []string{"STRAND_BROKERS=" + strings.Join(addrs, ",")}, "",
		"topic", "create", stallTopic, "--partitions", strconv.Itoa(stallPartitions), "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(addrs, stallTopic, stallPartitions) })
	waitFor(t, "a leader of partition 0", 10*time.Second, func() error {
		leaders, err := stallLeaders(addrs)
		victim = leaders[0]
		return err
	})
	acks = &ackTimes{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { produceSlowly(t, ctx, addrs, acks) })
	time.Sleep(time.Second) // writes flowing, so fsyncs are in flight
	return victim, acks, func() { cancel(); wg.Wait() }
}

// diskStallFile is the file whose existence stalls node i's disk (0-based).
func diskStallFile(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("disk-stall-%d", i+1))
}

// stallLeaders returns the leader of each partition of the stall topic.
func stallLeaders(addrs []string) ([]uint64, error) {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.DialTimeout(time.Second),
		clientlib.RequestTimeout(2*time.Second), clientlib.MaxRetries(1))
	if err != nil {
		return make([]uint64, stallPartitions), err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := c.Metadata(ctx)
	leaders := make([]uint64, stallPartitions)
	if err != nil {
		return leaders, err
	}
	for _, topic := range info.Topics {
		if topic.Name != stallTopic {
			continue
		}
		for _, p := range topic.Partitions {
			if int(p.Partition) < len(leaders) {
				leaders[p.Partition] = p.LeaderID
			}
		}
	}
	return leaders, nil
}

// produceSlowly writes 200 small records a second across the stall
// topic's partitions until ctx ends, noting each acknowledgement.
func produceSlowly(t *testing.T, ctx context.Context, addrs []string, acks *ackTimes) {
	c, err := clientlib.NewClient(clientlib.SeedAddresses(addrs...), clientlib.DialTimeout(time.Second),
		clientlib.RequestTimeout(2*time.Second), clientlib.DeliveryTimeout(30*time.Second),
		clientlib.RetryBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for seq := 0; ctx.Err() == nil; seq++ {
		select {
		case <-ctx.Done():
		case <-ticker.C:
			for k := range 2 {
				r := &clientlib.Record{Topic: stallTopic, Key: []byte(fmt.Sprintf("k%d", (2*seq+k)%64)), Value: []byte("v")}
				c.Produce(context.Background(), r, func(_ *clientlib.Record, err error) {
					if err == nil {
						acks.add(time.Now())
					}
				})
			}
		}
	}
}
