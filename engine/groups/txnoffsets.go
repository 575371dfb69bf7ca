package groups

import (
	"fmt"
	"maps"
	"slices"

	"github.com/strandlog/strand/proto/strandpb"
)

// Refusals of transactional offsets.
var (
	// ErrProducerFenced: a TxnOffsetCommit of a producer epoch older than
	// one the group already saw (in a pending commit or a marker): a
	// zombie producer, or a late duplicate of a finished transaction.
	ErrProducerFenced = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED, "producer fenced in the group")
	// ErrFencedInstanceID: a TxnOffsetCommit's group instance id is held
	// by another member id (a newer instance replaced it).
	ErrFencedInstanceID = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_FENCED_INSTANCE_ID, "fenced group instance id")
)

// ProducersMax bounds the producers with pending offsets or a fence in one
// group.
const ProducersMax = 1 << 14

// TxnCommit is a TxnOffsetCommit the transaction coordinator confirmed
// (the group is in the producer's open transaction): its offsets wait,
// invisible to Fetch, until the transaction's marker (TxnMarker).
type TxnCommit struct {
	Commit
	ProducerID    int64
	ProducerEpoch int32
	// InstanceID is the member's group instance id ("": none).
	InstanceID string
}

// pendingTxn is one producer's pending offsets in a group.
type pendingTxn struct {
	epoch   int32
	offsets map[TopicPartition]Committed
	// fence: TxnCommits below this epoch are refused (the newest marker's
	// epoch, or the newest pending epoch).
	fence int32
	// updatedMs: the proposer's clock at the last commit or marker; a
	// fence without offsets is forgotten an offsets retention later
	// (ExpireOffsets), or first when a group has ProducersMax.
	updatedMs int64
}

// TxnCommit stores pending transactional offsets: all, or none. The
// member is fenced like Commit's (KIP-447), except that an empty member
// id is not checked (Kafka's producers before KIP-447 send none); an
// instance id held by another member id is ErrFencedInstanceID. An epoch
// older than the producer's last pending commit or marker in the group is
// ErrProducerFenced; a newer one drops the older epoch's pending offsets
// (that transaction is over: the coordinator starts a new one only once
// every marker of the last was written).
func (s *State) TxnCommit(c TxnCommit) error {
	if c.ProducerID < 0 || c.ProducerEpoch < 0 || !validName(c.InstanceID, true) {
		return fmt.Errorf("%w: transactional commit of producer %d epoch %d", ErrInvalid, c.ProducerID, c.ProducerEpoch)
	}
	if err := validCommit(c.Commit); err != nil {
		return err
	}
	if c.MemberID != "" {
		if err := s.checkInstance(c); err != nil {
			return err
		}
		if err := s.checkCommitter(c.Commit); err != nil {
			return err
		}
	}
	g := s.group(c.Group, false)
	var p *pendingTxn
	if g != nil {
		p = g.pending[c.ProducerID]
	}
	switch {
	case p != nil && c.ProducerEpoch < max(p.fence, p.epoch):
		return fmt.Errorf("%w: epoch %d of producer %d, the group saw %d", ErrProducerFenced, c.ProducerEpoch, c.ProducerID, max(p.fence, p.epoch))
	case p == nil && g != nil && len(g.pending) >= ProducersMax && !g.evictFence():
		return fmt.Errorf("%w: %d producers with transactional offsets in %q", ErrInvalid, len(g.pending), c.Group)
	}
	g = s.group(c.Group, true)
	if p == nil || p.epoch != c.ProducerEpoch {
		fence := c.ProducerEpoch
		if p != nil {
			fence = max(fence, p.fence)
		}
		p = &pendingTxn{epoch: c.ProducerEpoch, offsets: make(map[TopicPartition]Committed), fence: fence}
		g.pending[c.ProducerID] = p
	}
	for _, o := range c.Offsets {
		p.offsets[o.Partition] = Committed{Offset: o.Offset, Metadata: o.Metadata, CommitMs: c.NowMs, TopicID: o.TopicID}
	}
	p.updatedMs = max(p.updatedMs, c.NowMs)
	return nil
}

// checkInstance refuses a member whose instance id another member holds.
func (s *State) checkInstance(c TxnCommit) error {
	g := s.group(c.Group, false)
	if g == nil || c.InstanceID == "" {
		return nil
	}
	if m := g.byInstance(c.InstanceID); m != nil && m.id != c.MemberID {
		return fmt.Errorf("%w: instance %q is member %q, not %q", ErrFencedInstanceID, c.InstanceID, m.id, c.MemberID)
	}
	return nil
}

// TxnMarker is a transaction's group marker: it commits (makes them the
// group's committed offsets) or aborts (drops) the producer's pending
// offsets of that transaction. Epoch is the marker's: the transaction's
// + 1 (KIP-890), or the transaction's own with KeptEpoch. Pending offsets
// of an older epoch belong to a fenced producer and are dropped, even by
// a commit. Idempotent: a repeated marker finds nothing pending.
type TxnMarker struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int32
	Commit        bool
	KeptEpoch     bool
	NowMs         int64
}

// TxnMarker applies one group marker; it refuses only a malformed one.
func (s *State) TxnMarker(m TxnMarker) error {
	if !validName(m.Group, false) || m.ProducerID < 0 || m.ProducerEpoch < 0 {
		return fmt.Errorf("%w: group marker of producer %d epoch %d", ErrInvalid, m.ProducerID, m.ProducerEpoch)
	}
	// The group is created when missing, to keep the producer's fence: a
	// TxnOffsetCommit verified before the transaction ended and applied
	// after this marker must not start pending offsets a later duplicate
	// marker would commit.
	g := s.group(m.Group, true)
	if len(g.members) == 0 {
		g.emptySinceMs = max(g.emptySinceMs, m.NowMs)
	}
	p := g.pending[m.ProducerID]
	if p == nil {
		if len(g.pending) >= ProducersMax && !g.evictFence() {
			return nil
		}
		// Nothing pending: keep the fence, so a TxnOffsetCommit of the
		// ended transaction that arrives late is refused.
		p = &pendingTxn{epoch: m.ProducerEpoch, offsets: make(map[TopicPartition]Committed), fence: m.ProducerEpoch, updatedMs: m.NowMs}
		g.pending[m.ProducerID] = p
		return nil
	}
	txnEpoch := m.ProducerEpoch - 1
	if m.KeptEpoch {
		txnEpoch = m.ProducerEpoch
	}
	if p.epoch > txnEpoch {
		return nil // a late duplicate: the pending offsets are a later transaction's
	}
	if (m.Commit || bugOffsetsOnAbort) && p.epoch == txnEpoch { // planted-bug hook (-tags simbugs)
		for _, tp := range slices.SortedFunc(maps.Keys(p.offsets), compareTP) {
			g.offsets[tp] = p.offsets[tp]
		}
	}
	p.offsets = make(map[TopicPartition]Committed)
	p.epoch, p.fence = m.ProducerEpoch, max(p.fence, m.ProducerEpoch)
	p.updatedMs = max(p.updatedMs, m.NowMs)
	return nil
}

// supersedePending drops every producer's pending offset of tp: a plain
// commit made after it wins when the transaction commits, as in Kafka
// (where the offset written later to the log is kept).
func (g *group) supersedePending(tp TopicPartition) {
	for _, pid := range g.sortedProducers() {
		delete(g.pending[pid].offsets, tp)
	}
}

// hasPendingOffsets reports whether some producer has pending offsets.
func (g *group) hasPendingOffsets() bool {
	for _, pid := range g.sortedProducers() {
		if len(g.pending[pid].offsets) > 0 {
			return true
		}
	}
	return false
}

// evictFence forgets the fence without pending offsets updated longest
// ago (ties: the lowest producer id), making room for another producer;
// false when every producer has pending offsets.
func (g *group) evictFence() bool {
	victim, found := int64(0), false
	for _, pid := range g.sortedProducers() {
		p := g.pending[pid]
		if len(p.offsets) == 0 && (!found || p.updatedMs < g.pending[victim].updatedMs) {
			victim, found = pid, true
		}
	}
	if found {
		delete(g.pending, victim)
	}
	return found
}

// expireFences forgets the fences without pending offsets not updated for
// retentionMs: no TxnOffsetCommit of their transactions can still come.
func (g *group) expireFences(nowMs, retentionMs int64) {
	for _, pid := range g.sortedProducers() {
		if p := g.pending[pid]; len(p.offsets) == 0 && nowMs-p.updatedMs >= retentionMs {
			delete(g.pending, pid)
		}
	}
}

// Unstable lists the partitions among ps (all when ps is empty) with
// pending transactional offsets in group, sorted: Kafka's OffsetFetch with
// require_stable answers UNSTABLE_OFFSET_COMMIT for them.
func (s *State) Unstable(group string, ps []TopicPartition) []TopicPartition {
	g := s.group(group, false)
	if g == nil {
		return nil
	}
	want := normalise(ps)
	var out []TopicPartition
	for _, pid := range g.sortedProducers() {
		for tp := range g.pending[pid].offsets {
			if len(want) == 0 || contains(want, tp) {
				out = append(out, tp)
			}
		}
	}
	return slices.Compact(SortPartitions(out))
}

// sortedProducers lists the producer ids with pending state, sorted.
func (g *group) sortedProducers() []int64 {
	return slices.Sorted(maps.Keys(g.pending))
}

// pendingToWire is a group's pending offsets in a snapshot.
func (g *group) pendingToWire() []*strandpb.GroupPendingOffsets {
	var out []*strandpb.GroupPendingOffsets
	for _, pid := range g.sortedProducers() {
		p := g.pending[pid]
		w := &strandpb.GroupPendingOffsets{ProducerId: pid, ProducerEpoch: p.epoch, FenceEpoch: p.fence, UpdatedMs: p.updatedMs}
		for _, tp := range slices.SortedFunc(maps.Keys(p.offsets), compareTP) {
			c := p.offsets[tp]
			w.Offsets = append(w.Offsets, &strandpb.GroupCommittedOffset{Topic: tp.Topic, Partition: tp.Partition,
				Offset: c.Offset, Metadata: c.Metadata, CommitTimeMs: c.CommitMs, TopicId: []byte(c.TopicID)})
		}
		out = append(out, w)
	}
	return out
}

// pendingFromWire restores a group's pending offsets from a snapshot.
func (g *group) pendingFromWire(in []*strandpb.GroupPendingOffsets) error {
	if len(in) > ProducersMax {
		return fmt.Errorf("%d producers with pending offsets", len(in))
	}
	for i, w := range in {
		if w.GetProducerId() < 0 || w.GetProducerEpoch() < 0 || i > 0 && in[i-1].GetProducerId() >= w.GetProducerId() {
			return fmt.Errorf("pending offsets of producer %d out of order or invalid", w.GetProducerId())
		}
		p := &pendingTxn{epoch: w.GetProducerEpoch(), fence: w.GetFenceEpoch(), offsets: make(map[TopicPartition]Committed), updatedMs: w.GetUpdatedMs()}
		for _, o := range w.GetOffsets() {
			tp := TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}
			if !validName(tp.Topic, false) || tp.Partition < 0 || o.GetOffset() < 0 {
				return fmt.Errorf("pending offset %d of %s/%d", o.GetOffset(), tp.Topic, tp.Partition)
			}
			p.offsets[tp] = Committed{Offset: o.GetOffset(), Metadata: o.GetMetadata(), CommitMs: o.GetCommitTimeMs(), TopicID: string(o.GetTopicId())}
		}
		if len(p.offsets) != len(w.GetOffsets()) {
			return fmt.Errorf("pending offsets of producer %d repeat a partition", w.GetProducerId())
		}
		g.pending[w.GetProducerId()] = p
	}
	return nil
}

// dropPendingTopic forgets pending offsets of a deleted topic.
func (g *group) dropPendingTopic(topic string) {
	for _, pid := range g.sortedProducers() {
		for _, tp := range slices.SortedFunc(maps.Keys(g.pending[pid].offsets), compareTP) {
			if tp.Topic == topic {
				delete(g.pending[pid].offsets, tp)
			}
		}
	}
}
