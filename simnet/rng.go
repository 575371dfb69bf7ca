package simnet

import "math/rand/v2"

// Stream constants split one seed into independent random streams: a draw
// added to one component never shifts the draws of another, so a change to
// the workload does not reshuffle the faults a seed produces.
const (
	streamNetwork  uint64 = 1
	streamDisk     uint64 = 2
	streamFaults   uint64 = 3
	streamWorkload uint64 = 4 << 16 // + client index: one stream per client
	streamClock    uint64 = 5       // node clock skews and tick phases
	streamTier     uint64 = 6       // tiered storage: the draw, then the bucket's faults
	streamNode     uint64 = 1 << 32 // + node id<<16 + incarnation
)

// newStream returns the PCG stream number stream of seed. The stream
// constant is mixed through a 64-bit finaliser so that neighbouring streams
// and neighbouring seeds start far apart.
func newStream(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, mix64(stream^0x9e3779b97f4a7c15)))
}

// mix64 is SplitMix64's finaliser: a bijection that spreads every input bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// chance reports true with probability p.
func chance(r *rand.Rand, p float64) bool {
	return p > 0 && r.Float64() < p
}

// between draws uniformly from [lo, hi] (lo when hi <= lo).
func between(r *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + r.Int64N(hi-lo+1)
}
