package node

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/raftlog"
)

// TestFetchReadBudgetDefersToNextProcess queues three fetches that become
// servable in one Process call of the leader, with a read budget smaller
// than one batch: each Process call serves one and leaves the rest to the
// next call (before the budget, one call read them all, however many
// bytes, while produces waited), and every fetch is answered in full.
// The batches are in the log's tail cache, so the reads run on the loop
// (a cold read runs as a storage job instead: fetch_cold.go).
func TestFetchReadBudgetDefersToNextProcess(t *testing.T) {
	c := newCluster(t, 7, 3, replicated(3, "t", 1), func(cfg *Config) {
		cfg.FetchReadBytesPerProcess = 1
	})
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	for i := range 3 {
		if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "b", 4)}); res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
	var got []FetchResult
	for range 3 {
		c.cores[lead].fetchNow(FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20}, func(r FetchResult) { got = append(got, r) })
	}
	perCall := map[int]int{} // answers per Process call of the leader
	for call := 0; len(got) < 3 && call < 200; call++ {
		before := len(got)
		if err := c.cores[lead].Process(); err != nil {
			t.Fatal(err)
		}
		if n := len(got) - before; n > 0 {
			perCall[call] = n
		}
		for _, id := range c.ids {
			if id != lead {
				if err := c.cores[id].Process(); err != nil {
					t.Fatal(err)
				}
			}
		}
		queue := c.queue
		c.queue = nil
		for _, e := range queue {
			c.cores[e.to].Receive(e.frame)
		}
		if len(queue) == 0 && len(got) == before {
			c.cores[lead].Tick()
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d of 3 fetches answered", len(got))
	}
	for call, n := range perCall {
		if n > 1 {
			t.Fatalf("Process call %d answered %d fetches of a batch each; the budget allows one", call, n)
		}
	}
	for i, r := range got {
		if r.Err != nil || len(r.Batches) != 3 {
			t.Fatalf("fetch %d: %d batches, err %v; want all 3", i, len(r.Batches), r.Err)
		}
	}
}

// TestFetchesShareReadIndex issues three fetches on the leader with no
// apply between them: they share one ReadIndex (one heartbeat round, where
// each fetch cost its own) and each sees every acknowledged batch. A fetch
// after a produce was applied asks for its own read index, so it sees that
// produce.
func TestFetchesShareReadIndex(t *testing.T) {
	c := newCluster(t, 11, 3, replicated(3, "t", 1), nil)
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "a", 2)}); res.Err != nil {
		t.Fatal(res.Err)
	}
	core := c.cores[lead]
	g := core.byTP[tp]
	var got []FetchResult
	for range 3 {
		core.fetchNow(FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20}, func(r FetchResult) { got = append(got, r) })
	}
	if n := len(g.readBy); n != 1 {
		t.Fatalf("three fetches with no apply between them asked for %d read indexes; want 1", n)
	}
	if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "b", 2)}); res.Err != nil {
		t.Fatal(res.Err)
	}
	for i := 0; len(got) < 3 && i < 100; i++ {
		c.tick(1)
	}
	if len(got) != 3 {
		t.Fatalf("%d of 3 shared fetches answered", len(got))
	}
	for i, r := range got {
		if r.Err != nil || len(r.Batches) == 0 {
			t.Fatalf("shared fetch %d: %d batches, err %v", i, len(r.Batches), r.Err)
		}
	}
	// The produce above was applied: a new fetch must not share an older
	// read index, and sees both batches.
	res := c.fetch(lead, FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20})
	if res.Err != nil || len(res.Batches) != 2 {
		t.Fatalf("fetch after the produce: %d batches, err %v; want 2", len(res.Batches), res.Err)
	}
}

// byteCountingDisk counts the bytes read from the partitions' raft log
// segments.
type byteCountingDisk struct {
	raftlog.Disk
	bytes *int
}

func (d byteCountingDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	if err != nil || !strings.HasPrefix(name, "p/") || !strings.Contains(name, "/log/") {
		return f, err
	}
	return byteCountingFile{File: f, bytes: d.bytes}, nil
}

type byteCountingFile struct {
	raftlog.File
	bytes *int
}

func (f byteCountingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	*f.bytes += n
	return n, err
}

// TestLongPollWakeReadsOnlyNewBatches parks a fetch whose min_bytes takes
// six batches and produces them one at a time, with the log's tail cache
// off: each wake reads only the new batch (before, each wake re-read every
// batch from the fetch's offset: 1+2+...+5 batches for five wakes), and
// the answer holds the six batches in order.
func TestLongPollWakeReadsOnlyNewBatches(t *testing.T) {
	var read int
	c := newMetaCluster(t, 21, 1, func(cfg *Config) {
		cfg.LogTailCacheBytesMax = -1
		cfg.Disk = byteCountingDisk{Disk: cfg.Disk, bytes: &read}
	})
	c.createTopic(1, "w", 1, 1)
	tp := TopicPartition{Topic: "w", Partition: 0}
	c.leader(tp)
	var batches [][]byte
	for i := range 6 {
		batches = append(batches, testBatch(t, strings.Repeat(string(rune('a'+i)), 2000), 1))
	}
	var resp *strandpb.Response
	c.cores[1].handleAnonymous(fetchReq(100, tp, 0, int32(6*len(batches[0])-10), 60000), func(r *strandpb.Response) { resp = r })
	c.tick(2)
	read = 0
	for i, b := range batches {
		if resp != nil {
			t.Fatalf("answered after %d of 6 batches: below min_bytes", i)
		}
		c.handle(1, produceReq(uint64(101+i), tp, b))
	}
	if resp == nil {
		t.Fatal("not answered once min_bytes were in")
	}
	got := resp.GetFetch().GetPartitions()[0].GetBatches()
	if len(got) != 6 {
		t.Fatalf("answer holds %d batches; want 6", len(got))
	}
	for i, b := range got {
		if !bytes.Equal(b.GetRecords(), batches[i]) {
			t.Fatalf("batch %d differs from the one written", i)
		}
	}
	// Apply reads each entry once too; re-reading from the start would add
	// another 1+2+3+4+5 batches.
	if limit := 2*6*len(batches[0]) + 6*1024; read > limit {
		t.Fatalf("wakes read %d bytes of log for 6 batches of %d bytes; want at most %d", read, len(batches[0]), limit)
	}
	t.Logf("read %d bytes for 6 batches of %d", read, len(batches[0]))
}
