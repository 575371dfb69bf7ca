package node

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// Bounds of HandleAs's requests.
const (
	// handlePartitionsMax bounds the partitions (or topics) of one request.
	handlePartitionsMax = 10000
	// waitMsMax bounds a client-chosen wait (fetch max_wait_ms, admin
	// timeout_ms): five minutes.
	waitMsMax = 5 * 60 * 1000
)

// HandleAs serves one client request of the wire protocol
// (proto/wire.proto) from caller: metadata, produce, fetch (a long poll
// bounded by max_wait_ms, counted in ticks), list offsets, the admin and
// group requests. respond is called exactly once, on the Core's goroutine,
// possibly during a later Tick or Process (proposals, long polls); the
// response carries the request's correlation id. Hello and raft frames are
// the runtime's, not HandleAs's: they are answered with
// ERROR_CODE_INVALID_REQUEST.
//
// With Config.Authorization on, the request runs only if the applied ACLs
// allow everything it needs (else it is answered TOPIC_, GROUP_ or
// CLUSTER_AUTHORIZATION_FAILED, and nothing is written or read), and
// answers that list everything list only what caller may describe. A
// refusal is decided only on metadata confirmed current for the request
// (auth.go: confirmThenHandle): until then the request waits, as a
// linearizable read does, at most the request timeout.
//
// Every wait is bounded in ticks: produces and reads by RequestTimeoutTicks,
// long polls by max_wait_ms, admin requests by timeout_ms (0: the request
// timeout). Per request semantics are in the package doc (doc.go: HandleAs, per request).
func (c *Core) HandleAs(caller Caller, req *strandpb.Request, respond func(*strandpb.Response)) {
	defer c.flush()
	corr := req.GetCorrelationId()
	answer := func(resp *strandpb.Response) {
		resp.CorrelationId = corr
		c.completions = append(c.completions, func() { respond(resp) })
	}
	if c.closed {
		answer(&strandpb.Response{Error: c.wireError(ErrStopped, 0, nil)})
		return
	}
	c.handle(caller, req, answer, false)
}

// handle authorizes req and runs it; answer carries the correlation id.
// confirmed: the request's second pass, its refusals decided on metadata
// confirmed current for it (auth.go: confirmThenHandle).
func (c *Core) handle(caller Caller, req *strandpb.Request, answer func(*strandpb.Response), confirmed bool) {
	if req, answer = c.authorize(caller, req, answer, confirmed); req == nil {
		return
	}
	answer = c.filterAnswer(caller, req, answer)
	switch body := req.GetBody().(type) {
	case *strandpb.Request_Metadata:
		answer(&strandpb.Response{Body: &strandpb.Response_Metadata{Metadata: c.metadataResponse(body.Metadata)}})
	case *strandpb.Request_Produce:
		c.handleProduce(body.Produce, answer)
	case *strandpb.Request_Fetch:
		c.handleFetch(body.Fetch, answer)
	case *strandpb.Request_ListOffsets:
		c.handleListOffsets(body.ListOffsets, answer)
	case *strandpb.Request_CreateTopics:
		c.handleCreateTopics(body.CreateTopics, answer)
	case *strandpb.Request_DeleteTopics:
		c.handleDeleteTopics(body.DeleteTopics, answer)
	case *strandpb.Request_DescribeTopics:
		c.handleDescribeTopics(body.DescribeTopics, answer)
	case *strandpb.Request_InitProducerId:
		c.handleInitProducerID(answer)
	case *strandpb.Request_AlterConfigs:
		c.handleAlterConfigs(body.AlterConfigs, answer)
	case *strandpb.Request_DeleteRecords:
		c.handleDeleteRecords(body.DeleteRecords, answer)
	case *strandpb.Request_DescribePartitions:
		c.handleDescribePartitions(body.DescribePartitions, answer)
	case *strandpb.Request_CreatePartitions:
		c.handleCreatePartitions(body.CreatePartitions, answer)
	case *strandpb.Request_NodeAdmin:
		c.handleNodeAdmin(body.NodeAdmin, answer)
	case *strandpb.Request_ClusterMembers:
		c.handleClusterMembers(answer)
	case *strandpb.Request_ElectLeaders:
		c.handleElectLeaders(answer)
	case *strandpb.Request_MovePartitions:
		c.handleMovePartitions(body.MovePartitions, answer)
	default:
		if c.handleGroupRequest(req, answer) || c.handleTxnRequest(req, answer) || c.handleSecurityRequest(req, answer) {
			return
		}
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: Handle serves no hello, raft frame or empty request"))
	}
}

// requestError is a response failing the whole request.
func requestError(code strandpb.ErrorCode, msg string) *strandpb.Response {
	return &strandpb.Response{Error: &strandpb.Error{Code: code, Message: msg}}
}

// msToTicks turns a wire wait in ms into ticks, rounding up, at most
// waitMsMax; ms <= 0 gives fallback.
func (c *Core) msToTicks(ms int32, fallback uint64) uint64 {
	if ms <= 0 {
		return fallback
	}
	d := time.Duration(min(ms, waitMsMax)) * time.Millisecond
	return uint64((d + c.cfg.TickDuration - 1) / c.cfg.TickDuration)
}

// wireError maps a node error to its wire form, its code the one its
// sentinel carries (strandpb.CodeOf: INTERNAL when none does). lead is the leader this
// node knows (NOT_LEADER hint); tp, when the partition is not hosted here,
// decides between UNKNOWN_TOPIC_OR_PARTITION and NOT_LEADER (it exists
// elsewhere: the client should refresh metadata and go to a replica).
func (c *Core) wireError(err error, lead NodeID, tp *TopicPartition) *strandpb.Error {
	if err == nil {
		return nil
	}
	e := &strandpb.Error{Message: err.Error(), Code: strandpb.CodeOf(err)}
	switch e.Code {
	case strandpb.ErrorCode_ERROR_CODE_NOT_LEADER:
		if lead == 0 {
			e.Code = strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE
			e.Message = "node: partition has no leader yet"
		}
		e.LeaderId, e.LeaderAddress = uint64(lead), c.peerAddress(lead)
	case strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION:
		if tp != nil && c.placedElsewhere(*tp) {
			e.Code = strandpb.ErrorCode_ERROR_CODE_NOT_LEADER
			e.Message = "node: partition has no replica on this node; its leader is unknown here"
		}
	case strandpb.ErrorCode_ERROR_CODE_TIMEOUT:
		if lead != 0 { // e.g. ErrLeadershipLost: where to retry
			e.LeaderId, e.LeaderAddress = uint64(lead), c.peerAddress(lead)
		}
	}
	return e
}

// placedElsewhere tells whether tp exists in the metadata state although
// this node hosts no replica of it.
func (c *Core) placedElsewhere(tp TopicPartition) bool {
	if c.byTP[tp] != nil {
		return false
	}
	_, err := c.meta.meta.Assignment(tp.Topic, tp.Partition)
	return err == nil
}

// handleProduce proposes each partition's batch and answers once every
// partition completed, each per acks (0: once proposed; 1: once in the
// leader's synced log; -1: once applied, with the base offset).
func (c *Core) handleProduce(req *strandpb.ProduceRequest, answer func(*strandpb.Response)) {
	acks := Acks(req.GetAcks())
	if acks != AcksNone && acks != AcksLeader && acks != AcksAll {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, fmt.Sprintf("node: acks %d is not 0, 1 or -1", req.GetAcks())))
		return
	}
	parts := req.GetPartitions()
	if len(parts) > handlePartitionsMax {
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "node: too many partitions in one produce"))
		return
	}
	out := make([]*strandpb.ProduceResponse_Partition, len(parts))
	pending := len(parts)
	finish := func() {
		answer(&strandpb.Response{Body: &strandpb.Response_Produce{Produce: &strandpb.ProduceResponse{Partitions: out}}})
	}
	if pending == 0 {
		finish()
		return
	}
	for i, p := range parts {
		tp := TopicPartition{Topic: c.nameTopic(p.GetTopic(), p.GetTopicId()), Partition: p.GetPartition()}
		producerID := p.GetProducerId()
		if producerID <= 0 {
			producerID = -1 // 0 is an unset field: never a real producer
		}
		done := func(res ProduceResult) {
			out[i] = &strandpb.ProduceResponse_Partition{
				Topic: tp.Topic, Partition: tp.Partition, BaseOffset: res.BaseOffset, Duplicate: res.Duplicate,
				Error: c.wireError(res.Err, res.Leader, &tp),
			}
			if pending--; pending == 0 {
				finish()
			}
		}
		if isCoordinatorTopic(tp.Topic) { // internal: only the coordinators write it (groups.go, txn.go)
			res := ProduceResult{Err: fmt.Errorf("%w: %s is internal to the coordinators", ErrInvalidRequest, tp.Topic), BaseOffset: -1}
			c.completions = append(c.completions, func() { done(res) })
			continue
		}
		if err := c.checkTopicID(tp, p.GetTopicId()); err != nil {
			res := ProduceResult{Err: err, BaseOffset: -1}
			c.completions = append(c.completions, func() { done(res) })
			continue
		}
		pr := ProduceRequest{
			TopicPartition: tp, Acks: acks, ProducerID: producerID,
			ProducerEpoch: p.GetProducerEpoch(), BaseSequence: p.GetBaseSequence(), Batch: p.GetBatch(),
		}
		if p.GetTransactional() {
			pr.Transactional, pr.TransactionalID = true, req.GetTransactionalId()
			c.produceTransactional(pr, done)
			continue
		}
		c.produce(pr, done)
	}
}

// metadataResponse describes the cluster from this node's applied state
// (not a linearizable read: it may lag the metadata leader by the entries
// not yet applied here). Every partition's leader is the one its leaders
// reported to the metadata group, or the one this node's replica knows
// when its term is newer (partitionLeader); 0 until a leader reported.
func (c *Core) metadataResponse(req *strandpb.MetadataRequest) *strandpb.MetadataResponse {
	resp := &strandpb.MetadataResponse{}
	resp.Nodes = c.wireNodes()
	lead, _ := c.metaLeader()
	resp.ControllerId = uint64(lead)
	resp.MetadataVersion = c.meta.meta.Version()
	resp.ClusterId = c.meta.meta.ClusterID().Bytes()
	names := req.GetTopics()
	if len(names) == 0 {
		for _, t := range c.clusterTopics() {
			resp.Topics = append(resp.Topics, c.wireTopicMetadata(t))
		}
		return resp
	}
	// Named topics are looked up one by one: copying every topic to
	// answer for one (clients ask for the topics they use) was most of the
	// metadata state's copies in the simulator.
	for _, name := range names[:min(len(names), handlePartitionsMax)] {
		t, ok := c.meta.meta.Topic(name)
		if !ok {
			resp.Topics = append(resp.Topics, &strandpb.MetadataResponse_Topic{Name: name, Error: &strandpb.Error{
				Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, Message: fmt.Sprintf("node: unknown topic %q", name)}})
			continue
		}
		resp.Topics = append(resp.Topics, c.wireTopicMetadata(t))
	}
	return resp
}

// indexTopic finds name in topics sorted by name; -1 when absent.
func indexTopic(topics []metadata.Topic, name string) int {
	i, found := slices.BinarySearchFunc(topics, name, func(t metadata.Topic, name string) int { return cmp.Compare(t.Name, name) })
	if !found {
		return -1
	}
	return i
}

// wireNodes lists the cluster's nodes by id: the registered ones not
// removed, plus the Config.Nodes not registered yet.
func (c *Core) wireNodes() []*strandpb.MetadataResponse_Node {
	var out []*strandpb.MetadataResponse_Node
	registered := c.meta.meta.Nodes()
	for _, n := range registered {
		if n.State == metadata.NodeRemoved {
			continue
		}
		out = append(out, &strandpb.MetadataResponse_Node{Id: n.ID, Address: n.Address, Rack: n.Rack, KafkaAddress: n.KafkaAddress,
			Registered: true})
	}
	for _, p := range c.cfg.Nodes {
		if !slices.ContainsFunc(registered, func(n metadata.Node) bool { return n.ID == uint64(p.ID) }) {
			out = append(out, &strandpb.MetadataResponse_Node{Id: uint64(p.ID), Address: p.Address, Rack: p.Rack,
				KafkaAddress: p.KafkaAddress})
		}
	}
	slices.SortFunc(out, func(a, b *strandpb.MetadataResponse_Node) int { return cmp.Compare(a.GetId(), b.GetId()) })
	for _, n := range out {
		if n.GetId() == uint64(c.cfg.ID) {
			n.DiskFull = c.space.full // only this node knows (diskfull.go)
			n.DiskStalled = c.stall.stalled
		}
	}
	return out
}

// clusterTopics lists the metadata state's topics, sorted by name.
func (c *Core) clusterTopics() []metadata.Topic { return c.meta.meta.Topics() }

// wireTopicMetadata is one topic of a metadata response.
func (c *Core) wireTopicMetadata(t metadata.Topic) *strandpb.MetadataResponse_Topic {
	out := &strandpb.MetadataResponse_Topic{Name: t.Name, TopicId: t.UUID.Bytes()}
	for p, replicas := range t.Replicas {
		if replicas == nil {
			continue
		}
		wp := &strandpb.MetadataResponse_Partition{Partition: int32(p), Replicas: replicas}
		if p < len(t.Targets) {
			wp.TargetReplicas = t.Targets[p]
		}
		lead, term := c.partitionLeader(t, int32(p))
		wp.LeaderId, wp.LeaderTerm = uint64(lead), term
		out.Partitions = append(out.Partitions, wp)
	}
	return out
}
