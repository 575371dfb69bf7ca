package metadata

import (
	"encoding/binary"
	"hash/fnv"
)

// Digest is a deterministic 64-bit hash of the whole state (applied index,
// version, cluster id, id allocators, nodes, topics with their configs,
// replica lists and leaders): replicas at the same applied index have equal
// digests, and a restore that forgot part of the state has another, so the
// simulator can compare metadata replicas whole at every applied index.
//
// It hashes the snapshot's canonical bytes (applied index zeroed, then
// folded in): O(state), and the metadata state is small. A cache keyed by
// Version was tried and dropped: some commands change the state without a
// version bump (the cluster id on a first command, even a failing one;
// leader records), and a stale cache would hide a divergence.
//
// Rejected: element sums kept by every command, as the partition does
// (many mutation sites, each a chance to forget one).
func (s *State) Digest() uint64 {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], s.appliedIndex)
	binary.LittleEndian.PutUint64(b[8:], s.stateHash())
	h.Write(b[:])
	return h.Sum64()
}

// stateHash hashes the state without its applied index.
func (s *State) stateHash() uint64 {
	h := fnv.New64a()
	h.Write(s.marshal(0))
	return h.Sum64()
}
