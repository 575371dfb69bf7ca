package metadata

import (
	"errors"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// Client-visible outcomes of applying a command, carried in Result.Err
// (match them with errors.Is). They are not bugs: every replica reaches the
// same outcome for the same entry, and the state is unchanged. Each carries
// the wire code the node answers (strandpb.CodeOf), except
// ErrInvalidSnapshot, which answers no request.
var (
	// ErrInvalidCommand: the entry's bytes do not decode or name no command.
	ErrInvalidCommand = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: invalid command")
	// ErrInvalidNode: node id 0, or an empty or oversized address or rack.
	ErrInvalidNode = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: invalid node")
	// ErrUnknownNode: no registered node has the id.
	ErrUnknownNode = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_NODE, "metadata: unknown node")
	// ErrTooManyNodes: registering one more node would pass NodesMax.
	ErrTooManyNodes = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: too many nodes")
	// ErrInvalidTopicName: not 1..249 characters of [a-zA-Z0-9._-], or "."
	// or "..".
	ErrInvalidTopicName = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: invalid topic name")
	// ErrTopicExists: a topic of that name exists already.
	ErrTopicExists = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS, "metadata: topic exists")
	// ErrUnknownTopic: no topic of that name exists.
	ErrUnknownTopic = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND, "metadata: unknown topic")
	// ErrUnknownTopicID: a delete named a topic id the topic of that name
	// does not have (it was deleted and created again since).
	ErrUnknownTopicID = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID, "metadata: unknown topic id")
	// ErrUnknownPartition: the topic has no partition of that number.
	ErrUnknownPartition = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "metadata: unknown partition")
	// ErrInvalidPartitions: a partition count outside 1..PartitionsMax, or
	// (CreatePartitions) not above the topic's current count.
	ErrInvalidPartitions = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, "metadata: invalid partition count")
	// ErrTooManyPartitions: the cluster would hold more than
	// ClusterPartitionsMax partitions.
	ErrTooManyPartitions = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, "metadata: too many partitions in the cluster")
	// ErrInvalidReplicationFactor: a replication factor below 1.
	ErrInvalidReplicationFactor = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, "metadata: invalid replication factor")
	// ErrNotEnoughReplicas: the replication factor exceeds the number of
	// registered, unfenced nodes. Retriable on the wire: a node may
	// register in a moment (the node refuses a factor above the cluster's
	// size before proposing).
	ErrNotEnoughReplicas = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS, "metadata: not enough replicas")
	// ErrInvalidConfig: an unknown configuration key or a value out of range.
	ErrInvalidConfig = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_CONFIG, "metadata: invalid topic config")
	// ErrInvalidProducerIDCount: a count outside 1..ProducerIDBlockMax.
	ErrInvalidProducerIDCount = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: invalid producer id count")
	// ErrProducerIDsExhausted: the int64 producer id space is used up.
	ErrProducerIDsExhausted = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INTERNAL, "metadata: producer ids exhausted")
	// ErrNodeRemoved: the node was removed from the cluster; it may not
	// register or change state again (ids are not reused).
	ErrNodeRemoved = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_NODE_REMOVED, "metadata: node removed")
	// ErrMembershipRefused: a node state change out of order (removing an
	// active node) or removing a node that still holds replicas.
	ErrMembershipRefused = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_MEMBERSHIP_REFUSED, "metadata: membership change refused")
	// ErrInvalidSnapshot: Restore was given bytes that do not decode, an
	// unknown version or a state that breaks an invariant.
	ErrInvalidSnapshot = errors.New("metadata: invalid snapshot")
)

// Bounds that keep every command's cost and the state's size bounded.
const (
	// NodesMax is the most nodes the cluster registers.
	NodesMax = 1024
	// PartitionsMax is the most partitions one topic has.
	PartitionsMax = 10000
	// ClusterPartitionsMax is the most partitions over all topics; it bounds
	// the work of placement and the size of a snapshot.
	ClusterPartitionsMax = 1 << 20
	// TopicNameLengthMax is Kafka's limit on topic names.
	TopicNameLengthMax = 249
	// NodeTextLengthMax bounds a node's address and rack, in bytes.
	NodeTextLengthMax = 255
	// ProducerIDBlockMax is the most producer ids one command hands out.
	ProducerIDBlockMax = 1 << 20
	// FirstProducerID is the first id handed out: 0 and -1 stay free so an
	// unset or "not idempotent" field is never a real producer.
	FirstProducerID int64 = 1
	// snapshotVersion is the only MetadataSnapshot version this code knows.
	snapshotVersion = 1
)

// Node is a registered node as the metadata log knows it.
type Node struct {
	ID uint64
	// Address is the host:port clients connect to.
	Address string
	// Rack is the node's failure domain; empty: unknown.
	Rack string
	// Fenced nodes keep their replicas but get no new ones.
	Fenced bool
	// KafkaAddress is the host:port Kafka clients connect to; empty: the
	// node has no Kafka listener.
	KafkaAddress string
	// State is the node's membership state; a decommissioning or removed
	// node is always fenced.
	State NodeState
}

// NodeState is a registered node's membership state.
type NodeState uint8

// The membership states, in the only order a node moves through them
// (decommissioning may go back to active: a cancelled decommission).
const (
	NodeActive          NodeState = NodeState(strandpb.MetadataNodeState_METADATA_NODE_STATE_ACTIVE)
	NodeDecommissioning NodeState = NodeState(strandpb.MetadataNodeState_METADATA_NODE_STATE_DECOMMISSIONING)
	NodeRemoved         NodeState = NodeState(strandpb.MetadataNodeState_METADATA_NODE_STATE_REMOVED)
)

// String names the state as operators read it.
func (s NodeState) String() string {
	switch s {
	case NodeActive:
		return "active"
	case NodeDecommissioning:
		return "decommissioning"
	case NodeRemoved:
		return "removed"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Topic is a topic with its configuration and replica assignment.
type Topic struct {
	Name string
	// ID is never reused within the cluster: a topic deleted and created
	// again under the same name has a new ID, so nodes can tell the two
	// apart. It names the replicas' directories and raft traffic.
	ID uint64
	// UUID is the topic's cluster-wide identity, shown to clients: unique
	// across clusters too, so a client that started on one topic can tell
	// it from any other, even after its cluster was replaced.
	UUID              UUID
	ReplicationFactor int32
	Config            TopicConfig
	// Replicas[p] is partition p's ordered replica list; Replicas[p][0] is
	// its preferred leader.
	Replicas [][]uint64
	// Leaders[p] is partition p's leader as last reported (term 0: none).
	Leaders []Leader
	// Targets[p] is the target of partition p's move in progress (nil:
	// none).
	Targets [][]uint64
}

// Partitions is the topic's partition count.
func (t Topic) Partitions() int32 { return int32(len(t.Replicas)) }

// PartitionRef names one partition a node hosts, with its replica list, so
// the node can start its raft group with the right peers.
type PartitionRef struct {
	Topic     string
	TopicID   uint64
	TopicUUID UUID
	Partition int32
	Replicas  []uint64
	// Target is the target of a move in progress (nil: none): the node
	// hosts the partition when it is in Replicas or Target.
	Target []uint64
	// Bootstrap is the replica set the partition's raft log was
	// bootstrapped over: a new replica bootstraps the same entries.
	Bootstrap []uint64
	// Leaving is the nodes of a redirected move's earlier targets still
	// hosting the partition until the move completes (nil: none).
	Leaving []uint64
}

// Result is the outcome of applying one entry.
type Result struct {
	// Err is nil when the command took effect; otherwise one of the errors
	// above (errors.Is works), and the state is unchanged but for one
	// thing: a command carrying a cluster seed fixes the cluster id when
	// none is set yet, whatever the command's outcome (every replica
	// applies the same entry, so every replica fixes the same id).
	Err error
	// ProposalID is the command's proposal id, for the proposing node.
	ProposalID uint64
	// Version is the metadata version after the entry.
	Version uint64
	// Topic is the created topic with its assignment (CreateTopic), the
	// topic as altered (AlterTopicConfig), or as grown (CreatePartitions;
	// as it would be, with validate-only).
	Topic *Topic
	// AddedPartitions is how many partitions CreatePartitions added (or
	// would add, with validate-only).
	AddedPartitions int32
	// FirstProducerID and ProducerIDCount give the allocated ids
	// [FirstProducerID, FirstProducerID+ProducerIDCount).
	FirstProducerID int64
	ProducerIDCount int32
	// ACLsAdded and ACLsRemoved count the bindings AlterAcls changed.
	ACLsAdded, ACLsRemoved int32
}

// topicState is one topic inside State. replicas[p] is never shared with a
// caller: reads hand out copies.
type topicState struct {
	name              string
	id                uint64
	replicationFactor int32
	config            TopicConfig
	replicas          [][]uint64
	uuid              UUID
	// leaders[p] is partition p's last reported leader.
	leaders []Leader
	// targets[p] is the target of partition p's move in progress (nil:
	// none); bootstrap[p] the replicas its raft log was bootstrapped over
	// (nil: replicas[p], never moved). Both have len(replicas) entries.
	targets   [][]uint64
	bootstrap [][]uint64
	// leaving[p] is the nodes of earlier targets of partition p's move
	// that replicas and target do not name (a redirected or cancelled
	// move): they host it until the move completes.
	leaving [][]uint64
}

// State is the cluster metadata, built only by applying the committed
// entries of the metadata group in order. Not safe for concurrent use.
type State struct {
	appliedIndex   uint64
	version        uint64
	clusterID      UUID
	nextTopicID    uint64
	nextProducerID int64
	// nodes is sorted by ID.
	nodes []Node
	// topics is for lookup only; topicNames (sorted) gives every order.
	topics          map[string]*topicState
	topicNames      []string
	partitionsTotal int64
	// sec holds users, ACLs and quotas (security.go).
	sec security
}

// New returns the empty metadata state before raft index 1.
func New() *State {
	return &State{
		nextTopicID:    1,
		nextProducerID: FirstProducerID,
		topics:         map[string]*topicState{},
	}
}

// Apply applies the committed entry at index whose Data is data (a
// marshalled strandpb.MetadataCommand). Indexes must arrive consecutively;
// a gap is a bug and panics. An undecodable entry consumes the index and
// changes nothing.
func (s *State) Apply(index uint64, data []byte) Result {
	s.advance(index)
	var cmd strandpb.MetadataCommand
	if err := proto.Unmarshal(data, &cmd); err != nil {
		// The decoder's message is left out: its text may differ between
		// binaries, and results must not.
		return s.result(Result{Err: ErrInvalidCommand})
	}
	s.maybeInitCluster(cmd.GetClusterSeed())
	r := s.dispatch(&cmd)
	r.ProposalID = cmd.GetProposalId()
	return s.result(r)
}

// ApplyEmpty applies a raft entry that carries no command (an empty entry a
// new leader appends, or a configuration change): it consumes the index.
func (s *State) ApplyEmpty(index uint64) { s.advance(index) }

// advance checks that index follows the last applied one and records it.
func (s *State) advance(index uint64) {
	if index != s.appliedIndex+1 {
		panic(fmt.Sprintf("metadata: apply index %d after %d", index, s.appliedIndex))
	}
	s.appliedIndex = index
}

// result stamps r with the version after the entry.
func (s *State) result(r Result) Result {
	r.Version = s.version
	return r
}

// changed bumps the metadata version: watchers compare versions to learn
// cheaply that something changed.
func (s *State) changed() { s.version++ }

// dispatch runs the one command cmd carries.
func (s *State) dispatch(cmd *strandpb.MetadataCommand) Result {
	switch c := cmd.GetCommand().(type) {
	case *strandpb.MetadataCommand_RegisterNode:
		return s.registerNode(c.RegisterNode)
	case *strandpb.MetadataCommand_SetNodeFenced:
		return s.setNodeFenced(c.SetNodeFenced)
	case *strandpb.MetadataCommand_SetNodeState:
		return s.setNodeState(c.SetNodeState)
	case *strandpb.MetadataCommand_CreateTopic:
		return s.createTopic(c.CreateTopic)
	case *strandpb.MetadataCommand_DeleteTopic:
		return s.deleteTopic(c.DeleteTopic)
	case *strandpb.MetadataCommand_AlterTopicConfig:
		return s.alterTopicConfig(c.AlterTopicConfig)
	case *strandpb.MetadataCommand_AllocateProducerIds:
		return s.allocateProducerIDs(c.AllocateProducerIds)
	case *strandpb.MetadataCommand_ReportLeaders:
		return s.reportLeaders(c.ReportLeaders)
	case *strandpb.MetadataCommand_CreatePartitions:
		return s.createPartitions(c.CreatePartitions)
	case *strandpb.MetadataCommand_UpsertUser:
		return s.upsertUser(c.UpsertUser)
	case *strandpb.MetadataCommand_DeleteUser:
		return s.deleteUser(c.DeleteUser)
	case *strandpb.MetadataCommand_AlterAcls:
		return s.alterACLs(c.AlterAcls)
	case *strandpb.MetadataCommand_SetQuotas:
		return s.setQuotas(c.SetQuotas)
	case *strandpb.MetadataCommand_ReassignPartition:
		return s.reassignPartition(c.ReassignPartition)
	case *strandpb.MetadataCommand_CompletePartitionMove:
		return s.completePartitionMove(c.CompletePartitionMove)
	}
	return Result{Err: fmt.Errorf("%w: no command set", ErrInvalidCommand)}
}

// AppliedIndex is the raft index of the last applied entry.
func (s *State) AppliedIndex() uint64 { return s.appliedIndex }

// Version is the metadata version: it grows by one with every command that
// changes the nodes, topics, placement, configs or producer ids and never
// otherwise, so a node that saw version v need reconcile its replicas only
// when Version() != v. The cluster id and leader reports leave it alone.
func (s *State) Version() uint64 { return s.version }

// NextProducerID is the first producer id the next allocation hands out.
func (s *State) NextProducerID() int64 { return s.nextProducerID }

// Nodes returns every registered node, sorted by ID.
func (s *State) Nodes() []Node {
	return append([]Node(nil), s.nodes...)
}

// Node returns the registered node id, if any.
func (s *State) Node(id uint64) (Node, bool) {
	i, ok := s.nodeIndex(id)
	if !ok {
		return Node{}, false
	}
	return s.nodes[i], true
}

// nodeIndex finds id in the sorted nodes.
func (s *State) nodeIndex(id uint64) (int, bool) {
	i := sort.Search(len(s.nodes), func(i int) bool { return s.nodes[i].ID >= id })
	return i, i < len(s.nodes) && s.nodes[i].ID == id
}

// TopicNames returns every topic's name, sorted.
func (s *State) TopicNames() []string {
	return append([]string(nil), s.topicNames...)
}

// Topics returns every topic, sorted by name (deep copies).
func (s *State) Topics() []Topic {
	out := make([]Topic, 0, len(s.topicNames))
	for _, name := range s.topicNames {
		out = append(out, s.topics[name].export())
	}
	return out
}

// Topic returns the named topic (a deep copy), if it exists.
func (s *State) Topic(name string) (Topic, bool) {
	t, ok := s.topics[name]
	if !ok {
		return Topic{}, false
	}
	return t.export(), true
}

// TopicConfig returns the named topic's ID and configuration without
// copying the rest of it (Topic deep-copies every partition's replicas):
// the produce path asks for every batch.
func (s *State) TopicConfig(name string) (id uint64, cfg TopicConfig, ok bool) {
	t, ok := s.topics[name]
	if !ok {
		return 0, TopicConfig{}, false
	}
	return t.id, t.config, true
}

// Assignment returns the ordered replica list of one partition (a copy);
// the first replica is the preferred leader. It fails with ErrUnknownTopic
// or ErrUnknownPartition.
func (s *State) Assignment(topic string, partition int32) ([]uint64, error) {
	t, ok := s.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	if partition < 0 || int(partition) >= len(t.replicas) {
		return nil, fmt.Errorf("%w: %q has no partition %d", ErrUnknownPartition, topic, partition)
	}
	return append([]uint64(nil), t.replicas[partition]...), nil
}

// HostedPartitions lists the partitions with a replica on node (in the
// replica list or the target of a move in progress), sorted by topic name
// then partition: what the node should be running.
func (s *State) HostedPartitions(node uint64) []PartitionRef {
	var out []PartitionRef
	for _, name := range s.topicNames {
		t := s.topics[name]
		for p, replicas := range t.replicas {
			if containsID(replicas, node) || containsID(t.targets[p], node) || containsID(t.leaving[p], node) {
				out = append(out, t.ref(int32(p)))
			}
		}
	}
	return out
}

// ref describes partition p for a hosting node (copies).
func (t *topicState) ref(p int32) PartitionRef {
	boot := t.bootstrap[p]
	if len(boot) == 0 {
		boot = t.replicas[p]
	}
	r := PartitionRef{
		Topic: t.name, TopicID: t.id, TopicUUID: t.uuid, Partition: p,
		Replicas: append([]uint64(nil), t.replicas[p]...), Bootstrap: append([]uint64(nil), boot...),
	}
	if len(t.targets[p]) > 0 {
		r.Target = append([]uint64(nil), t.targets[p]...)
	}
	if len(t.leaving[p]) > 0 {
		r.Leaving = append([]uint64(nil), t.leaving[p]...)
	}
	return r
}

// grow extends the per-partition move slices to the partition count.
func (t *topicState) grow() {
	for len(t.targets) < len(t.replicas) {
		t.targets = append(t.targets, nil)
	}
	for len(t.bootstrap) < len(t.replicas) {
		t.bootstrap = append(t.bootstrap, nil)
	}
	for len(t.leaving) < len(t.replicas) {
		t.leaving = append(t.leaving, nil)
	}
}

// export deep-copies a topic for a caller. Every partition's replica and
// target lists share one backing array (each capped at its length, so an
// append by the caller copies): one allocation instead of one per list,
// for the node's metadata answers and the simulator's checks, which
// export whole topics often.
func (t *topicState) export() Topic {
	n := 0
	for p, r := range t.replicas {
		n += len(r) + len(t.targets[p])
	}
	ids := make([]uint64, 0, n)
	lists := make([][]uint64, 2*len(t.replicas))
	replicas, targets := lists[:len(t.replicas):len(t.replicas)], lists[len(t.replicas):]
	for p, r := range t.replicas {
		if len(r) > 0 { // an empty list stays nil, as a copy of it was
			ids = append(ids, r...)
			replicas[p] = ids[len(ids)-len(r) : len(ids) : len(ids)]
		}
		if tp := t.targets[p]; len(tp) > 0 {
			ids = append(ids, tp...)
			targets[p] = ids[len(ids)-len(tp) : len(ids) : len(ids)]
		}
	}
	return Topic{
		Name: t.name, ID: t.id, UUID: t.uuid, ReplicationFactor: t.replicationFactor, Config: t.config,
		Replicas: replicas, Leaders: append([]Leader(nil), t.leaders...), Targets: targets,
	}
}

// containsID reports whether ids holds id.
func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
