package metadata

import (
	"fmt"
	"math"
	"sort"

	"github.com/strandlog/strand/proto/strandpb"
)

// registerNode registers a node or updates a registered one (a restart with
// a new address or rack) and unfences it. Registering the same values again
// is a success that changes nothing and leaves the version alone.
func (s *State) registerNode(c *strandpb.MetadataRegisterNode) Result {
	n := Node{ID: c.GetNodeId(), Address: c.GetAddress(), Rack: c.GetRack(), KafkaAddress: c.GetKafkaAddress()}
	if err := validateNode(n); err != nil {
		return Result{Err: err}
	}
	i, ok := s.nodeIndex(n.ID)
	if ok && c.GetPreregister() {
		if s.nodes[i].State == NodeRemoved {
			return Result{Err: fmt.Errorf("%w: %d", ErrNodeRemoved, n.ID)}
		}
		return Result{} // the node registers itself; an operator does not move it
	}
	n.Fenced = c.GetPreregister() // nothing placed on it until it runs
	if ok {
		switch s.nodes[i].State {
		case NodeRemoved:
			return Result{Err: fmt.Errorf("%w: %d", ErrNodeRemoved, n.ID)}
		case NodeDecommissioning:
			// A restart of a node being drained must not unfence it.
			n.State, n.Fenced = NodeDecommissioning, true
		}
		if s.nodes[i] != n {
			s.nodes[i] = n
			s.changed()
		}
		return Result{}
	}
	if len(s.nodes) >= NodesMax {
		return Result{Err: fmt.Errorf("%w: %d registered", ErrTooManyNodes, len(s.nodes))}
	}
	s.nodes = append(s.nodes, Node{})
	copy(s.nodes[i+1:], s.nodes[i:])
	s.nodes[i] = n
	s.changed()
	return Result{}
}

// validateNode checks a node's id, address and rack.
func validateNode(n Node) error {
	switch {
	case n.ID == 0:
		return fmt.Errorf("%w: id 0", ErrInvalidNode)
	case n.Address == "" || len(n.Address) > NodeTextLengthMax:
		return fmt.Errorf("%w: node %d: address of %d bytes", ErrInvalidNode, n.ID, len(n.Address))
	case len(n.KafkaAddress) > NodeTextLengthMax:
		return fmt.Errorf("%w: node %d: Kafka address of %d bytes", ErrInvalidNode, n.ID, len(n.KafkaAddress))
	case len(n.Rack) > NodeTextLengthMax:
		return fmt.Errorf("%w: node %d: rack of %d bytes", ErrInvalidNode, n.ID, len(n.Rack))
	}
	return nil
}

// setNodeFenced fences or unfences a registered node.
func (s *State) setNodeFenced(c *strandpb.MetadataSetNodeFenced) Result {
	i, ok := s.nodeIndex(c.GetNodeId())
	if !ok {
		return Result{Err: fmt.Errorf("%w: %d", ErrUnknownNode, c.GetNodeId())}
	}
	if s.nodes[i].State != NodeActive && !c.GetFenced() {
		return Result{Err: fmt.Errorf("%w: node %d is %s; it stays fenced", ErrMembershipRefused, c.GetNodeId(), s.nodes[i].State)}
	}
	if s.nodes[i].Fenced != c.GetFenced() {
		s.nodes[i].Fenced = c.GetFenced()
		s.changed()
	}
	return Result{}
}

// setNodeState moves a registered node to another membership state:
// active -> decommissioning (fenced), decommissioning -> active
// (unfenced: a cancelled decommission) or -> removed (only once no
// partition lists it); removed is final. The same state again changes
// nothing.
func (s *State) setNodeState(c *strandpb.MetadataSetNodeState) Result {
	id, to := c.GetNodeId(), NodeState(c.GetState())
	i, ok := s.nodeIndex(id)
	switch {
	case !ok:
		return Result{Err: fmt.Errorf("%w: %d", ErrUnknownNode, id)}
	case to > NodeRemoved:
		return Result{Err: fmt.Errorf("%w: unknown state %d", ErrInvalidCommand, uint8(to))}
	case s.nodes[i].State == to:
		return Result{}
	case s.nodes[i].State == NodeRemoved:
		return Result{Err: fmt.Errorf("%w: %d", ErrNodeRemoved, id)}
	case to == NodeRemoved && s.nodes[i].State != NodeDecommissioning:
		return Result{Err: fmt.Errorf("%w: node %d is %s: decommission it first", ErrMembershipRefused, id, s.nodes[i].State)}
	case to == NodeRemoved && len(s.HostedPartitions(id)) > 0:
		return Result{Err: fmt.Errorf("%w: node %d still holds %d replicas: move them first", ErrMembershipRefused, id,
			len(s.HostedPartitions(id)))}
	}
	s.nodes[i].State = to
	s.nodes[i].Fenced = to != NodeActive
	s.changed()
	return Result{}
}

// createTopic validates and creates a topic, placing its replicas.
func (s *State) createTopic(c *strandpb.MetadataCreateTopic) Result {
	name := c.GetName()
	if err := ValidateTopicName(name); err != nil {
		return Result{Err: err}
	}
	if _, ok := s.topics[name]; ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrTopicExists, name)}
	}
	partitions, rf := c.GetPartitions(), c.GetReplicationFactor()
	if partitions < 1 || partitions > PartitionsMax {
		return Result{Err: fmt.Errorf("%w: %d, want 1..%d", ErrInvalidPartitions, partitions, PartitionsMax)}
	}
	if s.partitionsTotal+int64(partitions) > ClusterPartitionsMax {
		return Result{Err: fmt.Errorf("%w: %d + %d > %d", ErrTooManyPartitions, s.partitionsTotal, partitions, ClusterPartitionsMax)}
	}
	if rf < 1 {
		return Result{Err: fmt.Errorf("%w: %d", ErrInvalidReplicationFactor, rf)}
	}
	eligible := s.eligibleNodes()
	if int(rf) > len(eligible) {
		return Result{Err: fmt.Errorf("%w: replication factor %d, %d nodes available", ErrNotEnoughReplicas, rf, len(eligible))}
	}
	config, err := withEntries(DefaultTopicConfig(), c.GetConfigs(), nil)
	if err != nil {
		return Result{Err: err}
	}
	t := &topicState{name: name, id: s.nextTopicID, replicationFactor: rf, config: config, uuid: s.topicUUID(s.appliedIndex)}
	t.replicas = s.place(eligible, t.id, 0, partitions, rf)
	t.leaders = make([]Leader, partitions)
	t.grow()
	s.nextTopicID++
	s.insertTopic(t)
	s.changed()
	created := t.export()
	return Result{Topic: &created}
}

// ValidateTopicName checks a name as Kafka does: 1..249 characters of
// [a-zA-Z0-9._-], and neither "." nor "..". It fails with
// ErrInvalidTopicName.
func ValidateTopicName(name string) error {
	if name == "" || len(name) > TopicNameLengthMax {
		return fmt.Errorf("%w: length %d, want 1..%d", ErrInvalidTopicName, len(name), TopicNameLengthMax)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidTopicName, name)
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		ok := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-'
		if !ok {
			return fmt.Errorf("%w: %q has byte %#x at %d", ErrInvalidTopicName, name, b, i)
		}
	}
	return nil
}

// insertTopic adds t to the lookup map and the sorted name list.
func (s *State) insertTopic(t *topicState) {
	i := sort.SearchStrings(s.topicNames, t.name)
	s.topicNames = append(s.topicNames, "")
	copy(s.topicNames[i+1:], s.topicNames[i:])
	s.topicNames[i] = t.name
	s.topics[t.name] = t
	s.partitionsTotal += int64(len(t.replicas))
}

// deleteTopic removes a topic and its partitions. Its id is not reused.
func (s *State) deleteTopic(c *strandpb.MetadataDeleteTopic) Result {
	name := c.GetName()
	t, ok := s.topics[name]
	if !ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrUnknownTopic, name)}
	}
	if id := c.GetTopicId(); len(id) > 0 {
		if u, ok := UUIDFromBytes(id); !ok || u != t.uuid {
			return Result{Err: fmt.Errorf("%w: topic %q does not have id %x", ErrUnknownTopicID, name, id)}
		}
	}
	i := sort.SearchStrings(s.topicNames, name)
	s.topicNames = append(s.topicNames[:i], s.topicNames[i+1:]...)
	delete(s.topics, name)
	s.partitionsTotal -= int64(len(t.replicas))
	s.changed()
	return Result{}
}

// alterTopicConfig changes some keys of a topic's configuration, all or
// none. A change to the same values leaves the version alone.
func (s *State) alterTopicConfig(c *strandpb.MetadataAlterTopicConfig) Result {
	t, ok := s.topics[c.GetName()]
	if !ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrUnknownTopic, c.GetName())}
	}
	config, err := withEntries(t.config, c.GetSets(), c.GetResets())
	if err != nil {
		return Result{Err: err}
	}
	if config != t.config {
		t.config = config
		s.changed()
	}
	altered := t.export()
	return Result{Topic: &altered}
}

// allocateProducerIDs hands out count ids that were never handed out.
func (s *State) allocateProducerIDs(c *strandpb.MetadataAllocateProducerIds) Result {
	count := c.GetCount()
	if count < 1 || count > ProducerIDBlockMax {
		return Result{Err: fmt.Errorf("%w: %d, want 1..%d", ErrInvalidProducerIDCount, count, ProducerIDBlockMax)}
	}
	if s.nextProducerID > math.MaxInt64-int64(count) {
		return Result{Err: ErrProducerIDsExhausted}
	}
	first := s.nextProducerID
	s.nextProducerID += int64(count)
	s.changed()
	return Result{FirstProducerID: first, ProducerIDCount: count}
}
