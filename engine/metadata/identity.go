package metadata

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strandlog/strand/proto/strandpb"
)

// UUID is a 16-byte identity: the cluster's, or a topic's. The zero UUID
// means "none" (a static topic, a cluster whose first command has not
// applied yet).
type UUID [16]byte

// IsZero reports whether u is the zero UUID.
func (u UUID) IsZero() bool { return u == UUID{} }

// String formats u as a UUID: 8-4-4-4-12 hex digits.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// ParseUUID reads what String writes (lower or upper case hex); ok is
// false for anything else.
func ParseUUID(s string) (u UUID, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return UUID{}, false
	}
	digits := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(u[:], []byte(digits)); err != nil {
		return UUID{}, false
	}
	return u, true
}

// Bytes is u as a wire field: nil for the zero UUID.
func (u UUID) Bytes() []byte {
	if u.IsZero() {
		return nil
	}
	return u[:]
}

// UUIDFromBytes reads a wire field: 16 bytes, or empty for the zero UUID;
// ok is false for any other length.
func UUIDFromBytes(b []byte) (u UUID, ok bool) {
	switch len(b) {
	case 0:
		return UUID{}, true
	case len(u):
		copy(u[:], b)
		return u, true
	}
	return UUID{}, false
}

// Leader is a partition's leader as last reported to the metadata group:
// the node and the raft term it leads in. Term 0: none reported yet.
type Leader struct {
	Node uint64
	Term uint64
}

// LeaderReport is one leader's report about one partition. TopicID is the
// topic's sequence id (Topic.ID), so a report about a deleted topic never
// lands on a new topic of the same name.
type LeaderReport struct {
	Topic     string
	TopicID   uint64
	Partition int32
	Leader    Leader
}

// LeaderReportsMax bounds the reports of one ReportLeaders command.
const LeaderReportsMax = 4096

// ClusterID is the cluster's id: zero until the first command carrying a
// cluster seed applied.
func (s *State) ClusterID() UUID { return s.clusterID }

// TopicUUID returns the named topic's uuid, if the topic exists: a
// lookup without Topic's deep copy.
func (s *State) TopicUUID(name string) (UUID, bool) {
	t, ok := s.topics[name]
	if !ok {
		return UUID{}, false
	}
	return t.uuid, true
}

// TopicByUUID returns the name of the topic with uuid u, if one exists:
// a scan of the topics in name order, without copies.
func (s *State) TopicByUUID(u UUID) (string, bool) {
	for _, name := range s.topicNames {
		if s.topics[name].uuid == u {
			return name, true
		}
	}
	return "", false
}

// Leader returns the last leader reported for a partition, if the
// partition exists.
func (s *State) Leader(topic string, partition int32) (Leader, bool) {
	t, ok := s.topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.leaders) {
		return Leader{}, false
	}
	return t.leaders[partition], true
}

// maybeInitCluster takes the command's seed as the cluster id while there
// is none. The seed is random bytes the proposing node drew (from its
// handed-in source): the state machine draws nothing itself.
func (s *State) maybeInitCluster(seed []byte) {
	if !s.clusterID.IsZero() {
		return
	}
	if u, ok := UUIDFromBytes(seed); ok && !u.IsZero() {
		s.clusterID = u
	}
}

// topicUUID derives the id of a topic created by the entry at index:
// SHA-256 of the cluster id and the index, cut to 16 bytes and marked as
// a version-8 (custom) RFC 9562 UUID. The index is unique within the
// metadata log and the cluster id across clusters, so ids are never
// reused; the rare collision with a live topic is stepped past.
func (s *State) topicUUID(index uint64) UUID {
	for attempt := uint64(0); ; attempt++ {
		var in [16 + 16]byte
		copy(in[:16], s.clusterID[:])
		binary.BigEndian.PutUint64(in[16:], index)
		binary.BigEndian.PutUint64(in[24:], attempt)
		sum := sha256.Sum256(in[:])
		var u UUID
		copy(u[:], sum[:16])
		u[6] = u[6]&0x0f | 0x80
		u[8] = u[8]&0x3f | 0x80
		if !s.uuidInUse(u) {
			return u
		}
	}
}

// uuidInUse reports whether a live topic has id u.
func (s *State) uuidInUse(u UUID) bool {
	for _, name := range s.topicNames {
		if s.topics[name].uuid == u {
			return true
		}
	}
	return false
}

// reportLeaders records each report whose term is newer than the recorded
// one, for a live partition of the named topic incarnation, naming one of
// its replicas. Stale and unknown reports are skipped: raft terms only
// grow, and a term has at most one leader, so the newest term wins
// whatever order reports arrive in. Leaders do not bump the version (it
// tells nodes to reconcile their replicas; leaders move nothing).
func (s *State) reportLeaders(c *strandpb.MetadataReportLeaders) Result {
	if len(c.GetReports()) > LeaderReportsMax {
		return Result{Err: fmt.Errorf("%w: %d leader reports, max %d", ErrInvalidCommand, len(c.GetReports()), LeaderReportsMax)}
	}
	for _, r := range c.GetReports() {
		t, ok := s.topics[r.GetTopic()]
		p := r.GetPartition()
		if !ok || t.id != r.GetTopicSeq() || p < 0 || int(p) >= len(t.replicas) {
			continue
		}
		if r.GetLeaderTerm() <= t.leaders[p].Term ||
			!containsID(t.replicas[p], r.GetLeaderId()) && !containsID(t.targets[p], r.GetLeaderId()) {
			continue
		}
		t.leaders[p] = Leader{Node: r.GetLeaderId(), Term: r.GetLeaderTerm()}
	}
	return Result{}
}

// EncodeReportLeaders records partition leaders (at most
// LeaderReportsMax reports).
func EncodeReportLeaders(reports []LeaderReport) ([]byte, error) {
	c := &strandpb.MetadataReportLeaders{Reports: make([]*strandpb.MetadataLeaderReport, len(reports))}
	for i, r := range reports {
		c.Reports[i] = &strandpb.MetadataLeaderReport{
			Topic: r.Topic, TopicSeq: r.TopicID, Partition: r.Partition,
			LeaderId: r.Leader.Node, LeaderTerm: r.Leader.Term,
		}
	}
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_ReportLeaders{ReportLeaders: c}})
}

// clusterSeedField is MetadataCommand.cluster_seed's field number.
const clusterSeedField = 20

// WithClusterSeed returns data (an encoded command) carrying seed as its
// cluster seed, appending to data: the first applied command with a seed
// fixes the cluster id. A node attaches one while its state has no id.
func WithClusterSeed(data []byte, seed UUID) []byte {
	data = protowire.AppendTag(data, clusterSeedField, protowire.BytesType)
	return protowire.AppendBytes(data, seed[:])
}
