package simnet

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The event queue pops in (at, seq) order whatever the interleaving of
// pushes and pops: the order the run's determinism rests on. Checked
// against a sorted list over random schedules with many ties in time.
func TestEventQueueOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var s scheduler
		var want []*event // pending, kept sorted by (at, seq)
		for step := range 300 {
			if len(want) == 0 || r.IntN(3) != 0 {
				e := &event{}
				s.schedule(time.Duration(r.IntN(20))*time.Millisecond, e)
				want = append(want, e)
				slices.SortFunc(want, func(a, b *event) int {
					if a.at != b.at {
						return int(a.at - b.at)
					}
					return int(a.seq) - int(b.seq)
				})
				continue
			}
			got := s.next()
			if got != want[0] {
				t.Fatalf("round %d step %d: popped at=%v seq=%d, want at=%v seq=%d", round, step, got.at, got.seq, want[0].at, want[0].seq)
			}
			want = want[1:]
		}
	}
}

// BenchmarkEventQueue is the queue's cost per event at a run's usual
// depth (a few hundred pending: ticks, frames, client timers): one push
// and one pop per event, times a little ahead of now.
func BenchmarkEventQueue(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var s scheduler
	events := make([]event, 512)
	for i := range events {
		s.schedule(time.Duration(r.IntN(100))*time.Millisecond, &events[i])
	}
	b.ResetTimer()
	for range b.N {
		e := s.next()
		s.schedule(time.Duration(r.IntN(100))*time.Millisecond, e)
	}
}
