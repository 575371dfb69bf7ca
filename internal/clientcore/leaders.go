package clientcore

import (
	"bytes"
	"sort"

	"github.com/strandlog/strand/proto/strandpb"
)

// LeaderCache is the client's view of the cluster: nodes, topics, and each
// partition's leader. It is sans-IO (no locks, clock or network): the
// Client guards it with a mutex, and the simulator's private clients drive
// it directly with metadata answers and NOT_LEADER hints.
//
// Metadata for a partition replaces the cached leader only when its
// leader_term is at least the cached one, so an answer from a lagging node
// cannot undo a newer view; but a cache that knows no leader (the newer
// answer named none, or the leader was forgotten) takes a leader named at
// a lower term: a higher term with no leader may never get one (a
// replica's election that came to nothing, its term then lost with its
// disk), and a stale leader costs one NOT_LEADER, while no leader would
// hold the partition's records until the cluster's term passed it. A
// NOT_LEADER hint is applied at once and keeps the term: it is fresher
// than the metadata it corrects.
type LeaderCache struct {
	nodes        map[uint64]string
	topics       map[string]*TopicInfo
	controllerID uint64
	changes      uint64
}

// TopicInfo is what the cache knows about one topic.
type TopicInfo struct {
	Name string
	// Err is the topic's error in the last metadata answer (UNKNOWN_TOPIC:
	// the topic does not exist).
	Err        strandpb.ErrorCode
	Partitions []PartitionInfo // index = partition number
	// ID is the topic's id (16 bytes; nil when the node names none): a
	// topic deleted and created again under its name has a new one.
	ID []byte
	// Version is the metadata version of the answer the entry came from
	// (0: the node named none). A lagging node answers an older version,
	// so of two ids of one name the one seen at the higher version is
	// the newer topic.
	Version uint64
}

// PartitionInfo is one partition's leadership.
type PartitionInfo struct {
	Partition  int32
	LeaderID   uint64 // 0: no leader known
	LeaderTerm uint64
	Replicas   []uint64
	// TargetReplicas is the target of a move in progress (nil: none).
	TargetReplicas []uint64
	Err            strandpb.ErrorCode
}

// NewLeaderCache returns an empty cache.
func NewLeaderCache() *LeaderCache {
	return &LeaderCache{nodes: make(map[uint64]string), topics: make(map[string]*TopicInfo)}
}

// ApplyMetadata merges a metadata answer: node addresses are replaced,
// topics named in it are updated (partition by partition, by term), topics
// it does not name are kept.
func (c *LeaderCache) ApplyMetadata(m *strandpb.MetadataResponse) {
	c.changes++
	if len(m.GetNodes()) > 0 {
		c.nodes = make(map[uint64]string, len(m.GetNodes()))
		for _, n := range m.GetNodes() {
			c.nodes[n.GetId()] = n.GetAddress()
		}
	}
	if m.GetControllerId() != 0 {
		c.controllerID = m.GetControllerId()
	}
	for _, t := range m.GetTopics() {
		c.applyTopic(t, m.GetMetadataVersion())
	}
}

// applyTopic merges one topic of a metadata answer.
func (c *LeaderCache) applyTopic(t *strandpb.MetadataResponse_Topic, version uint64) {
	code := t.GetError().GetCode()
	if code != strandpb.ErrorCode_ERROR_CODE_NONE {
		if code == strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
			c.topics[t.GetName()] = &TopicInfo{Name: t.GetName(), Err: code, Version: version}
		}
		return
	}
	old := c.topics[t.GetName()]
	info := &TopicInfo{Name: t.GetName(), Partitions: make([]PartitionInfo, len(t.GetPartitions())), ID: bytes.Clone(t.GetTopicId()),
		Version: version}
	if old != nil && !bytes.Equal(old.ID, info.ID) {
		old = nil // another topic: its leaders and terms say nothing about this one
	}
	for i := range info.Partitions {
		info.Partitions[i] = PartitionInfo{Partition: int32(i)}
	}
	for _, p := range t.GetPartitions() {
		i := p.GetPartition()
		if i < 0 || int(i) >= len(info.Partitions) {
			continue // a malformed answer: ignore the partition
		}
		next := PartitionInfo{
			Partition:  i,
			LeaderID:   p.GetLeaderId(),
			LeaderTerm: p.GetLeaderTerm(),
			Replicas:   append([]uint64(nil), p.GetReplicas()...),
			Err:        p.GetError().GetCode(),
		}
		if old != nil && int(i) < len(old.Partitions) && old.Partitions[i].LeaderTerm > next.LeaderTerm &&
			(old.Partitions[i].LeaderID != 0 || next.LeaderID == 0) {
			next.LeaderID, next.LeaderTerm = old.Partitions[i].LeaderID, old.Partitions[i].LeaderTerm
		}
		info.Partitions[i] = next
	}
	c.topics[t.GetName()] = info
}

// ApplyNotLeader applies a NOT_LEADER answer for a partition: the hinted
// leader (and its address, if new) when the error names one (leaderID 0:
// none), else no leader. It reports whether the partition's leader
// changed.
func (c *LeaderCache) ApplyNotLeader(topic string, partition int32, leaderID uint64, leaderAddress string) bool {
	p := c.partition(topic, partition)
	if p == nil {
		return false
	}
	c.changes++
	if leaderID != 0 && leaderAddress != "" {
		c.nodes[leaderID] = leaderAddress
	}
	if p.LeaderID == leaderID {
		return false
	}
	p.LeaderID = leaderID
	return true
}

// ForgetLeader marks a partition's leader unknown, after a connection
// error to it, until metadata names one again.
func (c *LeaderCache) ForgetLeader(topic string, partition int32) {
	if p := c.partition(topic, partition); p != nil {
		c.changes++
		p.LeaderID = 0
	}
}

// Changes counts the calls that may have changed the cache (ApplyMetadata,
// ApplyNotLeader, ForgetLeader): what was read from it is still true while
// the count stays the same.
func (c *LeaderCache) Changes() uint64 { return c.changes }

// partition finds a cached partition.
func (c *LeaderCache) partition(topic string, partition int32) *PartitionInfo {
	t := c.topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil
	}
	return &t.Partitions[partition]
}

// Leader is the partition's leader and its address; ok is false when no
// leader (or no address for it) is known.
func (c *LeaderCache) Leader(topic string, partition int32) (id uint64, addr string, ok bool) {
	p := c.partition(topic, partition)
	if p == nil || p.LeaderID == 0 {
		return 0, "", false
	}
	addr, ok = c.nodes[p.LeaderID]
	return p.LeaderID, addr, ok
}

// Topic is the cached topic, or nil when it was never seen.
func (c *LeaderCache) Topic(name string) *TopicInfo { return c.topics[name] }

// Address is a node's address.
func (c *LeaderCache) Address(id uint64) (string, bool) {
	a, ok := c.nodes[id]
	return a, ok
}

// ControllerID is the metadata group's leader as last reported, 0 if none.
func (c *LeaderCache) ControllerID() uint64 { return c.controllerID }

// NodeIDs lists the known nodes in ascending id order.
func (c *LeaderCache) NodeIDs() []uint64 {
	ids := make([]uint64, 0, len(c.nodes))
	for id := range c.nodes {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
