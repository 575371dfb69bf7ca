package clientcore

import (
	"math/rand/v2"
	"time"
)

// A paused or wedged node (SIGSTOP, a stuck disk, a dead NIC that keeps
// the TCP connection open) answers nothing, while the rest of the cluster
// elects new leaders for its partitions within an election timeout. The
// pieces below let the client notice that within a bound close to that
// (StallTimeout, default 2 s) instead of the request timeout, go elsewhere,
// and steer keyless records away. They are pure, like Window: time is
// handed in.

// Stalled reports whether a call sent at sentAt has waited too long for a
// node that shows no sign of life: more than wait (the time the node may
// legitimately hold it: a fetch's long poll) plus stall has passed since it
// was sent, and nothing at all arrived on the connection in the last stall.
// A busy connection whose other answers keep arriving is never stalled,
// however slow one call is. stall <= 0 disables the rule.
func Stalled(now, sentAt, lastRead, wait, stall time.Duration) bool {
	if stall <= 0 {
		return false
	}
	return now-sentAt > wait+stall && now-lastRead > stall
}

// Suspects is the client's list of nodes that recently stalled: requests
// for their partitions wait (and metadata is refreshed) until the
// suspicion lapses or metadata names another leader. It also sets each
// node's stall bound: doubled per stall in the last strikeMemory, so a node
// that is slow but alive (a request that takes longer than the bound every
// time) is soon given enough time instead of being given up on forever.
// Sans-IO.
type Suspects struct {
	until   map[uint64]time.Duration
	strikes map[uint64]int
	last    map[uint64]time.Duration // when node last stalled
	marks   uint64
}

// Marks counts the calls to Mark: a node not suspect at some time is still
// not suspect later while the count stays the same (suspicions only lapse).
func (s *Suspects) Marks() uint64 { return s.marks }

// strikeMemory is how long a stall keeps raising a node's bound.
const strikeMemory = time.Minute

// Mark records that node stalled at now: suspect until now+d, and one
// more strike.
func (s *Suspects) Mark(node uint64, now, d time.Duration) {
	if s.until == nil {
		s.until = make(map[uint64]time.Duration)
		s.strikes = make(map[uint64]int)
		s.last = make(map[uint64]time.Duration)
	}
	s.marks++
	s.until[node] = max(s.until[node], now+d)
	s.forget(node, now)
	s.strikes[node]++
	s.last[node] = now
}

// forget drops node's strikes once its last stall is strikeMemory old.
func (s *Suspects) forget(node uint64, now time.Duration) {
	if t, ok := s.last[node]; ok && now-t >= strikeMemory {
		delete(s.strikes, node)
		delete(s.last, node)
	}
}

// Until is when node's suspicion lapses; 0 when it is not suspect at now.
func (s *Suspects) Until(node uint64, now time.Duration) time.Duration {
	t, ok := s.until[node]
	if !ok {
		return 0
	}
	if t <= now {
		delete(s.until, node)
		return 0
	}
	return t
}

// Bound is node's stall bound at now: base doubled for each recent stall,
// at most ceiling.
func (s *Suspects) Bound(node uint64, now, base, ceiling time.Duration) time.Duration {
	s.forget(node, now)
	b := base
	for i := 0; i < s.strikes[node] && b < ceiling; i++ {
		b *= 2
	}
	return min(b, ceiling)
}

// PartitionLoad is what the adaptive partitioner knows of one partition.
type PartitionLoad struct {
	// Available: its leader is known and not suspect, and its window has
	// room for the open batch to be sealed.
	Available bool
	// Queued is the batches waiting or in flight (the window's length).
	Queued int
}

// AdaptivePartition picks the partition for the next keyless batch as
// Kafka's adaptive partitioner does (KIP-794): unavailable partitions are
// skipped, and the others are drawn with weight maxQueued+1-Queued, so a
// partition whose leader is slow (its queue grows) gets fewer records. When
// every partition is unavailable it draws uniformly (the records wait
// anyway). skip (the partition just sealed; -1: none) is left out when
// another qualifies. loads must not be empty.
func AdaptivePartition(loads []PartitionLoad, skip int32, rng *rand.Rand) int32 {
	if p, ok := adaptivePick(loads, skip, rng); ok {
		return p
	}
	if p, ok := adaptivePick(loads, -1, rng); ok {
		return p
	}
	return int32(rng.IntN(len(loads)))
}

// adaptivePick draws by AdaptivePartition's weights, leaving skip out;
// false when no partition has weight.
func adaptivePick(loads []PartitionLoad, skip int32, rng *rand.Rand) (int32, bool) {
	maxQueued := 0
	for _, l := range loads {
		if l.Available {
			maxQueued = max(maxQueued, l.Queued)
		}
	}
	weight := func(p int) int {
		if !loads[p].Available || int32(p) == skip {
			return 0
		}
		return maxQueued + 1 - loads[p].Queued
	}
	total := 0
	for p := range loads {
		total += weight(p)
	}
	if total == 0 {
		return 0, false
	}
	pick := rng.IntN(total)
	for p := range loads {
		if pick -= weight(p); pick < 0 {
			return int32(p), true
		}
	}
	panic("clientlib: adaptivePick fell off its table")
}
