package clientlib

import (
	"testing"

	"github.com/strandlog/strand/proto/frame"
)

// fill stops a request at its byte limit, leaving the batch that does not
// fit for the next round, and starts where it is told: with rotation, the
// partition left out first goes first next (issue 7, finding 3).
func TestFillCapsAndRotates(t *testing.T) {
	c, err := NewClient(SeedAddresses("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := newProducer(c)
	var sinks []sentBatch
	for i := range 3 {
		s := p.sink(topicPartition{"t", int32(i)})
		for range 2 {
			id := s.w.Push(1, 0)
			s.sealed[id] = &sealedBatch{bytes: make([]byte, 1000)}
		}
		sinks = append(sinks, sentBatch{s: s})
	}
	limit := 2 * frame.ProducePartitionBytes("t", 1000)
	partitions := func(bs []sentBatch) []int32 {
		var out []int32
		for _, b := range bs {
			out = append(out, b.s.tp.partition)
		}
		return out
	}
	for i, want := range [][]int32{{1, 2}, {2, 0}, {0, 1}} {
		got := partitions(p.fill(sinks, i+1, limit, 0))
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("round %d: partitions %v, want %v", i, got, want)
		}
	}
	if got := p.fill(sinks, 0, limit, 0); len(got) != 0 {
		t.Fatalf("every batch was taken, yet fill gave %v", partitions(got))
	}
}
