package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/linearizability"
)

// Four real `strand serve` processes; topic kill's partitions are moved
// onto nodes 1,2,3 and written with acks=all; then every partition is moved
// to 2,3,4 with `strand partition move --no-wait` and the leader of
// partition 0 is SIGKILLed mid-move and restarted. Every move must finish,
// the checkers must find no lost acknowledged record, and node 1 must hold
// no log segment of the topic afterwards.
func TestPartitionMoveUnderKill(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 4)
	env := []string{"STRAND_BROKERS=" + strings.Join(c.addrs, ",")}
	runCLI(t, env, "", "topic", "create", killTopic, "--partitions", fmt.Sprint(killPartitions), "--replication-factor", "3")
	waitFor(t, "topic", 30*time.Second, func() error { return topicReady(c.addrs, killTopic, killPartitions) })
	admin, err := clientlib.NewClient(clientlib.SeedAddresses(c.addrs...), clientlib.RequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	movesTo(t, admin, []uint64{1, 2, 3})

	w := &killWorkload{h: linearizability.NewHistory(), start: time.Now()}
	w.budget.Store(moveRecordsMax) // writers run until the moves are done
	var wg sync.WaitGroup
	for i := range killWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.write(t, c.addrs, linearizability.ClientID(i))
		}()
	}
	waitFor(t, "writes before the move", 30*time.Second, func() error { return ackedAtLeast(w, killProgressStep) })
	leader := partitionLeader(t, admin, 0)
	for p := range int32(killPartitions) {
		runCLI(t, env, "", "partition", "move", fmt.Sprintf("%s/%d", killTopic, p), "--replicas", "2,3,4", "--no-wait")
	}
	c.procs[leader-1].kill()
	acked := w.acked.Load()
	waitFor(t, "writes with the leader down", 30*time.Second, func() error { return ackedAtLeast(w, acked+killProgressStep) })
	c.start(int(leader - 1))
	waitFor(t, "moves", 60*time.Second, func() error { return movedTo(admin, []uint64{2, 3, 4}) })
	w.stopped.Store(true)
	wg.Wait()
	t.Logf("node %d (leader of partition 0) killed mid-move; %d records acknowledged, %d failed or unknown",
		leader, w.acked.Load(), w.failed.Load())
	w.polls().drain(t, c.addrs, linearizability.ClientID(killWriters), killPartitions, 60*time.Second)
	report := linearizability.Check(w.h, linearizability.Options{FinalDrain: true, Timeout: 60 * time.Second})
	if err := report.Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node 1 to drop its replicas", 30*time.Second, func() error { return noSegments(filepath.Join(c.dir, "data-1", "p")) })
}

// moveRecordsMax bounds the records the move test's writers attempt.
const moveRecordsMax = 30000

// movesTo moves every partition of killTopic to replicas and waits.
func movesTo(t *testing.T, admin *clientlib.Client, replicas []uint64) {
	t.Helper()
	var moves []clientlib.PartitionMove
	for p := range int32(killPartitions) {
		moves = append(moves, clientlib.PartitionMove{Topic: killTopic, Partition: p, Replicas: replicas})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin.MovePartitions(ctx, moves)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("move %s/%d: %v", r.Topic, r.Partition, r.Err)
		}
	}
	waitFor(t, "moves", 60*time.Second, func() error { return movedTo(admin, replicas) })
}

// movedTo says whether every partition of killTopic has replicas and no
// move in progress.
func movedTo(admin *clientlib.Client, replicas []uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := admin.Metadata(ctx)
	if err != nil {
		return err
	}
	for p := range int32(killPartitions) {
		pi, ok := findPartition(info, killTopic, p)
		if !ok || pi.TargetReplicas != nil || !slices.Equal(pi.Replicas, replicas) {
			return fmt.Errorf("partition %d on %v moving to %v", p, pi.Replicas, pi.TargetReplicas)
		}
	}
	return nil
}

// partitionLeader is partition p's leader as the metadata says.
func partitionLeader(t *testing.T, admin *clientlib.Client, p int32) uint64 {
	t.Helper()
	var leader uint64
	waitFor(t, "a leader", 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := admin.Metadata(ctx)
		if err != nil {
			return err
		}
		pi, _ := findPartition(info, killTopic, p)
		if leader = pi.LeaderID; leader == 0 {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	return leader
}

// ackedAtLeast says whether the writers had n records acknowledged.
func ackedAtLeast(w *killWorkload, n int64) error {
	if got := w.acked.Load(); got < n && w.budget.Load() > 0 {
		return fmt.Errorf("%d acknowledged, want %d", got, n)
	}
	return nil
}

// noSegments says whether no replica directory under dir holds a log file.
func noSegments(dir string) error {
	var found []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(path)) == "log" {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(found) > 0 {
		return fmt.Errorf("log files left: %v", found)
	}
	return nil
}
