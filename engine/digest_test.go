package engine

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// digestEntries are the entries the digest tests feed: two idempotent
// producers, one plain batch, empty entries, a trim that evicts producer 1.
func digestEntries(t *testing.T) [][]byte {
	return [][]byte{
		EncodeProduceEntry(nil, 100, 0, Producer{1, 0, 0}, batchOf(t, 3, 10)),
		nil,
		EncodeProduceEntry(nil, 101, 0, Producer{2, 0, 0}, batchOf(t, 2, 20)),
		EncodeProduceEntry(nil, 102, 0, NoProducer, batchOf(t, 1, 30)),
		EncodeProduceEntry(nil, 103, 0, Producer{2, 0, 2}, batchOf(t, 4, 40)),
		EncodeProduceEntry(nil, 104, 0, Producer{2, 0, 2}, batchOf(t, 4, 40)), // duplicate
		EncodeTrimEntry(nil, 105, 0, 3),
		EncodeProduceEntry(nil, 106, 0, Producer{3, 1, 0}, batchOf(t, 2, 50)),
	}
}

// feed applies entries (nil: an empty entry) from index 1.
func feed(p *Partition, entries [][]byte) []uint64 {
	var digests []uint64
	for i, data := range entries {
		if data == nil {
			p.ApplyEmpty(uint64(i + 1))
		} else {
			p.Apply(uint64(i+1), data)
		}
		digests = append(digests, p.Digest())
	}
	return digests
}

// TestDigestEqualForEqualEntries shows two partitions fed the same entries
// have equal digests at every index, a restored one has the digest of the
// state it was taken from, and the digests of successive states differ.
func TestDigestEqualForEqualEntries(t *testing.T) {
	entries := digestEntries(t)
	a, b := NewPartition(), NewPartition()
	da, db := feed(a, entries), feed(b, entries)
	seen := map[uint64]int{}
	for i := range da {
		if da[i] != db[i] {
			t.Fatalf("index %d: digests %016x and %016x for the same entries", i+1, da[i], db[i])
		}
		if j, dup := seen[da[i]]; dup {
			t.Fatalf("indexes %d and %d share digest %016x", j+1, i+1, da[i])
		}
		seen[da[i]] = i
	}
	r, err := RestorePartition(a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if r.Digest() != a.Digest() {
		t.Fatalf("restored digest %016x, original %016x", r.Digest(), a.Digest())
	}
	mustCheck(t, a)
}

// TestDigestCatchesForgetfulRestore shows a restore that loses any part of
// the state gives a different digest than the replicas that kept it: each
// case edits the snapshot the way a buggy Snapshot or Restore would (drop
// the producer table, one producer, one index entry, one earlier batch of a
// producer; move the log start or a timestamp) and restores that.
func TestDigestCatchesForgetfulRestore(t *testing.T) {
	p := NewPartition()
	feed(p, digestEntries(t))
	feed := func(p *Partition, data []byte) { p.Apply(p.AppliedIndex()+1, data) }
	// More batches from producer 3, so it has earlier batches to forget.
	feed(p, EncodeProduceEntry(nil, 107, 0, Producer{3, 1, 2}, batchOf(t, 1, 60)))
	feed(p, EncodeProduceEntry(nil, 108, 0, Producer{3, 1, 3}, batchOf(t, 1, 70)))
	want := p.Digest()
	cases := map[string]func(s *strandpb.PartitionSnapshot){
		"producer table dropped": func(s *strandpb.PartitionSnapshot) { s.Producers = nil },
		"one producer dropped":   func(s *strandpb.PartitionSnapshot) { s.Producers = s.Producers[1:] },
		"earlier batches dropped": func(s *strandpb.PartitionSnapshot) {
			s.Producers[len(s.Producers)-1].EarlierBatches = s.Producers[len(s.Producers)-1].EarlierBatches[1:]
		},
		"producer epoch lost": func(s *strandpb.PartitionSnapshot) { s.Producers[len(s.Producers)-1].ProducerEpoch = 0 },
		"first index entry dropped": func(s *strandpb.PartitionSnapshot) {
			s.Batches = s.Batches[1:]
			s.LogStartOffset = s.Batches[0].BaseOffset
		},
		"append time lost":   func(s *strandpb.PartitionSnapshot) { s.Batches[1].AppendTimeMs = 0 },
		"max timestamp lost": func(s *strandpb.PartitionSnapshot) { s.Batches[0].MaxTimestampMs = 0 },
		"log start moved":    func(s *strandpb.PartitionSnapshot) { s.LogStartOffset++ },
	}
	for name, edit := range cases {
		var snap strandpb.PartitionSnapshot
		if err := proto.Unmarshal(p.Snapshot(), &snap); err != nil {
			t.Fatal(err)
		}
		edit(&snap)
		data, err := proto.Marshal(&snap)
		if err != nil {
			t.Fatal(err)
		}
		q, err := RestorePartition(data)
		if err != nil {
			t.Fatalf("%s: the edited snapshot must still restore (only the digest can tell): %v", name, err)
		}
		if q.Digest() == want {
			t.Errorf("%s: restored digest %016x equals the full state's", name, want)
		}
	}
}

// TestDigestSumsTrackCompaction shows Compacted keeps the digest's sums
// equal to a recomputation (check verifies them) and changes the digest.
func TestDigestSumsTrackCompaction(t *testing.T) {
	p := NewPartition()
	feed(p, digestEntries(t))
	before := p.Digest()
	p.Compacted(4)
	mustCheck(t, p)
	if p.Digest() == before {
		t.Fatal("compaction dropped index entries but kept the digest")
	}
}
