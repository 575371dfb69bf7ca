package node

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/cryptotest"

	"pgregory.net/rapid"
)

// modelPartition is what clients were told about one partition: the
// acknowledged batches in offset order, and the batch being retried.
type modelPartition struct {
	acked   [][]byte
	records int64 // records in acked
	pending []byte
}

// Under random crashes (with torn unsynced writes), restarts, isolations
// and ticks, an idempotent producer that retries each batch until it is
// acknowledged sees dense offsets, and after healing every replica holds
// exactly the acknowledged batches; no group ever has two leaders in a term.
func TestRapidClusterKeepsAcknowledgedWrites(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cryptotest.SetGlobalRandom(t, rapid.Uint64().Draw(rt, "raftSeed"))
		specs := replicated(3, "t", 2)
		c := startCluster(rt, rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "diskSeed"), 1)), 3, specs,
			func(cfg *Config) { cfg.CheckpointEntries = 3 })
		models := make([]*modelPartition, len(specs))
		for i := range models {
			models[i] = &modelPartition{}
		}
		isolated := NodeID(0)
		c.drop = func(e envelope) bool { return isolated != 0 && (e.from == isolated || e.to == isolated) }
		rt.Repeat(map[string]func(*rapid.T){
			"produce": func(rt *rapid.T) {
				p := rapid.IntRange(0, len(specs)-1).Draw(rt, "partition")
				id := c.ids[rapid.IntRange(0, 2).Draw(rt, "node")]
				if c.cores[id] != nil {
					modelProduce(rt, c, specs[p].TopicPartition, models[p], id, p)
				}
			},
			"fetch": func(rt *rapid.T) {
				p := rapid.IntRange(0, len(specs)-1).Draw(rt, "partition")
				id := c.ids[rapid.IntRange(0, 2).Draw(rt, "node")]
				if c.cores[id] != nil {
					modelFetch(rt, c, specs[p].TopicPartition, models[p], id, rapid.IntRange(0, 40).Draw(rt, "offset"))
				}
			},
			"crash": func(rt *rapid.T) {
				id := c.ids[rapid.IntRange(0, 2).Draw(rt, "node")]
				if c.cores[id] != nil {
					c.crash(id)
					c.start(id)
				}
			},
			"isolate": func(rt *rapid.T) {
				isolated = NodeID(rapid.IntRange(0, 3).Draw(rt, "node"))
			},
			"tick": func(rt *rapid.T) {
				c.tick(rapid.IntRange(1, 25).Draw(rt, "ticks"))
				checkOneLeaderPerTerm(rt, c)
			},
			"": func(rt *rapid.T) { checkOneLeaderPerTerm(rt, c) },
		})
		isolated = 0
		for p, m := range models {
			tp := specs[p].TopicPartition
			for attempt := 0; m.pending != nil; attempt++ {
				if attempt == 50 {
					rt.Fatalf("%v: pending batch never acknowledged after healing", tp)
				}
				modelProduce(rt, c, tp, m, c.leader(tp), p)
			}
			c.converge(tp)
			for _, id := range c.ids {
				checkReplica(rt, c, id, tp, m)
			}
		}
	})
}

// modelProduce sends the partition's pending batch (a new one if none) to
// node id and records the outcome in the model.
func modelProduce(rt *rapid.T, c *cluster, tp TopicPartition, m *modelPartition, id NodeID, p int) {
	if m.pending == nil {
		m.pending = testBatch(rt, fmt.Sprintf("p%d-%d", p, len(m.acked)), 1+len(m.acked)%3)
	}
	res := c.produce(id, ProduceRequest{
		TopicPartition: tp, Acks: AcksAll, ProducerID: int64(100 + p), BaseSequence: int32(m.records), Batch: m.pending,
	})
	switch {
	case res.Err == nil:
		if res.BaseOffset != m.records {
			rt.Fatalf("%v: acknowledged at offset %d, want %d", tp, res.BaseOffset, m.records)
		}
		m.acked = append(m.acked, m.pending)
		m.records += int64(batchRecordCount(m.pending))
		m.pending = nil
	case errors.Is(res.Err, ErrNotLeader), errors.Is(res.Err, ErrTimeout), errors.Is(res.Err, ErrStopped),
		errors.Is(res.Err, ErrUnknownTopicPartition): // a restarted node replays its metadata log first
		// Refused or indefinite: the same batch is retried later.
	default:
		rt.Fatalf("%v: unexpected produce error %v", tp, res.Err)
	}
}

// checkReplica asserts node id holds exactly the acknowledged batches of tp.
func checkReplica(rt *rapid.T, c *cluster, id NodeID, tp TopicPartition, m *modelPartition) {
	g := c.cores[id].byTP[tp]
	if hwm := g.part.HighWatermark(); hwm != m.records {
		rt.Fatalf("node %d %v: high-water mark %d, want %d", id, tp, hwm, m.records)
	}
	offset := int64(0)
	for i, want := range m.acked {
		locs, err := g.part.Locate(offset, 1)
		if err != nil || len(locs) != 1 {
			rt.Fatalf("node %d %v: locate %d: %v", id, tp, offset, err)
		}
		got, err := c.cores[id].readBatch(g, g.bugRaftIndexOf(locs[0].RaftIndex))
		if err != nil || !bytes.Equal(got, want) || locs[0].BaseOffset != offset {
			rt.Fatalf("node %d %v: batch %d at %d differs (err %v)", id, tp, i, offset, err)
		}
		offset += int64(batchRecordCount(want))
	}
}

// checkOneLeaderPerTerm asserts no two live nodes lead a group in one term.
func checkOneLeaderPerTerm(rt *rapid.T, c *cluster) {
	leaders := map[TopicPartition]map[uint64]NodeID{}
	for _, id := range c.ids {
		if c.cores[id] == nil {
			continue
		}
		for _, st := range c.cores[id].Status() {
			if !st.IsLeader {
				continue
			}
			if leaders[st.TopicPartition] == nil {
				leaders[st.TopicPartition] = map[uint64]NodeID{}
			}
			if other, ok := leaders[st.TopicPartition][st.Term]; ok && other != id {
				rt.Fatalf("%v term %d: nodes %d and %d both lead", st.TopicPartition, st.Term, other, id)
			}
			leaders[st.TopicPartition][st.Term] = id
		}
	}
}

// converge ticks until tp has a leader and every replica applied all it
// committed.
func (c *cluster) converge(tp TopicPartition) {
	c.t.Helper()
	for range 200 {
		lead := c.leader(tp)
		g := c.cores[lead].byTP[tp]
		commit := g.raw.BasicStatus().GetCommit()
		// A new leader's commit index lags until an entry of its own term
		// commits (commit-only hard states are not synced, so after
		// restarts every node may recover an older one): wait until the
		// leader's whole log is committed, or the replicas' applied
		// indexes say nothing about what was acknowledged before.
		last, _ := g.log.LastIndex()
		done := commit >= last
		for _, id := range c.ids {
			if g := c.cores[id].byTP[tp]; g == nil || g.appliedRaft < commit {
				done = false
			}
		}
		if done {
			return
		}
		c.tick(1)
	}
	c.t.Fatalf("%v: replicas never caught up", tp)
}

// modelFetch reads tp at offset from node id: a served fetch sees every
// acknowledged batch (linearizable), each byte for byte at its offset, and
// at most the pending batch beyond them.
func modelFetch(rt *rapid.T, c *cluster, tp TopicPartition, m *modelPartition, id NodeID, offset int) {
	res := c.fetch(id, FetchRequest{TopicPartition: tp, Offset: int64(offset), MaxBytes: 200})
	switch {
	case errors.Is(res.Err, ErrNotLeader), errors.Is(res.Err, ErrTimeout), errors.Is(res.Err, ErrStopped),
		errors.Is(res.Err, ErrUnknownTopicPartition): // a restarted node replays its metadata log first
		return
	case errors.Is(res.Err, ErrOffsetOutOfRange):
		if int64(offset) <= m.records || res.HighWatermark >= int64(offset) {
			rt.Fatalf("%v: offset %d out of range with %d acknowledged, hwm %d", tp, offset, m.records, res.HighWatermark)
		}
		return
	case res.Err != nil:
		rt.Fatalf("%v: fetch: %v", tp, res.Err)
	}
	if res.HighWatermark < m.records {
		rt.Fatalf("%v: fetch high-water mark %d behind %d acknowledged records", tp, res.HighWatermark, m.records)
	}
	starts := map[int64][]byte{}
	next := int64(0)
	for _, b := range m.acked {
		starts[next] = b
		next += int64(batchRecordCount(b))
	}
	for _, b := range res.Batches {
		want, ok := starts[b.BaseOffset]
		if !ok && b.BaseOffset == next {
			want, ok = m.pending, m.pending != nil
		}
		if !ok || !bytes.Equal(want, b.Batch) {
			rt.Fatalf("%v: fetched batch at %d is not the one acknowledged there", tp, b.BaseOffset)
		}
		if b.BaseOffset+int64(batchRecordCount(b.Batch)) <= int64(offset) {
			rt.Fatalf("%v: fetch at %d served a batch ending before it", tp, offset)
		}
	}
}
