package clientlib

import (
	"context"
	"errors"

	"github.com/strandlog/strand/proto/strandpb"
)

// ErrInvalidPartitions matches a partition count a topic cannot take:
// below 1, above the per-topic maximum, or not above the topic's current
// count (partitions are only ever added).
var ErrInvalidPartitions = &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS}

// PartitionsAdded is the outcome of CreatePartitions.
type PartitionsAdded struct {
	// Partitions is the topic's partition count as applied (or as it
	// would be, with validate-only).
	Partitions int32
	// Added is how many partitions the call added; -1 when a retry found
	// the count already reached (an earlier attempt whose answer was lost
	// applied it).
	Added int32
}

// CreatePartitions grows topic to total partitions (the total, as Kafka's
// CreatePartitions and kafka-topics --alter --partitions), through the
// metadata group, and refreshes metadata so producers see the new
// partitions. New partitions get replicas as a create places them; old
// ones keep theirs and their records, but keyed records map to partitions
// by the count, so a key's later records may go to another partition.
// validateOnly checks and places without changing anything. A count not
// above the current one fails with ErrInvalidPartitions, a missing topic
// with ErrTopicNotFound.
func (c *Client) CreatePartitions(ctx context.Context, topic string, total int32, validateOnly bool) (PartitionsAdded, error) {
	req := &strandpb.Request{Body: &strandpb.Request_CreatePartitions{CreatePartitions: &strandpb.CreatePartitionsRequest{
		Topics:       []*strandpb.CreatePartitionsRequest_Topic{{Name: topic, Partitions: total}},
		TimeoutMs:    int32(c.cfg.requestTimeout.Milliseconds()),
		ValidateOnly: validateOnly,
	}}}
	var out PartitionsAdded
	unsure := false // an attempt may have applied the grow
	err := c.withRetriesUnsure(ctx, &unsure, func() error {
		resp, err := c.controllerRequest(ctx, req, &unsure)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		if err != nil {
			return err
		}
		for _, r := range resp.GetCreatePartitions().GetTopics() {
			if r.GetName() != topic {
				continue
			}
			err := errorFromWire(r.GetError())
			if err == nil {
				out = PartitionsAdded{Partitions: r.GetPartitions(), Added: r.GetAdded()}
			}
			return err
		}
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: "answer lacks topic " + topic}
	})
	if err != nil && unsure && !validateOnly && errors.Is(err, ErrInvalidPartitions) {
		// An earlier attempt may have applied the grow: it did when the
		// topic has exactly the count asked for now.
		if details, derr := c.DescribeTopics(ctx, topic); derr == nil && len(details) == 1 &&
			details[0].Err == nil && details[0].Partitions == total {
			out, err = PartitionsAdded{Partitions: total, Added: -1}, nil
		}
	}
	if err == nil && !validateOnly {
		c.RefreshMetadata(ctx)
	}
	return out, err
}
