package node

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strandlog/strand/raftlog"
)

// countingDisk counts the reads of the partitions' raft log segments.
type countingDisk struct {
	raftlog.Disk
	reads *int
}

func (d countingDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	if err != nil || !strings.HasPrefix(name, "p/") || !strings.Contains(name, "/log/") {
		return f, err
	}
	return countingFile{File: f, reads: d.reads}, nil
}

type countingFile struct {
	raftlog.File
	reads *int
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	*f.reads++
	return f.File.ReadAt(p, off)
}

// TestFetchReadsRangeAtOnce fetches ten batches with the log's tail cache
// off: the leader reads its segment once for the whole range (a read per
// batch made it ten), and hands every batch out as written.
func TestFetchReadsRangeAtOnce(t *testing.T) {
	var reads int
	c := newCluster(t, 5, 3, replicated(3, "t", 1), func(cfg *Config) {
		cfg.LogTailCacheBytesMax = -1
		cfg.Disk = countingDisk{Disk: cfg.Disk, reads: &reads}
	})
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	var want [][]byte
	for i := range 10 {
		b := testBatch(t, string(rune('a'+i)), 1)
		if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: b}); res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
		want = append(want, b)
	}
	before := reads
	res := c.fetch(lead, FetchRequest{TopicPartition: tp, Offset: 0, MaxBytes: 1 << 20})
	if res.Err != nil || len(res.Batches) != len(want) {
		t.Fatalf("fetch: %d batches, err %v; want %d", len(res.Batches), res.Err, len(want))
	}
	for i, b := range res.Batches {
		if !bytes.Equal(b.Batch, want[i]) || b.BaseOffset != int64(i) {
			t.Fatalf("batch %d at %d differs from the one written", i, b.BaseOffset)
		}
	}
	if got := reads - before; got > 2 {
		t.Fatalf("a fetch of %d batches read the log %d times; want one range read", len(want), got)
	}
}
