package kafkaproto

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// txnOffsetCommit is Kafka's TxnOffsetCommit (key 28, v0-v3), the native
// TxnOffsetCommit sent to this node, which must be the group's
// coordinator: the offsets are pending in the producer's open transaction
// (which must hold the group, AddOffsetsToTxn) until its marker. v3
// (KIP-447) carries the member's generation, id and instance id, fenced
// like an OffsetCommit's (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID); v0-v2 carry none and are not checked against the
// members. Partition checks and -1/-2 offsets are OffsetCommit's
// (commitChecks). v4 (KIP-890 part 1) is v3 whose client knows
// TRANSACTION_ABORTABLE; v5+ (transactions v2's implicit AddOffsetsToTxn,
// then topic ids) are not advertised, as Kafka serves no v5 to a client
// without transaction.version 2.
func (c *conn) txnOffsetCommit(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.TxnOffsetCommitRequest)
	local, resolved, ok := c.commitChecks(txnCommitAsCommit(r))
	if !ok {
		return func() kmsg.Response { return nil }
	}
	commit := &strandpb.OffsetCommitRequest{Group: r.Group, MemberEpoch: -1}
	if r.Version >= 3 && r.MemberID != "" {
		commit.MemberId, commit.MemberEpoch = r.MemberID, r.Generation
		commit.ClassicGeneration = !c.s.classic.isKIP848(r.Group, r.MemberID)
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			key := tp{t.Topic, p.Partition}
			if _, refused := local[key]; refused {
				continue
			}
			off := p.Offset
			if o, ok := resolved[key]; ok {
				off = o
			}
			commit.Offsets = append(commit.Offsets, &strandpb.OffsetCommitPartition{Topic: t.Topic, Partition: p.Partition, Offset: off,
				Metadata: deref(p.Metadata)})
		}
	}
	var k *call
	if len(commit.Offsets) > 0 {
		k = c.submit(&strandpb.Request{Body: &strandpb.Request_TxnOffsetCommit{TxnOffsetCommit: &strandpb.TxnOffsetCommitRequest{
			TransactionalId: r.TransactionalID, Producer: txnProducer(r.ProducerID, r.ProducerEpoch), Commit: commit,
			GroupInstanceId: deref(r.InstanceID)}}})
	}
	return func() kmsg.Response {
		var code int16
		if k != nil {
			resp := c.wait(k)
			if resp == nil {
				return nil
			}
			code = txnOffsetCode(r.Version, resp.GetError(), commit.GetClassicGeneration())
		}
		out := kmsg.NewPtrTxnOffsetCommitResponse()
		out.SetVersion(r.Version)
		for _, t := range r.Topics {
			ot := kmsg.NewTxnOffsetCommitResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				op.Partition, op.ErrorCode = p.Partition, code
				if lc, refused := local[tp{t.Topic, p.Partition}]; refused {
					op.ErrorCode = lc
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
}

// txnOffsetCode is a TxnOffsetCommit's answer: a classic member's fenced
// or stale epoch is ILLEGAL_GENERATION, a fenced producer
// PRODUCER_FENCED or INVALID_PRODUCER_EPOCH by version (txnCode), a group
// not in the open transaction TRANSACTION_ABORTABLE from v4 (abortable).
func txnOffsetCode(version int16, e *strandpb.Error, classic bool) int16 {
	if classic {
		switch e.GetCode() {
		case strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH, strandpb.ErrorCode_ERROR_CODE_STALE_MEMBER_EPOCH:
			return kerr.IllegalGeneration.Code
		}
	}
	return abortable(28, version, txnCode(28, version, e))
}

// txnCommitAsCommit is the partitions and offsets of r as an OffsetCommit
// request, for commitChecks.
func txnCommitAsCommit(r *kmsg.TxnOffsetCommitRequest) *kmsg.OffsetCommitRequest {
	out := kmsg.NewPtrOffsetCommitRequest()
	out.Group = r.Group
	for _, t := range r.Topics {
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			op.Partition, op.Offset = p.Partition, p.Offset
			ot.Partitions = append(ot.Partitions, op)
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}

// markUnstable answers UNSTABLE_OFFSET_COMMIT (offset -1) for each
// partition of og with pending transactional offsets (OffsetFetch
// require_stable, KIP-447), adding those not listed when og lists every
// committed partition (none asked).
func markUnstable(og *kmsg.OffsetFetchResponseGroup, unstable []*strandpb.GroupTopicPartitions, all bool) {
	pending := map[tp]bool{}
	for _, t := range unstable {
		for _, p := range t.GetPartitions() {
			pending[tp{t.GetTopic(), p}] = true
		}
	}
	for i := range og.Topics {
		t := &og.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if key := (tp{t.Topic, p.Partition}); pending[key] {
				p.ErrorCode, p.Offset, p.Metadata = kerr.UnstableOffsetCommit.Code, -1, nil
				delete(pending, key)
			}
		}
	}
	if !all {
		return
	}
	for _, t := range unstable {
		for _, part := range t.GetPartitions() {
			if !pending[tp{t.GetTopic(), part}] {
				continue
			}
			ot := kmsg.NewOffsetFetchResponseGroupTopic()
			ot.Topic = t.GetTopic()
			p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode = part, -1, -1, kerr.UnstableOffsetCommit.Code
			ot.Partitions = append(ot.Partitions, p)
			og.Topics = append(og.Topics, ot)
		}
	}
}
