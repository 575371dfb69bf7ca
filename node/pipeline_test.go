package node

import (
	"testing"
)

// pipelineLeader returns a cluster whose partition leader runs the
// pipelined storage path (Config.AsyncSyncs): its syncs wait for the test.
func pipelineLeader(t *testing.T, seed uint64, bug func(*Config)) (*cluster, NodeID) {
	c := newCluster(t, seed, 3, replicated(3, "orders", 1), bug)
	lead := c.leader(tp0)
	c.settle()
	c.cores[lead].cfg.AsyncSyncs = true
	return c, lead
}

// With the pipeline, the leader sends its appends to the followers before
// its own fsync, but answers neither acks=1 nor acks=all before that fsync
// completed, even when both followers already hold the entry durably (they
// form a majority, so the entry commits; the leader applies it only once
// its own copy is durable).
func TestPipelineAcksWaitForLeaderSync(t *testing.T) {
	c, lead := pipelineLeader(t, 21, nil)
	core := c.cores[lead]
	var one, all *ProduceResult
	core.Produce(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "a", 1)},
		func(r ProduceResult) { one = &r })
	core.Produce(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "b", 1)},
		func(r ProduceResult) { all = &r })
	if err := core.Process(); err != nil {
		t.Fatal(err)
	}
	jobs := core.TakeSyncJobs(nil)
	if len(jobs) != 1 {
		t.Fatalf("sync jobs after the write: %d, want 1", len(jobs))
	}
	if len(c.queue) == 0 {
		t.Fatal("no MsgApp sent before the leader's own fsync")
	}
	c.settle() // followers append, sync and answer; the leader's sync is still out
	if one != nil || all != nil {
		t.Fatalf("answered before the leader's fsync completed: acks=1 %+v, acks=all %+v", one, all)
	}
	if more := core.TakeSyncJobs(nil); len(more) != 0 {
		t.Fatalf("a second sync of the log started while one is in flight: %d", len(more))
	}
	core.SyncDone(jobs[0].Token, jobs[0].Run())
	if one == nil || one.Err != nil {
		t.Fatalf("acks=1 after the fsync: %+v", one)
	}
	for i := 0; all == nil && i < 10; i++ {
		c.settle()
		for _, j := range core.TakeSyncJobs(nil) {
			core.SyncDone(j.Token, j.Run())
		}
	}
	if all == nil || all.Err != nil || all.BaseOffset != 1 {
		t.Fatalf("acks=all after the fsync: %+v", all)
	}
}

// A failed fsync reported through SyncDone is fatal: the next Process
// returns it and nothing the write allowed is answered.
func TestPipelineSyncErrorIsFatal(t *testing.T) {
	c, lead := pipelineLeader(t, 22, nil)
	core := c.cores[lead]
	var one *ProduceResult
	core.Produce(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "a", 1)},
		func(r ProduceResult) { one = &r })
	if err := core.Process(); err != nil {
		t.Fatal(err)
	}
	jobs := core.TakeSyncJobs(nil)
	if len(jobs) != 1 {
		t.Fatalf("sync jobs: %d, want 1", len(jobs))
	}
	core.SyncDone(jobs[0].Token, errTestSync)
	if err := core.Process(); err == nil {
		t.Fatal("Process after a failed fsync returned nil")
	}
	if one != nil {
		t.Fatalf("acks=1 answered after a failed fsync: %+v", one)
	}
}

var errTestSync = testError("test: fsync failed")

type testError string

func (e testError) Error() string { return string(e) }
