package node

import (
	"fmt"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// handleCreatePartitions grows each topic to the partition count asked
// (the total, as Kafka's CreatePartitions) through the metadata group, one
// MetadataCreatePartitions command per topic, answered when applied here.
// Every node hosting a new partition opens its replica in the reconcile
// that follows the apply, the same path that opens a new topic's; clients
// see the partitions through their next metadata refresh.
//
// Refused before proposing: a bad or repeated name, a count below 1
// (INVALID_PARTITIONS) and the internal offsets topic, whose partition
// count maps every group to its coordinator (growing it would move every
// group's committed offsets out of reach).
func (c *Core) handleCreatePartitions(req *strandpb.CreatePartitionsRequest, answer func(*strandpb.Response)) {
	if !c.adminPreflight(answer) || !c.checkCount(len(req.GetTopics()), answer) {
		return
	}
	topics := req.GetTopics()
	out := make([]*strandpb.CreatePartitionsResponse_Topic, len(topics))
	pending := len(topics)
	done := func(i int, res metadata.Result, e *strandpb.Error) {
		o := &strandpb.CreatePartitionsResponse_Topic{Name: topics[i].GetName(), Error: e}
		if e == nil && res.Topic != nil {
			o.Partitions, o.Added = res.Topic.Partitions(), res.AddedPartitions
		}
		out[i] = o
		if pending--; pending == 0 {
			answer(&strandpb.Response{Body: &strandpb.Response_CreatePartitions{CreatePartitions: &strandpb.CreatePartitionsResponse{Topics: out}}})
		}
	}
	if pending == 0 {
		answer(&strandpb.Response{Body: &strandpb.Response_CreatePartitions{CreatePartitions: &strandpb.CreatePartitionsResponse{}}})
		return
	}
	timeout := c.msToTicks(req.GetTimeoutMs(), uint64(c.cfg.RequestTimeoutTicks))
	seen := map[string]bool{} // lookup only
	for i, t := range topics {
		data, e := createPartitionsCommand(t, req.GetValidateOnly(), seen)
		if e != nil {
			c.completions = append(c.completions, func() { done(i, metadata.Result{}, e) })
			continue
		}
		c.proposeMeta(data, timeout, func(res metadata.Result, err error) {
			if err != nil {
				done(i, res, c.wireError(err, 0, nil))
				return
			}
			done(i, res, metaError(res.Err))
		})
	}
}

// createPartitionsCommand encodes one topic's command, or refuses it
// before proposing.
func createPartitionsCommand(t *strandpb.CreatePartitionsRequest_Topic, validateOnly bool, seen map[string]bool) ([]byte, *strandpb.Error) {
	name, partitions := t.GetName(), t.GetPartitions()
	if e := checkTopicName(name, seen); e != nil {
		return nil, e
	}
	if isCoordinatorTopic(name) {
		return nil, &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			Message: fmt.Sprintf("node: %s is internal: its partition count maps every group or transactional id to its coordinator and cannot change", name)}
	}
	if partitions < 1 {
		return nil, &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS,
			Message: fmt.Sprintf("node: %d partitions: give the topic's new total, above its current count", partitions)}
	}
	data, err := metadata.EncodeCreatePartitions(name, partitions, validateOnly)
	return data, metaError(err)
}
