package node

import (
	"fmt"
	"testing"
)

// Replicas at the same applied index report the same engine digest, for
// partitions and the metadata group, and a partition's digest moves with
// every applied batch: what the simulator compares at every index. The
// logs run without their tail cache (LogTailCacheBytesMax < 0), so every
// entry raft reads back comes from the disk.
func TestStatusDigestAgreesAcrossReplicas(t *testing.T) {
	c := newCluster(t, 1, 3, replicated(3, "orders", 1), func(cfg *Config) { cfg.LogTailCacheBytesMax = -1 })
	lead := c.leader(tp0)
	seen := map[uint64]bool{}
	for i := range 10 {
		res := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1,
			Batch: testBatch(t, fmt.Sprintf("b%d", i), 2)})
		if res.Err != nil {
			t.Fatalf("produce %d: %+v", i, res)
		}
		st := c.partitionStatus(lead)
		if seen[st.Digest] {
			t.Fatalf("produce %d: digest %016x repeats an earlier state's", i, st.Digest)
		}
		seen[st.Digest] = true
	}
	c.settle()
	want := c.partitionStatus(lead)
	wantMeta, _ := c.cores[lead].MetadataStatus()
	if wantMeta.Digest != c.cores[lead].meta.meta.Digest() {
		t.Fatalf("metadata digest %016x, the state's is %016x", wantMeta.Digest, c.cores[lead].meta.meta.Digest())
	}
	compared := 0
	for _, id := range c.ids {
		st := c.partitionStatus(id)
		if st.AppliedIndex == want.AppliedIndex {
			compared++
		}
		if st.AppliedIndex == want.AppliedIndex && st.Digest != want.Digest {
			t.Errorf("node %d at index %d: digest %016x, the leader's %016x", id, st.AppliedIndex, st.Digest, want.Digest)
		}
		if st, _ := c.cores[id].MetadataStatus(); st.AppliedIndex == wantMeta.AppliedIndex && st.Digest != wantMeta.Digest {
			t.Errorf("node %d metadata at index %d: digest %016x, the leader's %016x", id, st.AppliedIndex, st.Digest,
				wantMeta.Digest)
		}
	}
	if compared != len(c.ids) {
		t.Fatalf("%d of %d replicas reached the leader's applied index %d", compared, len(c.ids), want.AppliedIndex)
	}
}

// partitionStatus is node id's status of tp0.
func (c *cluster) partitionStatus(id NodeID) GroupStatus {
	for _, st := range c.cores[id].Status() {
		if st.TopicPartition == tp0 {
			return st
		}
	}
	c.t.Fatalf("node %d does not host %v", id, tp0)
	return GroupStatus{}
}
