package clientlib

import (
	"math/rand/v2"
	"strconv"
)

// Murmur2 is Kafka's murmur2 hash (org.apache.kafka.common.utils.Utils.murmur2),
// bit for bit, returned as Java's signed int so it compares with Kafka's own
// test vectors.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[length&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is Kafka's default partitioner for a keyed record:
// Utils.toPositive(Utils.murmur2(key)) % numPartitions. toPositive masks the
// sign bit (it is not Math.abs), so every key maps exactly as in Kafka.
func KeyPartition(key []byte, partitions int32) int32 {
	if partitions <= 0 {
		panic("clientlib: KeyPartition with no partitions")
	}
	return (Murmur2(key) & 0x7fffffff) % partitions
}

// SaltedKey spreads one hot key over salts keys "key:1" … "key:salts",
// choosing by pick (a counter or a random number): SaltedKey(k, 4, i)
// cycles through k:1..k:4 as i grows (R17). It trades per-key order for
// spread: records of one key land on up to salts partitions, so a consumer
// sees them in order per salted key only. A salts below 1 counts as 1.
func SaltedKey(key []byte, salts int, pick uint32) []byte {
	if salts < 1 {
		salts = 1
	}
	n := 1 + int(pick%uint32(salts))
	out := make([]byte, 0, len(key)+1+len(strconv.Itoa(n)))
	out = append(out, key...)
	out = append(out, ':')
	return strconv.AppendInt(out, int64(n), 10)
}

// Sticky is Kafka's sticky partitioner for keyless records, as a pure
// value: every keyless record of a topic goes to one partition until the
// batch it joined is sealed for sending, then the next record picks
// another partition at random. Batches fill up instead of spreading
// single records over every partition.
type Sticky struct {
	current map[string]int32
	last    map[string]int32
}

// Partition gives the partition for a keyless record of topic, which has
// partitions partitions, drawing a new one from rng when none is current.
func (s *Sticky) Partition(topic string, partitions int32, rng *rand.Rand) int32 {
	if s.current == nil {
		s.current = make(map[string]int32)
		s.last = make(map[string]int32)
	}
	if p, ok := s.current[topic]; ok && p < partitions {
		return p
	}
	p := rng.Int32N(partitions)
	if last, ok := s.last[topic]; ok && partitions > 1 && last < partitions {
		// Draw among the others: skip the partition just sealed.
		p = rng.Int32N(partitions - 1)
		if p >= last {
			p++
		}
	}
	s.current[topic] = p
	return p
}

// BatchSealed tells Sticky that partition's open batch was sealed: if it
// was the topic's sticky partition, the next keyless record moves on,
// avoiding the partition just used when there is another.
func (s *Sticky) BatchSealed(topic string, partition int32) {
	if p, ok := s.current[topic]; ok && p == partition {
		delete(s.current, topic)
		s.last[topic] = partition
	}
}

// PartitionAdaptive is Partition with Kafka's adaptive choice (KIP-794,
// see AdaptivePartition): load(p) describes partition p. The topic's
// current partition is kept while it is available; when it is not (its
// leader stalled or is unknown, or its window is full so its open batch
// cannot be sealed) the topic moves on at once instead of piling records
// onto a partition that cannot send them. When no partition is available
// (no leader known yet, as right after a topic is created) it stays:
// moving on would only scatter the records of one batch over every
// partition, one each.
func (s *Sticky) PartitionAdaptive(topic string, partitions int32, rng *rand.Rand, load func(int32) PartitionLoad) int32 {
	if s.current == nil {
		s.current = make(map[string]int32)
		s.last = make(map[string]int32)
	}
	cur, ok := s.current[topic]
	if ok && cur < partitions && load(cur).Available {
		return cur
	}
	skip := int32(-1)
	if ok {
		skip = cur
	} else if last, ok := s.last[topic]; ok {
		skip = last
	}
	loads := make([]PartitionLoad, partitions)
	anyAvailable := false
	for p := range partitions {
		loads[p] = load(p)
		anyAvailable = anyAvailable || loads[p].Available
	}
	if ok && cur < partitions && !anyAvailable {
		return cur
	}
	p := AdaptivePartition(loads, skip, rng)
	s.current[topic] = p
	return p
}
