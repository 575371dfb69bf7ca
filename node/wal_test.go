package node

import (
	"flag"
	"fmt"
	"testing"
)

// walFlag runs every harness cluster with the node-wide write-ahead log.
var walFlag = flag.Bool("node.wal", false, "run the test clusters with Config.WAL (the node-wide write-ahead log)")

// walSingleNode returns a one-node cluster leading partitions of topic
// "orders", with the write-ahead log on or off.
func walSingleNode(t *testing.T, partitions int, on bool, config func(*Config)) *cluster {
	c := newCluster(t, 31, 1, replicated(1, "orders", partitions), func(cfg *Config) {
		cfg.WAL = on
		if config != nil {
			config(cfg)
		}
	})
	for p := range partitions {
		c.leader(TopicPartition{Topic: "orders", Partition: int32(p)})
	}
	c.settle()
	return c
}

// produceEach proposes one acks=1 batch to each partition on core and runs
// one Process; it returns the answers (nil until done) and the sync jobs.
func produceEach(t *testing.T, core *Core, partitions int, tag string) ([]*ProduceResult, []SyncJob) {
	answers := make([]*ProduceResult, partitions)
	for p := range partitions {
		tp := TopicPartition{Topic: "orders", Partition: int32(p)}
		core.produceNow(ProduceRequest{TopicPartition: tp, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, fmt.Sprintf("%s-%d", tag, p), 1)},
			func(r ProduceResult) { answers[p] = &r })
	}
	if err := core.Process(); err != nil {
		t.Fatal(err)
	}
	return answers, core.TakeSyncJobs(nil)
}

// produceAckedThenClose produces one acks=1 batch to each of node 1's two
// partitions, runs their sync jobs, requires every answer acknowledged,
// then closes node 1's core (c.cores[1] nil; its disk keeps what it wrote).
func produceAckedThenClose(t *testing.T, c *cluster, tag string) {
	t.Helper()
	core := c.cores[1]
	answers, jobs := produceEach(t, core, 2, tag)
	for _, j := range jobs {
		core.SyncDone(j.Token, j.Run())
	}
	for p, a := range answers {
		if a == nil || a.Err != nil {
			t.Fatalf("partition %d: %+v", p, a)
		}
	}
	_ = core.Close()
	c.cores[1] = nil
}

// With the write-ahead log, one round's writes to four partition logs take
// one sync job, not one per log, and no answer goes before it completes;
// the partition logs themselves stay unsynced. Without it the same round
// takes four.
func TestWALOneSyncPerNodePerRound(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := walSingleNode(t, 4, on, nil)
		core := c.cores[1]
		answers, jobs := produceEach(t, core, 4, "a")
		want := 4
		if on {
			want = 1
		}
		if len(jobs) != want {
			t.Fatalf("WAL %v: %d sync jobs for writes to 4 logs, want %d", on, len(jobs), want)
		}
		for p, a := range answers {
			if a != nil {
				t.Fatalf("WAL %v: partition %d answered before its sync: %+v", on, p, a)
			}
		}
		if on {
			for p := range 4 {
				dir := c.replicaDir(1, TopicPartition{Topic: "orders", Partition: int32(p)}) + "/log"
				if c.disks[1].Synced(dir) {
					t.Fatalf("partition log %s synced in WAL mode", dir)
				}
			}
		}
		for _, j := range jobs {
			core.SyncDone(j.Token, j.Run())
		}
		for p, a := range answers {
			if a == nil || a.Err != nil {
				t.Fatalf("WAL %v: partition %d after the sync: %+v", on, p, a)
			}
		}
	}
}

// What the write-ahead log's sync acknowledged survives a power loss that
// keeps nothing unsynced, though the partition logs were never synced:
// recovery replays it into them.
func TestWALPowerLossKeepsAcknowledged(t *testing.T) {
	c := walSingleNode(t, 4, true, nil)
	core := c.cores[1]
	answers, jobs := produceEach(t, core, 4, "kept")
	if len(jobs) != 1 {
		t.Fatalf("%d sync jobs", len(jobs))
	}
	core.SyncDone(jobs[0].Token, jobs[0].Run())
	for p, a := range answers {
		if a == nil || a.Err != nil {
			t.Fatalf("partition %d: %+v", p, a)
		}
	}
	_ = core.Close()
	c.cores[1] = nil
	c.disks[1].Crash(nil)
	c.start(1)
	for p := range 4 {
		tp := TopicPartition{Topic: "orders", Partition: int32(p)}
		c.leader(tp)
		batches, _ := c.fetchAll(1, tp)
		if !holdsTag(t, batches, fmt.Sprintf("kept-%d", p)) {
			t.Fatalf("partition %d lost its acknowledged batch: %d batches", p, len(batches))
		}
	}
}

// holdsTag reports whether a batch of testBatch(tag, ...) is among batches.
func holdsTag(t *testing.T, batches []FetchedBatch, tag string) bool {
	want := testBatch(t, tag, 1)
	for _, b := range batches {
		if string(b.Batch) == string(want) {
			return true
		}
	}
	return false
}

// Past Config.WALBytesMax the node syncs its logs and rotates: one segment
// remains, and after a power loss every acknowledged batch is there — also
// when logs are flushed early in the background (Config.WALLogFlushBytes)
// between rotations.
func TestWALRotationKeepsAcknowledged(t *testing.T) {
	for _, early := range []int64{0, 600} {
		t.Run(fmt.Sprintf("early=%d", early), func(t *testing.T) { testWALRotation(t, early) })
	}
}

func testWALRotation(t *testing.T, early int64) {
	c := walSingleNode(t, 2, true, func(cfg *Config) { cfg.WALBytesMax, cfg.WALLogFlushBytes = 4<<10, early })
	for i := range 40 {
		tp := TopicPartition{Topic: "orders", Partition: int32(i % 2)}
		if res := c.produce(1, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, fmt.Sprintf("r%d", i), 4)}); res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
	if n := c.cores[1].Stats().WALRotations; n == 0 {
		t.Fatal("no rotation past WALBytesMax")
	}
	if n := c.cores[1].Stats().WALEarlyFlushes; (n > 0) != (early > 0) {
		t.Fatalf("%d early flushes with WALLogFlushBytes %d", n, early)
	}
	if names, _ := c.disks[1].List(walDir); len(names) != 1 {
		t.Fatalf("write-ahead log segments after rotation: %v", names)
	}
	c.crash(1)
	c.start(1)
	for p := range 2 {
		tp := TopicPartition{Topic: "orders", Partition: int32(p)}
		c.leader(tp)
		batches, _ := c.fetchAll(1, tp)
		if len(batches) != 20 {
			t.Fatalf("partition %d: %d batches after the power loss, want 20", p, len(batches))
		}
	}
}

// A node restarted without the write-ahead log after a power loss replays
// the one a run with it left, then removes it: nothing acknowledged is
// lost by turning the switch off.
func TestWALSwitchedOffReplaysAndRemoves(t *testing.T) {
	c := walSingleNode(t, 2, true, nil)
	produceAckedThenClose(t, c, "off")
	c.disks[1].Crash(nil)
	c.config = func(cfg *Config) { cfg.WAL = false }
	c.start(1)
	if names, _ := c.disks[1].List(walDir); len(names) != 0 {
		t.Fatalf("write-ahead log left after a start without it: %v", names)
	}
	for p := range 2 {
		tp := TopicPartition{Topic: "orders", Partition: int32(p)}
		c.leader(tp)
		if batches, _ := c.fetchAll(1, tp); !holdsTag(t, batches, fmt.Sprintf("off-%d", p)) {
			t.Fatalf("partition %d lost its acknowledged batch", p)
		}
	}
}
