package kafkaproto

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// createPartitions grows topics through the metadata group (Strand's
// CreatePartitions): Count is the new total, as Kafka's. validate_only is
// served (the metadata group checks and places without a change). Refused
// here, as Kafka refuses them: a topic named twice (every occurrence is
// INVALID_REQUEST) and a manual replica assignment (Strand places replicas
// itself; INVALID_REQUEST saying so). A missing topic answers
// UNKNOWN_TOPIC_OR_PARTITION, a count not above the current one
// INVALID_PARTITIONS, too few live nodes INVALID_REPLICATION_FACTOR, all
// with Strand's message.
func (c *conn) createPartitions(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.CreatePartitionsRequest)
	count := map[string]int{}
	for _, t := range r.Topics {
		count[t.Topic]++
	}
	local := map[string]*strandpb.Error{}
	sreq := &strandpb.CreatePartitionsRequest{TimeoutMs: r.TimeoutMillis, ValidateOnly: r.ValidateOnly}
	for _, t := range r.Topics {
		switch {
		case count[t.Topic] > 1:
			local[t.Topic] = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
				Message: "topic named more than once in one CreatePartitions: name it once"}
			continue
		case len(t.Assignment) > 0:
			local[t.Topic] = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
				Message: "Strand places replicas itself: send CreatePartitions without an assignment"}
			continue
		}
		sreq.Topics = append(sreq.Topics, &strandpb.CreatePartitionsRequest_Topic{Name: t.Topic, Partitions: t.Count})
	}
	var k *call
	if len(sreq.Topics) > 0 {
		k = c.submit(&strandpb.Request{Body: &strandpb.Request_CreatePartitions{CreatePartitions: sreq}})
	}
	return func() kmsg.Response {
		answers := map[string]*strandpb.Error{}
		var whole *strandpb.Response
		if k != nil {
			if whole = c.wait(k); whole == nil {
				return nil
			}
			for _, t := range whole.GetCreatePartitions().GetTopics() {
				answers[t.GetName()] = t.GetError()
			}
		}
		out := kmsg.NewPtrCreatePartitionsResponse()
		out.SetVersion(r.Version)
		for _, t := range r.Topics {
			e, ok := local[t.Topic]
			if !ok {
				if e, ok = answers[t.Topic]; ok {
					e = partErr(whole, e)
				} else {
					e = whole.GetError()
				}
			}
			ot := kmsg.NewCreatePartitionsResponseTopic()
			ot.Topic, ot.ErrorCode, ot.ErrorMessage = t.Topic, createTopicCode(e), message(e)
			out.Topics = append(out.Topics, ot)
		}
		return out
	}
}
