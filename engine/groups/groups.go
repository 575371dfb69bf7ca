package groups

import (
	"cmp"
	"slices"
	"strings"

	"github.com/strandlog/strand/proto/strandpb"
)

// Limits that keep one command's work bounded.
const (
	// MembersMax bounds the members of one group.
	MembersMax = 4096
	// PartitionsMax bounds the partitions one group's subscriptions cover.
	PartitionsMax = 1 << 16
	// NameMax bounds group, member, instance and topic names and racks.
	NameMax = 255
	// MetadataMax bounds a committed offset's metadata string.
	MetadataMax = 4096
)

// Special member epochs a heartbeat may carry.
const (
	// EpochJoin: the member joins (or rejoins) and owns nothing.
	EpochJoin int32 = 0
	// EpochLeave: the member leaves the group for good.
	EpochLeave int32 = -1
	// EpochLeaveStatic: a static member leaves for a restart; it keeps its
	// assignment until its instance id rejoins or the coordinator expires it.
	EpochLeaveStatic int32 = -2
)

// Refusals. Each leaves the state unchanged and carries its wire code
// (strandpb.CodeOf), which the coordinator answers.
var (
	// ErrUnknownMember: the member id is not in the group (never joined,
	// left, expired, or replaced by its instance id): rejoin with epoch 0.
	ErrUnknownMember = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID, "unknown member id")
	// ErrFencedMemberEpoch: the member's epoch is not one the coordinator
	// handed it (a zombie, or it was fenced): rejoin with epoch 0.
	ErrFencedMemberEpoch = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH, "fenced member epoch")
	// ErrStaleMemberEpoch: a commit carries an epoch older than the
	// member's: heartbeat first, then commit what it still owns.
	ErrStaleMemberEpoch = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_STALE_MEMBER_EPOCH, "stale member epoch")
	// ErrStaleHeartbeat: the heartbeat's sequence number is not newer than
	// one already applied (a duplicate or reordered resend): ignore it.
	ErrStaleHeartbeat = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_STALE_HEARTBEAT, "stale heartbeat sequence")
	// ErrGroupNotEmpty: the operation needs a group without members.
	ErrGroupNotEmpty = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_EMPTY, "group has active members")
	// ErrGroupNotFound: no such group.
	ErrGroupNotFound = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND, "group not found")
	// ErrGroupSubscribedToTopic: an offset delete of a partition whose
	// topic a member of the group subscribes to; the offset is kept.
	ErrGroupSubscribedToTopic = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_GROUP_SUBSCRIBED_TO_TOPIC, "group subscribed to topic")
	// ErrInvalid: a malformed command (empty or oversized names, a
	// negative offset, too many members or partitions).
	ErrInvalid = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "invalid group command")
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// compareTP orders partitions by topic, then number.
func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// SortPartitions sorts ps in place by topic, then number, and returns it.
func SortPartitions(ps []TopicPartition) []TopicPartition {
	slices.SortFunc(ps, compareTP)
	return ps
}

// TopicInfo is a subscribed topic's partition count as the proposing
// coordinator's metadata saw it: data in the command, so every replica
// computes the same assignment.
type TopicInfo struct {
	Name       string
	Partitions int32
	// Racks are, per partition, the racks of its replicas (sorted,
	// distinct; nil when unknown): members in one of them are preferred.
	Racks [][]string
}

// equalTopic reports whether two topic infos are the same.
func equalTopic(a, b TopicInfo) bool {
	if a.Name != b.Name || a.Partitions != b.Partitions || len(a.Racks) != len(b.Racks) {
		return false
	}
	for i := range a.Racks {
		if !slices.Equal(a.Racks[i], b.Racks[i]) {
			return false
		}
	}
	return true
}

// rackLocal reports whether rack holds a replica of p (false when either
// is unknown).
func (g *group) rackLocal(p TopicPartition, rack string) bool {
	if rack == "" {
		return false
	}
	i, ok := slices.BinarySearchFunc(g.topics, p.Topic, func(x TopicInfo, n string) int { return cmpString(x.Name, n) })
	if !ok || int(p.Partition) >= len(g.topics[i].Racks) {
		return false
	}
	_, local := slices.BinarySearch(g.topics[i].Racks[p.Partition], rack)
	return local
}

// Committed is a group's committed position in one partition.
type Committed struct {
	Offset   int64
	Metadata string
	// CommitMs is the proposer's wall clock at the commit (for display
	// and offset expiry).
	CommitMs int64
	// TopicID is the id of the topic the offset belongs to (nil: not
	// recorded). The coordinator never applies it to another topic of
	// the name (a deleted topic's namesake). Raw bytes in a string, so
	// Committed stays comparable.
	TopicID string
}

// member is one consumer of a group.
type member struct {
	id, instanceID, rack string
	epoch, prevEpoch     int32
	subs                 []string         // sorted, distinct
	assigned             []TopicPartition // sorted: what the member may own now
	revoking             []TopicPartition // sorted: it must give these up; still its own until it reports so
	target               []TopicPartition // sorted: its share of the target assignment
	leftStatic           bool             // a static member away for a restart
	lastSeq              uint64           // newest heartbeat sequence applied
	classic              *ClassicView     // what a classic member was told; nil for a KIP-848 member
}

// group is one consumer group.
type group struct {
	id          string
	epoch       int32       // bumps when membership, subscriptions or topics change
	targetEpoch int32       // the epoch the target assignment was computed at
	members     []*member   // sorted by id
	topics      []TopicInfo // sorted by name: partition counts of subscribed topics
	offsets     map[TopicPartition]Committed
	// pending are transactional offsets and fences, by producer id
	// (txnoffsets.go); walked through sortedProducers.
	pending map[int64]*pendingTxn
	// emptySinceMs: the proposer's clock when the group last became empty
	// or, while empty, last committed; offsets expire a retention after.
	emptySinceMs int64
}

// State is every group of one coordinator partition.
type State struct {
	groups map[string]*group
	names  []string // sorted group ids: the only order groups are walked in
}

// New returns an empty state.
func New() *State { return &State{groups: make(map[string]*group)} }

func validName(s string, empty bool) bool {
	if s == "" {
		return empty
	}
	return len(s) <= NameMax
}

// group returns the group id, creating it when create is set.
func (s *State) group(id string, create bool) *group {
	if g := s.groups[id]; g != nil {
		return g
	}
	if !create {
		return nil
	}
	g := &group{id: id, offsets: make(map[TopicPartition]Committed), pending: make(map[int64]*pendingTxn)}
	s.groups[id] = g
	i, _ := slices.BinarySearch(s.names, id)
	s.names = slices.Insert(s.names, i, id)
	return g
}

// deleteGroup forgets a group entirely.
func (s *State) deleteGroup(id string) {
	delete(s.groups, id)
	if i, ok := slices.BinarySearch(s.names, id); ok {
		s.names = slices.Delete(s.names, i, i+1)
	}
}

// memberIndex finds a member by id.
func (g *group) memberIndex(id string) (int, bool) {
	return slices.BinarySearchFunc(g.members, id, func(m *member, id string) int { return strings.Compare(m.id, id) })
}

// find returns the member with id, or nil.
func (g *group) find(id string) *member {
	if i, ok := g.memberIndex(id); ok {
		return g.members[i]
	}
	return nil
}

// byInstance returns the member with the instance id, or nil.
func (g *group) byInstance(instance string) *member {
	if instance == "" {
		return nil
	}
	for _, m := range g.members {
		if m.instanceID == instance {
			return m
		}
	}
	return nil
}

// insert adds m in id order.
func (g *group) insert(m *member) {
	i, _ := g.memberIndex(m.id)
	g.members = slices.Insert(g.members, i, m)
}

// remove drops the member with id; the group's epoch moves and the target
// assignment is recomputed.
func (g *group) remove(id string, nowMs int64) {
	i, ok := g.memberIndex(id)
	if !ok {
		return
	}
	g.members = slices.Delete(g.members, i, i+1)
	if len(g.members) == 0 {
		g.emptySinceMs = nowMs
	}
	g.bump()
}

// bump moves the group epoch and recomputes the target assignment.
func (g *group) bump() {
	g.epoch++
	g.computeTarget()
	g.targetEpoch = g.epoch
}

// heldByOther reports whether a member other than m owns p (assigned or
// still revoking).
func (g *group) heldByOther(p TopicPartition, m *member) bool {
	for _, o := range g.members {
		if o == m {
			continue
		}
		if contains(o.assigned, p) || contains(o.revoking, p) {
			return true
		}
	}
	return false
}

// contains reports whether the sorted ps holds p.
func contains(ps []TopicPartition, p TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(ps, p, compareTP)
	return ok
}

// intersect returns the sorted elements of a that b holds.
func intersect(a, b []TopicPartition) []TopicPartition {
	var out []TopicPartition
	for _, p := range a {
		if contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}

// minus returns the sorted elements of a that b does not hold.
func minus(a, b []TopicPartition) []TopicPartition {
	var out []TopicPartition
	for _, p := range a {
		if !contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}

// normalise sorts and de-duplicates ps into a fresh slice.
func normalise(ps []TopicPartition) []TopicPartition {
	out := SortPartitions(slices.Clone(ps))
	return slices.Compact(out)
}
