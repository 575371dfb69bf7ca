package node

import "testing"

// BenchmarkProduceAcksAll measures the core's cost per acks=all produce of
// a 16 KiB batch through three in-memory nodes (memdisk, in-test network):
// CPU of raft, framing, the Ready cycle and the engine, not disk speed.
func BenchmarkProduceAcksAll(b *testing.B) {
	// Small segments: memdisk copies a whole file per Sync.
	c := newCluster(b, 1, 3, replicated(3, "bench", 1), func(cfg *Config) { cfg.SegmentBytesMax = 1 << 20 })
	tp := TopicPartition{Topic: "bench"}
	lead := c.leader(tp)
	batch := oversizedBatch(16<<10 - 64) // one record of ~16 KiB
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for range b.N {
		if res := c.produce(lead, ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1, Batch: batch}); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}
