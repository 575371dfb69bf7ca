package kafkaproto

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// Versions of the classic group requests EncodeRequest sends (flexible,
// like the produce and fetch it sends).
const (
	clientJoinGroupVersion = 9
	clientSyncGroupVersion = 5
	clientHeartbeatVersion = 4
)

// classicRequest is the Kafka request a classic step stands for, as a
// Kafka client sends it, and the decoder of its answer into the
// heartbeat answer the step's caller reads: REBALANCE_IN_PROGRESS is
// Rejoin, ILLEGAL_GENERATION FENCED_MEMBER_EPOCH. nil when hb carries no
// classic step.
func classicRequest(hb *strandpb.ConsumerGroupHeartbeatRequest, corr int32) (kmsg.Request, func([]byte) (*strandpb.Response, error)) {
	step := hb.GetClassic()
	switch step.GetStep() {
	case strandpb.ClassicStep_CLASSIC_STEP_JOIN:
		r := kmsg.NewPtrJoinGroupRequest()
		r.SetVersion(clientJoinGroupVersion)
		r.Group, r.MemberID, r.ProtocolType = hb.GetGroup(), hb.GetMemberId(), "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 45000, 300000
		if id := hb.GetInstanceId(); id != "" {
			r.InstanceID = &id
		}
		md := kmsg.NewConsumerMemberMetadata()
		md.Version, md.Topics = 1, hb.GetSubscriptions()
		for _, o := range hb.GetOwned() {
			md.OwnedPartitions = append(md.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: o.GetTopic(), Partitions: o.GetPartitions()})
		}
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: step.GetProtocol(), Metadata: md.AppendTo(nil)}}
		return r, func(f []byte) (*strandpb.Response, error) {
			var a kmsg.JoinGroupResponse
			if err := readClassic(f, corr, r.Version, &a); err != nil {
				return nil, err
			}
			out := &strandpb.ConsumerGroupHeartbeatResponse{MemberId: a.MemberID, MemberEpoch: a.Generation, Generation: a.Generation,
				Protocol: deref(a.Protocol)}
			return classicAnswer(corr, a.ErrorCode, out), nil
		}
	case strandpb.ClassicStep_CLASSIC_STEP_SYNC:
		r := kmsg.NewPtrSyncGroupRequest()
		r.SetVersion(clientSyncGroupVersion)
		pt, proto := "consumer", step.GetProtocol()
		r.Group, r.Generation, r.MemberID, r.ProtocolType, r.Protocol = hb.GetGroup(), step.GetGeneration(), hb.GetMemberId(), &pt, &proto
		return r, func(f []byte) (*strandpb.Response, error) {
			var a kmsg.SyncGroupResponse
			if err := readClassic(f, corr, r.Version, &a); err != nil {
				return nil, err
			}
			out := &strandpb.ConsumerGroupHeartbeatResponse{MemberId: hb.GetMemberId(), Generation: r.Generation, Protocol: deref(a.Protocol)}
			if a.ErrorCode == 0 {
				ca := kmsg.NewConsumerMemberAssignment()
				if err := ca.ReadFrom(a.MemberAssignment); err != nil {
					return nil, fmt.Errorf("kafkaproto: sync group assignment: %v", err)
				}
				for _, t := range ca.Topics {
					out.Assigned = append(out.Assigned, &strandpb.GroupTopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			return classicAnswer(corr, a.ErrorCode, out), nil
		}
	case strandpb.ClassicStep_CLASSIC_STEP_HEARTBEAT:
		r := kmsg.NewPtrHeartbeatRequest()
		r.SetVersion(clientHeartbeatVersion)
		r.Group, r.Generation, r.MemberID = hb.GetGroup(), step.GetGeneration(), hb.GetMemberId()
		return r, func(f []byte) (*strandpb.Response, error) {
			var a kmsg.HeartbeatResponse
			if err := readClassic(f, corr, r.Version, &a); err != nil {
				return nil, err
			}
			out := &strandpb.ConsumerGroupHeartbeatResponse{MemberId: hb.GetMemberId(), Generation: r.Generation}
			return classicAnswer(corr, a.ErrorCode, out), nil
		}
	}
	return nil, nil
}

// readClassic reads a classic group response frame into a.
func readClassic(f []byte, corr int32, version int16, a kmsg.Response) error {
	body, err := responseBody(f, corr)
	if err != nil {
		return err
	}
	a.SetVersion(version)
	if err := a.ReadFrom(body); err != nil {
		return fmt.Errorf("kafkaproto: key %d response: %v", a.Key(), err)
	}
	return nil
}

// classicAnswer wraps a classic step's answer, its Kafka error code read
// back as the coordinator's.
func classicAnswer(corr int32, code int16, out *strandpb.ConsumerGroupHeartbeatResponse) *strandpb.Response {
	resp := &strandpb.Response{CorrelationId: uint64(corr), Body: &strandpb.Response_GroupHeartbeat{GroupHeartbeat: out}}
	switch code {
	case 0:
	case kerr.RebalanceInProgress.Code:
		out.Rejoin, out.Assigned = true, nil
	case kerr.IllegalGeneration.Code:
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH, Message: kerr.IllegalGeneration.Message}
	default:
		resp.Error = strandError(code, nil)
	}
	return resp
}
