package clientcore

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strandlog/strand/proto/strandpb"
)

const ms = time.Millisecond

// A call is stalled only when its own wait and the stall bound have both
// passed and the connection has been silent for the whole stall bound: a
// long poll within its wait, or a slow call on a connection whose other
// answers keep arriving, is not.
func TestStalled(t *testing.T) {
	const stall = 2000 * ms
	cases := []struct {
		name                        string
		now, sentAt, lastRead, wait time.Duration
		want                        bool
	}{
		{"silent past the bound", 3000 * ms, 500 * ms, 400 * ms, 0, true},
		{"just sent", 3000 * ms, 2500 * ms, 0, 0, false},
		{"other answers arriving", 9000 * ms, 500 * ms, 8500 * ms, 0, false},
		{"long poll within its wait", 9000 * ms, 500 * ms, 400 * ms, 10000 * ms, false},
		{"long poll past its wait", 13000 * ms, 500 * ms, 400 * ms, 10000 * ms, true},
	}
	for _, c := range cases {
		if got := Stalled(c.now, c.sentAt, c.lastRead, c.wait, stall); got != c.want {
			t.Errorf("%s: Stalled = %v, want %v", c.name, got, c.want)
		}
	}
	if Stalled(time.Hour, 0, 0, 0, 0) {
		t.Error("stall 0 must disable the rule")
	}
}

// A suspicion lasts until its bound, is extended by a later mark, and
// lapses on its own.
func TestSuspects(t *testing.T) {
	var s Suspects
	if s.Until(1, 0) != 0 {
		t.Fatal("a node never marked is suspect")
	}
	s.Mark(1, 100*ms, 400*ms)
	s.Mark(1, 200*ms, 100*ms) // an earlier lapse does not shorten it
	if got := s.Until(1, 300*ms); got != 500*ms {
		t.Fatalf("Until = %v, want 500ms", got)
	}
	if s.Until(2, 300*ms) != 0 || s.Until(1, 500*ms) != 0 {
		t.Fatal("suspicion outlived its bound or spread to another node")
	}
}

// A node's stall bound doubles with each recent stall, up to the ceiling,
// so a slow but live node is not given up on at every attempt; a minute
// without a stall forgets the strikes.
func TestSuspectsBound(t *testing.T) {
	const base, ceiling = 2000 * ms, 15000 * ms
	var s Suspects
	if b := s.Bound(1, 0, base, ceiling); b != base {
		t.Fatalf("bound %v before any stall, want %v", b, base)
	}
	now := time.Second
	for _, want := range []time.Duration{4000 * ms, 8000 * ms, ceiling, ceiling} {
		s.Mark(1, now, base)
		if b := s.Bound(1, now, base, ceiling); b != want {
			t.Fatalf("bound %v, want %v", b, want)
		}
		if s.Bound(2, now, base, ceiling) != base {
			t.Fatal("another node's bound grew")
		}
		now += time.Second
	}
	if b := s.Bound(1, now+strikeMemory, base, ceiling); b != base {
		t.Fatalf("bound %v a minute after the last stall, want %v", b, base)
	}
}

// AdaptivePartition never picks an unavailable partition while another
// is available, favours short queues, and leaves out the partition just
// sealed when it can.
func TestAdaptivePartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	loads := []PartitionLoad{{Available: false}, {Available: true, Queued: 4}, {Available: true, Queued: 0}, {Available: false}}
	counts := make([]int, len(loads))
	for range 5000 {
		counts[AdaptivePartition(loads, -1, rng)]++
	}
	if counts[0] != 0 || counts[3] != 0 {
		t.Fatalf("unavailable partitions picked: %v", counts)
	}
	// Weights 1 and 5.
	if counts[2] < 3*counts[1] {
		t.Fatalf("the short queue is not favoured: %v", counts)
	}
	for range 100 {
		if p := AdaptivePartition(loads, 2, rng); p != 1 {
			t.Fatalf("picked %d with 2 skipped, want 1", p)
		}
	}
	if p := AdaptivePartition([]PartitionLoad{{}, {Available: true}}, 1, rng); p != 1 {
		t.Fatalf("the only available partition, skipped, must still be picked; got %d", p)
	}
	none := []PartitionLoad{{}, {}, {}}
	if p := AdaptivePartition(none, -1, rng); p < 0 || p > 2 {
		t.Fatalf("picked %d of 3", p)
	}
}

// The sticky partition moves at once when it becomes unavailable (its
// leader stalled, or its window filled up), not when a batch is sealed,
// which a full window never does; while available it stays.
func TestStickyAdaptiveLeavesUnavailablePartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s Sticky
	down := map[int32]bool{}
	load := func(p int32) PartitionLoad { return PartitionLoad{Available: !down[p]} }
	first := s.PartitionAdaptive("t", 4, rng, load)
	for range 20 {
		if p := s.PartitionAdaptive("t", 4, rng, load); p != first {
			t.Fatalf("sticky moved from %d to %d while available", first, p)
		}
	}
	down[first] = true
	for range 100 {
		if p := s.PartitionAdaptive("t", 4, rng, load); p == first {
			t.Fatalf("keyless record sent to unavailable partition %d", p)
		}
	}
}

// With no partition available (no leader known yet, as right after a
// topic is created) the sticky partition stays: before, every record
// moved on, so one produce of 1,000 keyless lines landed on all four
// partitions of a new topic, a quarter each.
func TestStickyAdaptiveStaysWhenNoneAvailable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var s Sticky
	first := s.PartitionAdaptive("t", 4, rng, func(int32) PartitionLoad { return PartitionLoad{} })
	for range 100 {
		if p := s.PartitionAdaptive("t", 4, rng, func(int32) PartitionLoad { return PartitionLoad{} }); p != first {
			t.Fatalf("sticky moved from %d to %d with no partition available", first, p)
		}
	}
}

// TestPastThrottleHoldsStall: a call queued or sent just before its
// connection's 5 s throttle is not stalled during the throttle, and is
// again by the ordinary rule once the throttle and the stall bound have
// passed.
func TestPastThrottleHoldsStall(t *testing.T) {
	const stall = 2 * time.Second
	sent, lastRead, until := time.Second, time.Second, 6*time.Second
	s, r := PastThrottle(sent, lastRead, until)
	for now := sent; now <= until+stall; now += 100 * time.Millisecond {
		if Stalled(now, s, r, 0, stall) {
			t.Fatalf("stalled at %v, inside the throttle (until %v) plus the stall bound", now, until)
		}
	}
	if !Stalled(until+stall+time.Millisecond, s, r, 0, stall) {
		t.Fatal("not stalled after the throttle and the stall bound passed with nothing read")
	}
	if !Stalled(sent+stall+time.Millisecond, sent, lastRead, 0, stall) {
		t.Fatal("without the throttle the call stalls after the bound")
	}
}

// TestThrottleReadsProduceAndFetch: only produce and fetch answers carry
// a throttle.
func TestThrottleReadsProduceAndFetch(t *testing.T) {
	p := &strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{ThrottleMs: 1500}}}
	f := &strandpb.Response{Body: &strandpb.Response_Fetch{Fetch: &strandpb.FetchResponse{ThrottleMs: 20}}}
	m := &strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: &strandpb.MetadataResponse{}}}
	if Throttle(p) != 1500*time.Millisecond || Throttle(f) != 20*time.Millisecond || Throttle(m) != 0 || Throttle(nil) != 0 {
		t.Fatalf("Throttle: produce %v, fetch %v, metadata %v", Throttle(p), Throttle(f), Throttle(m))
	}
}
