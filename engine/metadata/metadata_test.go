package metadata

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// applier feeds commands to a state at consecutive indexes.
type applier struct {
	t tester
	s *State
}

// tester is what applier needs of *testing.T and *rapid.T.
type tester interface {
	Helper()
	Fatalf(format string, args ...any)
}

func newApplier(t tester) *applier { return &applier{t: t, s: New()} }

// do applies an encoded command at the next index.
func (a *applier) do(data []byte, err error) Result {
	a.t.Helper()
	if err != nil {
		a.t.Fatalf("encode: %v", err)
	}
	r := a.s.Apply(a.s.AppliedIndex()+1, data)
	if cerr := a.s.Check(); cerr != nil {
		a.t.Fatalf("invariant broken after apply: %v", cerr)
	}
	return r
}

// ok applies a command that must succeed.
func (a *applier) ok(data []byte, err error) Result {
	a.t.Helper()
	r := a.do(data, err)
	if r.Err != nil {
		a.t.Fatalf("apply: %v", r.Err)
	}
	return r
}

// nodes registers nodes 1..n without racks.
func (a *applier) nodes(n int) {
	a.t.Helper()
	for id := uint64(1); id <= uint64(n); id++ {
		a.ok(EncodeRegisterNode(id, "127.0.0.1:"+string(rune('0'+id%10)), ""))
	}
}

// wantErr fails unless r.Err matches target.
func wantErr(t *testing.T, r Result, target error) {
	t.Helper()
	if !errors.Is(r.Err, target) {
		t.Fatalf("error %v, want %v", r.Err, target)
	}
}

// TestRegisterNode shows registration, update, idempotent re-registration
// (no version bump) and validation.
func TestRegisterNode(t *testing.T) {
	a := newApplier(t)
	r := a.ok(EncodeRegisterNode(2, "h2:9092", "rack-a"))
	if r.Version != 1 {
		t.Fatalf("version %d after first change, want 1", r.Version)
	}
	a.ok(EncodeRegisterNode(1, "h1:9092", ""))
	if got := a.s.Nodes(); len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 || got[1].Rack != "rack-a" {
		t.Fatalf("nodes %+v, want 1 and 2 sorted", got)
	}
	r = a.ok(EncodeRegisterNode(1, "h1:9092", ""))
	if r.Version != 2 {
		t.Fatalf("re-registering the same values bumped the version to %d", r.Version)
	}
	a.ok(EncodeRegisterNode(1, "h1:9093", "rack-b"))
	if n, _ := a.s.Node(1); n.Address != "h1:9093" || n.Rack != "rack-b" || a.s.Version() != 3 {
		t.Fatalf("update not applied: %+v version %d", n, a.s.Version())
	}
	wantErr(t, a.do(EncodeRegisterNode(0, "h:1", "")), ErrInvalidNode)
	wantErr(t, a.do(EncodeRegisterNode(3, "", "")), ErrInvalidNode)
	wantErr(t, a.do(EncodeRegisterNode(3, strings.Repeat("h", NodeTextLengthMax+1), "")), ErrInvalidNode)
	wantErr(t, a.do(EncodeRegisterNode(3, "h:1", strings.Repeat("r", NodeTextLengthMax+1))), ErrInvalidNode)
	if a.s.Version() != 3 || len(a.s.Nodes()) != 2 {
		t.Fatalf("a refused command changed the state")
	}
}

// TestTooManyNodes shows registration stops at NodesMax.
func TestTooManyNodes(t *testing.T) {
	a := newApplier(t)
	for id := uint64(1); id <= NodesMax; id++ {
		a.ok(EncodeRegisterNode(id, "h:1", ""))
	}
	wantErr(t, a.do(EncodeRegisterNode(NodesMax+1, "h:1", "")), ErrTooManyNodes)
	a.ok(EncodeRegisterNode(NodesMax, "h:2", "")) // updates still work
}

// TestFenceNode shows a fenced node gets no new replicas, keeps its old
// ones, is unfenced by registering again, and unknown nodes are refused.
func TestFenceNode(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	a.ok(EncodeCreateTopic("before", 3, 3, nil))
	a.ok(EncodeSetNodeFenced(2, true))
	if n, _ := a.s.Node(2); !n.Fenced {
		t.Fatal("node 2 not fenced")
	}
	wantErr(t, a.do(EncodeCreateTopic("rf3", 1, 3, nil)), ErrNotEnoughReplicas)
	r := a.ok(EncodeCreateTopic("after", 8, 2, nil))
	for p, replicas := range r.Topic.Replicas {
		if containsID(replicas, 2) {
			t.Fatalf("partition %d placed on fenced node 2: %v", p, replicas)
		}
	}
	if got := len(a.s.HostedPartitions(2)); got != 3 {
		t.Fatalf("fenced node hosts %d partitions, want its 3 old ones", got)
	}
	v := a.s.Version()
	a.ok(EncodeSetNodeFenced(2, true))
	if a.s.Version() != v {
		t.Fatal("fencing a fenced node bumped the version")
	}
	a.ok(EncodeRegisterNode(2, "127.0.0.1:2", ""))
	if n, _ := a.s.Node(2); n.Fenced {
		t.Fatal("registering again did not unfence")
	}
	wantErr(t, a.do(EncodeSetNodeFenced(9, true)), ErrUnknownNode)
}

// TestCreateTopic shows a created topic's assignment, defaults and the
// result carrying it.
func TestCreateTopic(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	r := a.ok(EncodeCreateTopic("orders", 6, 3, []ConfigEntry{{ConfigMaxMessageBytes, "1048576"}}))
	if r.Topic == nil || r.Topic.Name != "orders" || r.Topic.Partitions() != 6 || r.Topic.ID != 1 {
		t.Fatalf("result topic %+v", r.Topic)
	}
	got, ok := a.s.Topic("orders")
	if !ok || got.Config.RetentionMs != RetentionMsDefault || got.Config.RetentionBytes != -1 ||
		got.Config.MaxMessageBytes != 1<<20 || got.Config.CleanupPolicy != CleanupDelete {
		t.Fatalf("topic %+v", got)
	}
	for p := int32(0); p < 6; p++ {
		replicas, err := a.s.Assignment("orders", p)
		if err != nil || len(replicas) != 3 {
			t.Fatalf("partition %d: %v %v", p, replicas, err)
		}
	}
	leaders := map[uint64]int{}
	for _, replicas := range got.Replicas {
		leaders[replicas[0]]++
	}
	if leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("preferred leaders %v, want 2 each", leaders)
	}
	if _, err := a.s.Assignment("orders", 6); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("partition 6: %v", err)
	}
	if _, err := a.s.Assignment("nope", 0); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
}

// TestCreateTopicErrors shows every refusal of CreateTopic and that none
// changes the state.
func TestCreateTopicErrors(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	a.ok(EncodeCreateTopic("t", 1, 1, nil))
	v := a.s.Version()
	cases := []struct {
		name       string
		partitions int32
		rf         int32
		configs    []ConfigEntry
		want       error
	}{
		{"t", 1, 1, nil, ErrTopicExists},
		{"", 1, 1, nil, ErrInvalidTopicName},
		{".", 1, 1, nil, ErrInvalidTopicName},
		{"..", 1, 1, nil, ErrInvalidTopicName},
		{"a b", 1, 1, nil, ErrInvalidTopicName},
		{"a/b", 1, 1, nil, ErrInvalidTopicName},
		{"é", 1, 1, nil, ErrInvalidTopicName},
		{strings.Repeat("x", 250), 1, 1, nil, ErrInvalidTopicName},
		{"p0", 0, 1, nil, ErrInvalidPartitions},
		{"p-", -1, 1, nil, ErrInvalidPartitions},
		{"pbig", PartitionsMax + 1, 1, nil, ErrInvalidPartitions},
		{"rf0", 1, 0, nil, ErrInvalidReplicationFactor},
		{"rf4", 1, 4, nil, ErrNotEnoughReplicas},
		{"cfg", 1, 1, []ConfigEntry{{"retention.days", "1"}}, ErrInvalidConfig},
		{"cfg", 1, 1, []ConfigEntry{{ConfigCleanupPolicy, "shred"}}, ErrInvalidConfig},
	}
	for _, c := range cases {
		wantErr(t, a.do(EncodeCreateTopic(c.name, c.partitions, c.rf, c.configs)), c.want)
	}
	if a.s.Version() != v || len(a.s.Topics()) != 1 {
		t.Fatal("a refused create changed the state")
	}
	a.ok(EncodeCreateTopic(strings.Repeat("x", 249), 1, 1, nil))
	a.ok(EncodeCreateTopic("Az09._-", PartitionsMax, 3, nil))
}

// TestTooManyPartitions shows the cluster-wide partition bound.
func TestTooManyPartitions(t *testing.T) {
	a := newApplier(t)
	a.nodes(1)
	a.s.partitionsTotal = ClusterPartitionsMax - 2 // as if many topics existed
	wantErr(t, a.s.Apply(a.s.AppliedIndex()+1, mustBytes(EncodeCreateTopic("big", 3, 1, nil))), ErrTooManyPartitions)
	if r := a.s.Apply(a.s.AppliedIndex()+1, mustBytes(EncodeCreateTopic("fits", 2, 1, nil))); r.Err != nil {
		t.Fatal(r.Err)
	}
}

func mustBytes(data []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return data
}

// TestDeleteTopic shows deletion, ErrUnknownTopic, and that a re-created
// topic gets a new id.
func TestDeleteTopic(t *testing.T) {
	a := newApplier(t)
	a.nodes(2)
	first := a.ok(EncodeCreateTopic("t", 2, 2, nil)).Topic.ID
	a.ok(EncodeDeleteTopic("t"))
	if _, ok := a.s.Topic("t"); ok || len(a.s.HostedPartitions(1)) != 0 {
		t.Fatal("topic still there")
	}
	wantErr(t, a.do(EncodeDeleteTopic("t")), ErrUnknownTopic)
	second := a.ok(EncodeCreateTopic("t", 2, 2, nil)).Topic.ID
	if second == first {
		t.Fatalf("topic id %d reused", first)
	}
}

// TestDeleteTopicByID shows that a delete naming a topic's UUID removes
// only the topic that has it: one naming the UUID of a topic deleted and
// created again under the name is refused (ErrUnknownTopicID) and changes
// nothing.
func TestDeleteTopicByID(t *testing.T) {
	a := newApplier(t)
	a.nodes(2)
	old := a.ok(EncodeCreateTopic("t", 1, 2, nil)).Topic.UUID
	a.ok(EncodeDeleteTopicID("t", old))
	fresh := a.ok(EncodeCreateTopic("t", 1, 2, nil)).Topic.UUID
	version := a.s.Version()
	wantErr(t, a.do(EncodeDeleteTopicID("t", old)), ErrUnknownTopicID)
	if got, ok := a.s.Topic("t"); !ok || got.UUID != fresh || a.s.Version() != version {
		t.Fatalf("after a stale delete: topic %+v (exists %v), version %d, want %d", got, ok, a.s.Version(), version)
	}
	a.ok(EncodeDeleteTopicID("t", fresh))
	if _, ok := a.s.Topic("t"); ok {
		t.Fatal("topic still there after a delete by its id")
	}
}

// TestAlterTopicConfig shows validation of every key, that a compacting
// cleanup.policy is taken (the node gates it), that retention and segment keys are taken,
// resets, all-or-nothing application and no version bump for a no-op.
func TestAlterTopicConfig(t *testing.T) {
	a := newApplier(t)
	a.nodes(1)
	a.ok(EncodeCreateTopic("t", 1, 1, nil))
	for _, e := range []ConfigEntry{{ConfigCleanupPolicy, "compact"}, {ConfigCleanupPolicy, "compact,delete"}} {
		// The state machine takes it (the node gates it before proposing).
		r := a.ok(EncodeAlterTopicConfig("t", []ConfigEntry{e}, nil))
		if r.Topic.Config.CleanupPolicy.String() != e.Value || !r.Topic.Config.CleanupPolicy.Compacts() {
			t.Errorf("set %s=%s: policy %v", e.Name, e.Value, r.Topic.Config.CleanupPolicy)
		}
	}
	r := a.ok(EncodeAlterTopicConfig("t", []ConfigEntry{
		{ConfigRetentionMs, "60000"}, {ConfigRetentionBytes, "1073741824"}, {ConfigSegmentBytes, "4096"}, {ConfigSegmentMs, "1000"},
		{ConfigCleanupPolicy, "delete"},
	}, nil))
	want := DefaultTopicConfig()
	want.RetentionMs, want.RetentionBytes, want.SegmentBytes, want.SegmentMs = 60000, 1<<30, 4096, 1000
	if r.Topic.Config != want {
		t.Fatalf("config %+v, want %+v", r.Topic.Config, want)
	}
	r = a.ok(EncodeAlterTopicConfig("t", []ConfigEntry{{ConfigMaxMessageBytes, "1048576"}},
		[]string{ConfigRetentionMs, ConfigRetentionBytes, ConfigSegmentBytes, ConfigSegmentMs, ConfigCleanupPolicy, ConfigMaxMessageBytes}))
	if r.Topic.Config != DefaultTopicConfig() {
		t.Fatalf("config %+v, want the defaults", r.Topic.Config)
	}
	got, _ := a.s.Topic("t")
	v := a.s.Version()
	bad := [][]ConfigEntry{
		{{ConfigRetentionMs, "-2"}}, {{ConfigRetentionMs, "1e3"}}, {{ConfigRetentionMs, " 5"}},
		{{ConfigRetentionBytes, "-5"}}, {{ConfigSegmentBytes, "4095"}}, {{ConfigSegmentBytes, "1073741825"}},
		{{ConfigSegmentMs, "99"}}, {{ConfigSegmentMs, "x"}},
		{{ConfigMaxMessageBytes, "0"}}, {{ConfigMaxMessageBytes, "1048577"}}, {{ConfigCleanupPolicy, "Delete"}},
		{{"unknown.key", "1"}},
		{{ConfigMaxMessageBytes, "1048576"}, {ConfigCleanupPolicy, "compacted"}}, // all or nothing
	}
	for _, sets := range bad {
		wantErr(t, a.do(EncodeAlterTopicConfig("t", sets, nil)), ErrInvalidConfig)
	}
	wantErr(t, a.do(EncodeAlterTopicConfig("t", nil, []string{"unknown.key"})), ErrInvalidConfig)
	wantErr(t, a.do(EncodeAlterTopicConfig("t", make([]ConfigEntry, configEntriesMax+1), nil)), ErrInvalidConfig)
	wantErr(t, a.do(EncodeAlterTopicConfig("nope", nil, nil)), ErrUnknownTopic)
	a.ok(EncodeAlterTopicConfig("t", []ConfigEntry{{ConfigMaxMessageBytes, "1048576"}}, nil))
	if got2, _ := a.s.Topic("t"); got2.Config != got.Config || a.s.Version() != v {
		t.Fatalf("refused or no-op alters changed the state: %+v version %d->%d", got2.Config, v, a.s.Version())
	}
}

// TestEnforced shows which stored values the nodes honour: every default,
// a smaller max.message.bytes and every cleanup.policy (a larger
// max.message.bytes is not); describe marks the others.
func TestEnforced(t *testing.T) {
	for _, e := range DefaultTopicConfig().Entries() {
		if got, want := Enforced(e.Name, e.Value), true; got != want {
			t.Errorf("Enforced(%s, %s) = %v, want %v", e.Name, e.Value, got, want)
		}
	}
	if Enforced(ConfigMaxMessageBytes, "2000000") || Enforced("nope", "1") {
		t.Errorf("a larger max.message.bytes or an unknown key counted as enforced")
	}
	if !Enforced(ConfigLocalRetentionMs, "1000") || !Enforced(ConfigLocalRetentionBytes, "-1") {
		t.Fatal("a local retention is marked not enforced; tiered topics keep to it (LocalRetentionNote says what it means)")
	}
	if n := LocalRetentionNote(ConfigLocalRetentionMs, "1000", true); !strings.HasPrefix(n, "enforced") {
		t.Errorf("tiered local.retention.ms note %q", n)
	}
	if n := LocalRetentionNote(ConfigLocalRetentionBytes, "100", false); !strings.HasPrefix(n, "no effect") {
		t.Errorf("untiered local.retention.bytes note %q", n)
	}
	if LocalRetentionNote(ConfigLocalRetentionMs, "-2", true) != "" || LocalRetentionNote(ConfigRetentionMs, "1000", true) != "" {
		t.Errorf("a note for the default or another key")
	}
	if !Enforced(ConfigMaxMessageBytes, "1000") || !Enforced(ConfigCleanupPolicy, "compact") || !Enforced(ConfigCleanupPolicy, "compact,delete") {
		t.Errorf("a smaller max.message.bytes, cleanup.policy=compact or compact,delete counted as not enforced")
	}
}

// TestConfigEntries shows describe output is sorted and round-trips.
func TestConfigEntries(t *testing.T) {
	c := DefaultTopicConfig()
	entries := c.Entries()
	for i := 1; i < len(entries); i++ {
		if entries[i-1].Name >= entries[i].Name {
			t.Fatalf("entries not sorted: %v", entries)
		}
	}
	var back TopicConfig
	for _, e := range entries {
		if err := back.set(e.Name, e.Value); err != nil {
			t.Fatal(err)
		}
	}
	if back != c {
		t.Fatalf("round trip %+v, want %+v", back, c)
	}
}

// TestAllocateProducerIDs shows ids are handed out in increasing,
// disjoint blocks, bounds are checked and exhaustion is refused.
func TestAllocateProducerIDs(t *testing.T) {
	a := newApplier(t)
	r1 := a.ok(EncodeAllocateProducerIDs(1))
	r2 := a.ok(EncodeAllocateProducerIDs(1000))
	r3 := a.ok(EncodeAllocateProducerIDs(1))
	if r1.FirstProducerID != FirstProducerID || r1.ProducerIDCount != 1 ||
		r2.FirstProducerID != FirstProducerID+1 || r2.ProducerIDCount != 1000 || r3.FirstProducerID != FirstProducerID+1001 {
		t.Fatalf("allocations %+v %+v %+v", r1, r2, r3)
	}
	wantErr(t, a.do(EncodeAllocateProducerIDs(0)), ErrInvalidProducerIDCount)
	wantErr(t, a.do(EncodeAllocateProducerIDs(ProducerIDBlockMax+1)), ErrInvalidProducerIDCount)
	a.s.nextProducerID = math.MaxInt64 - 10 // next never passes MaxInt64
	wantErr(t, a.do(EncodeAllocateProducerIDs(11)), ErrProducerIDsExhausted)
	if r := a.ok(EncodeAllocateProducerIDs(10)); r.FirstProducerID != math.MaxInt64-10 || a.s.NextProducerID() != math.MaxInt64 {
		t.Fatalf("last block %+v", r)
	}
}

// TestInvalidCommand shows garbage and empty commands are refused without
// a change, and still consume their index.
func TestInvalidCommand(t *testing.T) {
	s := New()
	for i, data := range [][]byte{{0xff, 0xff}, {}, nil, WithProposalID(nil, 7)} {
		r := s.Apply(uint64(i+1), data)
		if !errors.Is(r.Err, ErrInvalidCommand) || r.Version != 0 {
			t.Fatalf("data %x: %+v", data, r)
		}
	}
	if s.AppliedIndex() != 4 {
		t.Fatalf("applied index %d", s.AppliedIndex())
	}
	if _, err := EncodeRegisterNode(1, "\xff", ""); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("non-UTF-8 address encoded: %v", err)
	}
}

// TestProposalID shows the proposal id set with WithProposalID comes back
// in the result, the last one winning.
func TestProposalID(t *testing.T) {
	s := New()
	data := WithProposalID(WithProposalID(mustBytes(EncodeAllocateProducerIDs(1)), 5), 42)
	if r := s.Apply(1, data); r.Err != nil || r.ProposalID != 42 {
		t.Fatalf("result %+v", r)
	}
}

// TestApplyGapPanics shows a skipped or repeated index is a bug.
func TestApplyGapPanics(t *testing.T) {
	for _, index := range []uint64{0, 2} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("index %d after 0 did not panic", index)
				}
			}()
			New().Apply(index, nil)
		}()
	}
	s := New()
	s.ApplyEmpty(1)
	if r := s.Apply(2, mustBytes(EncodeAllocateProducerIDs(1))); r.Err != nil || s.AppliedIndex() != 2 {
		t.Fatalf("after ApplyEmpty: %+v", r)
	}
}

// TestHostedPartitions shows the per-node list is sorted by topic then
// partition and matches the assignments.
func TestHostedPartitions(t *testing.T) {
	a := newApplier(t)
	a.nodes(4)
	a.ok(EncodeCreateTopic("zeta", 5, 2, nil))
	a.ok(EncodeCreateTopic("alpha", 7, 3, nil))
	total := 0
	for id := uint64(1); id <= 4; id++ {
		refs := a.s.HostedPartitions(id)
		total += len(refs)
		for i, ref := range refs {
			if i > 0 {
				prev := refs[i-1]
				if prev.Topic > ref.Topic || prev.Topic == ref.Topic && prev.Partition >= ref.Partition {
					t.Fatalf("node %d: not sorted at %d: %+v", id, i, refs)
				}
			}
			replicas, _ := a.s.Assignment(ref.Topic, ref.Partition)
			if !containsID(replicas, id) || len(replicas) != len(ref.Replicas) {
				t.Fatalf("node %d: ref %+v, assignment %v", id, ref, replicas)
			}
		}
	}
	if total != 5*2+7*3 {
		t.Fatalf("%d replicas hosted, want %d", total, 5*2+7*3)
	}
}

// TestReadsAreCopies shows callers cannot change the state through what
// reads return.
func TestReadsAreCopies(t *testing.T) {
	a := newApplier(t)
	a.nodes(2)
	r := a.ok(EncodeCreateTopic("t", 1, 2, nil))
	r.Topic.Replicas[0][0] = 99
	top, _ := a.s.Topic("t")
	top.Replicas[0][1] = 99
	rep, _ := a.s.Assignment("t", 0)
	rep[0] = 99
	a.s.Nodes()[0].Address = "x"
	a.s.HostedPartitions(1)[0].Replicas[0] = 99
	if err := a.s.Check(); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.s.Node(1); n.Address == "x" {
		t.Fatal("node changed through Nodes()")
	}
}
