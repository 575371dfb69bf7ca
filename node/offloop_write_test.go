package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/raftlog"
)

// writeWatch counts the writes to raft log segments (*.log files) made
// inside a storage job and outside one (on the loop).
type writeWatch struct {
	inJob                 bool
	loopWrites, jobWrites int
	loopSyncs, jobSyncs   int
	loopFiles             map[string]int
}

// watchedDisk is a Disk whose segment writes writeWatch counts.
type watchedDisk struct {
	raftlog.Disk
	w *writeWatch
}

func (d watchedDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return watchedFile{File: f, name: name, w: d.w}, nil
}

type watchedFile struct {
	raftlog.File
	name string
	w    *writeWatch
}

func (f watchedFile) WriteAt(p []byte, off int64) (int, error) {
	if f.w.inJob {
		f.w.jobWrites++
	} else {
		f.w.loopWrites++
		f.w.loopFiles[f.name]++
	}
	return f.File.WriteAt(p, off)
}

func (f watchedFile) Sync() error {
	if f.w.inJob {
		f.w.jobSyncs++
	} else {
		f.w.loopSyncs++
		f.w.loopFiles[f.name]++
	}
	return f.File.Sync()
}

// Every append's write runs in the storage job that fsyncs it, never on
// the loop (issue 22): with three nodes producing acks=all batches, no
// segment of any raft log (partition or metadata) is written outside a
// job, and the records read back. Before the
// change the loop made one WriteAt per group per round.
func TestAppendWritesRunInStorageJobs(t *testing.T) {
	if *walFlag {
		t.Skip("with the write-ahead log the appends' writes are still the loop's (DESIGN.md §8)")
	}
	w := &writeWatch{loopFiles: map[string]int{}}
	c := newCluster(t, 7, 3, replicated(3, "orders", 2), func(cfg *Config) {
		cfg.Disk = watchedDisk{Disk: cfg.Disk, w: w}
	})
	c.runJobsWatched(w)
	lead := c.leader(tp0)
	w.loopWrites, w.jobWrites = 0, 0
	clear(w.loopFiles)
	var want [][]byte
	var counts []int64
	for i := range 30 {
		batch := testBatch(t, fmt.Sprintf("w%d", i), 1+i%3)
		res := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: batch})
		if res.Err != nil || res.BaseOffset != sum(counts) {
			t.Fatalf("produce %d: %+v", i, res)
		}
		want, counts = append(want, batch), append(counts, int64(1+i%3))
	}
	c.tick(20)
	if w.loopWrites != 0 {
		t.Fatalf("%d raft log writes on the loop (%v), want 0", w.loopWrites, w.loopFiles)
	}
	if w.jobWrites == 0 {
		t.Fatalf("no raft log write in a storage job")
	}
	fetched, hwm := c.fetchAll(lead, tp0)
	checkFetched(t, fetched, hwm, want, counts)
}

// runJobsWatched runs every storage job of c at once, telling w which
// writes and syncs happen inside one.
func (c *cluster) runJobsWatched(w *writeWatch) {
	c.hold = func(id NodeID, j SyncJob) bool {
		w.inJob = true
		err := j.Run()
		w.inJob = false
		c.cores[id].SyncDone(j.Token, err)
		return true
	}
}

// sum adds xs.
func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// monoClock is a clock whose monotonic time the test moves (segment.ms is
// measured on it).
type monoClock struct{ now *time.Duration }

func (m monoClock) Monotonic() time.Duration { return *m.now }
func (monoClock) Realtime() time.Time        { return time.UnixMilli(1_700_000_000_000) }

// A roll by age (segment.ms) fsyncs the segment it seals in the group's
// storage job, never on the loop (issue 22): across three rolls on every
// replica no raft log segment is synced outside a job, every replica holds
// the rolled segments, and the records read back. Before, rollByAge sealed
// and fsynced the segment inline (raftlog Roll), one loop fsync per roll.
func TestRollByAgeSyncsInStorageJob(t *testing.T) {
	if *walFlag {
		t.Skip("with the write-ahead log a roll stays on the loop, as its appends do (DESIGN.md §8)")
	}
	var now time.Duration
	w := &writeWatch{loopFiles: map[string]int{}}
	c := newMetaCluster(t, 27, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.Clock = monoClock{now: &now}
		cfg.Disk = watchedDisk{Disk: cfg.Disk, w: w}
	})
	c.runJobsWatched(w)
	c.createTopicWith(c.metaLeaderOf(), "aged", 1, 3, map[string]string{"segment.ms": "1000", "retention.ms": "-1"})
	tp := TopicPartition{Topic: "aged"}
	c.tick(20)
	w.loopSyncs, w.jobSyncs = 0, 0
	clear(w.loopFiles)
	const rounds, batches = 3, 5
	for range rounds {
		c.fillPartition(tp, batches)
		c.tick(20) // every replica sees the active segment (its age starts)
		now += 2 * time.Second
		c.tick(20)
	}
	if w.loopSyncs != 0 {
		t.Fatalf("%d raft log fsyncs on the loop (%v), want 0", w.loopSyncs, w.loopFiles)
	}
	for _, id := range c.ids {
		if rolls := c.cores[id].Stats().SegmentRolls; rolls < rounds {
			t.Fatalf("node %d rolled %d segments by age, want at least %d", id, rolls, rounds)
		}
		if segs := c.cores[id].byTP[tp].log.Segments(nil); len(segs) < rounds+1 {
			t.Fatalf("node %d holds %d segments after %d rolls", id, len(segs), rounds)
		}
	}
	lead := c.leader(tp)
	if _, hwm := c.fetchFrom(lead, tp, 0); hwm != rounds*batches*8 {
		t.Fatalf("high-water mark %d, want %d", hwm, rounds*batches*8)
	}
	c.checkSameState(tp)
}
