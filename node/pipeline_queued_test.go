package node

import "testing"

// A follower's acknowledgement of an entry its leader sent but still
// queues behind its own sync in flight counts: the leader's progress for
// the follower reaches that entry. Before, the sanity check compared the
// acknowledged index with the leader's written log and dropped it, so the
// follower looked behind until a later write, and a leader whose fsync
// hangs could never hand its leadership on (the transfer waits for a
// follower matching raft's last index).
func TestAckOfQueuedEntryCounts(t *testing.T) {
	c, lead := pipelineLeader(t, 25, nil)
	core := c.cores[lead]
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "a", 1)},
		func(ProduceResult) {})
	if err := core.Process(); err != nil {
		t.Fatal(err)
	}
	if jobs := core.TakeSyncJobs(nil); len(jobs) != 1 {
		t.Fatalf("sync jobs: %d, want 1", len(jobs)) // held: never run
	}
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "b", 1)},
		func(ProduceResult) {})
	c.settle()
	g := core.byTP[tp0]
	want, err := g.lastQueuedIndex()
	if err != nil {
		t.Fatal(err)
	}
	if written, _ := g.log.LastIndex(); written >= want {
		t.Fatalf("the second write is not queued: log ends at %d, queue at %d", written, want)
	}
	for id, pr := range g.raw.Status().Progress {
		if NodeID(id) != lead && pr.Match != want {
			t.Fatalf("follower %d: match %d, want %d (its acknowledgement of the queued entry was dropped)", id, pr.Match, want)
		}
	}
}
