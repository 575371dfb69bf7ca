package groups

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// FuzzCommands applies an arbitrary command sequence, classic steps among
// them (one byte picks the command, the next ones its arguments), and
// checks that nothing panics and Check's invariants hold after every
// command, as the coordinator applies whatever its log holds.
func FuzzCommands(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 0, 3, 1, 1, 2, 4, 5, 6})
	f.Add([]byte{0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := New()
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int(b)
		}
		for step := 0; len(data) > 0 && step < 500; step++ {
			op, member := next()%10, fmt.Sprintf("m%d", next()%4)
			switch op {
			case 0, 1, 2:
				var owned []TopicPartition
				for p := range next() % 5 {
					owned = append(owned, TopicPartition{Topic: "t", Partition: int32(p + next()%3)})
				}
				inst := ""
				if next()%2 == 0 {
					inst = "i" + member
				}
				_, _ = s.Heartbeat(Heartbeat{Group: "g", MemberID: member, InstanceID: inst, MemberEpoch: int32(next()%6) - 2,
					Seq: uint64(next()), Subscriptions: []string{"t", "u"}[:1+next()%2], Owned: owned,
					Topics: []TopicInfo{{Name: "t", Partitions: int32(next() % 6)}, {Name: "u", Partitions: 2, Racks: [][]string{{"a"}, {"b", "a"}}}},
					Rack:   []string{"", "a", "b"}[next()%3], NowMs: int64(step)})
			case 3:
				_ = s.Commit(Commit{Group: "g", MemberID: []string{"", member}[next()%2], MemberEpoch: int32(next() % 5),
					Offsets: []OffsetCommit{{Partition: TopicPartition{Topic: "t", Partition: int32(next() % 4)}, Offset: int64(next())}}, NowMs: int64(step)})
			case 4:
				s.Expire("g", member, int32(next()%5), int64(step))
			case 5:
				_ = s.DeleteGroup("g")
				s.DeleteTopic([]string{"t", "u"}[next()%2])
			case 6:
				s.ExpireOffsets(int64(step), int64(next()))
			case 7:
				var owned []TopicPartition
				for p := range next() % 3 {
					owned = append(owned, TopicPartition{Topic: "t", Partition: int32(p)})
				}
				_, _ = s.Heartbeat(Heartbeat{Group: "g", MemberID: member, Seq: uint64(next()), Subscriptions: []string{"t"}, Owned: owned,
					Topics: []TopicInfo{{Name: "t", Partitions: int32(next() % 6)}}, NowMs: int64(step),
					Classic: Classic{Step: ClassicStep(1 + next()%4), Generation: int32(next() % 5), Protocol: "range"}})
				_ = s.Commit(Commit{Group: "g", MemberID: member, MemberEpoch: int32(next() % 5), ClassicGeneration: true,
					Offsets: []OffsetCommit{{Partition: TopicPartition{Topic: "t", Partition: 0}, Offset: int64(step)}}, NowMs: int64(step)})
			case 8:
				_ = s.TxnCommit(TxnCommit{Commit: Commit{Group: "g", MemberID: []string{"", member}[next()%2], MemberEpoch: int32(next() % 5),
					Offsets: []OffsetCommit{{Partition: TopicPartition{Topic: "t", Partition: int32(next() % 4)}, Offset: int64(next())}}, NowMs: int64(step)},
					ProducerID: int64(next() % 3), ProducerEpoch: int32(next() % 4), InstanceID: []string{"", "i" + member}[next()%2]})
			case 9:
				_ = s.TxnMarker(TxnMarker{Group: "g", ProducerID: int64(next() % 3), ProducerEpoch: int32(next() % 5), Commit: next()%2 == 0,
					KeptEpoch: next()%2 == 0, NowMs: int64(step)})
				_ = s.Unstable("g", nil)
			}
			if err := s.Check(); err != nil {
				t.Fatalf("step %d (op %d): %v", step, op, err)
			}
		}
	})
}

// FuzzRestorePending restores arbitrary snapshot bytes seeded with pending
// transactional offsets and fences (a snapshot record of the
// group log is read back from disk): no panic, and a snapshot that
// restores gives back an equal snapshot after another round trip.
func FuzzRestorePending(f *testing.F) {
	s := New()
	_ = s.Commit(Commit{Group: "g", Offsets: []OffsetCommit{{Partition: TopicPartition{Topic: "t", Partition: 1}, Offset: 4}}})
	_ = s.TxnCommit(TxnCommit{Commit: Commit{Group: "g", Offsets: []OffsetCommit{{Partition: TopicPartition{Topic: "t", Partition: 0}, Offset: 7}}},
		ProducerID: 3, ProducerEpoch: 1})
	_ = s.TxnMarker(TxnMarker{Group: "g", ProducerID: 5, ProducerEpoch: 2})
	seed, _ := proto.Marshal(s.Snapshot(9))
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		var snap strandpb.GroupsSnapshot
		if proto.Unmarshal(data, &snap) != nil {
			return
		}
		r, err := Restore(&snap)
		if err != nil {
			return
		}
		again, err := Restore(r.Snapshot(snap.GetAsOf()))
		if err != nil {
			t.Fatalf("a restored state's snapshot does not restore: %v", err)
		}
		if !proto.Equal(again.Snapshot(snap.GetAsOf()), r.Snapshot(snap.GetAsOf())) {
			t.Fatal("snapshot round trip differs")
		}
	})
}
