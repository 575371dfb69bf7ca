package node

import (
	"fmt"
	"slices"
	"testing"
)

// TestStatusSeqMovesWithStatus looks at every node's statuses after every
// Process while a cluster elects, takes produces, loses its leader and
// gets it back: whenever StatusSeq stood still since the last look, the
// statuses (replicas' and the metadata group's) are the ones seen then.
func TestStatusSeqMovesWithStatus(t *testing.T) {
	c := newCluster(t, 11, 3, replicated(3, "orders", 2), nil)
	type seen struct {
		core *Core
		seq  uint64
		st   []GroupStatus
	}
	last := map[NodeID]seen{}
	still, moved := 0, 0
	c.afterProcess = func(id NodeID, core *Core) {
		st := core.AppendStatus(nil)
		if m, ok := core.MetadataStatus(); ok {
			st = append(st, m)
		}
		prev := last[id]
		if prev.core == core && prev.seq == core.StatusSeq() {
			still++
			if !slices.Equal(prev.st, st) {
				t.Fatalf("node %d: statuses changed while StatusSeq stayed %d:\nwas %+v\nnow %+v", id, prev.seq, prev.st, st)
			}
		} else if prev.core == core && !slices.Equal(prev.st, st) {
			moved++
		}
		last[id] = seen{core: core, seq: core.StatusSeq(), st: st}
	}
	produce := func(n int) {
		t.Helper()
		for i := range n {
			lead := c.leader(tp0)
			res := c.produce(lead, ProduceRequest{TopicPartition: tp0, Acks: AcksAll, ProducerID: -1,
				Batch: testBatch(t, fmt.Sprintf("b%d", i), 1)})
			if res.Err != nil {
				t.Fatalf("produce %d: %v", i, res.Err)
			}
		}
	}
	produce(10)
	lead := c.leader(tp0)
	c.crash(lead)
	c.tick(60) // the others elect
	produce(5)
	c.start(lead)
	c.tick(60) // it catches up
	produce(5)
	if still == 0 || moved == 0 {
		t.Fatalf("looked %d times with StatusSeq still and %d with statuses moved: want both", still, moved)
	}
}
