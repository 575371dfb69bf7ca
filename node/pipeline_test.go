package node

import (
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// pipelineLeader returns a cluster whose partition leader runs the
// pipelined storage path: its syncs wait for the test.
func pipelineLeader(t *testing.T, seed uint64, bug func(*Config)) (*cluster, NodeID) {
	c := newCluster(t, seed, 3, replicated(3, "orders", 1), bug)
	lead := c.leader(tp0)
	c.settle()
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
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "a", 1)},
		func(r ProduceResult) { one = &r })
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1, Batch: testBatch(t, "b", 1)},
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
	core.produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, ProducerID: -1, Batch: testBatch(t, "a", 1)},
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

// votesIn returns the MsgVotes of node from in the frames queued so far.
func votesIn(t *testing.T, c *cluster, from NodeID) int {
	n := 0
	for _, e := range c.queue {
		if e.from != from {
			continue
		}
		_, msgs, ok := parseRaftFrame(e.frame, nil, nil)
		if !ok {
			t.Fatal("unparsable frame")
		}
		for _, rm := range msgs {
			var m raftpb.Message
			if err := proto.Unmarshal(rm.message, &m); err != nil {
				t.Fatal(err)
			}
			if m.GetType() == raftpb.MessageType_MsgVote {
				n++
			}
		}
	}
	return n
}

// A candidate's MsgVote carries a term its log has written but not synced
// yet: it must wait for that sync (the durability audit checks every
// message's term). With the pipeline raft hands it out at once; the core
// holds it behind the append that writes the term.
func TestPipelineHoldsVoteUntilTermIsDurable(t *testing.T) {
	c := newCluster(t, 24, 3, replicated(3, "orders", 1), nil)
	old := c.leader(tp0)
	c.settle()
	c.drop = func(e envelope) bool { return e.from == old || e.to == old }
	for range 500 {
		for _, id := range c.ids {
			core := c.cores[id]
			if id == old {
				continue
			}
			core.Tick()
			if err := core.Process(); err != nil {
				t.Fatal(err)
			}
			jobs := core.TakeSyncJobs(nil)
			candidate := core.byTP[tp0].raw.BasicStatus().RaftState == raft.StateCandidate
			if candidate && len(jobs) > 0 {
				if n := votesIn(t, c, id); n != 0 {
					t.Fatalf("node %d sent %d MsgVotes before its term was durable", id, n)
				}
				for _, j := range jobs {
					core.SyncDone(j.Token, j.Run())
				}
				if votesIn(t, c, id) == 0 {
					t.Fatalf("node %d sent no MsgVote once its term was durable", id)
				}
				return
			}
			for _, j := range jobs {
				core.SyncDone(j.Token, j.Run())
			}
		}
		queue := c.queue
		c.queue = nil
		for _, e := range queue {
			if core := c.cores[e.to]; core != nil && !c.drop(e) {
				core.Receive(e.frame)
			}
		}
	}
	t.Fatal("no follower became a candidate")
}
