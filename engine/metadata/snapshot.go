package metadata

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// Snapshot returns the state as a versioned MetadataSnapshot. Nodes are in
// id order and topics in name order and the encoding is deterministic, so
// equal states give byte-identical snapshots.
func (s *State) Snapshot() []byte {
	return s.marshal(s.appliedIndex)
}

// marshal encodes the state as a MetadataSnapshot with appliedIndex as its
// applied index (Digest hashes it with 0: the state without its position).
func (s *State) marshal(appliedIndex uint64) []byte {
	snap := &strandpb.MetadataSnapshot{
		Version:         snapshotVersion,
		AppliedIndex:    appliedIndex,
		MetadataVersion: s.version,
		NextTopicId:     s.nextTopicID,
		NextProducerId:  s.nextProducerID,
		Nodes:           make([]*strandpb.MetadataNode, len(s.nodes)),
		Topics:          make([]*strandpb.MetadataTopic, len(s.topicNames)),
		ClusterId:       s.clusterID.Bytes(),
	}
	for i, n := range s.nodes {
		snap.Nodes[i] = &strandpb.MetadataNode{NodeId: n.ID, Address: n.Address, Rack: n.Rack, Fenced: n.Fenced,
			KafkaAddress: n.KafkaAddress, State: strandpb.MetadataNodeState(n.State)}
	}
	for i, name := range s.topicNames {
		t := s.topics[name]
		pt := &strandpb.MetadataTopic{
			Name: name, TopicId: t.id, TopicUuid: t.uuid.Bytes(), ReplicationFactor: t.replicationFactor, Config: t.config.toProto(),
			Partitions: make([]*strandpb.MetadataPartition, len(t.replicas)),
		}
		for p, replicas := range t.replicas {
			pt.Partitions[p] = &strandpb.MetadataPartition{Replicas: replicas, LeaderId: t.leaders[p].Node, LeaderTerm: t.leaders[p].Term,
				TargetReplicas: t.targets[p], BootstrapReplicas: t.bootstrap[p], LeavingReplicas: t.leaving[p]}
		}
		snap.Topics[i] = pt
	}
	s.securityToSnapshot(snap)
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		panic(fmt.Sprintf("metadata: marshal snapshot: %v", err)) // every string was validated
	}
	return data
}

// Restore rebuilds a state from Snapshot's bytes. It refuses bytes that do
// not decode, versions it does not know and states that break an invariant,
// with ErrInvalidSnapshot.
func Restore(data []byte) (*State, error) {
	var snap strandpb.MetadataSnapshot
	if err := proto.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	if snap.GetVersion() != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d, this code knows %d", ErrInvalidSnapshot, snap.GetVersion(), snapshotVersion)
	}
	if len(snap.GetNodes()) > NodesMax {
		return nil, fmt.Errorf("%w: %d nodes", ErrInvalidSnapshot, len(snap.GetNodes()))
	}
	s := New()
	s.appliedIndex = snap.GetAppliedIndex()
	s.version = snap.GetMetadataVersion()
	s.nextTopicID = snap.GetNextTopicId()
	s.nextProducerID = snap.GetNextProducerId()
	var ok bool
	if s.clusterID, ok = UUIDFromBytes(snap.GetClusterId()); !ok {
		return nil, fmt.Errorf("%w: cluster id of %d bytes", ErrInvalidSnapshot, len(snap.GetClusterId()))
	}
	for _, n := range snap.GetNodes() {
		s.nodes = append(s.nodes, Node{ID: n.GetNodeId(), Address: n.GetAddress(), Rack: n.GetRack(), Fenced: n.GetFenced(),
			KafkaAddress: n.GetKafkaAddress(), State: NodeState(n.GetState())})
	}
	for _, pt := range snap.GetTopics() {
		if _, dup := s.topics[pt.GetName()]; dup {
			return nil, fmt.Errorf("%w: topic %q twice", ErrInvalidSnapshot, pt.GetName())
		}
		t := &topicState{
			name: pt.GetName(), id: pt.GetTopicId(), replicationFactor: pt.GetReplicationFactor(),
			config: configFromProto(pt.GetConfig()), replicas: make([][]uint64, len(pt.GetPartitions())),
			leaders: make([]Leader, len(pt.GetPartitions())),
		}
		if t.uuid, ok = UUIDFromBytes(pt.GetTopicUuid()); !ok {
			return nil, fmt.Errorf("%w: topic %q: id of %d bytes", ErrInvalidSnapshot, t.name, len(pt.GetTopicUuid()))
		}
		for p, part := range pt.GetPartitions() {
			t.replicas[p] = append([]uint64(nil), part.GetReplicas()...)
			t.leaders[p] = Leader{Node: part.GetLeaderId(), Term: part.GetLeaderTerm()}
		}
		t.grow()
		for p, part := range pt.GetPartitions() {
			if len(part.GetTargetReplicas()) > 0 {
				t.targets[p] = append([]uint64(nil), part.GetTargetReplicas()...)
			}
			if len(part.GetBootstrapReplicas()) > 0 {
				t.bootstrap[p] = append([]uint64(nil), part.GetBootstrapReplicas()...)
			}
			if len(part.GetLeavingReplicas()) > 0 {
				t.leaving[p] = append([]uint64(nil), part.GetLeavingReplicas()...)
			}
		}
		s.topicNames = append(s.topicNames, t.name)
		s.topics[t.name] = t
		s.partitionsTotal += int64(len(t.replicas))
	}
	s.securityFromSnapshot(&snap)
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	return s, nil
}

// Check verifies the state's invariants and returns the first one broken:
// nodes sorted, unique and valid; topic names sorted, unique and valid;
// topic ids unique and below the next one; partition counts and replica
// lists valid (rf distinct registered nodes each); configs in range; the
// producer id allocator past every id handed out. Restore relies on it;
// tests call it after every step.
func (s *State) Check() error {
	if err := s.checkNodes(); err != nil {
		return err
	}
	if err := s.checkSecurity(); err != nil {
		return err
	}
	if s.nextProducerID < FirstProducerID {
		return fmt.Errorf("next producer id %d below %d", s.nextProducerID, FirstProducerID)
	}
	if len(s.topicNames) != len(s.topics) {
		return fmt.Errorf("%d topic names for %d topics", len(s.topicNames), len(s.topics))
	}
	var total int64
	ids := make(map[uint64]bool, len(s.topicNames)) // lookup only
	uuids := make(map[UUID]bool, len(s.topicNames)) // lookup only
	for i, name := range s.topicNames {
		if i > 0 && s.topicNames[i-1] >= name {
			return fmt.Errorf("topics out of order: %q then %q", s.topicNames[i-1], name)
		}
		t, ok := s.topics[name]
		if !ok || t.name != name {
			return fmt.Errorf("topic %q missing from the map", name)
		}
		if t.id == 0 || t.id >= s.nextTopicID || ids[t.id] {
			return fmt.Errorf("topic %q: id %d reused or not below next %d", name, t.id, s.nextTopicID)
		}
		ids[t.id] = true
		if t.uuid.IsZero() || uuids[t.uuid] {
			return fmt.Errorf("topic %q: uuid %s zero or shared", name, t.uuid)
		}
		uuids[t.uuid] = true
		if err := s.checkTopic(t); err != nil {
			return fmt.Errorf("topic %q: %w", name, err)
		}
		total += int64(len(t.replicas))
	}
	if total != s.partitionsTotal || total > ClusterPartitionsMax {
		return fmt.Errorf("%d partitions counted, %d recorded (max %d)", total, s.partitionsTotal, ClusterPartitionsMax)
	}
	return nil
}

// checkNodes verifies the node list is sorted, unique and valid.
func (s *State) checkNodes() error {
	if len(s.nodes) > NodesMax {
		return fmt.Errorf("%d nodes, max %d", len(s.nodes), NodesMax)
	}
	for i, n := range s.nodes {
		if err := validateNode(n); err != nil {
			return err
		}
		if n.State > NodeRemoved || (n.State != NodeActive && !n.Fenced) {
			return fmt.Errorf("node %d: state %s, fenced %v", n.ID, n.State, n.Fenced)
		}
		if i > 0 && s.nodes[i-1].ID >= n.ID {
			return fmt.Errorf("nodes out of order: %d then %d", s.nodes[i-1].ID, n.ID)
		}
	}
	return nil
}

// checkTopic verifies one topic's name, config and replica lists.
func (s *State) checkTopic(t *topicState) error {
	if err := ValidateTopicName(t.name); err != nil {
		return err
	}
	if err := t.config.validate(); err != nil {
		return err
	}
	if len(t.replicas) < 1 || len(t.replicas) > PartitionsMax {
		return fmt.Errorf("%d partitions", len(t.replicas))
	}
	if t.replicationFactor < 1 || int(t.replicationFactor) > len(s.nodes) {
		return fmt.Errorf("replication factor %d with %d nodes", t.replicationFactor, len(s.nodes))
	}
	if len(t.leaders) != len(t.replicas) || len(t.targets) != len(t.replicas) || len(t.bootstrap) != len(t.replicas) ||
		len(t.leaving) != len(t.replicas) {
		return fmt.Errorf("%d leaders, %d targets, %d bootstraps, %d leaving for %d partitions", len(t.leaders),
			len(t.targets), len(t.bootstrap), len(t.leaving), len(t.replicas))
	}
	for p, replicas := range t.replicas {
		// A leader reported from a move's target stays recorded when a
		// redirect leaves its node outside the replicas and the new
		// target: it is leaving, may still lead, and completion clears it.
		if l := t.leaders[p]; (l.Term == 0) != (l.Node == 0) || l.Node != 0 && !containsID(replicas, l.Node) &&
			!containsID(t.targets[p], l.Node) && !containsID(t.leaving[p], l.Node) {
			return fmt.Errorf("partition %d: leader %d in term %d", p, l.Node, l.Term)
		}
		// A move may change a partition's replica count (as Kafka's
		// reassignment does); the topic's factor is what creates use.
		if len(replicas) < 1 || len(replicas) > max(int(t.replicationFactor), MoveReplicasMax) {
			return fmt.Errorf("partition %d: %d replicas, factor %d", p, len(replicas), t.replicationFactor)
		}
		for _, list := range [][]uint64{replicas, t.targets[p], t.bootstrap[p], t.leaving[p]} {
			if err := s.checkReplicaList(list); err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
		}
		if err := checkMove(replicas, t.targets[p], t.leaving[p]); err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
	}
	return nil
}

// checkMove verifies a partition's move: a target equal to the replicas
// only as a cancel (some node leaving), leaving nodes only during a move
// and in neither replicas nor target.
func checkMove(replicas, target, leaving []uint64) error {
	switch {
	case len(target) > 0 && slices.Equal(target, replicas) && len(leaving) == 0:
		return fmt.Errorf("a move to its own replicas %v", replicas)
	case len(leaving) > 0 && len(target) == 0:
		return fmt.Errorf("nodes %v leaving without a move", leaving)
	}
	for _, id := range leaving {
		if containsID(replicas, id) || containsID(target, id) {
			return fmt.Errorf("node %d leaving and placed", id)
		}
	}
	return nil
}

// checkReplicaList verifies a replica list names distinct registered
// nodes.
func (s *State) checkReplicaList(replicas []uint64) error {
	for j, id := range replicas {
		if _, ok := s.nodeIndex(id); !ok {
			return fmt.Errorf("replica on unknown node %d", id)
		}
		if containsID(replicas[:j], id) {
			return fmt.Errorf("node %d twice", id)
		}
	}
	return nil
}
