package simnet

import (
	"context"
	"fmt"
	"strconv"

	"github.com/strandlog/strand/clientlib"
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
// change. Most go through clientlib's admin call for the type (lib), the
// call cmd/strand makes, with its retries; the rest are sent raw (req):
// see rawRequestTypes.
type opRequest struct {
	target int
	req    *strandpb.Request
	// lib runs the clientlib admin call on cl as a task (SimRun) and
	// returns its error, and for the listing calls how many items the
	// answer listed (the intruder's must list none). nil: raw.
	lib    func(ctx context.Context, cl *clientlib.Client) (listed int, err error)
	writes []cellWrite // the cells the request sets if it took effect
	// itemErr is the error of the request's one item in a successful
	// answer (per topic, partition, user or group); nil: none. Raw only.
	itemErr func(*strandpb.Response) error
	onAck   func(*strandpb.Response) // raw only
	// libAck runs when lib succeeded (it reads what lib kept).
	libAck func()
	// mustSucceed: a definite refusal fails the run (a read the
	// operator is allowed).
	mustSucceed bool
}

// rawRequestTypes are the request types the operator sends raw, not
// through a clientlib admin call, and why:
//   - produce, fetch, init_producer_id, group_heartbeat and the
//     transaction requests (txn_init_producer_id, add_partitions_to_txn,
//     add_offsets_to_txn, txn_offset_commit, end_txn) are no admin calls:
//     clientlib's producer, consumers and transactional producer send
//     them, and the workloads run those (wire_libproducer.go,
//     wire_libconsumer.go, wire_libgroup.go, wire_txn_session.go);
//   - find_coordinator is sent inside every clientlib group and
//     transaction call, never on its own;
//   - hello, sasl_authenticate, raft and write_txn_markers are the
//     connection's and the peers': clientlib sends the first two only in
//     its handshake, never the others; the check is that Handle refuses
//     them from a client;
//   - offset_delete has no clientlib call (cmd/strand offers none).
//
// The intruder sends raw too the types clientlib routes by what the
// intruder may not read, so that its call would stop before the request
// the check is about reaches the node: the per-partition ones
// (list_offsets, describe_partitions, describe_producers, delete_records)
// go to the partition's leader by the metadata the intruder may not
// describe (clientlib stops at "topic does not exist"), the group ones
// (offset_commit, offset_fetch, describe_groups, delete_groups) and the
// transactional-id ones (describe_transactions, abort_transaction) to a
// coordinator whose FindCoordinator needs DESCRIBE on the group or id
// (intruderRawRequest).
var rawRequestTypes = []string{"produce", "fetch", "init_producer_id", "group_heartbeat", "txn_init_producer_id",
	"add_partitions_to_txn", "add_offsets_to_txn", "txn_offset_commit", "end_txn", "find_coordinator", "hello",
	"sasl_authenticate", "raft", "write_txn_markers", "offset_delete"}

// rawAdminRequestTypes are the request types the simulator's other
// administrators (the topic admin, the mover and its canceller, the joins'
// administrator, the grower: ww.administers) still send raw, not through
// a clientlib admin call, and why (ww.call panics on any other):
//   - metadata: their own view of the cluster, which draws the moves and
//     the decommission's plans (wireClient.refresh): a checker's read;
//   - alter_users, alter_acls: the admin's bootstrap of authorization,
//     with the credentials sasl.go salted from the run's stream;
//   - alter_quotas: the same bootstrap's quota on the workload's
//     principal (Options.AppQuota, operator.go quotaRequests);
//   - elect_leaders: the mover's leader balance after a move, at every
//     live node at once (clientlib's ElectPreferredLeaders asks one node
//     per call, as strand cluster leaders --balance asks them in turn).
//
// Until the eleventh session the moves and their cancels and roll-backs,
// the joins, decommissions and drains, the grow and the re-creation's
// delete and create, and the set-up's creates, went raw too
// (move_partitions, node_admin, create_partitions, delete_topics,
// create_topics): now clientlib's MovePartitions, AddNode,
// SetNodeDecommissioning, ActivateNode, RemoveNode, CreatePartitions,
// DeleteTopic and CreateTopic send them (wire_moves.go, wire_joins.go,
// wire_partitions.go, wire_recreate.go, wire_client.go's createTopic).
var rawAdminRequestTypes = []string{"metadata", "alter_users", "alter_acls", "alter_quotas", "elect_leaders"}

// administers reports whether c is one of the administrators
// rawAdminRequestTypes is about.
func (ww *wireWorkload) administers(c *wireClient) bool {
	return c == ww.admin || ww.moves.owns(c) || ww.joins.owns(c) || ww.grow != nil && c == ww.grow.client
}

// request builds the request of action a.
func (op *operator) request(a opAction) *opRequest {
	if a.intruder {
		if r := op.intruderRawRequest(a); r != nil {
			return r
		}
	}
	for _, build := range []func(opAction) *opRequest{op.topicRequest, op.logRequest, op.groupRequest,
		op.securityRequest, op.clusterRequest, op.txnRequest} {
		if r := build(a); r != nil {
			return r
		}
	}
	panic(fmt.Sprintf("simnet: the operator cannot send request type %q", a.kind))
}

// intruderRawRequest builds the intruder's requests of the types
// clientlib routes by what the intruder may not read (see
// rawRequestTypes): a partition's leader, a group's or transactional
// id's coordinator (FindCoordinator needs DESCRIBE on the group or id).
// Raw, they reach the authorization of the request itself. nil: the
// intruder sends a of another type.
func (op *operator) intruderRawRequest(a opAction) *opRequest {
	var req *strandpb.Request
	target := op.ops.randomNode()
	switch a.kind {
	case "list_offsets", "describe_partitions", "describe_producers", "delete_records":
		p := op.mainPartition()
		tp := op.ww.tps[p]
		target = op.ops.leaderOf(p)
		switch a.kind {
		case "list_offsets":
			req = &strandpb.Request{Body: &strandpb.Request_ListOffsets{ListOffsets: &strandpb.ListOffsetsRequest{
				Partitions: []*strandpb.ListOffsetsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, TimestampMs: -2}}}}}
		case "describe_partitions":
			req = &strandpb.Request{Body: &strandpb.Request_DescribePartitions{DescribePartitions: &strandpb.DescribePartitionsRequest{
				Partitions: []*strandpb.DescribePartitionsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition}}}}}
		case "describe_producers":
			req = &strandpb.Request{Body: &strandpb.Request_DescribeProducers{DescribeProducers: &strandpb.DescribeProducersRequest{
				Partitions: []*strandpb.DescribeProducersRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition}}}}}
		default:
			req = &strandpb.Request{Body: &strandpb.Request_DeleteRecords{DeleteRecords: &strandpb.DeleteRecordsRequest{
				Partitions: []*strandpb.DeleteRecordsRequest_Partition{{Topic: tp.Topic, Partition: tp.Partition, BeforeOffset: op.ww.w.work.maxHwm[p] / 2}}}}}
		}
	case "offset_commit":
		p := op.mainPartition()
		req = &strandpb.Request{Body: &strandpb.Request_OffsetCommit{OffsetCommit: &strandpb.OffsetCommitRequest{Group: opGroup,
			Offsets: []*strandpb.OffsetCommitPartition{{Topic: topicMain, Partition: int32(p), Offset: intruderValue}}}}}
		return &opRequest{target: op.coordinatorOf(opGroup), req: req,
			writes: []cellWrite{{key: offsetCell(p), value: strconv.Itoa(intruderValue)}}}
	case "offset_fetch":
		req = &strandpb.Request{Body: &strandpb.Request_OffsetFetch{OffsetFetch: &strandpb.OffsetFetchRequest{Group: opGroup}}}
		target = op.coordinatorOf(opGroup)
	case "describe_groups":
		req = &strandpb.Request{Body: &strandpb.Request_DescribeGroups{DescribeGroups: &strandpb.DescribeGroupsRequest{Groups: []string{opGroup}}}}
		target = op.coordinatorOf(opGroup)
	case "delete_groups":
		req = &strandpb.Request{Body: &strandpb.Request_DeleteGroups{DeleteGroups: &strandpb.DeleteGroupsRequest{Groups: []string{opGroup}}}}
		target = op.coordinatorOf(opGroup)
	case "describe_transactions": // names the id: refused as a whole
		req = &strandpb.Request{Body: &strandpb.Request_DescribeTransactions{DescribeTransactions: &strandpb.DescribeTransactionsRequest{TransactionalIds: []string{opTxnID}}}}
	case "abort_transaction":
		req = &strandpb.Request{Body: &strandpb.Request_AbortTransaction{AbortTransaction: &strandpb.AbortTransactionRequest{TransactionalId: opTxnID}}}
	default:
		return nil
	}
	return &opRequest{target: target, req: req}
}

// mainPartition draws a partition of the main topic (never re-created):
// its group index.
func (op *operator) mainPartition() int { return op.rng.IntN(op.ww.topics[0].partitions) }

// libErr is a listing call's answer as lib returns it.
func libErr(n int, err error) (int, error) { return n, err }

// topicRequest builds the topic admin requests.
func (op *operator) topicRequest(a opAction) *opRequest {
	switch a.kind {
	case "create_topics": // the topic exists: refused, nothing changes
		name := topicMain
		if a.intruder {
			name = intruderTopicName
		}
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			return 0, cl.CreateTopic(ctx, name, 1, 3, nil)
		}}
	case "delete_topics":
		name := "ops-absent"
		if a.intruder {
			name = topicMain
		}
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) { return 0, cl.DeleteTopic(ctx, name) }}
	case "create_partitions": // not above the current count: refused
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			_, err := cl.CreatePartitions(ctx, topicMain, 1, false)
			return 0, err
		}}
	case "alter_configs":
		return op.alterConfigs(a)
	case "describe_topics":
		var names []string
		if !a.intruder {
			names = []string{topicMain}
		}
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			ts, err := cl.DescribeTopics(ctx, names...)
			return libErr(len(ts), err)
		}}
	case "metadata":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			info, err := cl.Metadata(ctx)
			return libErr(len(info.Topics), err)
		}}
	}
	return nil
}

// alterConfigs sets or resets the main topic's max.message.bytes.
func (op *operator) alterConfigs(a opAction) *opRequest {
	cell, value := "config/"+topicMain+"/"+opConfigKey, ""
	switch {
	case a.intruder:
		value = strconv.Itoa(intruderValue)
	case op.rng.IntN(3) > 0:
		value = strconv.FormatInt(opConfigBase+1024*op.nextValue(), 10)
	}
	var sets map[string]string
	var deletes []string
	if value == "" {
		deletes = []string{opConfigKey}
	} else {
		sets = map[string]string{opConfigKey: value}
	}
	var applied map[string]string
	return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
		var err error
		applied, err = cl.AlterTopicConfig(ctx, topicMain, sets, deletes)
		return 0, err
	},
		writes: []cellWrite{{key: cell, value: value}},
		libAck: func() {
			// The answer carries the whole configuration as applied (a
			// late ambiguous change may have applied since).
			got := map[string]string{cell: configMapValue(applied)}
			if why := op.ledger.mismatch(cell, got); why != "" {
				op.ww.w.fail("operator: AlterConfigs of %s=%q acknowledged with the configuration as applied: %s", opConfigKey, value, why)
			}
		}}
}

// configMapValue is max.message.bytes in configs, "" when absent or the
// default.
func configMapValue(configs map[string]string) string {
	if v, ok := configs[opConfigKey]; ok && v != strconv.Itoa(1<<20) {
		return v
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
	}
	switch a.kind {
	case "list_offsets":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			ls, err := cl.ListOffsets(ctx, tp.Topic, []int32{tp.Partition}, clientlib.OffsetEarliest())
			return 0, firstLibErr(len(ls), err, func() error { return ls[0].Err })
		}}
	case "describe_partitions":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			ls, err := cl.DescribePartitionLogs(ctx, tp.Topic, []int32{tp.Partition})
			return 0, firstLibErr(len(ls), err, func() error { return ls[0].Err })
		}}
	case "describe_producers": // the partition leader's producers; a read
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			ps := cl.DescribeProducers(ctx, tp.Topic, []int32{tp.Partition})
			return 0, firstLibErr(len(ps), nil, func() error { return ps[0].Err })
		}}
	case "delete_records":
		return op.deleteRecords(p)
	}
	return nil
}

// firstLibErr is a clientlib call's error, else the error of its answer's
// one item (an error when it has none).
func firstLibErr(n int, err error, first func() error) error {
	switch {
	case err != nil:
		return err
	case n != 1:
		return fmt.Errorf("simnet: answer has %d items, want 1", n)
	}
	return first()
}

// deleteRecords trims partition p below half the highest high-water mark
// a client saw there (committed, so never beyond the partition's end).
func (op *operator) deleteRecords(p int) *opRequest {
	tp := op.ww.tps[p]
	before := op.ww.w.work.maxHwm[p] / 2
	var start int64
	return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
		var err error
		start, err = cl.DeleteRecords(ctx, tp.Topic, tp.Partition, before)
		return 0, err
	},
		libAck: func() {
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
	switch a.kind {
	case "find_coordinator":
		return &opRequest{target: op.ops.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{Group: opGroup}}},
			onAck: func(resp *strandpb.Response) { op.learnCoordinator(opGroup, resp) }}
	case "group_heartbeat": // a join the operator never follows up: the session ends it
		return &opRequest{target: op.coordinatorOf(opMemberGroup), req: &strandpb.Request{Body: &strandpb.Request_GroupHeartbeat{GroupHeartbeat: &strandpb.ConsumerGroupHeartbeatRequest{
			Group: opMemberGroup, MemberId: fmt.Sprintf("ops-m%d", op.nextValue()), Subscriptions: []string{topicMain}}}}}
	case "offset_commit":
		return op.offsetCommit(a)
	case "offset_fetch":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			os, err := cl.FetchOffsets(ctx, opGroup)
			return libErr(len(os), err)
		}}
	case "list_groups":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			gs, err := cl.ListGroups(ctx)
			return libErr(len(gs), err)
		}}
	case "describe_groups":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			_, err := cl.DescribeGroup(ctx, opGroup)
			return 0, err
		}}
	case "delete_groups":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) { return 0, cl.DeleteGroup(ctx, opGroup) },
			writes: op.groupCells(func(int) string { return "" })}
	case "offset_delete": // raw: see rawRequestTypes
		p := op.mainPartition()
		return &opRequest{target: op.coordinatorOf(opGroup), req: &strandpb.Request{Body: &strandpb.Request_OffsetDelete{OffsetDelete: &strandpb.OffsetDeleteRequest{Group: opGroup,
			Partitions: []*strandpb.GroupTopicPartitions{{Topic: topicMain, Partitions: []int32{int32(p)}}}}}},
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
func (op *operator) offsetCommit(a opAction) *opRequest {
	p := op.mainPartition()
	offset := op.nextValue()
	if a.intruder {
		offset = intruderValue
	}
	return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
		return 0, cl.CommitOffsets(ctx, opGroup, map[clientlib.TopicPartition]int64{{Topic: topicMain, Partition: int32(p)}: offset})
	},
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
	switch a.kind {
	case "alter_users":
		return op.alterUsers(a)
	case "list_users":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			us, err := cl.ListUsers(ctx)
			return libErr(len(us), err)
		}}
	case "alter_acls":
		return op.alterACLs(a)
	case "describe_acls":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			_, err := cl.DescribeACLs(ctx, "", "")
			return 0, err
		}}
	case "alter_quotas":
		return op.alterQuotas(a)
	case "sasl_authenticate": // the connection's, right after its hello: refused here
		return &opRequest{target: op.ops.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_SaslAuthenticate{SaslAuthenticate: &strandpb.SaslAuthenticateRequest{Mechanism: "SCRAM-SHA-256"}}}}
	}
	return nil
}

// opUserPresent is a user cell's value while the user has a
// SCRAM-SHA-256 credential (clientlib's CreateUser salts every credential
// with the same iteration count, so upserts are not told apart).
const opUserPresent = "present"

// alterUsers creates or deletes one of the operator's users, as strand
// user create/delete do; the intruder creates one of its own.
func (op *operator) alterUsers(a opAction) *opRequest {
	name := fmt.Sprintf("ops-u%d", op.rng.IntN(opUsers))
	if a.intruder {
		name = intruderName + "-u"
	}
	value := opUserPresent
	password := fmt.Sprintf("ops-password-%d", op.nextValue())
	if !a.intruder && op.rng.IntN(3) == 0 {
		value = ""
	}
	return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
		if value == "" {
			return 0, cl.DeleteUser(ctx, name)
		}
		return 0, cl.CreateUser(ctx, name, password, saslMechanism)
	},
		writes: []cellWrite{{key: "user/" + name, value: value}}}
}

// opACL is the one binding shape the operator adds and removes, per
// principal.
func opACL(principal string) *strandpb.AclBinding {
	return &strandpb.AclBinding{Principal: principal, ResourceType: "topic", ResourceName: topicMain, PatternType: "literal",
		Operation: "read", Permission: "allow", Host: "*"}
}

// alterACLs adds or removes the binding of one of the operator's
// principals; the intruder adds one for a principal of its own.
func (op *operator) alterACLs(a opAction) *opRequest {
	principal := fmt.Sprintf("User:ops-p%d", op.rng.IntN(opACLPrincipals))
	if a.intruder {
		principal = "User:" + intruderName + "-p"
	}
	var add, remove []*strandpb.AclBinding
	value := "present"
	if !a.intruder && op.rng.IntN(2) == 0 {
		value = ""
		remove = []*strandpb.AclBinding{opACL(principal)}
	} else {
		add = []*strandpb.AclBinding{opACL(principal)}
	}
	return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
		_, _, err := cl.AlterACLs(ctx, add, remove)
		return 0, err
	},
		writes: []cellWrite{{key: "acl/" + principal, value: value}}}
}

// alterQuotas sets (or, both rates 0, removes) the quotas of one of the
// operator's principals; the intruder sets a principal's of its own, so
// the read-back finds its quota whatever the operator acknowledged after
// (on an operator's principal a later acknowledged change hid it).
func (op *operator) alterQuotas(a opAction) *opRequest {
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
	return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
		return 0, cl.SetQuota(ctx, principal, produce, fetch)
	},
		writes: []cellWrite{{key: "quota/" + principal, value: value}}}
}

// clusterRequest builds the cluster and runtime requests.
func (op *operator) clusterRequest(a opAction) *opRequest {
	c := op.ops
	switch a.kind {
	case "init_producer_id":
		return &opRequest{target: c.controllerTarget(nil), req: &strandpb.Request{Body: &strandpb.Request_InitProducerId{InitProducerId: &strandpb.InitProducerIdRequest{}}}}
	case "elect_leaders": // at one node, as strand cluster elect-leaders asks each
		addr := op.ww.peers[c.rng.IntN(len(op.ww.peers))].Address
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			_, _, err := cl.ElectPreferredLeaders(ctx, addr)
			return 0, err
		}}
	case "cluster_members":
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			_, err := cl.ClusterMembers(ctx)
			return 0, err
		}}
	case "node_admin": // the operator's names no node (refused); the intruder's decommissions one
		id := uint64(1 + c.randomNode())
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			if a.intruder {
				return 0, cl.SetNodeDecommissioning(ctx, id)
			}
			return 0, cl.RemoveNode(ctx, 99)
		}}
	case "move_partitions": // onto a node that does not exist: refused
		tp := op.ww.tps[op.mainPartition()]
		return &opRequest{lib: func(ctx context.Context, cl *clientlib.Client) (int, error) {
			rs, err := cl.MovePartitions(ctx, []clientlib.PartitionMove{{Topic: tp.Topic, Partition: tp.Partition, Replicas: []uint64{1, 2, 99}}})
			return 0, firstLibErr(len(rs), err, func() error { return rs[0].Err })
		}}
	case "hello": // the runtime's: Handle refuses it
		return &opRequest{target: c.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: 1, VersionMax: 1}}}}
	case "raft": // a peer's, never a client's: Handle refuses it
		return &opRequest{target: c.randomNode(), req: &strandpb.Request{Body: &strandpb.Request_Raft{Raft: &strandpb.RaftFrame{}}}}
	}
	return nil
}
