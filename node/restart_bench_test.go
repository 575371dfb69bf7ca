package node

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/osdisk"
)

// restartBatches are the partition sizes BenchmarkRestart builds; -short
// keeps the first only.
var restartBatches = flag.String("restart.batches", "1000000,10000000", "comma-separated partition sizes (batches) of BenchmarkRestart")

// restartRounds is how many steady-state checkpoints BenchmarkRestart times
// at each size, each after checkpointEntriesDefault more applied entries.
const restartRounds = 8

// restartTail is how many committed entries follow the last checkpoint, so
// a restart replays a tail as it would after a crash.
const restartTail = 512

// BenchmarkRestart builds one partition replica of n one-record batches on
// a real disk (a temporary directory) and measures (a) the checkpoints the
// node writes while applying: the first one at n batches, then the steady
// state (one every 1,024 entries; the worst single stall and the cost per
// applied entry), and (b) a restart: Open until the replica has applied
// every committed entry (raft log recovery, checkpoint load, tail replay).
// b.N counts restarts; the build and the checkpoints run once per size.
func BenchmarkRestart(b *testing.B) {
	var sizes []int
	for _, f := range strings.Split(*restartBatches, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
			b.Fatalf("bad -restart.batches element %q", f)
		}
		sizes = append(sizes, n)
	}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("batches=%d", n), func(b *testing.B) { benchRestart(b, n) })
	}
}

// benchRestart is BenchmarkRestart at one size.
func benchRestart(b *testing.B, n int) {
	disk, err := osdisk.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tp := TopicPartition{Topic: "bench"}
	dir := benchReplica(b, disk, tp)
	steady := restartRounds * int(checkpointEntriesDefault)
	last := writeSyntheticLog(b, disk, dir+"/log", n+steady+restartTail)
	cfg := Config{ID: 1, Nodes: []Peer{{ID: 1, Address: addressOf(1)}}, Disk: disk, Network: sender{}, Clock: testClock{}}
	if err := cfg.setDefaults(); err != nil {
		b.Fatal(err)
	}
	first, worst, total := benchCheckpoints(b, cfg, tp, dir, n)

	// (b) Restart: Open, then Process until every committed entry applied.
	b.ResetTimer()
	for range b.N {
		core, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; core.byTP[tp] == nil || core.byTP[tp].appliedRaft < last; i++ {
			if i == 1_000_000 {
				b.Fatalf("restart stuck before applying %d", last)
			}
			if err := processAndRunJobs(core); err != nil {
				b.Fatal(err)
			}
		}
		if err := core.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	logOpen, ckptLoad := benchRestartParts(b, disk, dir, last)
	// After the loop: ResetTimer drops metrics reported before it.
	b.ReportMetric(float64(logOpen.Microseconds())/1000, "log-open-ms")
	b.ReportMetric(float64(ckptLoad.Microseconds())/1000, "ckpt-load-ms")
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ckpt-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ckpt-ms")
	b.ReportMetric(float64(total.Nanoseconds())/float64(steady), "ckpt-ns/entry")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "restart-ms")
}

// benchReplica creates topic tp.Topic (one partition) on a one-node
// cluster over disk, through the metadata group as production does, and
// empties the replica's directory for the synthetic log; it returns that
// directory. A restart then finds the topic in the metadata log and opens
// the replica over the synthetic log.
func benchReplica(b *testing.B, disk raftlog.Disk, tp TopicPartition) string {
	c := newCluster(b, 1, 1, replicated(1, tp.Topic, 1), func(cfg *Config) { cfg.Disk = disk })
	dir := c.replicaDir(1, tp)
	c.settle()
	if err := c.cores[1].Close(); err != nil {
		b.Fatal(err)
	}
	for _, sub := range []string{"/log", "/checkpoint"} {
		names, err := disk.List(dir + sub)
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range names {
			if err := disk.Remove(dir + sub + "/" + name); err != nil {
				b.Fatal(err)
			}
		}
	}
	return dir
}

// benchCheckpoints is part (a): it applies the log straight to the engine
// (no raft) up to n batches, times the checkpoint there, then restartRounds
// checkpoints each after checkpointEntriesDefault more entries, as
// applyReady paces them. It returns the first, the worst of the rounds and
// their total.
func benchCheckpoints(b *testing.B, cfg Config, tp TopicPartition, dir string, n int) (first, worst, total time.Duration) {
	c := &Core{cfg: cfg}
	g := newGroup(tp, []NodeID{1}, dir)
	var err error
	g.log, err = raftlog.Open(cfg.Disk, g.dir+"/log", raftlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.log.Close()
	g.part = engine.NewPartition()
	g.confState = &raftpb.ConfState{Voters: []uint64{1}}
	g.part.ApplyEmpty(1) // the conf change
	g.appliedRaft = 1
	applyUpTo := func(index uint64) {
		for g.appliedRaft < index {
			ents, err := g.log.Entries(g.appliedRaft+1, index+1, 64<<20)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range ents {
				if r := g.part.Apply(e.GetIndex(), e.GetData()); r.Err != nil {
					b.Fatal(r.Err)
				}
				g.appliedRaft = e.GetIndex()
			}
		}
	}
	checkpoint := func() time.Duration {
		start := time.Now()
		if err := c.writeCheckpoint(g); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	applyUpTo(uint64(n) + 1)
	first = checkpoint()
	for range restartRounds {
		applyUpTo(g.appliedRaft + checkpointEntriesDefault)
		d := checkpoint()
		worst, total = max(worst, d), total+d
	}
	return first, worst, total
}

// benchRestartParts times, once each, the parts of a restart: the raft
// log's recovery and the checkpoint's load.
func benchRestartParts(b *testing.B, disk raftlog.Disk, dir string, last uint64) (logOpen, ckptLoad time.Duration) {
	start := time.Now()
	log, err := raftlog.Open(disk, dir+"/log", raftlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	logOpen = time.Since(start)
	if err := log.Close(); err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	if ck, err := loadCheckpoint(disk, dir+"/checkpoint", last, false); err != nil || ck == nil {
		b.Fatalf("no checkpoint loaded: %v", err)
	}
	return logOpen, time.Since(start)
}

// writeSyntheticLog writes a committed raft log of entries: a conf change
// adding node 1 at index 1 (as raft's Bootstrap does), then produce entries
// of one small batch each, all in term 1. It returns the last index.
func writeSyntheticLog(b *testing.B, disk raftlog.Disk, dir string, entries int) uint64 {
	log, err := raftlog.Open(disk, dir, raftlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(1)})
	if err != nil {
		b.Fatal(err)
	}
	data := engine.EncodeProduceEntry(nil, 1_700_000_000_000, 0, engine.NoProducer, testBatch(b, "r", 1))
	chunk := []*raftpb.Entry{{Type: raftpb.EntryConfChange.Enum(), Term: proto.Uint64(1), Index: proto.Uint64(1), Data: cc}}
	index := uint64(1)
	for index < uint64(entries)+1 {
		for len(chunk) < 4096 && index < uint64(entries)+1 {
			index++
			chunk = append(chunk, &raftpb.Entry{Type: raftpb.EntryNormal.Enum(), Term: proto.Uint64(1), Index: proto.Uint64(index), Data: data})
		}
		if err := log.Append(chunk); err != nil {
			b.Fatal(err)
		}
		chunk = slices.Delete(chunk, 0, len(chunk))
	}
	if err := log.SetHardState(&raftpb.HardState{Term: proto.Uint64(1), Vote: proto.Uint64(1), Commit: proto.Uint64(index)}); err != nil {
		b.Fatal(err)
	}
	if err := log.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := log.Close(); err != nil {
		b.Fatal(err)
	}
	return index
}

// processAndRunJobs is one Process followed by the storage jobs it started,
// run in order on this goroutine as the server's pool would run them.
func processAndRunJobs(core *Core) error {
	if err := core.Process(); err != nil {
		return err
	}
	for _, j := range core.TakeSyncJobs(nil) {
		core.SyncDone(j.Token, j.Run())
	}
	return nil
}
