package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/strandlog/strand/proto/strandpb"
)

// drawCommand draws one encoded command, valid or not, over a small space
// of ids and names so commands interact.
func drawCommand(t *rapid.T) []byte {
	name := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "bad/name"}).Draw(t, "name")
	var data []byte
	var err error
	switch rapid.IntRange(0, 7).Draw(t, "kind") {
	case 0, 1:
		id := rapid.Uint64Range(0, 9).Draw(t, "id")
		data, err = EncodeRegisterNode(id, fmt.Sprintf("h%d:1", id), rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(t, "rack"))
	case 2:
		data, err = EncodeSetNodeFenced(rapid.Uint64Range(1, 9).Draw(t, "id"), rapid.Bool().Draw(t, "fenced"))
	case 3:
		data, err = EncodeCreateTopic(name, int32(rapid.IntRange(0, 30).Draw(t, "p")), int32(rapid.IntRange(0, 4).Draw(t, "rf")),
			[]ConfigEntry{{ConfigMaxMessageBytes, rapid.SampledFrom([]string{"1048576", "1"}).Draw(t, "max")}})
	case 4:
		data, err = EncodeDeleteTopic(name)
	case 5:
		data, err = EncodeAlterTopicConfig(name, []ConfigEntry{{ConfigRetentionMs, fmt.Sprint(rapid.IntRange(-2, 9).Draw(t, "ms"))}}, nil)
	case 6:
		data, err = EncodeAllocateProducerIDs(int32(rapid.IntRange(0, 100).Draw(t, "count")))
	case 7:
		data, err = EncodeCreatePartitions(name, int32(rapid.IntRange(0, 40).Draw(t, "p")), rapid.Bool().Draw(t, "validate"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// resultSignature is the replica-independent content of a result.
func resultSignature(r Result) string {
	return fmt.Sprintf("%v|%d|%+v|%d|%d|%d", r.Err, r.Version, r.Topic, r.FirstProducerID, r.ProducerIDCount, r.AddedPartitions)
}

// TestSnapshotRoundTrip shows a state restored from its snapshot at any
// point behaves identically afterwards: same results, same snapshots.
func TestSnapshotRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := rapid.SliceOfN(rapid.Custom(drawCommand), 0, 30).Draw(t, "before")
		after := rapid.SliceOfN(rapid.Custom(drawCommand), 1, 30).Draw(t, "after")
		orig := New()
		for i, data := range before {
			orig.Apply(uint64(i+1), data)
		}
		snap := orig.Snapshot()
		restored, err := Restore(snap)
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		if !bytes.Equal(restored.Snapshot(), snap) || restored.AppliedIndex() != orig.AppliedIndex() {
			t.Fatal("restored state differs")
		}
		for _, data := range after {
			index := orig.AppliedIndex() + 1
			r1, r2 := orig.Apply(index, data), restored.Apply(index, data)
			if resultSignature(r1) != resultSignature(r2) {
				t.Fatalf("index %d: %s vs restored %s", index, resultSignature(r1), resultSignature(r2))
			}
		}
		if !bytes.Equal(orig.Snapshot(), restored.Snapshot()) {
			t.Fatal("states diverged after the same commands")
		}
	})
}

// TestDeterminism shows the same commands give byte-identical snapshots
// and identical results, run after run.
func TestDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cmds := rapid.SliceOfN(rapid.Custom(drawCommand), 1, 60).Draw(t, "cmds")
		var snaps [3][]byte
		var sigs [3]string
		for run := range snaps {
			s := New()
			for i, data := range cmds {
				sigs[run] += resultSignature(s.Apply(uint64(i+1), data)) + "\n"
			}
			snaps[run] = s.Snapshot()
		}
		for run := 1; run < len(snaps); run++ {
			if !bytes.Equal(snaps[0], snaps[run]) || sigs[0] != sigs[run] {
				t.Fatalf("run %d differs from run 0", run)
			}
		}
	})
}

// TestEmptySnapshot shows a fresh state round-trips.
func TestEmptySnapshot(t *testing.T) {
	s, err := Restore(New().Snapshot())
	if err != nil || s.Version() != 0 || s.NextProducerID() != FirstProducerID || len(s.Topics()) != 0 {
		t.Fatalf("%v %+v", err, s)
	}
}

// TestRestoreRefuses shows Restore refuses unknown versions, garbage and
// snapshots that break each kind of invariant.
func TestRestoreRefuses(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	a.ok(EncodeCreateTopic("t", 2, 2, nil))
	good := a.s.Snapshot()
	mutate := func(f func(*strandpb.MetadataSnapshot)) []byte {
		var snap strandpb.MetadataSnapshot
		if err := proto.Unmarshal(good, &snap); err != nil {
			t.Fatal(err)
		}
		f(&snap)
		data, err := proto.Marshal(&snap)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	cases := map[string][]byte{
		"garbage":           {0xff, 0xff, 0xff},
		"version 0":         mutate(func(s *strandpb.MetadataSnapshot) { s.Version = 0 }),
		"version 2":         mutate(func(s *strandpb.MetadataSnapshot) { s.Version = 2 }),
		"nodes unsorted":    mutate(func(s *strandpb.MetadataSnapshot) { s.Nodes[0], s.Nodes[1] = s.Nodes[1], s.Nodes[0] }),
		"node id 0":         mutate(func(s *strandpb.MetadataSnapshot) { s.Nodes[0].NodeId = 0 }),
		"topic id reused":   mutate(func(s *strandpb.MetadataSnapshot) { s.NextTopicId = 1 }),
		"bad topic name":    mutate(func(s *strandpb.MetadataSnapshot) { s.Topics[0].Name = "a b" }),
		"duplicate topic":   mutate(func(s *strandpb.MetadataSnapshot) { s.Topics = append(s.Topics, s.Topics[0]) }),
		"replica unknown":   mutate(func(s *strandpb.MetadataSnapshot) { s.Topics[0].Partitions[0].Replicas[0] = 99 }),
		"replica twice":     mutate(func(s *strandpb.MetadataSnapshot) { r := s.Topics[0].Partitions[0].Replicas; r[1] = r[0] }),
		"no replicas":       mutate(func(s *strandpb.MetadataSnapshot) { s.Topics[0].Partitions[0].Replicas = nil }),
		"target unknown":    mutate(func(s *strandpb.MetadataSnapshot) { s.Topics[0].Partitions[0].TargetReplicas = []uint64{99} }),
		"no partitions":     mutate(func(s *strandpb.MetadataSnapshot) { s.Topics[0].Partitions = nil }),
		"config missing":    mutate(func(s *strandpb.MetadataSnapshot) { s.Topics[0].Config = nil }),
		"policy unknown":    mutate(func(s *strandpb.MetadataSnapshot) { s.Topics[0].Config.CleanupPolicy = 7 }),
		"producer id below": mutate(func(s *strandpb.MetadataSnapshot) { s.NextProducerId = 0 }),
		"cluster id short":  mutate(func(s *strandpb.MetadataSnapshot) { s.ClusterId = []byte{1, 2, 3} }),
		"topic uuid zero":   mutate(func(s *strandpb.MetadataSnapshot) { s.Topics[0].TopicUuid = nil }),
		"topic uuid short":  mutate(func(s *strandpb.MetadataSnapshot) { s.Topics[0].TopicUuid = []byte{1} }),
		"leader no replica": mutate(func(s *strandpb.MetadataSnapshot) {
			s.Topics[0].Partitions[0].LeaderId, s.Topics[0].Partitions[0].LeaderTerm = 99, 3
		}),
		"leader without term": mutate(func(s *strandpb.MetadataSnapshot) {
			s.Topics[0].Partitions[0].LeaderId = s.Topics[0].Partitions[0].Replicas[0]
		}),
	}
	for name, data := range cases {
		if _, err := Restore(data); !errors.Is(err, ErrInvalidSnapshot) {
			t.Errorf("%s: restore gave %v, want ErrInvalidSnapshot", name, err)
		}
	}
	if _, err := Restore(good); err != nil {
		t.Fatalf("the unmutated snapshot: %v", err)
	}
}
