package metadata

import (
	"fmt"

	"github.com/strandlog/strand/proto/strandpb"
)

// createPartitions grows a topic to c.Partitions partitions, placing the
// new ones with the same placer as a create, on the loads of every
// partition already placed (this topic's included), so the spread
// guarantees of placement hold across adds too. Existing partitions keep
// their replicas and leaders. Partitions are never removed: a count not
// above the current one is ErrInvalidPartitions, as in Kafka (a shrink would
// drop acknowledged records and remap every key). With ValidateOnly the
// same checks and placement run and nothing changes: Result.Topic is the
// topic as it would be.
func (s *State) createPartitions(c *strandpb.MetadataCreatePartitions) Result {
	t, ok := s.topics[c.GetName()]
	if !ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrUnknownTopic, c.GetName())}
	}
	current, want := int32(len(t.replicas)), c.GetPartitions()
	switch {
	case want == current:
		return Result{Err: fmt.Errorf("%w: topic %q already has %d partitions", ErrInvalidPartitions, t.name, current)}
	case want < current:
		return Result{Err: fmt.Errorf("%w: topic %q has %d partitions and cannot shrink to %d: partitions can only be added",
			ErrInvalidPartitions, t.name, current, want)}
	case want > PartitionsMax:
		return Result{Err: fmt.Errorf("%w: %d, want %d..%d", ErrInvalidPartitions, want, current+1, PartitionsMax)}
	}
	added := want - current
	if s.partitionsTotal+int64(added) > ClusterPartitionsMax {
		return Result{Err: fmt.Errorf("%w: %d + %d > %d", ErrTooManyPartitions, s.partitionsTotal, added, ClusterPartitionsMax)}
	}
	eligible := s.eligibleNodes()
	if int(t.replicationFactor) > len(eligible) {
		return Result{Err: fmt.Errorf("%w: replication factor %d, %d nodes available", ErrNotEnoughReplicas,
			t.replicationFactor, len(eligible))}
	}
	placed := s.place(eligible, t.id, current, added, t.replicationFactor)
	if c.GetValidateOnly() {
		would := t.export()
		would.Replicas = append(would.Replicas, placed...)
		would.Leaders = append(would.Leaders, make([]Leader, added)...)
		would.Targets = append(would.Targets, make([][]uint64, added)...)
		return Result{Topic: &would, AddedPartitions: added}
	}
	t.replicas = append(t.replicas, placed...)
	t.leaders = append(t.leaders, make([]Leader, added)...)
	t.grow()
	s.partitionsTotal += int64(added)
	s.changed()
	grown := t.export()
	return Result{Topic: &grown, AddedPartitions: added}
}

// EncodeCreatePartitions grows topic name to partitions partitions (the
// total, as Kafka's CreatePartitions); validateOnly checks and places
// without changing anything.
func EncodeCreatePartitions(name string, partitions int32, validateOnly bool) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_CreatePartitions{
		CreatePartitions: &strandpb.MetadataCreatePartitions{Name: name, Partitions: partitions, ValidateOnly: validateOnly},
	}})
}
