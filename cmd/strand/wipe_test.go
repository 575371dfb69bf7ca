package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/linearizability"
)

// wipeAckedBefore is how many records (of ~2 KB) are written before the
// wipe: about 20 MB of data for node 3 to rebuild.
const wipeAckedBefore = 10000

// Three real `strand serve` processes under writes: node 3 is killed, its
// data directory deleted (a replaced disk) and restarted empty under its
// old id. It must rebuild every replica from its peers without an operator
// (node/rejoin.go) and catch up; then node 1 is killed, so nodes 2 and 3
// alone hold the data, and writes go on. Every acknowledged record is read
// back and checked. Before disk-loss recovery the empty node voted at once
// and could elect a leader missing committed records.
func TestWipedNodeRejoinsAndCatchesUp(t *testing.T) {
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
	waitFor(t, "writes before the wipe", 60*time.Second, w.ackedAtLeast(wipeAckedBefore))
	base, baseStart := w.acked.Load(), time.Now()
	time.Sleep(2 * time.Second) // a measurement window, not a synchronisation
	baseRate := float64(w.acked.Load()-base) / time.Since(baseStart).Seconds()

	c.procs[2].kill()
	dataDir := filepath.Join(c.dir, "data-3")
	size := dirBytes(dataDir)
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	offsets := c.logSizes()
	ackedAtWipe := w.acked.Load()
	c.start(2)
	restarted := time.Now()
	waitFor(t, "node 3 rebuilt", 60*time.Second, func() error { return c.rejoinDone(2, offsets[2]) })
	took := time.Since(restarted)
	t.Logf("node 3 rebuilt %.1f MB in %v (%.1f MB/s, STRAND_CATCHUP_BYTES_PER_SEC=%q); producers %.0f records/s meanwhile, %.0f/s before the wipe",
		float64(size)/1e6, took.Round(10*time.Millisecond), float64(size)/1e6/took.Seconds(), os.Getenv("STRAND_CATCHUP_BYTES_PER_SEC"),
		float64(w.acked.Load()-ackedAtWipe)/took.Seconds(), baseRate)

	c.procs[0].kill()
	target := w.acked.Load() + catchupAfterKill
	waitFor(t, "writes after killing node 1", 30*time.Second, w.ackedAtLeast(target))
	w.stopped.Store(true)
	wg.Wait()
	t.Logf("%d records acknowledged, %d failed or unknown", w.acked.Load(), w.failed.Load())
	w.polls().drain(t, c.addrs[1:], linearizability.ClientID(catchupWriters), catchupPartitions, 30*time.Second)
	report := linearizability.Check(w.h, linearizability.Options{FinalDrain: true, Timeout: 20 * time.Second})
	if err := report.Err(); err != nil {
		t.Fatal(err)
	}
}

// rejoinDone is nil once node i's log, from offset on, shows at least one
// replica that lost its state and every such replica caught up.
func (c *testCluster) rejoinDone(i int, offset int64) error {
	f, err := os.Open(c.logPath(i))
	if err != nil {
		return err
	}
	defer f.Close()
	f.Seek(offset, 0)
	lost, done := 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "replica lost its state"),
			strings.Contains(line, "the cluster exists: rebuilding from peers"):
			lost++
		case strings.Contains(line, "caught up: votes again"):
			done++
		}
	}
	if lost == 0 || done < lost {
		return fmt.Errorf("node %d: %d replicas recovering, %d caught up", i+1, lost, done)
	}
	return nil
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
