package node

import (
	"testing"
	"time"
)

// BenchmarkColdFetchLoop fetches 256 KiB at a time from a partition whose
// leader keeps no tail cache, and reports the time its loop spends per
// fetch (loop-µs/op: the cluster's time less the storage jobs' run time,
// which the server's pool spends on other goroutines) beside the jobs'
// (jobs-µs/op). A cold read on the loop counts in the first; as a storage
// job in the second. Written against the test cluster only, so the same
// file measures a tree from before cold reads were jobs.
func BenchmarkColdFetchLoop(b *testing.B) {
	c := newCluster(b, 31, 3, replicated(3, "t", 1), func(cfg *Config) {
		cfg.LogTailCacheBytesMax = -1
		cfg.SegmentBytesMax = 1 << 20
	})
	var jobs time.Duration
	c.hold = func(id NodeID, j SyncJob) bool {
		start := time.Now()
		err := j.Run()
		jobs += time.Since(start)
		c.cores[id].SyncDone(j.Token, err)
		return true
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	lead := c.leader(tp)
	batch := testBatch(b, "cold", 1000)
	var offsets []int64
	for range 200 {
		res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: batch})
		if res.Err != nil {
			b.Fatalf("produce: %v", res.Err)
		}
		offsets = append(offsets, res.BaseOffset)
	}
	b.SetBytes(256 << 10)
	b.ResetTimer()
	jobs = 0
	start := time.Now()
	for i := range b.N {
		res := c.fetch(lead, FetchRequest{TopicPartition: tp, Offset: offsets[(i*13)%len(offsets)], MaxBytes: 256 << 10})
		if res.Err != nil || len(res.Batches) == 0 {
			b.Fatalf("fetch: %d batches, %v", len(res.Batches), res.Err)
		}
	}
	total := time.Since(start)
	b.ReportMetric(float64((total-jobs).Microseconds())/float64(b.N), "loop-µs/op")
	b.ReportMetric(float64(jobs.Microseconds())/float64(b.N), "jobs-µs/op")
}
