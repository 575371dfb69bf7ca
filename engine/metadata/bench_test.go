package metadata

import (
	"fmt"
	"testing"
)

// BenchmarkCreateTopic measures placing a 1000-partition, rf=3 topic on
// 100 nodes in 10 racks, with 20,000 partitions already placed.
func BenchmarkCreateTopic(b *testing.B) {
	s := New()
	index := uint64(0)
	apply := func(data []byte) Result {
		index++
		return s.Apply(index, data)
	}
	for id := uint64(1); id <= 100; id++ {
		apply(mustBytes(EncodeRegisterNode(id, "h:1", fmt.Sprint("r", id%10))))
	}
	for i := 0; i < 20; i++ {
		apply(mustBytes(EncodeCreateTopic(fmt.Sprint("base", i), 1000, 3, nil)))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := apply(mustBytes(EncodeCreateTopic(fmt.Sprint("t", i), 1000, 3, nil))); r.Err != nil {
			b.Fatal(r.Err)
		}
		b.StopTimer()
		apply(mustBytes(EncodeDeleteTopic(fmt.Sprint("t", i))))
		b.StartTimer()
	}
}

// BenchmarkSnapshot measures snapshotting 100 topics of 100 partitions.
func BenchmarkSnapshot(b *testing.B) {
	s := New()
	index := uint64(0)
	for id := uint64(1); id <= 10; id++ {
		index++
		s.Apply(index, mustBytes(EncodeRegisterNode(id, "h:1", "")))
	}
	for i := 0; i < 100; i++ {
		index++
		s.Apply(index, mustBytes(EncodeCreateTopic(fmt.Sprint("t", i), 100, 3, nil)))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.SetBytes(int64(len(s.Snapshot())))
	}
}
