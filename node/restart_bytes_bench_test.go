package node

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/engine"
	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/raftlog"
	"github.com/strandlog/strand/raftlog/osdisk"
)

var (
	restartBytes      = flag.String("restart.bytes", "1GiB,10GiB", "comma-separated data sizes per node of BenchmarkRestartBytes (suffix MiB or GiB)")
	restartBatchBytes = flag.Int("restart.batch-bytes", 16<<10, "bytes of each synthetic batch of BenchmarkRestartBytes (Kafka's batch.size default: 16 KiB)")
	restartAlternate  = flag.Int("restart.rounds", 5, "alternated restart rounds of BenchmarkRestartBytes")
)

// restartSpareBytes is the free space BenchmarkRestartBytes leaves on the
// disk besides its data.
const restartSpareBytes = 2 << 30

// BenchmarkRestartBytes builds, on real files in temporary directories,
// one-node replicas holding about each -restart.bytes of one partition's
// data (batches of -restart.batch-bytes, an engine checkpoint, then a
// tail of restartTail committed entries after it, as a crash leaves), then
// restarts them in alternation -restart.rounds times: Open until the
// replica applied every committed entry. It reports each size's fastest
// and slowest restart, the raft log's Open and the checkpoint's load, and
// the ratio of the largest size's restart to the smallest's (issue 9:
// under 2), in wall time and in the process's CPU time (steadier on a
// shared machine; the garbage collector's background work counts too). Sizes that do not fit the disk are scaled down, with a note.
// Run it with -benchtime 1x (make bench-restart): it does its own rounds.
func BenchmarkRestartBytes(b *testing.B) {
	sizes := parseByteSizes(b, *restartBytes)
	root := b.TempDir()
	sizes = fitDisk(b, root, sizes)
	batch := syntheticBatch(b, *restartBatchBytes)
	type replica struct {
		label    string
		cfg      Config
		tp       TopicPartition
		dir      string
		last     uint64
		restarts []time.Duration
		cpu      []time.Duration // the process's user+system time of each restart
	}
	var replicas []*replica
	for k, size := range sizes {
		disk, err := osdisk.New(fmt.Sprintf("%s/%d", root, k))
		if err != nil {
			b.Fatal(err)
		}
		r := &replica{label: byteLabel(size), tp: TopicPartition{Topic: "bench"}}
		r.dir = benchReplica(b, disk, r.tp)
		r.cfg = Config{ID: 1, Nodes: []Peer{{ID: 1, Address: addressOf(1)}}, Disk: disk, Network: sender{}, Clock: testClock{}}
		if err := r.cfg.setDefaults(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		r.last = buildBytesReplica(b, r.cfg, r.tp, r.dir, size, batch)
		b.Logf("built %s: %d entries of %d bytes in %v", r.label, r.last, len(batch), time.Since(start).Round(time.Millisecond))
		replicas = append(replicas, r)
	}
	b.ResetTimer()
	for range b.N {
		for range *restartAlternate {
			for _, r := range replicas {
				wall, cpu := timeRestart(b, r.cfg, r.tp, r.last)
				r.restarts, r.cpu = append(r.restarts, wall), append(r.cpu, cpu)
			}
		}
	}
	b.StopTimer()
	for _, r := range replicas {
		logOpen, ckptLoad := benchRestartParts(b, r.cfg.Disk, r.dir, r.last)
		lo, hi := slices.Min(r.restarts), slices.Max(r.restarts)
		b.Logf("%s: restart %v–%v (median %v) over %d alternated rounds (log open %v, checkpoint load %v)",
			r.label, lo.Round(time.Millisecond), hi.Round(time.Millisecond), medianOf(r.restarts).Round(time.Millisecond), len(r.restarts),
			logOpen.Round(time.Millisecond), ckptLoad.Round(time.Millisecond))
		b.Logf("%s: restart CPU %v–%v (median %v)", r.label, slices.Min(r.cpu).Round(time.Millisecond),
			slices.Max(r.cpu).Round(time.Millisecond), medianOf(r.cpu).Round(time.Millisecond))
		b.ReportMetric(float64(lo.Microseconds())/1000, r.label+"-restart-ms-min")
		b.ReportMetric(float64(medianOf(r.restarts).Microseconds())/1000, r.label+"-restart-ms-median")
		b.ReportMetric(float64(hi.Microseconds())/1000, r.label+"-restart-ms-max")
	}
	if n := len(replicas); n > 1 {
		small, large := replicas[0].restarts, replicas[n-1].restarts
		median := float64(medianOf(large)) / float64(medianOf(small))
		worst := float64(slices.Max(large)) / float64(slices.Min(small))
		b.Logf("restart ratio %s/%s: %.2f median over median, %.2f slowest large over fastest small",
			replicas[n-1].label, replicas[0].label, median, worst)
		cpu := float64(medianOf(replicas[n-1].cpu)) / float64(medianOf(replicas[0].cpu))
		b.Logf("restart CPU ratio %s/%s: %.2f median over median (less sensitive to a loaded machine than wall time)",
			replicas[n-1].label, replicas[0].label, cpu)
		b.ReportMetric(cpu, "ratio-cpu-median")
		b.ReportMetric(median, "ratio-median")
		b.ReportMetric(worst, "ratio-worst")
	}
}

// timeRestart opens a Core over cfg and processes until tp applied last;
// it returns the wall time and the process's CPU time (user + system).
func timeRestart(b *testing.B, cfg Config, tp TopicPartition, last uint64) (wall, cpu time.Duration) {
	cpuStart := processCPU(b)
	start := time.Now()
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
	wall, cpu = time.Since(start), processCPU(b)-cpuStart
	if err := core.Close(); err != nil {
		b.Fatal(err)
	}
	return wall, cpu
}

// processCPU is the process's user plus system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// buildBytesReplica writes tp's raft log in dir straight through raftlog
// (no raft, no cluster): a conf change, then produce entries of batch up to
// about total bytes, applied to an engine as they are written; a
// checkpoint restartTail entries before the end; everything committed.
// It returns the last index.
func buildBytesReplica(b *testing.B, cfg Config, tp TopicPartition, dir string, total int64, batch []byte) uint64 {
	c := &Core{cfg: cfg}
	g := newGroup(tp, []NodeID{1}, dir)
	log, err := raftlog.Open(cfg.Disk, dir+"/log", raftlog.Options{TailCacheBytesMax: -1})
	if err != nil {
		b.Fatal(err)
	}
	g.log = log
	defer log.Close()
	g.part = engine.NewPartition()
	g.confState = &raftpb.ConfState{Voters: []uint64{1}}
	cc, err := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(1)})
	if err != nil {
		b.Fatal(err)
	}
	data := engine.EncodeProduceEntry(nil, 1_700_000_000_000, 0, engine.NoProducer, batch)
	entries := max(uint64(total/int64(len(data))), restartTail+2)
	last := entries + 1
	chunk := []*raftpb.Entry{{Type: raftpb.EntryConfChange.Enum(), Term: proto.Uint64(1), Index: proto.Uint64(1), Data: cc}}
	g.part.ApplyEmpty(1)
	g.appliedRaft = 1
	for index := uint64(2); index <= last; {
		for len(chunk) < 256 && index <= last {
			chunk = append(chunk, &raftpb.Entry{Type: raftpb.EntryNormal.Enum(), Term: proto.Uint64(1), Index: proto.Uint64(index), Data: data})
			index++
		}
		if err := log.Append(chunk); err != nil {
			b.Fatal(err)
		}
		for _, e := range chunk {
			if e.GetIndex() > last-restartTail || e.GetType() != raftpb.EntryNormal {
				continue
			}
			if r := g.part.Apply(e.GetIndex(), e.GetData()); r.Err != nil {
				b.Fatal(r.Err)
			}
			g.appliedRaft = e.GetIndex()
		}
		chunk = slices.Delete(chunk, 0, len(chunk))
	}
	if err := log.SetHardState(&raftpb.HardState{Term: proto.Uint64(1), Vote: proto.Uint64(1), Commit: proto.Uint64(last)}); err != nil {
		b.Fatal(err)
	}
	if err := c.writeCheckpoint(g); err != nil {
		b.Fatal(err)
	}
	return last
}

// syntheticBatch is a record batch of about n bytes: 1 KiB records.
func syntheticBatch(b *testing.B, n int) []byte {
	value := []byte(strings.Repeat("v", 1000))
	var records []recordbatch.Record
	for size := 24; size < n || len(records) == 0; size += len(value) + 16 {
		records = append(records, recordbatch.Record{TimestampMs: 1_700_000_000_000, Key: []byte("key"), Value: value})
	}
	batch, err := recordbatch.Encode(nil, records)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

// parseByteSizes parses "1GiB,10GiB"-style sizes.
func parseByteSizes(b *testing.B, s string) []int64 {
	var sizes []int64
	for _, f := range strings.Split(s, ",") {
		var n int64
		var unit string
		if _, err := fmt.Sscanf(f, "%d%s", &n, &unit); err != nil || n <= 0 {
			b.Fatalf("bad -restart.bytes element %q", f)
		}
		switch unit {
		case "MiB":
			n <<= 20
		case "GiB":
			n <<= 30
		default:
			b.Fatalf("bad unit in -restart.bytes element %q (MiB or GiB)", f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// fitDisk scales sizes down (keeping their ratios) when the disk holding
// dir cannot take them all plus restartSpareBytes, and says so.
func fitDisk(b *testing.B, dir string, sizes []int64) []int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		b.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	var need int64
	for _, s := range sizes {
		need += s + s/20 // checkpoint index and framing
	}
	if need+restartSpareBytes <= free {
		return sizes
	}
	scaled := slices.Clone(sizes)
	for k := range scaled {
		scaled[k] = max(64<<20, int64(float64(sizes[k])*float64(free-restartSpareBytes)/float64(need)))
	}
	msg := fmt.Sprintf("NOTE: %s free on the disk holding %s cannot take %s; sizes scaled down to", byteLabel(free), dir, byteLabel(need))
	for _, s := range scaled {
		msg += " " + byteLabel(s)
	}
	fmt.Println(msg)
	b.Log(msg)
	return scaled
}

// byteLabel prints n in MiB or GiB.
func byteLabel(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%dGiB", n>>30)
	}
	if n >= 1<<30 {
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%dMiB", n>>20)
}

// medianOf returns the median of ds.
func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
