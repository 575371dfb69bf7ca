package compact

import (
	"crypto/sha256"
	"encoding/binary"
)

// The offset map (Kafka's SkimpyOffsetMap, log.cleaner.dedupe.buffer.size):
// key hash → the latest offset of that key in the dirty section, in an
// open-addressed table whose size the decision fixes in bytes, so memory is
// bounded by configuration, never by the key count. Keys are hashed to 128
// bits of SHA-256 (Kafka uses MD5, whose collisions anyone can forge: a
// collision makes compaction drop the older key's latest value, so the
// hash must resist a producer choosing keys). Lookups only: its iteration
// order never reaches the output.

const (
	// SlotBytes is one slot: a 128-bit key hash and an offset.
	SlotBytes = 24
	// loadPercent is the share of slots filled before the map counts as
	// full (Kafka's log.cleaner.io.buffer.load.factor, 0.9).
	loadPercent = 90
)

// keyHash is the 128-bit hash of a key.
type keyHash struct{ high, low uint64 }

// hashKey hashes a record key.
func hashKey(key []byte) keyHash {
	sum := sha256.Sum256(key)
	return keyHash{binary.LittleEndian.Uint64(sum[0:8]), binary.LittleEndian.Uint64(sum[8:16])}
}

// slot is one table entry; offsetPlusOne 0 marks it empty.
type slot struct {
	hash          keyHash
	offsetPlusOne int64
}

// offsetMap is the table. Its capacity (the keys it takes before a pass
// counts it full) is fixed at creation by the decision's bytes; the
// table itself starts at offsetMapSlotsMin slots and doubles, up to the
// decision's, as keys come: a pass over a few keys neither allocates nor
// zeroes the whole buffer (8 MiB by default, node's compactionMapBytes,
// per pass), and where the map counts as full stays the decision's alone,
// so every replica stops its pass at the same offset.
type offsetMap struct {
	slots    []slot
	entries  int
	capacity int
	slotsMax int // the decision's slots: mapBytes / SlotBytes
}

// offsetMapSlotsMin is the table's first size (24 KiB).
const offsetMapSlotsMin = 1024

// newOffsetMap makes a map of mapBytes bytes' capacity.
func newOffsetMap(mapBytes int64) *offsetMap {
	n := int(mapBytes / SlotBytes)
	return &offsetMap{slots: make([]slot, min(n, offsetMapSlotsMin)), capacity: n * loadPercent / 100, slotsMax: n}
}

// grow doubles the table (at most to slotsMax) and places every entry
// again; lookups only, so the order of placement leaks nowhere.
func (m *offsetMap) grow() {
	old := m.slots
	m.slots = make([]slot, min(2*len(old), m.slotsMax))
	for _, s := range old {
		if s.offsetPlusOne != 0 {
			*m.find(s.hash) = s
		}
	}
}

// room is how many more keys the map takes.
func (m *offsetMap) room() int { return m.capacity - m.entries }

// find returns the slot of h: the one holding it or the empty one where it
// would go. The table is never full (put grows it past loadPercent, and
// capacity < slotsMax), so it ends.
func (m *offsetMap) find(h keyHash) *slot {
	i := int(h.low % uint64(len(m.slots)))
	for {
		s := &m.slots[i]
		if s.offsetPlusOne == 0 || s.hash == h {
			return s
		}
		if i++; i == len(m.slots) {
			i = 0
		}
	}
}

// put records offset as the latest of h. The caller checked room.
func (m *offsetMap) put(h keyHash, offset int64) {
	if len(m.slots) < m.slotsMax && (m.entries+1)*100 > len(m.slots)*loadPercent {
		m.grow()
	}
	s := m.find(h)
	if s.offsetPlusOne == 0 {
		m.entries++
		s.hash = h
	} else if bugKeepsOlder {
		return
	}
	s.offsetPlusOne = offset + 1
}

// latest returns the latest offset recorded for h, or false.
func (m *offsetMap) latest(h keyHash) (int64, bool) {
	if len(m.slots) == 0 {
		return 0, false
	}
	s := m.find(h)
	return s.offsetPlusOne - 1, s.offsetPlusOne != 0
}
