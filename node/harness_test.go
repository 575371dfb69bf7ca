package node

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/raftlog/memdisk"
)

// testClock is a fixed clock: append times are all the same instant.
type testClock struct{}

func (testClock) Monotonic() time.Duration { return 0 }
func (testClock) Realtime() time.Time      { return time.UnixMilli(1_700_000_000_000) }

// tester is what the harness needs of *testing.T and *rapid.T.
type tester interface {
	Helper()
	Fatalf(format string, args ...any)
}

// envelope is one frame in flight.
type envelope struct {
	from, to NodeID
	frame    []byte
}

// cluster is an in-test world of Cores wired through one FIFO queue of
// frames: no goroutines, no time, deterministic under cryptotest's seed.
type cluster struct {
	t     tester
	ids   []NodeID
	nodes []Peer // the metadata group's voters: every node
	disks map[NodeID]*memdisk.Disk
	cores map[NodeID]*Core // nil while a node is down
	queue []envelope
	rng   *rand.Rand
	// drop, when set, discards the frames it returns true for.
	drop   func(e envelope) bool
	config func(cfg *Config) // adjusts each node's Config before Open
	// trace, when set, hashes every frame sent, in order, so two runs of
	// one seed can be compared.
	trace hash.Hash
	// hold, when set, sees each storage job before it runs; a job it
	// returns true for is neither run nor reported (the test crashes the
	// node next).
	hold func(id NodeID, j SyncJob) bool
	// afterProcess, when set, sees each node after each Process settle
	// runs on it.
	afterProcess func(id NodeID, core *Core)
}

// sender is one node's Network.
type sender struct {
	c    *cluster
	from NodeID
}

func (s sender) Send(to NodeID, frame []byte) {
	if s.c.trace != nil {
		fmt.Fprintf(s.c.trace, "%d>%d:", s.from, to)
		s.c.trace.Write(frame)
	}
	s.c.queue = append(s.c.queue, envelope{from: s.from, to: to, frame: frame})
}

// newCluster starts n nodes running the metadata group over all of them
// (node i at addressOf(i), in its own rack), with raft's election
// randomness seeded by seed. When specs is not empty, its topics are then
// created through the metadata group (one partition count and replication
// factor per topic, from the specs) and the cluster ticks until every node
// runs the replicas placed on it: the path production runs.
func newCluster(t tester, seed uint64, n int, specs []PartitionSpec, config func(*Config)) *cluster {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		cryptotest.SetGlobalRandom(tt, seed) // benchmarks run unseeded
	}
	return startCluster(t, rand.New(rand.NewPCG(seed, 1)), n, specs, config)
}

// startCluster is newCluster with crash damage drawn from rng and raft's
// randomness left as the caller seeded it.
func startCluster(t tester, rng *rand.Rand, n int, specs []PartitionSpec, config func(*Config)) *cluster {
	t.Helper()
	c := &cluster{
		t: t, config: config, rng: rng,
		disks: map[NodeID]*memdisk.Disk{}, cores: map[NodeID]*Core{},
	}
	for i := 1; i <= n; i++ {
		id := NodeID(i)
		c.ids = append(c.ids, id)
		c.nodes = append(c.nodes, Peer{ID: id, Address: addressOf(id), Rack: fmt.Sprintf("rack-%d", i)})
		c.disks[id] = memdisk.New()
	}
	for _, id := range c.ids {
		c.start(id)
	}
	if len(specs) > 0 {
		c.createSpecs(specs)
	}
	return c
}

// createSpecs creates the topics of specs through the metadata leader and
// waits until every node hosts the replicas placed on it.
func (c *cluster) createSpecs(specs []PartitionSpec) {
	c.t.Helper()
	c.waitRegistered(len(c.ids))
	want := 0
	for i, s := range specs {
		want += len(s.Replicas)
		if i+1 < len(specs) && specs[i+1].Topic == s.Topic {
			continue
		}
		c.createTopic(c.metaLeaderOf(), s.Topic, s.Partition+1, int32(len(s.Replicas)))
	}
	for range 300 {
		hosted := 0
		for _, id := range c.ids {
			hosted += len(c.hosted(id))
		}
		if hosted == want {
			return
		}
		c.tick(1)
	}
	c.t.Fatalf("replicas of %v did not start", specs)
}

// replicaDir is the directory of node id's replica of tp.
func (c *cluster) replicaDir(id NodeID, tp TopicPartition) string {
	c.t.Helper()
	g := c.cores[id].byTP[tp]
	if g == nil {
		c.t.Fatalf("node %d hosts no replica of %v", id, tp)
	}
	return g.dir
}

// replicated describes a topic whose partitions each have a replica on
// every one of n nodes (replication factor n).
func replicated(n int, topic string, partitions int) []PartitionSpec {
	var specs []PartitionSpec
	for p := 0; p < partitions; p++ {
		spec := PartitionSpec{TopicPartition: TopicPartition{Topic: topic, Partition: int32(p)}}
		for i := 1; i <= n; i++ {
			spec.Replicas = append(spec.Replicas, NodeID(i))
		}
		specs = append(specs, spec)
	}
	return specs
}

// start opens node id's Core on its disk.
func (c *cluster) start(id NodeID) {
	c.t.Helper()
	cfg := Config{
		ID: id, Nodes: c.nodes, Disk: c.disks[id], Network: sender{c: c, from: id},
		Clock: testClock{}, Rand: rand.New(rand.NewPCG(uint64(id), 2)),
		WAL: *walFlag, // wal_test.go
	}
	if c.config != nil {
		c.config(&cfg)
	}
	core, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("open node %d: %v", id, err)
	}
	c.cores[id] = core
}

// crash stops node id, losing what its disk had not synced (torn writes
// included), and restart reopens it.
func (c *cluster) crash(id NodeID) {
	_ = c.cores[id].Close()
	c.cores[id] = nil
	c.disks[id].Crash(c.rng)
}

// settle delivers frames and processes every node until nothing is in
// flight (bounded).
func (c *cluster) settle() {
	c.t.Helper()
	for range 1000 {
		ran := false
		for _, id := range c.ids {
			if core := c.cores[id]; core != nil {
				if err := core.Process(); err != nil {
					c.t.Fatalf("node %d: process: %v", id, err)
				}
				if c.afterProcess != nil {
					c.afterProcess(id, core)
				}
				ran = c.runJobsOf(id, core) || ran
			}
		}
		if len(c.queue) == 0 && !ran {
			return
		}
		queue := c.queue
		c.queue = nil
		for _, e := range queue {
			if core := c.cores[e.to]; core != nil && (c.drop == nil || !c.drop(e)) {
				core.Receive(e.frame)
			}
		}
	}
	c.t.Fatalf("cluster did not settle")
}

// runJobs runs the storage jobs core started, in order, as the server's
// storage pool would (one at a time), and reports whether there were any.
func (c *cluster) runJobs(core *Core) bool {
	jobs := core.TakeSyncJobs(nil)
	for _, j := range jobs {
		core.SyncDone(j.Token, j.Run())
	}
	return len(jobs) > 0
}

// runJobsOf is runJobs for node id, passing each job by c.hold first.
func (c *cluster) runJobsOf(id NodeID, core *Core) bool {
	if c.hold == nil {
		return c.runJobs(core)
	}
	jobs := core.TakeSyncJobs(nil)
	for _, j := range jobs {
		if !c.hold(id, j) {
			core.SyncDone(j.Token, j.Run())
		}
	}
	return len(jobs) > 0
}

// tick advances every live node's clock n times, settling after each.
func (c *cluster) tick(n int) {
	c.t.Helper()
	for range n {
		for _, id := range c.ids {
			if core := c.cores[id]; core != nil {
				core.Tick()
			}
		}
		c.settle()
	}
}

// leader ticks until every partition has one leader that all live replicas
// agree on, and returns it for tp.
func (c *cluster) leader(tp TopicPartition) NodeID {
	c.t.Helper()
	for range 200 {
		if lead := c.agreedLeader(tp); lead != 0 {
			return lead
		}
		c.tick(1)
	}
	c.t.Fatalf("no leader for %v", tp)
	return 0
}

func (c *cluster) agreedLeader(tp TopicPartition) NodeID {
	var lead NodeID
	for _, id := range c.ids {
		core := c.cores[id]
		if core == nil {
			continue
		}
		for _, st := range core.Status() {
			if st.TopicPartition != tp {
				continue
			}
			if st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				return 0
			}
			lead = st.Leader
		}
	}
	if lead == 0 || c.cores[lead] == nil || c.cores[lead].byTP[tp] == nil {
		return 0 // a restarted leader-to-be may not run the replica yet
	}
	return lead
}

// othersThan is the two nodes of a three-node cluster other than id, in
// id order.
func (c *cluster) othersThan(id NodeID) (a, b NodeID) {
	for _, o := range c.ids {
		switch {
		case o == id:
		case a == 0:
			a = o
		default:
			b = o
		}
	}
	return a, b
}

// produce sends req to node id and settles until it completes.
func (c *cluster) produce(id NodeID, req ProduceRequest) ProduceResult {
	c.t.Helper()
	var res *ProduceResult
	c.cores[id].produceNow(req, func(r ProduceResult) { res = &r })
	for i := 0; res == nil && i < 200; i++ {
		c.settle()
		if res == nil {
			c.tick(1)
		}
	}
	if res == nil {
		c.t.Fatalf("produce on node %d never completed", id)
	}
	return *res
}

// fetch sends req to node id and settles until it completes.
func (c *cluster) fetch(id NodeID, req FetchRequest) FetchResult {
	c.t.Helper()
	var res *FetchResult
	c.cores[id].fetchNow(req, func(r FetchResult) { res = &r })
	for i := 0; res == nil && i < 200; i++ {
		c.settle()
		if res == nil {
			c.tick(1)
		}
	}
	if res == nil {
		c.t.Fatalf("fetch on node %d never completed", id)
	}
	return *res
}

// fetchAll reads the partition from offset 0 to the high-water mark.
func (c *cluster) fetchAll(id NodeID, tp TopicPartition) ([]FetchedBatch, int64) {
	c.t.Helper()
	var out []FetchedBatch
	offset := int64(0)
	for range 1000 {
		res := c.fetch(id, FetchRequest{TopicPartition: tp, Offset: offset, MaxBytes: 1 << 20})
		if res.Err != nil {
			c.t.Fatalf("fetch %v at %d: %v", tp, offset, res.Err)
		}
		for _, b := range res.Batches {
			if b.BaseOffset < offset {
				continue // the batch holding offset started before it
			}
			out = append(out, b)
			offset = b.BaseOffset + int64(batchRecordCount(b.Batch))
		}
		if offset >= res.HighWatermark {
			return out, res.HighWatermark
		}
	}
	c.t.Fatalf("fetchAll did not reach the high-water mark")
	return nil, 0
}

// testBatch encodes count records whose values name tag.
func testBatch(t tester, tag string, count int) []byte {
	t.Helper()
	records := make([]recordbatch.Record, count)
	for i := range records {
		records[i] = recordbatch.Record{TimestampMs: 1000, Key: []byte(tag), Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	batch, err := recordbatch.Encode(nil, records)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return batch
}

// oversizedBatch hand-encodes a batch of one record whose value is n
// bytes, bypassing the encoder's own size check.
func oversizedBatch(n int) []byte {
	b := make([]byte, recordbatch.HeaderBytes)
	b = append(b, 0x00, 0x01) // timestamp delta 0, null key (-1)
	b = binary.AppendVarint(b, int64(n))
	b = append(b, bytes.Repeat([]byte{'x'}, n)...)
	b = append(b, 0x00) // no headers
	b[0] = recordbatch.Magic
	binary.LittleEndian.PutUint32(b[8:12], 1)
	binary.LittleEndian.PutUint64(b[12:20], 1000)
	binary.LittleEndian.PutUint32(b[20:24], uint32(len(b)-recordbatch.HeaderBytes))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
