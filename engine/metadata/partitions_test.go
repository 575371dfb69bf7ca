package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestCreatePartitionsGrows shows a grown topic keeps its partitions'
// replicas and reported leaders, gets new partitions with no leader yet,
// bumps the version once, shows the new partitions to their hosts, and
// survives a snapshot round trip.
func TestCreatePartitionsGrows(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	before := *a.ok(EncodeCreateTopic("t", 2, 2, nil)).Topic
	a.ok(EncodeReportLeaders([]LeaderReport{{Topic: "t", TopicID: before.ID, Partition: 1,
		Leader: Leader{Node: before.Replicas[1][1], Term: 4}}}))
	version := a.s.Version()
	r := a.ok(EncodeCreatePartitions("t", 5, false))
	if r.Version != version+1 || r.AddedPartitions != 3 || r.Topic.Partitions() != 5 {
		t.Fatalf("version %d (was %d), added %d, partitions %d; want +1, 3, 5", r.Version, version, r.AddedPartitions, r.Topic.Partitions())
	}
	after, _ := a.s.Topic("t")
	if after.ID != before.ID || after.UUID != before.UUID {
		t.Fatalf("grow changed the topic's identity: %d %s -> %d %s", before.ID, before.UUID, after.ID, after.UUID)
	}
	for p := range 2 {
		if !slices.Equal(after.Replicas[p], before.Replicas[p]) {
			t.Fatalf("partition %d moved: %v -> %v", p, before.Replicas[p], after.Replicas[p])
		}
	}
	if after.Leaders[1] != (Leader{Node: before.Replicas[1][1], Term: 4}) || after.Leaders[4] != (Leader{}) {
		t.Fatalf("leaders %+v: want partition 1's report kept, new partitions without", after.Leaders)
	}
	hosted := 0
	for id := uint64(1); id <= 3; id++ {
		for _, ref := range a.s.HostedPartitions(id) {
			if ref.Partition >= 2 {
				hosted++
			}
		}
	}
	if hosted != 3*2 {
		t.Fatalf("new partitions hosted %d times, want 6 (3 partitions x rf 2)", hosted)
	}
	restored, err := Restore(a.s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := restored.Topic("t"); !slices.EqualFunc(got.Replicas, after.Replicas, slices.Equal) || restored.Digest() != a.s.Digest() {
		t.Fatalf("restored topic %+v, want %+v", got, after)
	}
}

// TestCreatePartitionsRefusals shows every refusal is typed, says what to
// do, and changes nothing.
func TestCreatePartitionsRefusals(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	a.ok(EncodeCreateTopic("t", 4, 3, nil))
	cases := []struct {
		name       string
		partitions int32
		want       error
		text       string
	}{
		{"nope", 8, ErrUnknownTopic, `"nope"`},
		{"t", 4, ErrInvalidPartitions, `topic "t" already has 4 partitions`},
		{"t", 2, ErrInvalidPartitions, "partitions can only be added"},
		{"t", 0, ErrInvalidPartitions, "cannot shrink to 0"},
		{"t", -1, ErrInvalidPartitions, "cannot shrink to -1"},
		{"t", PartitionsMax + 1, ErrInvalidPartitions, fmt.Sprintf("want 5..%d", PartitionsMax)},
	}
	for _, c := range cases {
		snap := a.s.Snapshot()
		r := a.do(EncodeCreatePartitions(c.name, c.partitions, false))
		wantErr(t, r, c.want)
		if !strings.Contains(r.Err.Error(), c.text) {
			t.Fatalf("%s to %d: %q lacks %q", c.name, c.partitions, r.Err, c.text)
		}
		if after := a.s.Snapshot(); !bytes.Equal(withoutIndex(t, after), withoutIndex(t, snap)) {
			t.Fatalf("%s to %d: a refused command changed the state", c.name, c.partitions)
		}
	}
	a.ok(EncodeSetNodeFenced(2, true))
	wantErr(t, a.do(EncodeCreatePartitions("t", 5, false)), ErrNotEnoughReplicas)
	a.ok(EncodeSetNodeFenced(2, false))
	a.ok(EncodeCreatePartitions("t", PartitionsMax, false))
}

// withoutIndex is a snapshot with its applied index zeroed.
func withoutIndex(t *testing.T, snap []byte) []byte {
	s, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	return s.marshal(0)
}

// TestCreatePartitionsClusterLimit shows an add that would pass
// ClusterPartitionsMax is refused, and one that reaches it exactly is
// taken.
func TestCreatePartitionsClusterLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("places a million partitions")
	}
	s := New()
	apply := func(data []byte, err error) Result {
		if err != nil {
			t.Fatal(err)
		}
		return s.Apply(s.AppliedIndex()+1, data)
	}
	apply(EncodeRegisterNode(1, "h:1", ""))
	full := ClusterPartitionsMax / PartitionsMax // topics of PartitionsMax partitions
	for i := range full {
		if r := apply(EncodeCreateTopic(fmt.Sprintf("t%03d", i), PartitionsMax, 1, nil)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	left := int32(ClusterPartitionsMax - full*PartitionsMax)
	apply(EncodeCreateTopic("last", 1, 1, nil))
	if r := apply(EncodeCreatePartitions("last", left+1, false)); !errors.Is(r.Err, ErrTooManyPartitions) {
		t.Fatalf("grow past the cluster limit: %v, want ErrTooManyPartitions", r.Err)
	}
	if r := apply(EncodeCreatePartitions("last", left, false)); r.Err != nil {
		t.Fatalf("grow to the cluster limit: %v", r.Err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestCreatePartitionsValidateOnly shows validate-only runs every check
// and the placement, answers the topic as it would be, and changes
// nothing (not even the version).
func TestCreatePartitionsValidateOnly(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	a.ok(EncodeCreateTopic("t", 2, 3, nil))
	snap := withoutIndex(t, a.s.Snapshot())
	r := a.ok(EncodeCreatePartitions("t", 6, true))
	if r.Topic.Partitions() != 6 || r.AddedPartitions != 4 {
		t.Fatalf("validate-only answered %d partitions, %d added; want 6, 4", r.Topic.Partitions(), r.AddedPartitions)
	}
	if !bytes.Equal(withoutIndex(t, a.s.Snapshot()), snap) {
		t.Fatal("validate-only changed the state")
	}
	wantErr(t, a.do(EncodeCreatePartitions("t", 1, true)), ErrInvalidPartitions)
	real := a.ok(EncodeCreatePartitions("t", 6, false))
	if !slices.EqualFunc(real.Topic.Replicas, r.Topic.Replicas, slices.Equal) {
		t.Fatalf("validate-only placed %v, the real add %v", r.Topic.Replicas, real.Topic.Replicas)
	}
}

// TestCreatePartitionsRackAware shows added partitions spread over racks
// like a create's.
func TestCreatePartitionsRackAware(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := newApplier(t)
		n := rapid.IntRange(1, 9).Draw(t, "nodes")
		for id := uint64(1); id <= uint64(n); id++ {
			a.ok(EncodeRegisterNode(id, "h:1", rapid.SampledFrom([]string{"", "a", "b", "c"}).Draw(t, "rack")))
		}
		rf := int32(rapid.IntRange(1, n).Draw(t, "rf"))
		partitions := int32(rapid.IntRange(1, 10).Draw(t, "p"))
		a.ok(EncodeCreateTopic("t", partitions, rf, nil))
		for range rapid.IntRange(1, 4).Draw(t, "adds") {
			partitions += int32(rapid.IntRange(1, 10).Draw(t, "more"))
			checkRacks(t, a.s, *a.ok(EncodeCreatePartitions("t", partitions, false)).Topic)
		}
	})
}

// TestPlacementSpreadWithAdds shows the spread guarantees of placement
// hold when topics grow: preferred-leader counts differ by at most 1 after
// every create and add, replica counts too with one replication factor
// and no racks.
func TestPlacementSpreadWithAdds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := newApplier(t)
		n := rapid.IntRange(1, 12).Draw(t, "nodes")
		a.nodes(n)
		rf := int32(rapid.IntRange(1, min(n, 5)).Draw(t, "rf"))
		counts := map[string]int32{}
		var names []string
		for i := range rapid.IntRange(1, 30).Draw(t, "steps") {
			if len(names) == 0 || rapid.Bool().Draw(t, "create") {
				name := fmt.Sprintf("t%02d", i)
				counts[name] = int32(rapid.IntRange(1, 20).Draw(t, "partitions"))
				names = append(names, name)
				a.ok(EncodeCreateTopic(name, counts[name], rf, nil))
			} else {
				name := rapid.SampledFrom(names).Draw(t, "topic")
				counts[name] += int32(rapid.IntRange(1, 20).Draw(t, "more"))
				a.ok(EncodeCreatePartitions(name, counts[name], false))
			}
			if leaders, replicas := spread(a.s); leaders > 1 || replicas > 1 {
				t.Fatalf("step %d: leader counts differ by %d, replica counts by %d", i, leaders, replicas)
			}
		}
	})
}
