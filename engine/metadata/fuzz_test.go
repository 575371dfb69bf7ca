package metadata

import (
	"bytes"
	"testing"
)

// fuzzEntries splits fuzz input into entries: each is one length byte and
// that many bytes (fewer at the end).
func fuzzEntries(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < 64 {
		n := int(data[0])
		data = data[1:]
		n = min(n, len(data))
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// joinEntries is fuzzEntries' inverse for seeds.
func joinEntries(entries ...[]byte) []byte {
	var out []byte
	for _, e := range entries {
		if len(e) > 255 {
			panic("seed entry too long")
		}
		out = append(out, byte(len(e)))
		out = append(out, e...)
	}
	return out
}

// fuzzSeeds are command sequences that reach every command and error.
func fuzzSeeds() [][]byte {
	m := mustBytes
	reg := func(id uint64, rack string) []byte { return m(EncodeRegisterNode(id, "h:1", rack)) }
	return [][]byte{
		joinEntries(reg(1, ""), reg(2, ""), reg(3, ""), m(EncodeCreateTopic("t", 4, 3, nil))),
		joinEntries(reg(1, "a"), reg(2, "b"), reg(3, "a"), m(EncodeCreateTopic("t", 6, 2, []ConfigEntry{{ConfigCleanupPolicy, "compact"}})),
			m(EncodeAlterTopicConfig("t", []ConfigEntry{{ConfigRetentionMs, "5"}}, []string{ConfigCleanupPolicy})),
			m(EncodeDeleteTopic("t")), m(EncodeDeleteTopic("t"))),
		joinEntries(reg(1, ""), m(EncodeSetNodeFenced(1, true)), m(EncodeCreateTopic("t", 1, 1, nil)),
			m(EncodeSetNodeFenced(1, false)), m(EncodeCreateTopic("t", 1, 2, nil))),
		joinEntries(m(EncodeAllocateProducerIDs(1)), m(EncodeAllocateProducerIDs(1000)), m(EncodeAllocateProducerIDs(0))),
		joinEntries(WithProposalID(reg(7, ""), 9), []byte{0xff}, nil, m(EncodeCreateTopic("..", 1, 1, nil))),
		joinEntries(reg(1, "a"), reg(2, "b"), m(EncodeCreateTopic("t", 2, 2, nil)), m(EncodeCreatePartitions("t", 5, true)),
			m(EncodeCreatePartitions("t", 5, false)), m(EncodeCreatePartitions("t", 3, false)), m(EncodeCreatePartitions("u", 3, false)),
			m(EncodeSetNodeFenced(2, true)), m(EncodeCreatePartitions("t", 6, false))),
	}
}

// FuzzApply shows arbitrary entries never panic the state machine, keep
// its invariants and leave a state whose snapshot restores identically.
func FuzzApply(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := New()
		for i, entry := range fuzzEntries(data) {
			r := s.Apply(uint64(i+1), entry)
			if r.Version != s.Version() {
				t.Fatalf("result version %d, state %d", r.Version, s.Version())
			}
			if err := s.Check(); err != nil {
				t.Fatalf("entry %d (%x): %v", i, entry, err)
			}
		}
		snap := s.Snapshot()
		restored, err := Restore(snap)
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		if !bytes.Equal(restored.Snapshot(), snap) {
			t.Fatal("restored state snapshots differently")
		}
	})
}
