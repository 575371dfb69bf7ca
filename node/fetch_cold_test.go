package node

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/raftlog"
)

// jobReads counts the reads of one node's partition logs, apart: those
// made while a storage job runs and the rest, made on the loop.
type jobReads struct {
	inJob           bool
	onLoop, fromJob int
}

// jobReadDisk is a Disk whose partition log files count their reads in r.
type jobReadDisk struct {
	raftlog.Disk
	r *jobReads
}

func (d jobReadDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	if err != nil || !strings.HasPrefix(name, "p/") || !strings.Contains(name, "/log/") {
		return f, err
	}
	return jobReadFile{File: f, r: d.r}, nil
}

type jobReadFile struct {
	raftlog.File
	r *jobReads
}

func (f jobReadFile) ReadAt(p []byte, off int64) (int, error) {
	if f.r.inJob {
		f.r.fromJob++
	} else {
		f.r.onLoop++
	}
	return f.File.ReadAt(p, off)
}

// coldCluster is a cluster whose nodes keep no tail cache (every fetch
// reads the log), counting each node's log reads on and off the loop; it
// runs every storage job itself, marking the node's reads as a job's.
func coldCluster(t *testing.T, seed uint64, config func(*Config)) (*cluster, map[NodeID]*jobReads) {
	reads := map[NodeID]*jobReads{}
	c := newCluster(t, seed, 3, replicated(3, "t", 1), func(cfg *Config) {
		cfg.LogTailCacheBytesMax = -1
		r := reads[cfg.ID]
		if r == nil {
			r = &jobReads{}
			reads[cfg.ID] = r
		}
		cfg.Disk = jobReadDisk{Disk: cfg.Disk, r: r}
		if config != nil {
			config(cfg)
		}
	})
	c.hold = func(id NodeID, j SyncJob) bool {
		r := reads[id]
		r.inJob = true
		err := j.Run()
		r.inJob = false
		c.cores[id].SyncDone(j.Token, err)
		return true
	}
	return c, reads
}

// TestColdFetchReadsOffTheLoop fetches batches the leader's tail cache
// does not hold, from a log it wrote and from one it reopened (sealed
// segments not yet indexed, read whole at their first read): the leader's
// loop reads none of it, the reads run as storage jobs, and every batch
// comes back as written. Before cold reads were jobs the loop made every
// one of these reads.
func TestColdFetchReadsOffTheLoop(t *testing.T) {
	c, reads := coldCluster(t, 21, func(cfg *Config) { cfg.SegmentBytesMax = 4 << 10 })
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	want := map[int64][]byte{} // by base offset
	end := int64(0)
	for i := range 30 {
		b := testBatch(t, string(rune('a'+i%26)), 20)
		res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: b})
		if res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
		want[res.BaseOffset], end = b, res.BaseOffset+20
	}
	check := func(step string, id NodeID) {
		t.Helper()
		r := reads[id]
		r.onLoop, r.fromJob = 0, 0
		cold := c.cores[id].Stats().ColdReads
		for off := int64(0); off < end; {
			res := c.fetch(id, FetchRequest{TopicPartition: tp, Offset: off, MaxBytes: 1 << 10})
			if res.Err != nil || len(res.Batches) == 0 {
				t.Fatalf("%s: fetch at %d: %d batches, err %v", step, off, len(res.Batches), res.Err)
			}
			for _, b := range res.Batches {
				if b.BaseOffset != off || !bytes.Equal(b.Batch, want[off]) {
					t.Fatalf("%s: batch at %d differs from the one written at %d", step, b.BaseOffset, off)
				}
				off = b.nextOffset()
			}
		}
		if r.onLoop != 0 || r.fromJob == 0 || c.cores[id].Stats().ColdReads == cold {
			t.Fatalf("%s: the loop read the log %d times, jobs %d times (%d cold reads); want every read in a job",
				step, r.onLoop, r.fromJob, c.cores[id].Stats().ColdReads-cold)
		}
	}
	segments := 0
	for _, name := range c.disks[lead].Files() {
		if strings.HasPrefix(name, "p/") && strings.HasSuffix(name, ".log") {
			segments++
		}
	}
	if segments < 3 {
		t.Fatalf("the leader's log has %d segments; the test needs sealed ones", segments)
	}
	check("written", lead)
	for _, id := range c.ids { // every node reopens its log: sealed segments unindexed
		c.crash(id)
	}
	for _, id := range c.ids {
		c.start(id)
	}
	check("reopened", c.leader(tp))
}

// TestColdFetchCrashBeforeCompletion holds the leader's cold read job,
// crashes the leader with it in flight (the fetch is answered ErrStopped
// at Close, never left waiting), restarts it and fetches again: every
// acknowledged batch is served.
func TestColdFetchCrashBeforeCompletion(t *testing.T) {
	c, _ := coldCluster(t, 22, nil)
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	for i := range 5 {
		if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "x", 2)}); res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
	run := c.hold
	held := false
	c.hold = func(id NodeID, j SyncJob) bool {
		if id == lead && j.Read() {
			held = true
			return true // never run, never reported: the crash comes first
		}
		return run(id, j)
	}
	var got *FetchResult
	c.cores[lead].fetchNow(FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20}, func(r FetchResult) { got = &r })
	for i := 0; !held && i < 50; i++ {
		c.settle()
		c.tick(1)
	}
	if !held || got != nil {
		t.Fatalf("the fetch's read job held %v, answered before its completion: %v", held, got != nil)
	}
	c.crash(lead)
	if got == nil || !errors.Is(got.Err, ErrStopped) {
		t.Fatalf("a fetch whose read was in flight at the crash: answered %v", got)
	}
	c.hold = run
	c.start(lead)
	lead = c.leader(tp)
	batches, hwm := c.fetchAll(lead, tp)
	if hwm != 10 || len(batches) != 5 {
		t.Fatalf("after the crash: %d batches, high-water mark %d; want 5 batches, 10", len(batches), hwm)
	}
}

// unlinkDisk counts the unlinks of partition log files made on the loop
// (outside a storage job, *inJob false).
type unlinkDisk struct {
	raftlog.Disk
	inJob  *bool
	onLoop *int
}

func (d unlinkDisk) Remove(name string) error {
	if !*d.inJob && strings.HasPrefix(name, "p/") && strings.Contains(name, "/log/") {
		*d.onLoop++
	}
	return d.Disk.Remove(name)
}

// TestSnapshotInstallUnlinksOffTheLoop: a follower that was down while
// retention moved the log past it installs the leader's snapshot; its
// loop unlinks none of its old segments (ApplySnapshot retires them by
// rename, a trash job unlinks them), and no retired file is left.
func TestSnapshotInstallUnlinksOffTheLoop(t *testing.T) {
	inJob := map[NodeID]*bool{}
	onLoop := map[NodeID]*int{}
	c := newMetaCluster(t, 11, 3, func(cfg *Config) {
		retentionConfig(cfg)
		if inJob[cfg.ID] == nil {
			inJob[cfg.ID], onLoop[cfg.ID] = new(bool), new(int)
		}
		cfg.Disk = unlinkDisk{Disk: cfg.Disk, inJob: inJob[cfg.ID], onLoop: onLoop[cfg.ID]}
	})
	c.hold = func(id NodeID, j SyncJob) bool {
		*inJob[id] = true
		err := j.Run()
		*inJob[id] = false
		c.cores[id].SyncDone(j.Token, err)
		return true
	}
	c.createTopicWith(c.metaLeaderOf(), "r", 1, 3, map[string]string{
		"segment.bytes": "4096", "retention.bytes": "12288", "retention.ms": "-1",
	})
	tp := TopicPartition{Topic: "r", Partition: 0}
	lead := c.leader(tp)
	follower := c.ids[(slices.Index(c.ids, lead)+1)%len(c.ids)]
	c.fillPartition(tp, 30) // the follower holds several segments
	c.crash(follower)
	c.fillPartition(tp, 200)
	c.tick(30)
	c.start(follower)
	*onLoop[follower] = 0
	c.tick(60)
	if c.cores[follower].Stats().SnapshotsInstalled == 0 {
		t.Fatalf("follower installed no snapshot: %+v", c.cores[follower].Stats())
	}
	if *onLoop[follower] != 0 {
		t.Fatalf("the follower's loop unlinked %d log files", *onLoop[follower])
	}
	for _, name := range c.disks[follower].Files() {
		if strings.HasSuffix(name, ".del") {
			t.Fatalf("retired file %s left behind", name)
		}
	}
	c.checkSameState(tp)
}

// heldColdRead builds a three-node cluster with one retained partition "r"
// of ten records and no tail cache, then starts the leader's fetch of
// offset 0, a cold read whose storage job it holds (c.hold) and returns:
// the cluster, the partition, the leader, the held job (exactly one) and
// where the fetch's answer lands (nil until the job runs).
func heldColdRead(t *testing.T) (c *cluster, tp TopicPartition, lead NodeID, held []SyncJob, got **FetchResult) {
	t.Helper()
	c = newMetaCluster(t, 12, 3, func(cfg *Config) {
		retentionConfig(cfg)
		cfg.LogTailCacheBytesMax = -1
		cfg.DiskStallAfter = time.Hour // the held job would hand the leadership on
	})
	c.createTopicWith(c.metaLeaderOf(), "r", 1, 3, map[string]string{
		"segment.bytes": "4096", "retention.bytes": "12288", "retention.ms": "-1",
	})
	tp = TopicPartition{Topic: "r", Partition: 0}
	c.fillPartition(tp, 10)
	lead = c.leader(tp)
	c.hold = func(id NodeID, j SyncJob) bool {
		if id == lead && j.Read() {
			held = append(held, j)
			return true
		}
		return false
	}
	got = new(*FetchResult)
	c.cores[lead].fetchNow(FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20}, func(r FetchResult) { *got = &r })
	for i := 0; len(held) == 0 && i < 50; i++ {
		c.settle()
		c.tick(1)
	}
	if len(held) != 1 || *got != nil {
		t.Fatalf("%d read jobs held, answered %v", len(held), *got != nil)
	}
	return c, tp, lead, held, got
}

// TestColdFetchAfterRetentionRetiredItsSegment holds the leader's cold
// read of offset 0 while retention trims and compacts the log past it
// (the segment the job reads is retired, its file closed), then runs the
// job: the fetch answers OFFSET_OUT_OF_RANGE naming the new log start,
// never a storage failure, and the node goes on.
func TestColdFetchAfterRetentionRetiredItsSegment(t *testing.T) {
	c, tp, lead, held, got := heldColdRead(t)
	c.fillPartition(tp, 200)
	c.tick(30)
	if c.leader(tp) != lead || statusOf(c.cores[lead], tp).LogStartOffset == 0 || c.cores[lead].Stats().Compactions == 0 {
		t.Fatalf("the leader changed or compacted nothing: %+v", c.cores[lead].Stats())
	}
	c.hold = nil
	j := held[0]
	c.cores[lead].SyncDone(j.Token, j.Run())
	if err := c.cores[lead].Process(); err != nil {
		t.Fatalf("after the read of a retired segment: %v", err)
	}
	start := statusOf(c.cores[lead], tp).LogStartOffset
	if r := *got; r == nil || !errors.Is(r.Err, ErrOffsetOutOfRange) || r.LogStartOffset != start {
		t.Fatalf("fetch at 0 after its segment was retired: %+v; want out of range naming %d", r, start)
	}
	if batches, _ := c.fetchFrom(lead, tp, start); len(batches) == 0 {
		t.Fatalf("nothing served from the log start %d", start)
	}
}
