package node

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// scenario is the state of one script of testdata/scenario: a cluster of
// in-test nodes hosting partition orders/0, and the batches produced so far
// (by tag b0, b1, ...) so fetches can say which batch they returned.
type scenario struct {
	c        *cluster
	produced [][]byte
}

// TestScenarios runs the node scenario scripts in testdata/scenario with
// cockroachdb/datadriven: produce, fetch, crash and restart stories over the
// deterministic test cluster, each opening with a # line saying what it
// shows. -rewrite regenerates the expected output; commit it only once it
// is understood. Commands:
//
//	cluster nodes=N [checkpoint-entries=K] [chunk-records=R] [seed=S]
//	produce n=N [records=R] [producer=ID seq=S]  acks=all on the leader
//	fetch                                         everything up to the hwm, from the leader
//	status                                        every live node's high-water mark
//	crash node=ID|leader|follower|all             power cut: unsynced bytes lost or torn
//	start                                         reopen every node down (restore, then replay)
//	tick n=N
//	checkpoint node=ID|leader|follower            the files of its latest checkpoint
//	damage node=ID index-record=O                 flip a bit of ordinal O's record
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "scenario"), func(t *testing.T, path string) {
		defer func(n int64) { indexChunkRecords = n }(indexChunkRecords)
		s := &scenario{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(t, d) + "\n"
		})
	})
}

// scenarioTP is the one partition of every scenario.
var scenarioTP = TopicPartition{Topic: "orders"}

// run runs one command.
func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "cluster" && s.c == nil {
		d.Fatalf(t, "%s before cluster", d.Cmd)
	}
	switch d.Cmd {
	case "cluster":
		return s.cluster(t, d)
	case "produce":
		return s.produce(t, d)
	case "fetch":
		return s.fetch(t, d)
	case "crash":
		var out []string
		for _, id := range s.nodes(t, d) {
			s.c.crash(id)
			out = append(out, fmt.Sprintf("node %d down", id))
		}
		return strings.Join(out, "\n")
	case "start":
		var out []string
		for _, id := range s.c.ids {
			if s.c.cores[id] != nil {
				continue
			}
			s.c.start(id)
			out = append(out, s.describeStart(id))
		}
		return strings.Join(out, "\n")
	case "status":
		var out []string
		for _, id := range s.c.ids {
			if core := s.c.cores[id]; core != nil {
				st := core.Status()[0]
				out = append(out, fmt.Sprintf("node %d: high-water mark %d, log start %d", id, st.HighWatermark, st.LogStartOffset))
			}
		}
		return strings.Join(out, "\n")
	case "tick":
		s.c.tick(int(s.intArg(t, d, "n", 1)))
		return "ok"
	case "checkpoint":
		return s.checkpointFiles(s.nodes(t, d)[0])
	case "damage":
		id, ordinal := s.nodes(t, d)[0], s.intArg(t, d, "index-record", 0)
		name := managedDir(scenarioTP.Topic, 1, scenarioTP.Partition) /* the cluster's first topic: id 1 */ + "/checkpoint/index/" + indexChunkName(ordinal)
		s.c.disks[id].FlipBit(name, (ordinal%indexChunkRecords)*indexRecordBytes+9, 1)
		return fmt.Sprintf("flipped a bit of index record %d on node %d", ordinal, id)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// intArg is the integer argument key, or def when absent.
func (s *scenario) intArg(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			n, err := strconv.ParseInt(a.SingleVal(t), 10, 64)
			if err != nil {
				d.Fatalf(t, "%s: %v", key, err)
			}
			return n
		}
	}
	return def
}

// nodes resolves node=ID|leader|follower|all (default leader).
func (s *scenario) nodes(t *testing.T, d *datadriven.TestData) []NodeID {
	which := "leader"
	if d.HasArg("node") {
		d.ScanArgs(t, "node", &which)
	}
	switch which {
	case "all":
		return s.c.ids
	case "leader":
		return []NodeID{s.c.leader(scenarioTP)}
	case "follower":
		lead := s.c.leader(scenarioTP)
		for _, id := range s.c.ids {
			if id != lead {
				return []NodeID{id}
			}
		}
	}
	n, err := strconv.Atoi(which)
	if err != nil || s.c.disks[NodeID(n)] == nil {
		d.Fatalf(t, "node %q", which)
	}
	return []NodeID{NodeID(n)}
}

func (s *scenario) cluster(t *testing.T, d *datadriven.TestData) string {
	entries := uint64(s.intArg(t, d, "checkpoint-entries", 0))
	indexChunkRecords = s.intArg(t, d, "chunk-records", indexChunkRecords)
	nodes := int(s.intArg(t, d, "nodes", 3))
	s.c = newCluster(t, uint64(s.intArg(t, d, "seed", 1)), nodes, replicated(nodes, scenarioTP.Topic, 1),
		func(cfg *Config) { cfg.CheckpointEntries = entries })
	s.c.leader(scenarioTP)
	return fmt.Sprintf("%d nodes, a leader elected", nodes)
}

func (s *scenario) produce(t *testing.T, d *datadriven.TestData) string {
	records := int(s.intArg(t, d, "records", 1))
	producer, seq := s.intArg(t, d, "producer", -1), int32(s.intArg(t, d, "seq", 0))
	var out []string
	for range s.intArg(t, d, "n", 1) {
		tag := fmt.Sprintf("b%d", len(s.produced))
		batch := testBatch(t, tag, records)
		res := s.c.produce(s.c.leader(scenarioTP), ProduceRequest{
			TopicPartition: scenarioTP, Acks: AcksAll, ProducerID: producer, BaseSequence: seq, Batch: batch,
		})
		switch {
		case res.Err != nil:
			out = append(out, fmt.Sprintf("%s: error %v", tag, res.Err))
		case res.Duplicate:
			out = append(out, fmt.Sprintf("%s: duplicate of base=%d", tag, res.BaseOffset))
		default:
			out = append(out, fmt.Sprintf("%s: base=%d", tag, res.BaseOffset))
		}
		s.produced = append(s.produced, batch)
		if producer >= 0 {
			seq += int32(records)
		}
	}
	return strings.Join(out, "\n")
}

func (s *scenario) fetch(t *testing.T, d *datadriven.TestData) string {
	id := s.nodes(t, d)[0]
	batches, hwm := s.c.fetchAll(id, scenarioTP)
	out := []string{fmt.Sprintf("node %d: high-water mark %d, %d batches", id, hwm, len(batches))}
	for _, b := range batches {
		tag := "unknown bytes"
		for i, p := range s.produced {
			if bytes.Equal(p, b.Batch) {
				tag = fmt.Sprintf("b%d", i)
			}
		}
		out = append(out, fmt.Sprintf("base=%d records=%d %s", b.BaseOffset, batchRecordCount(b.Batch), tag))
	}
	return strings.Join(out, "\n")
}

// describeStart says how a node that just opened restored its partition.
func (s *scenario) describeStart(id NodeID) string {
	g := s.c.cores[id].byTP[scenarioTP]
	if g.appliedRaft == 0 {
		return fmt.Sprintf("node %d up: no usable checkpoint, replays its whole log", id)
	}
	start, end := g.part.IndexOrdinals()
	return fmt.Sprintf("node %d up: restored from its checkpoint, batches [%d, %d) indexed, high-water mark %d",
		id, start, end, g.part.HighWatermark())
}

// checkpointFiles lists a node's checkpoint headers and index chunks.
func (s *scenario) checkpointFiles(id NodeID) string {
	dir := managedDir(scenarioTP.Topic, 1, scenarioTP.Partition) + "/checkpoint"
	headers, _ := s.c.disks[id].List(dir)
	chunks, _ := s.c.disks[id].List(dir + "/index")
	out := []string{fmt.Sprintf("node %d: %d header(s), index chunks %v", id, len(headers), chunks)}
	for _, h := range headers {
		data, _ := s.c.disks[id].ReadFile(dir + "/" + h)
		ck, err := decodeCheckpoint(s.c.disks[id], dir+"/index", data, false)
		if err != nil {
			out = append(out, "header: "+err.Error())
			continue
		}
		out = append(out, fmt.Sprintf("header: SCK2=%t batches [%d, %d), high-water mark %d",
			ck.indexed, ck.indexStart, ck.indexEnd, ck.partition.HighWatermark()))
	}
	return strings.Join(out, "\n")
}
