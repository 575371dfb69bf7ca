package metadata

import (
	"encoding/binary"
	"hash/fnv"
)

// Digest is a deterministic 64-bit hash of the whole state (applied index,
// version, id allocators, nodes, topics with their configs and replica
// lists): replicas at the same applied index have equal digests, and a
// restore that forgot part of the state has another, so the simulator can
// compare metadata replicas whole at every applied index.
//
// The state changes only with the version (Version's contract), so the
// hash of the rest is computed once per version, from the snapshot's
// canonical bytes, and cached: O(1) per entry that changes nothing, O(state)
// per command that does (metadata commands are rare and small).
//
// Rejected: element sums kept by every command, as the partition does
// (many mutation sites, each a chance to forget one; the state is small).
func (s *State) Digest() uint64 {
	if !s.digestValid || s.digestVersion != s.version {
		s.digestState = s.stateHash()
		s.digestVersion, s.digestValid = s.version, true
	}
	h := fnv.New64a()
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], s.appliedIndex)
	binary.LittleEndian.PutUint64(b[8:], s.version)
	binary.LittleEndian.PutUint64(b[16:], s.digestState)
	h.Write(b[:])
	return h.Sum64()
}

// stateHash hashes the state without its applied index.
func (s *State) stateHash() uint64 {
	h := fnv.New64a()
	h.Write(s.marshal(0))
	return h.Sum64()
}
