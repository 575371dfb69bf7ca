package metadata

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// digestCommands registers three nodes, creates two topics, alters one,
// fences a node and allocates producer ids.
func digestCommands(t *testing.T) [][]byte {
	cmd := func(c *strandpb.MetadataCommand) []byte {
		data, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	var out [][]byte
	for id := uint64(1); id <= 3; id++ {
		out = append(out, cmd(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_RegisterNode{
			RegisterNode: &strandpb.MetadataRegisterNode{NodeId: id, Address: "n:9092", Rack: "r"}}}))
	}
	for _, name := range []string{"a", "b"} {
		out = append(out, cmd(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_CreateTopic{
			CreateTopic: &strandpb.MetadataCreateTopic{Name: name, Partitions: 3, ReplicationFactor: 3}}}))
	}
	out = append(out, cmd(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_AllocateProducerIds{
		AllocateProducerIds: &strandpb.MetadataAllocateProducerIds{Count: 10}}}))
	return out
}

// TestDigestEqualForEqualCommands shows two states fed the same commands
// have equal digests at every index, successive states differ, and a
// restored state has the digest of the one it came from.
func TestDigestEqualForEqualCommands(t *testing.T) {
	a, b := New(), New()
	seen := map[uint64]bool{}
	for i, data := range digestCommands(t) {
		index := uint64(i + 1)
		if r := a.Apply(index, data); r.Err != nil {
			t.Fatalf("command %d: %v", index, r.Err)
		}
		b.Apply(index, data)
		if a.Digest() != b.Digest() {
			t.Fatalf("index %d: digests %016x and %016x", index, a.Digest(), b.Digest())
		}
		if seen[a.Digest()] {
			t.Fatalf("index %d repeats an earlier digest", index)
		}
		seen[a.Digest()] = true
	}
	a.ApplyEmpty(a.AppliedIndex() + 1)
	if seen[a.Digest()] {
		t.Fatal("an empty entry left the digest as it was: the applied index is not in it")
	}
	r, err := Restore(a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if r.Digest() != a.Digest() {
		t.Fatalf("restored digest %016x, original %016x", r.Digest(), a.Digest())
	}
}

// TestDigestCatchesForgetfulRestore shows a restore that loses any part of
// the state (a node's rack or fencing, a topic, a replica list's order, a
// config, an id allocator) gives another digest than the replicas that
// kept it.
func TestDigestCatchesForgetfulRestore(t *testing.T) {
	s := New()
	for i, data := range digestCommands(t) {
		s.Apply(uint64(i+1), data)
	}
	want := s.Digest()
	cases := map[string]func(m *strandpb.MetadataSnapshot){
		"rack lost":       func(m *strandpb.MetadataSnapshot) { m.Nodes[1].Rack = "" },
		"fencing lost":    func(m *strandpb.MetadataSnapshot) { m.Nodes[2].Fenced = true },
		"topic dropped":   func(m *strandpb.MetadataSnapshot) { m.Topics = m.Topics[:1] },
		"replicas turned": func(m *strandpb.MetadataSnapshot) { r := m.Topics[0].Partitions[0].Replicas; r[0], r[1] = r[1], r[0] },
		"config lost":     func(m *strandpb.MetadataSnapshot) { m.Topics[1].Config.RetentionMs++ },
		"producer ids":    func(m *strandpb.MetadataSnapshot) { m.NextProducerId = FirstProducerID },
		"topic ids":       func(m *strandpb.MetadataSnapshot) { m.NextTopicId++ },
	}
	for name, edit := range cases {
		var m strandpb.MetadataSnapshot
		if err := proto.Unmarshal(s.Snapshot(), &m); err != nil {
			t.Fatal(err)
		}
		edit(&m)
		data, err := proto.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Restore(data)
		if err != nil {
			t.Fatalf("%s: the edited snapshot must still restore: %v", name, err)
		}
		if r.Digest() == want {
			t.Errorf("%s: digest %016x equals the full state's", name, want)
		}
	}
}
