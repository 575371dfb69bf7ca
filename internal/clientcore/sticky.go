package clientcore

import "math/rand/v2"

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

// Current is topic's current partition, if it has one.
func (s *Sticky) Current(topic string) (int32, bool) {
	p, ok := s.current[topic]
	return p, ok
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
