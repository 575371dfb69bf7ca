package simnet

import (
	"fmt"
	"strconv"

	"github.com/strandlog/strand/proto/strandpb"
)

// The operator's resources: what its requests name, owned by no one else
// so the final read-back knows every change to them.
const (
	opGroup          = "ops-g0" // committed offsets, offset deletes, group deletes
	opMemberGroup    = "ops-hb" // the operator's heartbeat joins
	opConfigKey      = "max.message.bytes"
	opConfigBase     = 512 << 10 // values set are above every batch the workload sends
	opUsers          = 3         // ops-u0..
	opACLPrincipals  = 3         // User:ops-p0..
	opQuotaPrincipal = 2         // User:ops-q0..
	intruderValue    = 777_777   // an intruder's config value and committed offset
	// intruderTopicName is the topic an intruder asks to create: one the
	// operator may describe.
	intruderTopicName = topicMain + "-" + intruderName + "-topic"
)

// opRequest is one request of the operator actor and what it would
// change.
type opRequest struct {
	target int
	req    *strandpb.Request
	writes []cellWrite // the cells the request sets if it took effect
	// itemErr is the error of the request's one item in a successful
	// answer (per topic, partition, user or group); nil: none.
	itemErr func(*strandpb.Response) error
	onAck   func(*strandpb.Response)
	// mustSucceed: a definite refusal fails the run (a read the
	// operator is allowed).
	mustSucceed bool
}

// request builds the request of action a.
func (op *operator) request(a opAction) *opRequest {
	for _, build := range []func(opAction) *opRequest{op.topicRequest, op.logRequest, op.groupRequest,
		op.securityRequest, op.clusterRequest, op.txnRequest} {
		if r := build(a); r != nil {
			return r
		}
	}
	panic(fmt.Sprintf("simnet: the operator cannot send request type %q", a.kind))
}

// mainPartition draws a partition of the main topic (never re-created):
// its group index.
func (op *operator) mainPartition() int { return op.rng.IntN(op.ww.topics[0].partitions) }

// topicRequest builds the topic admin requests.
func (op *operator) topicRequest(a opAction) *opRequest {
	c := op.ops
	ctl := c.controllerTarget(nil)
	switch a.kind {
	case "create_topics": // the topic exists: refused, nothing changes
		name := topicMain
		if a.intruder {
			name = intruderTopicName
		}
		return &opRequest{target: ctl, req: &strandpb.Request{Body: &strandpb.Request_CreateTopics{CreateTopics: &strandpb.CreateTopicsRequest{
			Topics: []*strandpb.CreateTopicsRequest_Topic{{Name: name, Partitions: 1, ReplicationFactor: 3}}}}}}
	case "delete_topics":
		name := "ops-absent"
		if a.intruder {
			name = topicMain
		}
		return &opRequest{target: ctl, req: &strandpb.Request{Body: &strandpb.Request_DeleteTopics{DeleteTopics: &strandpb.DeleteTopicsRequest{Names: []string{name}}}}}
	case "create_partitions": // not above the current count: refused
		return &opRequest{target: ctl, req: &strandpb.Request{Body: &strandpb.Request_CreatePartitions{CreatePartitions: &strandpb.CreatePartitionsRequest{
			Topics: []*strandpb.CreatePartitionsRequest_Topic{{Name: topicMain, Partitions: 1}}}}}}
	case "alter_configs":
		return op.alterConfigs(a, ctl)
	case "describe_topics":
		var names []string
		if !a.intruder {
			names = []string{topicMain}
		}
		return &opRequest{target: c.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_DescribeTopics{DescribeTopics: &strandpb.DescribeTopicsRequest{Names: names}}}}
	case "metadata":
		var names []string
		if !a.intruder {
			names = []string{topicMain}
		}
		return &opRequest{target: c.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: names}}}}
	}
	return nil
}

// alterConfigs sets or resets the main topic's max.message.bytes.
func (op *operator) alterConfigs(a opAction, target int) *opRequest {
	t := &strandpb.AlterConfigsRequest_Topic{Name: topicMain}
	cell, value := "config/"+topicMain+"/"+opConfigKey, ""
	switch {
	case a.intruder:
		value = strconv.Itoa(intruderValue)
	case op.rng.IntN(3) > 0:
		value = strconv.FormatInt(opConfigBase+1024*op.nextValue(), 10)
	}
	if value == "" {
		t.Deletes = []string{opConfigKey}
	} else {
		t.Sets = []*strandpb.ConfigEntry{{Name: opConfigKey, Value: value}}
	}
	return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_AlterConfigs{AlterConfigs: &strandpb.AlterConfigsRequest{
		Topics: []*strandpb.AlterConfigsRequest_Topic{t}}}},
		writes: []cellWrite{{key: cell, value: value}},
		itemErr: func(resp *strandpb.Response) error {
			return firstItemErr(len(resp.GetAlterConfigs().GetTopics()), func() *strandpb.Error { return resp.GetAlterConfigs().GetTopics()[0].GetError() })
		},
		onAck: func(resp *strandpb.Response) {
			// The answer carries the whole configuration as applied (a
			// late ambiguous change may have applied since).
			got := map[string]string{cell: configValue(resp.GetAlterConfigs().GetTopics()[0].GetConfigs())}
			if why := op.ledger.mismatch(cell, got); why != "" {
				op.ww.w.fail("operator: AlterConfigs of %s=%q acknowledged with the configuration as applied: %s", opConfigKey, value, why)
			}
		}}
}

// configValue is max.message.bytes in configs, "" when absent or the
// default.
func configValue(configs []*strandpb.ConfigEntry) string {
	for _, c := range configs {
		if c.GetName() == opConfigKey && c.GetValue() != strconv.Itoa(1<<20) {
			return c.GetValue()
		}
	}
	return ""
}

// firstItemErr is the error of an answer's one item (an error when it
// has none).
func firstItemErr(n int, first func() *strandpb.Error) error {
	if n != 1 {
		return fmt.Errorf("simnet: answer has %d items, want 1", n)
	}
	return wireErr(first())
}

// logRequest builds the per-partition requests: produce, fetch, list
// offsets, delete records, describe partitions, describe producers.
func (op *operator) logRequest(a opAction) *opRequest {
	p := op.mainPartition()
	tp := op.ww.tps[p]
	target := op.ops.leaderOf(p)
	switch a.kind {
	case "produce": // the operator's names no partition; the intruder's writes one batch
		pr := &strandpb.ProduceRequest{Acks: -1}
		if a.intruder {
			pr.Partitions = []*strandpb.ProduceRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, Batch: []byte(intruderName)}}
		}
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_Produce{Produce: pr}}}
	case "fetch":
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{MaxBytes: 4096,
			Partitions: []*strandpb.FetchRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, MaxBytes: 4096}}}}}}
	case "list_offsets":
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
			Partitions: []*strandpb.ListOffsetsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, TimestampMs: -2}}}}}}
	case "describe_partitions":
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_DescribePartitions{DescribePartitions: &strandpb.DescribePartitionsRequest{
			Partitions: []*strandpb.DescribePartitionsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition}}}}}}
	case "describe_producers": // the partition leader's producers; a read
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_DescribeProducers{DescribeProducers: &strandpb.DescribeProducersRequest{
			Partitions: []*strandpb.DescribeProducersRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition}}}}}}
	case "delete_records":
		return op.deleteRecords(p, target)
	}
	return nil
}

// deleteRecords trims partition p below half the highest high-water mark
// a client saw there (committed, so never beyond the partition's end).
func (op *operator) deleteRecords(p, target int) *opRequest {
	tp := op.ww.tps[p]
	before := op.ww.w.work.maxHwm[p] / 2
	return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_DeleteRecords{DeleteRecords: &strandpb.DeleteRecordsRequest{
		Partitions: []*strandpb.DeleteRecordsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, BeforeOffset: before}}}}},
		itemErr: func(resp *strandpb.Response) error {
			ps := resp.GetDeleteRecords().GetPartitions()
			return firstItemErr(len(ps), func() *strandpb.Error { return ps[0].GetError() })
		},
		onAck: func(resp *strandpb.Response) {
			start := resp.GetDeleteRecords().GetPartitions()[0].GetLogStartOffset()
			if start < before {
				op.ww.w.fail("operator: DeleteRecords of %s/%d below %d acknowledged with log start %d", tp.Topic, tp.Partition, before, start)
			}
			op.trims[p] = max(op.trims[p], start)
			op.ww.w.coverage.Inc("operator/trim-acked")
		}}
}

// groupRequest builds the consumer-group requests, on the operator's own
// groups.
func (op *operator) groupRequest(a opAction) *opRequest {
	target := op.coordinatorOf(opGroup)
	gp := func(p int) []*strandpb.GroupTopicPartitions {
		return []*strandpb.GroupTopicPartitions{{Topic: topicMain, Partitions: []int32{int32(p)}}}
	}
	switch a.kind {
	case "find_coordinator":
		return &opRequest{target: op.ops.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{Group: opGroup}}},
			onAck: func(resp *strandpb.Response) { op.learnCoordinator(opGroup, resp) }}
	case "group_heartbeat": // a join the operator never follows up: the session ends it
		return &opRequest{target: op.coordinatorOf(opMemberGroup), req: &strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatRequest{
			Group: opMemberGroup, MemberId: fmt.Sprintf("ops-m%d", op.nextValue()), Subscriptions: []string{topicMain}}}}}
	case "offset_commit":
		return op.offsetCommit(a, target)
	case "offset_fetch":
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchRequest{Group: opGroup}}}}
	case "list_groups":
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_ListGroups{ListGroups: &strandpb.ListGroupsRequest{}}}}
	case "describe_groups":
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_DescribeGroups{DescribeGroups: &strandpb.DescribeGroupsRequest{Groups: []string{opGroup}}}}}
	case "delete_groups":
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_DeleteGroups{DeleteGroups: &strandpb.DeleteGroupsRequest{Groups: []string{opGroup}}}},
			writes: op.groupCells(func(int) string { return "" }),
			itemErr: func(resp *strandpb.Response) error {
				rs := resp.GetDeleteGroups().GetResults()
				return firstItemErr(len(rs), func() *strandpb.Error { return rs[0].GetError() })
			}}
	case "offset_delete":
		p := op.mainPartition()
		return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_OffsetDelete{OffsetDelete: &strandpb.OffsetDeleteRequest{Group: opGroup, Partitions: gp(p)}}},
			writes: []cellWrite{{key: offsetCell(p), value: ""}},
			itemErr: func(resp *strandpb.Response) error {
				rs := resp.GetOffsetDelete().GetResults()
				return firstItemErr(len(rs), func() *strandpb.Error { return rs[0].GetError() })
			}}
	}
	return nil
}

// offsetCommit commits a fresh offset (the intruder: intruderValue) of one
// partition for the operator's group, as a simple consumer.
func (op *operator) offsetCommit(a opAction, target int) *opRequest {
	p := op.mainPartition()
	offset := op.nextValue()
	if a.intruder {
		offset = intruderValue
	}
	return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitRequest{Group: opGroup,
		Offsets: []*strandpb.OffsetCommitPartition{{Topic: topicMain, Partition: int32(p), Offset: offset}}}}},
		writes: []cellWrite{{key: offsetCell(p), value: strconv.FormatInt(offset, 10)}}}
}

// offsetCell names partition p's committed offset of the operator's group.
func offsetCell(p int) string { return fmt.Sprintf("offset/%s/%d", opGroup, p) }

// groupCells are the cells of every partition of the main topic, each set
// to value(p).
func (op *operator) groupCells(value func(p int) string) []cellWrite {
	var out []cellWrite
	for p := range op.ww.topics[0].partitions {
		out = append(out, cellWrite{key: offsetCell(p), value: value(p)})
	}
	return out
}

// coordinatorOf is the node last named the coordinator of group, or a
// random node.
func (op *operator) coordinatorOf(group string) int {
	if i, ok := op.coordinator[group]; ok {
		return i
	}
	return op.ops.randomNode()
}

// learnCoordinator remembers the coordinator a FindCoordinator answer
// names.
func (op *operator) learnCoordinator(group string, resp *strandpb.Response) {
	if i, ok := op.ww.indexOf[resp.GetFindCoordinator().GetAddress()]; ok {
		op.coordinator[group] = i
	}
}

// securityRequest builds the user, ACL and quota requests.
func (op *operator) securityRequest(a opAction) *opRequest {
	ctl := op.ops.controllerTarget(nil)
	switch a.kind {
	case "alter_users":
		return op.alterUsers(a, ctl)
	case "list_users":
		return &opRequest{target: op.ops.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_ListUsers{ListUsers: &strandpb.ListUsersRequest{}}}}
	case "alter_acls":
		return op.alterACLs(a, ctl)
	case "describe_acls":
		return &opRequest{target: op.ops.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_DescribeAcls{DescribeAcls: &strandpb.DescribeAclsRequest{}}}}
	case "alter_quotas":
		return op.alterQuotas(a, ctl)
	case "sasl_authenticate": // the connection's, right after its hello: refused here
		return &opRequest{target: op.ops.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_SaslAuthenticate{SaslAuthenticate: &strandpb.SaslAuthenticateRequest{Mechanism: "SCRAM-SHA-256"}}}}
	}
	return nil
}

// alterUsers creates (with a fresh iteration count) or deletes one of the
// operator's users; the intruder creates one of its own.
func (op *operator) alterUsers(a opAction, target int) *opRequest {
	name, iterations := fmt.Sprintf("ops-u%d", op.rng.IntN(opUsers)), int32(4096+op.nextValue())
	if a.intruder {
		name = intruderName + "-u"
	}
	req := &strandpb.AlterUsersRequest{}
	value := fmt.Sprint(iterations)
	if !a.intruder && op.rng.IntN(3) == 0 {
		value = ""
		req.Deletes = []*strandpb.AlterUsersRequest_Delete{{Name: name}}
	} else {
		req.Upserts = []*strandpb.AlterUsersRequest_Upsert{{Name: name, Credential: op.credential(iterations)}}
	}
	return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_AlterUsers{AlterUsers: req}},
		writes: []cellWrite{{key: "user/" + name, value: value}},
		itemErr: func(resp *strandpb.Response) error {
			rs := resp.GetAlterUsers().GetResults()
			return firstItemErr(len(rs), func() *strandpb.Error { return rs[0].GetError() })
		}}
}

// opACL is the one binding shape the operator adds and removes, per
// principal.
func opACL(principal string) *strandpb.AclBinding {
	return &strandpb.AclBinding{Principal: principal, ResourceType: "topic", ResourceName: topicMain, PatternType: "literal",
		Operation: "read", Permission: "allow", Host: "*"}
}

// alterACLs adds or removes the binding of one of the operator's
// principals; the intruder adds one for a principal of its own.
func (op *operator) alterACLs(a opAction, target int) *opRequest {
	principal := fmt.Sprintf("User:ops-p%d", op.rng.IntN(opACLPrincipals))
	if a.intruder {
		principal = "User:" + intruderName + "-p"
	}
	req := &strandpb.AlterAclsRequest{}
	value := "present"
	if !a.intruder && op.rng.IntN(2) == 0 {
		value = ""
		req.Remove = []*strandpb.AclBinding{opACL(principal)}
	} else {
		req.Add = []*strandpb.AclBinding{opACL(principal)}
	}
	return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_AlterAcls{AlterAcls: req}},
		writes: []cellWrite{{key: "acl/" + principal, value: value}}}
}

// alterQuotas sets (or, both rates 0, removes) the quotas of one of the
// operator's principals; the intruder sets a principal's of its own, so
// the read-back finds its quota whatever the operator acknowledged after
// (on an operator's principal a later acknowledged change hid it).
func (op *operator) alterQuotas(a opAction, target int) *opRequest {
	principal := fmt.Sprintf("User:ops-q%d", op.rng.IntN(opQuotaPrincipal))
	produce, fetch := op.nextValue()<<20, op.nextValue()<<20
	if a.intruder {
		principal = "User:" + intruderName + "-q"
		produce, fetch = intruderValue, intruderValue
	} else if op.rng.IntN(3) == 0 {
		produce, fetch = 0, 0
	}
	value := ""
	if produce != 0 || fetch != 0 {
		value = fmt.Sprintf("%d,%d", produce, fetch)
	}
	return &opRequest{target: target, req: &strandpb.Request{Body: &strandpb.Request_AlterQuotas{AlterQuotas: &strandpb.AlterQuotasRequest{
		Quotas: []*strandpb.Quota{{Principal: principal, ProduceBytesPerSec: produce, FetchBytesPerSec: fetch}}}}},
		writes: []cellWrite{{key: "quota/" + principal, value: value}}}
}

// clusterRequest builds the cluster and runtime requests.
func (op *operator) clusterRequest(a opAction) *opRequest {
	c := op.ops
	switch a.kind {
	case "init_producer_id":
		return &opRequest{target: c.controllerTarget(nil), req: &strandpb.Request{Body: &strandpb.Request_InitProducerId{InitProducerId: &strandpb.InitProducerIdRequest{}}}}
	case "elect_leaders":
		return &opRequest{target: c.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_ElectLeaders{ElectLeaders: &strandpb.ElectLeadersRequest{}}}}
	case "cluster_members":
		return &opRequest{target: c.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_ClusterMembers{ClusterMembers: &strandpb.ClusterMembersRequest{}}}}
	case "node_admin": // the operator's names no node (refused); the intruder's decommissions one
		nr := &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_REMOVE, NodeId: 99}
		if a.intruder {
			nr = &strandpb.NodeAdminRequest{Action: strandpb.NodeAction_NODE_ACTION_DECOMMISSION, NodeId: uint64(1 + c.randomNode())}
		}
		return &opRequest{target: c.controllerTarget(nil), req: &strandpb.Request{Body: &strandpb.Request_NodeAdmin{NodeAdmin: nr}}}
	case "move_partitions": // onto a node that does not exist: refused
		tp := op.ww.tps[op.mainPartition()]
		return &opRequest{target: c.controllerTarget(nil), req: &strandpb.Request{Body: &strandpb.Request_MovePartitions{MovePartitions: &strandpb.MovePartitionsRequest{
			Moves: []*strandpb.MovePartitionsRequest_Move{{Topic: tp.Topic, Partition: tp.Partition, Replicas: []uint64{1, 2, 99}}}}}}}
	case "hello": // the runtime's: Handle refuses it
		return &opRequest{target: c.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: 1, VersionMax: 1}}}}
	case "raft": // a peer's, never a client's: Handle refuses it
		return &opRequest{target: c.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_Raft{Raft: &strandpb.RaftFrame{}}}}
	}
	return nil
}
