package simnet

import "hash/crc32"

// FNV-1a 64-bit parameters.
const (
	fnvOffset64 uint64 = 14695981039346656037
	fnvPrime64  uint64 = 1099511628211
)

// traceHash folds every processed event into one FNV-1a 64 hash: equal
// hashes for a seed mean the run replayed event for event.
type traceHash struct {
	sum uint64
}

func newTraceHash() traceHash { return traceHash{sum: fnvOffset64} }

// u64 folds x in, little-endian.
func (h *traceHash) u64(x uint64) {
	for i := 0; i < 8; i++ {
		h.sum ^= x & 0xff
		h.sum *= fnvPrime64
		x >>= 8
	}
}

// str folds in s as bytes.
func (h *traceHash) str(s string) {
	h.u64(uint64(len(s)))
	for i := 0; i < len(s); i++ {
		h.sum ^= uint64(s[i])
		h.sum *= fnvPrime64
	}
}

// hashBytes digests p alone, for the trace's digests of frames and
// entries: its length and its CRC-32C (hardware-accelerated; FNV-1a's
// byte loop over every frame was 2% of a run's CPU).
func hashBytes(p []byte) uint64 {
	return uint64(len(p))<<32 | uint64(crc32.Checksum(p, castagnoli))
}

// castagnoli is the CRC-32C table hashBytes uses.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)
