package node

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// ckWorld runs a 3-node cluster of one partition (tp0) on the pipelined
// storage path, as production runs it: every storage job is run by the
// test and reported with SyncDone, except the checkpoint write jobs of
// node hold, which wait in held.
type ckWorld struct {
	t    *testing.T
	c    *cluster
	hold NodeID
	held []SyncJob
}

// newCkWorld starts the cluster with checkpoints every 8 entries and holds
// the checkpoint writes of a follower of tp0.
func newCkWorld(t *testing.T, seed uint64, logs *bytes.Buffer) *ckWorld {
	c := newCluster(t, seed, 3, replicated(3, "orders", 1), func(cfg *Config) {
		cfg.CheckpointEntries = 8
		if logs != nil {
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		}
	})
	lead := c.leader(tp0)
	c.settle()
	w := &ckWorld{t: t, c: c}
	for _, id := range c.ids {
		if id != lead {
			w.hold = id
			break
		}
	}
	return w
}

// isCheckpointWrite reports whether job of core is a checkpoint's write.
func isCheckpointWrite(core *Core, job SyncJob) bool {
	j := core.syncsInFlight[job.Token]
	return j.ckWrite != nil && !j.ckTrim
}

// run processes every live node, runs the jobs it does not hold, and
// delivers frames, until nothing moves (bounded).
func (w *ckWorld) run() {
	w.t.Helper()
	c := w.c
	for range 500 {
		moved := false
		for _, id := range c.ids {
			core := c.cores[id]
			if core == nil {
				continue
			}
			if err := core.Process(); err != nil {
				w.t.Fatalf("node %d: process: %v", id, err)
			}
			for _, j := range core.TakeSyncJobs(nil) {
				if id == w.hold && isCheckpointWrite(core, j) {
					w.held = append(w.held, j)
					continue
				}
				core.SyncDone(j.Token, j.Run())
				moved = true
			}
		}
		queue := c.queue
		c.queue = nil
		for _, e := range queue {
			if core := c.cores[e.to]; core != nil {
				core.Receive(e.frame)
			}
		}
		if !moved && len(queue) == 0 {
			return
		}
	}
	w.t.Fatal("checkpoint world did not settle")
}

// restart reopens the held node after a crash, on the pipelined path.
func (w *ckWorld) restart() {
	w.c.start(w.hold)
	w.run()
}

// produceUntilHeld produces one batch at a time at tp0's leader until the
// held node has a checkpoint write waiting; it returns that job.
func (w *ckWorld) produceUntilHeld() SyncJob {
	w.t.Helper()
	for i := 0; i < 100 && len(w.held) == 0; i++ {
		lead := w.c.leader(tp0)
		w.c.cores[lead].produceNow(ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1,
			Batch: testBatch(w.t, "ck", 1)}, func(ProduceResult) {})
		w.run()
		for _, id := range w.c.ids {
			w.c.cores[id].Tick()
		}
		w.run()
	}
	if len(w.held) != 1 {
		w.t.Fatalf("node %d holds %d checkpoint writes, want 1", w.hold, len(w.held))
	}
	job := w.held[0]
	w.held = nil
	return job
}

// newestCheckpoint is the raft index of the checkpoint a restart of the
// replica in dir would restore now (0: none), and the headers on disk.
func newestCheckpoint(t *testing.T, c *cluster, id NodeID, dir string) (uint64, []string) {
	t.Helper()
	ck, err := loadCheckpoint(c.disks[id], dir+"/checkpoint", math.MaxUint64, false)
	if err != nil {
		t.Fatal(err)
	}
	names, err := c.disks[id].List(dir + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if ck == nil {
		return 0, names
	}
	return ck.raftIndex, names
}

// A checkpoint counts only once its write job completed: while the job
// waits the replica's checkpoint index stays put, and a power loss then
// recovers from the previous checkpoint, intact. A power loss after the
// job ran but before the loop heard of it finds the new header durable and
// the previous one still there (the trim waits for the completion). After
// the completion and the trim only the new header is left. Before, the
// checkpoint was written and synced inside Process, on the loop.
func TestCheckpointCountsOnlyOnCompletion(t *testing.T) {
	w := newCkWorld(t, 51, nil)
	f, c := w.hold, w.c
	dir := c.replicaDir(f, tp0)
	first := w.produceUntilHeld() // completes: the previous checkpoint below
	c.cores[f].SyncDone(first.Token, first.Run())
	w.run()
	job := w.produceUntilHeld()
	g := c.cores[f].byTP[tp0]
	prev, pending := g.checkpointIndex, c.cores[f].syncsInFlight[job.Token].ckWrite.raftIndex
	if pending <= prev || prev == 0 {
		t.Fatalf("checkpoint at %d waits, previous at %d: want a previous one below it", pending, prev)
	}
	c.crash(f) // the job never ran
	if got, names := newestCheckpoint(t, c, f, dir); got != prev {
		t.Fatalf("power loss before the write job: restart restores checkpoint %d (headers %v), want the previous %d", got, names, prev)
	}
	w.restart()
	job = w.produceUntilHeld()
	prev = c.cores[f].byTP[tp0].checkpointIndex
	pending = c.cores[f].syncsInFlight[job.Token].ckWrite.raftIndex
	if err := job.Run(); err != nil {
		t.Fatal(err)
	}
	if got := c.cores[f].byTP[tp0].checkpointIndex; got != prev {
		t.Fatalf("checkpoint index %d before the completion, want %d", got, prev)
	}
	c.crash(f) // ran, never completed
	if got, names := newestCheckpoint(t, c, f, dir); got != pending || len(names) != 2 {
		t.Fatalf("power loss after the write job: restores %d with headers %v, want %d beside the previous", got, names, pending)
	}
	w.restart()
	job = w.produceUntilHeld()
	pending = c.cores[f].syncsInFlight[job.Token].ckWrite.raftIndex
	c.cores[f].SyncDone(job.Token, job.Run())
	w.run() // the trim
	if got := c.cores[f].byTP[tp0].checkpointIndex; got != pending {
		t.Fatalf("checkpoint index %d after the completion, want %d", got, pending)
	}
	if got, names := newestCheckpoint(t, c, f, dir); got != pending || len(names) != 1 {
		t.Fatalf("after the completion and the trim: restores %d with headers %v, want only %d", got, names, pending)
	}
	w.sameState()
}

// sameState requires every replica of tp0 at the same applied index with
// the same engine digest.
func (w *ckWorld) sameState() {
	w.t.Helper()
	var want *GroupStatus
	for _, id := range w.c.ids {
		for _, st := range w.c.cores[id].Status() {
			if st.TopicPartition != tp0 {
				continue
			}
			if want == nil {
				want = &st
			} else if st.AppliedIndex != want.AppliedIndex || st.Digest != want.Digest {
				w.t.Fatalf("node %d at %d digest %x, another at %d digest %x", id, st.AppliedIndex, st.Digest, want.AppliedIndex, want.Digest)
			}
		}
	}
}

// A checkpoint write that hangs (a gray-failing disk under the checkpoint
// directory) is a storage job like a log's sync: the watchdog logs it as
// slow naming the checkpoint directory, the node turns stalled, and leaves
// the state once the write returns. Before, the hung write hung the loop.
func TestHungCheckpointWriteSeenByWatchdog(t *testing.T) {
	var logs bytes.Buffer
	w := newCkWorld(t, 52, &logs)
	f, c := w.hold, w.c
	dir := c.replicaDir(f, tp0)
	job := w.produceUntilHeld()
	core := c.cores[f]
	for i := 0; i < int(core.diskStallTicks())+2 && !core.diskStalled(); i++ {
		for _, id := range c.ids {
			c.cores[id].Tick()
		}
		w.run()
	}
	if !core.diskStalled() {
		t.Fatalf("node %d not stalled %d ticks into a hung checkpoint write", f, core.diskStallTicks()+2)
	}
	if _, file := core.oldestStorageJob(); file != dir+"/checkpoint" {
		t.Fatalf("oldest storage job names %q, want %q", file, dir+"/checkpoint")
	}
	out := logs.String()
	if !strings.Contains(out, "slow storage job") || !strings.Contains(out, "job=\"checkpoint write\"") ||
		!strings.Contains(out, dir+"/checkpoint") {
		t.Fatalf("no slow-job log line naming the checkpoint write and its directory:\n%s", out)
	}
	core.SyncDone(job.Token, job.Run())
	w.run()
	for range 3 {
		for _, id := range c.ids {
			c.cores[id].Tick()
		}
		w.run()
	}
	if core.diskStalled() {
		t.Fatal("node still stalled after its checkpoint write returned")
	}
}

// A replica removed while its checkpoint write waits cancels the write:
// the job then writes nothing into the removed directory (a replica placed
// there again later would restore a stale header), and its completion is
// no error. Before the guard the job wrote its header after the removal.
func TestRemovedReplicaCancelsCheckpointWrite(t *testing.T) {
	w := newCkWorld(t, 53, nil)
	f, c := w.hold, w.c
	dir := c.replicaDir(f, tp0)
	job := w.produceUntilHeld()
	resp, _ := c.handle(c.leader(tp0), &strandpb.Request{CorrelationId: 9, Body: &strandpb.Request_DeleteTopics{
		DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{tp0.Topic}}}})
	if resp.GetError() != nil {
		t.Fatalf("delete: %v", resp)
	}
	c.tick(20)
	if c.cores[f].byTP[tp0] != nil {
		t.Fatalf("node %d still hosts %v after the delete", f, tp0)
	}
	if err := job.Run(); !errors.Is(err, errJobCancelled) {
		t.Fatalf("the checkpoint write of a removed replica returned %v, want errJobCancelled", err)
	}
	c.cores[f].SyncDone(job.Token, errJobCancelled)
	if err := c.cores[f].Process(); err != nil {
		t.Fatalf("process after the cancelled write: %v", err)
	}
	if names, _ := c.disks[f].List(dir + "/checkpoint"); len(names) != 0 {
		t.Fatalf("removed replica's checkpoint directory holds %v", names)
	}
}
