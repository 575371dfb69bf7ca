package node

import (
	"testing"

	"github.com/strandlog/strand/raftlog"
)

// loopSpy counts the fsyncs (file syncs and directory syncs) a disk sees
// while the test runs a Core call (inLoop), apart from the storage jobs it
// runs itself.
type loopSpy struct {
	inLoop               bool
	loopSyncs, jobSyncs  int
	segmentsCreated      int
	lastLoopSync, loopOp string
}

func (s *loopSpy) synced(name string) {
	if s.inLoop {
		s.loopSyncs++
		s.lastLoopSync = name + " during " + s.loopOp
		return
	}
	s.jobSyncs++
}

type spyDisk struct {
	raftlog.Disk
	spy *loopSpy
}

func (d spyDisk) Open(name string) (raftlog.File, error) {
	f, err := d.Disk.Open(name)
	if err != nil {
		return nil, err
	}
	if size, _ := f.Size(); size == 0 && len(name) > 4 && name[len(name)-4:] == ".log" {
		d.spy.segmentsCreated++
	}
	return spyFile{File: f, spy: d.spy, name: name}, nil
}

func (d spyDisk) SyncDir(dir string) error { d.spy.synced(dir + "/"); return d.Disk.SyncDir(dir) }

type spyFile struct {
	raftlog.File
	spy  *loopSpy
	name string
}

func (f spyFile) Sync() error { f.spy.synced(f.name); return f.File.Sync() }

// On the pipelined path production runs, the loop makes no fsync while a
// partition takes produces, its segments roll, its replicas checkpoint and
// retention compacts them: every log sync, roll sync, checkpoint write and
// compaction snapshot is a storage job. Before, a checkpoint's 4–6 fsyncs,
// a roll's fsync and a compaction's 2–3 ran inside Process.
func TestLoopMakesNoFsyncWhileSegmentsRollAndCheckpoint(t *testing.T) {
	spy := &loopSpy{}
	c := newMetaCluster(t, 61, 3, func(cfg *Config) {
		cfg.Disk = spyDisk{Disk: cfg.Disk, spy: spy}
		cfg.WAL = false // with the write-ahead log a roll and a compaction still fsync inline
		cfg.CheckpointEntries = 16
		cfg.RetentionCheckTicks = 5
	})
	c.createTopicWith(c.metaLeaderOf(), "r", 1, 3, map[string]string{
		"segment.bytes": "4096", "retention.bytes": "8192", "retention.ms": "-1",
	})
	tp := TopicPartition{Topic: "r"}
	lead := c.leader(tp)
	c.settle()
	loop := func(op string, f func()) {
		spy.inLoop, spy.loopOp = true, op
		f()
		spy.inLoop = false
	}
	run := func() {
		for range 500 {
			moved := false
			for _, id := range c.ids {
				core := c.cores[id]
				loop("Process", func() {
					if err := core.Process(); err != nil {
						t.Fatalf("node %d: process: %v", id, err)
					}
				})
				for _, j := range core.TakeSyncJobs(nil) {
					err := j.Run()
					loop("SyncDone", func() { core.SyncDone(j.Token, err) })
					moved = true
				}
			}
			queue := c.queue
			c.queue = nil
			for _, e := range queue {
				loop("Receive", func() { c.cores[e.to].Receive(e.frame) })
			}
			if !moved && len(queue) == 0 {
				return
			}
		}
		t.Fatal("cluster did not settle")
	}
	run()
	before := spy.segmentsCreated
	var checkpoints, compactions uint64
	for _, id := range c.ids {
		checkpoints -= c.cores[id].Stats().Checkpoints
		compactions -= c.cores[id].Stats().Compactions
	}
	acked := 0
	for i := range 120 {
		loop("Produce", func() {
			c.cores[lead].produceNow(ProduceRequest{TopicPartition: tp, Acks: AcksAll, ProducerID: -1,
				Batch: testBatch(t, "roll", 4)}, func(r ProduceResult) {
				if r.Err == nil {
					acked++
				}
			})
		})
		run()
		if i%2 == 0 {
			for _, id := range c.ids {
				loop("Tick", c.cores[id].Tick)
			}
			run()
		}
	}
	for _, id := range c.ids {
		checkpoints += c.cores[id].Stats().Checkpoints
		compactions += c.cores[id].Stats().Compactions
	}
	if acked != 120 {
		t.Fatalf("%d of 120 produces acknowledged", acked)
	}
	if rolls := spy.segmentsCreated - before; rolls < 6 || checkpoints < 6 || compactions < 3 {
		t.Fatalf("%d segments created, %d checkpoints, %d compactions: the run must roll, checkpoint and compact",
			rolls, checkpoints, compactions)
	}
	if spy.loopSyncs != 0 {
		t.Fatalf("%d fsyncs on the loop (last: %s), %d in storage jobs; want none on the loop", spy.loopSyncs, spy.lastLoopSync, spy.jobSyncs)
	}
	t.Logf("%d segments created, %d checkpoints, %d compactions, %d fsyncs, all in storage jobs",
		spy.segmentsCreated-before, checkpoints, compactions, spy.jobSyncs)
}
