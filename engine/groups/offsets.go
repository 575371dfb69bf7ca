package groups

import (
	"fmt"
	"slices"
)

// OffsetCommit is one partition's position to commit.
type OffsetCommit struct {
	Partition TopicPartition
	Offset    int64
	Metadata  string
	TopicID   string // the offset's topic id, raw bytes ("": none recorded)
}

// topicIDMax bounds a committed offset's topic id (16 bytes in practice).
const topicIDMax = 16

// Commit stores committed offsets. A member commits in its current epoch
// only (older: ErrStaleMemberEpoch; newer: ErrFencedMemberEpoch). An empty
// MemberID is a simple consumer or an operator's reset, as Kafka allows:
// accepted only while the group has no members (ErrGroupNotEmpty), and it
// creates the group.
type Commit struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	Offsets     []OffsetCommit
	NowMs       int64
	// ClassicGeneration: MemberEpoch is a classic member's generation,
	// committed in the member's epoch when it is its view's (classicEpoch).
	ClassicGeneration bool
}

// Commit applies one commit: all of its offsets, or none.
func (s *State) Commit(c Commit) error {
	if err := validCommit(c); err != nil {
		return err
	}
	if err := s.checkCommitter(c); err != nil {
		return err
	}
	g := s.group(c.Group, true)
	for _, o := range c.Offsets {
		g.offsets[o.Partition] = Committed{Offset: o.Offset, Metadata: o.Metadata, CommitMs: c.NowMs, TopicID: o.TopicID}
		g.supersedePending(o.Partition)
	}
	if len(g.members) == 0 {
		g.emptySinceMs = max(g.emptySinceMs, c.NowMs)
	}
	return nil
}

// validCommit checks a commit's names and offsets.
func validCommit(c Commit) error {
	if !validName(c.Group, false) || !validName(c.MemberID, true) || len(c.Offsets) > PartitionsMax {
		return fmt.Errorf("%w: commit names", ErrInvalid)
	}
	for _, o := range c.Offsets {
		if !validName(o.Partition.Topic, false) || o.Partition.Partition < 0 || o.Offset < 0 || len(o.Metadata) > MetadataMax ||
			len(o.TopicID) > topicIDMax {
			return fmt.Errorf("%w: offset %d of %s/%d", ErrInvalid, o.Offset, o.Partition.Topic, o.Partition.Partition)
		}
	}
	return nil
}

// checkCommitter applies the epoch rules of Commit.
func (s *State) checkCommitter(c Commit) error {
	g := s.group(c.Group, false)
	if c.MemberID == "" {
		if g != nil && len(g.members) > 0 {
			return fmt.Errorf("%w: %q has %d; a commit without a member id needs an empty group", ErrGroupNotEmpty, c.Group, len(g.members))
		}
		return nil
	}
	var m *member
	if g != nil {
		m = g.find(c.MemberID)
	}
	epoch := c.MemberEpoch
	if c.ClassicGeneration {
		epoch = m.classicEpoch(epoch)
	}
	switch {
	case m == nil:
		return ErrUnknownMember
	case bugCommitSkipsEpoch:
		return nil
	case m.leftStatic || epoch > m.epoch:
		return ErrFencedMemberEpoch
	case epoch < m.epoch:
		return ErrStaleMemberEpoch
	}
	return nil
}

// Fetch returns the group's committed offset of each partition asked for
// (ok false where none), or of every partition when ps is empty, sorted.
func (s *State) Fetch(group string, ps []TopicPartition) []CommittedOffset {
	g := s.group(group, false)
	if g == nil {
		return nil
	}
	if len(ps) == 0 {
		ps = make([]TopicPartition, 0, len(g.offsets))
		for p := range g.offsets {
			ps = append(ps, p)
		}
	}
	ps = normalise(ps)
	out := make([]CommittedOffset, 0, len(ps))
	for _, p := range ps {
		if c, ok := g.offsets[p]; ok {
			out = append(out, CommittedOffset{Partition: p, Committed: c})
		}
	}
	return out
}

// DeleteOffsets forgets the group's committed offsets of ps, as Kafka's
// OffsetDelete: a partition of a topic some member subscribes to keeps its
// offset and gets ErrGroupSubscribedToTopic in the result at its index;
// every other is deleted (nil, also when nothing was committed). The group
// stays, even with no offsets left. A missing group is ErrGroupNotFound.
func (s *State) DeleteOffsets(group string, ps []TopicPartition) ([]error, error) {
	if !validName(group, false) || len(ps) > PartitionsMax {
		return nil, fmt.Errorf("%w: offset delete names", ErrInvalid)
	}
	for _, p := range ps {
		if !validName(p.Topic, false) || p.Partition < 0 {
			return nil, fmt.Errorf("%w: partition %s/%d", ErrInvalid, p.Topic, p.Partition)
		}
	}
	g := s.group(group, false)
	if g == nil {
		return nil, ErrGroupNotFound
	}
	out := make([]error, len(ps))
	for i, p := range ps {
		if m := g.subscriber(p.Topic); m != nil {
			out[i] = fmt.Errorf("%w: member %q subscribes to %q", ErrGroupSubscribedToTopic, m.id, p.Topic)
			continue
		}
		delete(g.offsets, p)
	}
	return out, nil
}

// subscriber is a member subscribed to topic, or nil.
func (g *group) subscriber(topic string) *member {
	for _, m := range g.members {
		if _, ok := slices.BinarySearch(m.subs, topic); ok {
			return m
		}
	}
	return nil
}

// CommittedOffset is one partition's committed position.
type CommittedOffset struct {
	Partition TopicPartition
	Committed
}

// DeleteTopic removes a deleted topic from every group: its offsets, its
// partition count (the target assignment moves when it had partitions).
func (s *State) DeleteTopic(topic string) {
	for _, id := range s.names {
		g := s.groups[id]
		for _, p := range g.sortedOffsets() {
			if p.Topic == topic {
				delete(g.offsets, p)
			}
		}
		g.dropPendingTopic(topic)
		i, ok := slices.BinarySearchFunc(g.topics, topic, func(x TopicInfo, n string) int { return cmpString(x.Name, n) })
		if ok {
			g.topics = slices.Delete(g.topics, i, i+1)
			g.bump()
		}
	}
}

// sortedOffsets lists the partitions with a committed offset, sorted.
func (g *group) sortedOffsets() []TopicPartition {
	ps := make([]TopicPartition, 0, len(g.offsets))
	for p := range g.offsets {
		ps = append(ps, p)
	}
	return SortPartitions(ps)
}

// Topics lists every topic some group of this state has offsets or a
// partition count for, sorted (the coordinator compares it with the
// cluster's topics to propose DeleteTopic for the ones gone).
func (s *State) Topics() []string {
	seen := make(map[string]bool)
	var out []string
	for _, id := range s.names {
		g := s.groups[id]
		for _, p := range g.sortedOffsets() {
			if !seen[p.Topic] {
				seen[p.Topic] = true
				out = append(out, p.Topic)
			}
		}
		for _, t := range g.topics {
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}
