package node

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/cryptotest"

	"pgregory.net/rapid"
)

// chaos is a cluster whose network drops, duplicates and reorders frames,
// with many produces in flight at once.
type chaos struct {
	*cluster
	net   *rand.Rand
	acked map[TopicPartition]map[int64][]byte // acknowledged base offset -> batch
	sent  int
}

// deliver hands every queued frame over in a random order, dropping and
// duplicating some, then processes every node.
func (ch *chaos) deliver() {
	queue := ch.queue
	ch.queue = nil
	ch.net.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
	for _, e := range queue {
		core := ch.cores[e.to]
		if core == nil || ch.net.IntN(10) == 0 || (ch.drop != nil && ch.drop(e)) {
			continue
		}
		core.Receive(e.frame)
		if ch.net.IntN(20) == 0 {
			core.Receive(e.frame)
		}
	}
	for _, id := range ch.ids {
		if core := ch.cores[id]; core != nil {
			if err := core.Process(); err != nil {
				ch.t.Fatalf("node %d: process: %v", id, err)
			}
		}
	}
}

// produceAsync sends a fresh non-idempotent batch to node id and records
// it if acknowledged; two acknowledgements at one offset are a violation.
func (ch *chaos) produceAsync(tp TopicPartition, id NodeID, acks Acks) {
	ch.sent++
	batch := testBatch(ch.t, fmt.Sprintf("c%d", ch.sent), 1+ch.sent%3)
	ch.cores[id].produceNow(ProduceRequest{TopicPartition: tp, Acks: acks, ProducerID: -1, Batch: batch}, func(r ProduceResult) {
		if r.Err != nil || acks != AcksAll {
			return
		}
		if prev, ok := ch.acked[tp][r.BaseOffset]; ok && !bytes.Equal(prev, batch) {
			ch.t.Fatalf("%v: offset %d acknowledged for two batches", tp, r.BaseOffset)
		}
		ch.acked[tp][r.BaseOffset] = batch
	})
}

// Under a lossy, duplicating, reordering network, crashes with torn writes
// and many produces in flight, every replica ends with the same log, and
// every acknowledged batch sits at its acknowledged offset on all of them.
func TestRapidChaosReplicasAgree(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cryptotest.SetGlobalRandom(t, rapid.Uint64().Draw(rt, "raftSeed"))
		seed := rapid.Uint64().Draw(rt, "seed")
		specs := replicated(3, "t", 2)
		ch := &chaos{
			cluster: startCluster(rt, rand.New(rand.NewPCG(seed, 1)), 3, specs,
				func(cfg *Config) { cfg.CheckpointEntries = 5; cfg.RequestTimeoutTicks = 15 }),
			net:   rand.New(rand.NewPCG(seed, 2)),
			acked: map[TopicPartition]map[int64][]byte{},
		}
		for _, s := range specs {
			ch.acked[s.TopicPartition] = map[int64][]byte{}
			ch.leader(s.TopicPartition)
		}
		steps := rapid.IntRange(50, 400).Draw(rt, "steps")
		for range steps {
			switch action := rapid.IntRange(0, 99).Draw(rt, "action"); {
			case action < 40:
				tp := specs[rapid.IntRange(0, 1).Draw(rt, "partition")].TopicPartition
				acks := rapid.SampledFrom([]Acks{AcksAll, AcksAll, AcksLeader, AcksNone}).Draw(rt, "acks")
				if id := ch.someLeader(tp); id != 0 {
					ch.produceAsync(tp, id, acks)
				}
			case action < 50:
				tp := specs[rapid.IntRange(0, 1).Draw(rt, "partition")].TopicPartition
				if id := ch.someLeader(tp); id != 0 {
					ch.cores[id].fetchNow(FetchRequest{TopicPartition: tp, MaxBytes: 64}, func(FetchResult) {})
				}
			case action < 75:
				ch.deliver()
			case action < 95:
				for _, id := range ch.ids {
					if core := ch.cores[id]; core != nil {
						core.Tick()
					}
				}
				ch.deliver()
			case action < 98:
				if id := ch.ids[rapid.IntRange(0, 2).Draw(rt, "node")]; ch.cores[id] != nil {
					ch.crash(id)
				}
			default:
				if id := ch.ids[rapid.IntRange(0, 2).Draw(rt, "node")]; ch.cores[id] == nil {
					ch.start(id)
				}
			}
			checkOneLeaderPerTerm(rt, ch.cluster)
		}
		for _, id := range ch.ids {
			if ch.cores[id] == nil {
				ch.start(id)
			}
		}
		ch.queue = nil
		for _, s := range specs {
			ch.converge(s.TopicPartition)
			checkAgree(rt, ch, s.TopicPartition)
		}
	})
}

// checkAgree asserts every replica of tp applied the same batches at the
// same offsets, including every acknowledged one.
func checkAgree(rt *rapid.T, ch *chaos, tp TopicPartition) {
	var ref map[int64][]byte
	for _, id := range ch.ids {
		g := ch.cores[id].byTP[tp]
		got := map[int64][]byte{}
		for offset := int64(0); offset < g.part.HighWatermark(); {
			locs, err := g.part.Locate(offset, 1)
			if err != nil || len(locs) != 1 {
				rt.Fatalf("node %d %v: locate %d: %v", id, tp, offset, err)
			}
			batch, err := ch.cores[id].readBatch(g, g.bugRaftIndexOf(locs[0].RaftIndex))
			if err != nil {
				rt.Fatalf("node %d %v: read at %d: %v", id, tp, offset, err)
			}
			got[locs[0].BaseOffset] = batch
			offset = locs[0].BaseOffset + int64(locs[0].RecordCount)
		}
		for offset, want := range ch.acked[tp] {
			if !bytes.Equal(got[offset], want) {
				rt.Fatalf("node %d %v: acknowledged batch at %d missing or different", id, tp, offset)
			}
		}
		if ref == nil {
			ref = got
			continue
		}
		if len(ref) != len(got) {
			rt.Fatalf("node %d %v: %d batches, another replica %d", id, tp, len(got), len(ref))
		}
		for offset, b := range ref {
			if !bytes.Equal(got[offset], b) {
				rt.Fatalf("node %d %v: batch at %d differs between replicas", id, tp, offset)
			}
		}
	}
}

// someLeader returns a live node that believes it leads tp, or 0.
func (ch *chaos) someLeader(tp TopicPartition) NodeID {
	for _, id := range ch.ids {
		if core := ch.cores[id]; core != nil && core.byTP[tp] != nil && core.byTP[tp].leaderTerm != 0 {
			return id
		}
	}
	return 0
}
