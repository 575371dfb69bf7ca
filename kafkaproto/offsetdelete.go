package kafkaproto

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// offsetDelete (key 47, v0) forgets a group's committed offsets on its
// coordinator: Strand's OffsetDelete, one replicated group command. As in
// Kafka, a partition of a topic a member subscribes to keeps its offset
// and answers GROUP_SUBSCRIBED_TO_TOPIC; a missing group answers
// GROUP_ID_NOT_FOUND at the top level, as do coordinator errors
// (NOT_COORDINATOR: the client finds the coordinator again).
func (c *conn) offsetDelete(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.OffsetDeleteRequest)
	sreq := &strandpb.OffsetDeleteRequest{Group: r.Group}
	for _, t := range r.Topics {
		tp := &strandpb.GroupTopicPartitions{Topic: t.Topic}
		for _, p := range t.Partitions {
			tp.Partitions = append(tp.Partitions, p.Partition)
		}
		sreq.Partitions = append(sreq.Partitions, tp)
	}
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_OffsetDelete{OffsetDelete: sreq}})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		out := kmsg.NewPtrOffsetDeleteResponse()
		out.SetVersion(r.Version)
		if e := resp.GetError(); e != nil {
			out.ErrorCode = kafkaCode(e)
			return out
		}
		results := resp.GetOffsetDelete().GetResults()
		i := 0
		for _, t := range r.Topics {
			ot := kmsg.NewOffsetDeleteResponseTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewOffsetDeleteResponseTopicPartition()
				op.Partition = p.Partition
				if i < len(results) {
					op.ErrorCode = kafkaCode(results[i].GetError())
				} else {
					op.ErrorCode = kafkaCode(&strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INTERNAL})
				}
				i++
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
}
