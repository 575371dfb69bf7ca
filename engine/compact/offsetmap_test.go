package compact

import (
	"math/rand/v2"
	"testing"
)

// TestOffsetMapGrowsUnseen shows the table that starts small and doubles
// answers exactly as a map of the decision's whole size: every key's
// latest offset, the entries and the room left, at every size from a few
// keys to the decision's capacity (where it must not grow past slotsMax).
func TestOffsetMapGrowsUnseen(t *testing.T) {
	for _, mapBytes := range []int64{SlotBytes * 2, SlotBytes * 100, SlotBytes * 5000, 8 << 20} {
		m := newOffsetMap(mapBytes)
		want := map[keyHash]int64{}
		rng := rand.New(rand.NewPCG(uint64(mapBytes), 1))
		keys := make([]keyHash, 0, 4096)
		for i := int64(0); i < 20000 && m.room() > 0; i++ {
			var h keyHash
			if len(keys) > 0 && rng.IntN(3) == 0 {
				h = keys[rng.IntN(len(keys))] // a newer value of a key seen
			} else {
				h = keyHash{rng.Uint64(), rng.Uint64()}
				keys = append(keys, h)
			}
			m.put(h, i)
			want[h] = i
		}
		if m.entries != len(want) || len(m.slots) > m.slotsMax || m.room() != m.capacity-len(want) {
			t.Fatalf("map of %d bytes: %d entries (want %d), %d slots of %d, room %d", mapBytes, m.entries, len(want),
				len(m.slots), m.slotsMax, m.room())
		}
		for h, off := range want {
			if got, ok := m.latest(h); !ok || got != off {
				t.Fatalf("map of %d bytes: latest %d %v, want %d", mapBytes, got, ok, off)
			}
		}
		if _, ok := m.latest(keyHash{1, 2}); ok {
			t.Fatalf("map of %d bytes: a key never put is found", mapBytes)
		}
	}
}
