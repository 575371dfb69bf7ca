package authz

import (
	"github.com/strandlog/strand/proto/strandpb"
)

// Partition-level refusals, as Kafka answers them: in a Produce, Fetch or
// ListOffsets, each partition of a topic the caller may not use is
// answered TOPIC_AUTHORIZATION_FAILED and the others are served, so a
// client writing or reading several topics is not stopped by one it may
// not use. When every partition is refused the whole request is
// (authorize). The node answers each partition at its request index
// (kafkaproto relies on it), so the refused ones are put back in place.

// splitPartitions returns the request to run and the answer to use:
// req itself when nothing is refused, nil (already answered) when
// everything is, else a copy of req without the refused partitions whose
// answer puts refusals back at their indexes.
func (z Authorizer) splitPartitions(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) (*strandpb.Request, func(*strandpb.Response)) {
	var parts []refusedPart
	var op string
	add := func(topic string, id []byte, partition int32) {
		name, known := z.topicNamed(topic, id)
		parts = append(parts, refusedPart{topic: topic, name: name, partition: partition, unknownID: !known})
	}
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Produce:
		op = "write"
		for _, p := range b.Produce.GetPartitions() {
			add(p.GetTopic(), p.GetTopicId(), p.GetPartition())
		}
	case *strandpb.Request_Fetch:
		op = "read"
		for _, p := range b.Fetch.GetPartitions() {
			add(p.GetTopic(), p.GetTopicId(), p.GetPartition())
		}
	case *strandpb.Request_ListOffsets:
		op = "describe"
		for _, p := range b.ListOffsets.GetPartitions() {
			add(p.GetTopic(), p.GetTopicId(), p.GetPartition())
		}
	default:
		return req, answer
	}
	n := 0
	for i := range parts {
		if a := topicAccess(parts[i].name, op); !parts[i].unknownID && !z.allowed(caller, a) {
			parts[i].err = z.refusal(caller, a).GetError()
			n++
		}
	}
	switch {
	case n == 0:
		return req, answer
	case n == len(parts):
		answer(&strandpb.Response{Error: parts[0].err})
		return nil, nil
	}
	refused := parts
	return keepAllowed(req, refused), func(resp *strandpb.Response) {
		if resp.GetError() == nil {
			putBackRefused(resp, refused)
		}
		answer(resp)
	}
}

// refusedPart is one partition of the request, with its refusal (nil:
// allowed).
type refusedPart struct {
	topic, name string // as the request named it, and the name ACLs checked
	partition   int32
	unknownID   bool // named by a topic id no applied topic has: not authorized here
	err         *strandpb.Error
}

// keepAllowed copies req without the refused partitions.
func keepAllowed(req *strandpb.Request, refused []refusedPart) *strandpb.Request {
	out := &strandpb.Request{CorrelationId: req.GetCorrelationId()}
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Produce:
		p := &strandpb.ProduceRequest{Acks: b.Produce.GetAcks(), TimeoutMs: b.Produce.GetTimeoutMs()}
		for i, part := range b.Produce.GetPartitions() {
			if refused[i].err == nil {
				p.Partitions = append(p.Partitions, part)
			}
		}
		out.Body = &strandpb.Request_Produce{Produce: p}
	case *strandpb.Request_Fetch:
		f := &strandpb.FetchRequest{MaxWaitMs: b.Fetch.GetMaxWaitMs(), MinBytes: b.Fetch.GetMinBytes(), MaxBytes: b.Fetch.GetMaxBytes()}
		for i, part := range b.Fetch.GetPartitions() {
			if refused[i].err == nil {
				f.Partitions = append(f.Partitions, part)
			}
		}
		out.Body = &strandpb.Request_Fetch{Fetch: f}
	case *strandpb.Request_ListOffsets:
		l := &strandpb.ListOffsetsRequest{}
		for i, part := range b.ListOffsets.GetPartitions() {
			if refused[i].err == nil {
				l.Partitions = append(l.Partitions, part)
			}
		}
		out.Body = &strandpb.Request_ListOffsets{ListOffsets: l}
	}
	return out
}

// putBackRefused rebuilds the answer's partition list in request order,
// refused partitions at their indexes (with the topic and partition the
// request named); the answer holds the allowed ones, in order.
func putBackRefused(resp *strandpb.Response, refused []refusedPart) {
	switch b := resp.GetBody().(type) {
	case *strandpb.Response_Produce:
		b.Produce.Partitions = merge(b.Produce.Partitions, refused, func(r refusedPart) *strandpb.ProduceResponse_Partition {
			return &strandpb.ProduceResponse_Partition{Topic: r.topic, Partition: r.partition, Error: r.err, BaseOffset: -1}
		})
	case *strandpb.Response_Fetch:
		b.Fetch.Partitions = merge(b.Fetch.Partitions, refused, func(r refusedPart) *strandpb.FetchResponse_Partition {
			return &strandpb.FetchResponse_Partition{Topic: r.topic, Partition: r.partition, Error: r.err, HighWatermark: -1, LogStartOffset: -1}
		})
	case *strandpb.Response_ListOffsets:
		b.ListOffsets.Partitions = merge(b.ListOffsets.Partitions, refused, func(r refusedPart) *strandpb.ListOffsetsResponse_Partition {
			return &strandpb.ListOffsetsResponse_Partition{Topic: r.topic, Partition: r.partition, Error: r.err, Offset: -1,
				HighWatermark: -1, LogStartOffset: -1, TimestampMs: -1}
		})
	}
}

// merge interleaves the allowed answers with refusals at their indexes.
func merge[P any](allowed []P, refused []refusedPart, build func(refusedPart) P) []P {
	out := make([]P, 0, len(refused))
	j := 0
	for _, r := range refused {
		switch {
		case r.err != nil:
			out = append(out, build(r))
		case j < len(allowed):
			out = append(out, allowed[j])
			j++
		}
	}
	return out
}
