package groupsvc

import (
	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/proto/strandpb"
)

// HeartbeatFromWire is a heartbeat command in engine/groups' terms.
func HeartbeatFromWire(cmd *strandpb.GroupHeartbeatCommand, now int64) groups.Heartbeat {
	r := cmd.GetRequest()
	hb := groups.Heartbeat{
		Group: r.GetGroup(), MemberID: r.GetMemberId(), InstanceID: r.GetInstanceId(), Rack: r.GetRack(),
		MemberEpoch: r.GetMemberEpoch(), Seq: r.GetSeq(), Subscriptions: r.GetSubscriptions(),
		Owned: PartitionsFromWire(r.GetOwned()), NowMs: now, Classic: groups.ClassicFromWire(r.GetClassic()),
	}
	for _, t := range cmd.GetTopics() {
		info := groups.TopicInfo{Name: t.GetName(), Partitions: t.GetPartitions()}
		for _, pr := range t.GetPartitionRacks() {
			info.Racks = append(info.Racks, pr.GetRacks())
		}
		hb.Topics = append(hb.Topics, info)
	}
	return hb
}

// CommitFromWire is a commit command in engine/groups' terms.
func CommitFromWire(r *strandpb.OffsetCommitRequest, now int64) groups.Commit {
	cm := groups.Commit{Group: r.GetGroup(), MemberID: r.GetMemberId(), MemberEpoch: r.GetMemberEpoch(), NowMs: now,
		ClassicGeneration: r.GetClassicGeneration()}
	for _, o := range r.GetOffsets() {
		cm.Offsets = append(cm.Offsets, groups.OffsetCommit{
			Partition: groups.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}, Offset: o.GetOffset(), Metadata: o.GetMetadata(),
			TopicID: string(o.GetTopicId()),
		})
	}
	return cm
}

// PartitionsFromWire flattens per-topic lists.
func PartitionsFromWire(in []*strandpb.GroupTopicPartitions) []groups.TopicPartition {
	var out []groups.TopicPartition
	for _, tp := range in {
		for _, p := range tp.GetPartitions() {
			out = append(out, groups.TopicPartition{Topic: tp.GetTopic(), Partition: p})
		}
	}
	return out
}

// PartitionsToWire groups sorted partitions by topic.
func PartitionsToWire(ps []groups.TopicPartition) []*strandpb.GroupTopicPartitions {
	var out []*strandpb.GroupTopicPartitions
	for _, p := range ps {
		if n := len(out); n == 0 || out[n-1].Topic != p.Topic {
			out = append(out, &strandpb.GroupTopicPartitions{Topic: p.Topic})
		}
		last := out[len(out)-1]
		last.Partitions = append(last.Partitions, p.Partition)
	}
	return out
}

// OffsetsToWire converts committed offsets.
func OffsetsToWire(os []groups.CommittedOffset) []*strandpb.GroupCommittedOffset {
	out := make([]*strandpb.GroupCommittedOffset, len(os))
	for i, o := range os {
		out[i] = &strandpb.GroupCommittedOffset{Topic: o.Partition.Topic, Partition: o.Partition.Partition, Offset: o.Offset, Metadata: o.Metadata,
			CommitTimeMs: o.CommitMs, TopicId: []byte(o.TopicID)}
	}
	return out
}

// GroupToWire converts a described group.
func GroupToWire(v groups.GroupView) *strandpb.DescribeGroupsResponse_Group {
	out := &strandpb.DescribeGroupsResponse_Group{Group: v.ID, State: v.State, Epoch: v.Epoch, TargetEpoch: v.TargetEpoch, Offsets: OffsetsToWire(v.Offsets)}
	for _, m := range v.Members {
		out.Members = append(out.Members, &strandpb.GroupMember{
			MemberId: m.ID, InstanceId: m.InstanceID, Rack: m.Rack, MemberEpoch: m.Epoch, Subscriptions: m.Subscriptions,
			Assigned: PartitionsToWire(m.Assigned), Revoking: PartitionsToWire(m.Revoking), Target: PartitionsToWire(m.Target), LeftStatic: m.LeftStatic,
			Classic: groups.ClassicToWire(m.Classic),
		})
	}
	return out
}

// TxnCommitFromWire is a GroupTxnCommit command as engine/groups' input.
func TxnCommitFromWire(w *strandpb.GroupTxnCommit, now int64) groups.TxnCommit {
	return groups.TxnCommit{Commit: CommitFromWire(w.GetCommit(), now), ProducerID: w.GetProducerId(), ProducerEpoch: w.GetProducerEpoch(),
		InstanceID: w.GetGroupInstanceId()}
}

// TxnMarkerFromWire is a GroupTxnMarker command as engine/groups' input.
func TxnMarkerFromWire(w *strandpb.GroupTxnMarker, now int64) groups.TxnMarker {
	return groups.TxnMarker{Group: w.GetGroup(), ProducerID: w.GetProducerId(), ProducerEpoch: w.GetProducerEpoch(), Commit: w.GetCommit(),
		KeptEpoch: w.GetKeptEpoch(), NowMs: now}
}
