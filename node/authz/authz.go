package authz

import (
	"fmt"
	"slices"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// Principal names who sends a request, as Kafka writes it: "User:alice"
// (SASL), "User:CN=client1,O=acme" (a TLS client certificate's subject), or
// Anonymous. The server decides it per connection (node/server: SASL and
// TLS live there, with their randomness and sockets); the node only
// authorizes.
type Principal string

// Anonymous is the principal of a connection that did not authenticate.
const Anonymous Principal = "User:ANONYMOUS"

// Caller is who sends a request and from where: ACLs name principals and
// hosts (an IP, or "*").
type Caller struct {
	Principal Principal
	Host      string
}

// State is the applied metadata authorization reads: the ACLs, and the
// topic ids (a request may name a partition by id only). The node hands in
// a view that reads its metadata replica's state at each call, so an
// answer filtered later reads the state applied by then.
type State interface {
	// Allowed evaluates one ACL check on a named resource (deny wins;
	// none: no).
	Allowed(principal, host, resourceType, name, operation string) bool
	// AllowedAny reports whether some resource of the type is allowed
	// (Kafka's "WRITE on any topic").
	AllowedAny(principal, host, resourceType, operation string) bool
	// TopicByUUID is the applied topic with that id.
	TopicByUUID(u metadata.UUID) (string, bool)
}

// Authorizer decides a node's requests: the node builds one per request
// when Config.Authorization is on (off, the node asks nothing). Its
// inputs that are not a read of applied state are Confirmed and Behind.
type Authorizer struct {
	// SuperUsers may do anything (Config.SuperUsers).
	SuperUsers []Principal
	// State is the applied metadata.
	State State
	// Confirmed: State is at least as new as a metadata read index taken
	// after the request arrived (node/auth.go: confirmThenHandle), so it
	// holds every ACL change acknowledged before the request was sent and
	// may decide a refusal. Unconfirmed, Authorize answers nothing when it
	// would refuse an access and reports the request pending: an allow
	// stands on any applied state, a refusal only on a confirmed one.
	Confirmed bool
	// Behind reports whether a confirmed state still cannot decide a
	// refusal (the node's metadata replica is rebuilding from its peers):
	// a refusal is then answered UNAVAILABLE, which clients retry. It is
	// called once per refused access, only when refusing on a confirmed
	// state; nil is never behind.
	Behind func() bool

	// unconfirmed is set by refusal when it would refuse on an
	// unconfirmed state (Authorize's pending answer).
	unconfirmed *bool
}

// resource is what one request touches: a topic, a group, the cluster or
// a transactional id (txn.go).
type resource struct {
	typ, name string
}

// access is one (resource, operation) pair a request needs.
type access struct {
	res resource
	op  string
}

func topicAccess(name, op string) access { return access{resource{"topic", name}, op} }
func groupAccess(name, op string) access { return access{resource{"group", name}, op} }
func clusterAccess(op string) access {
	return access{resource{"cluster", metadata.ClusterResourceName}, op}
}

// allowed evaluates one access for caller: super users may do anything;
// otherwise the applied ACLs decide (deny wins; none: no).
func (z Authorizer) allowed(caller Caller, a access) bool {
	if slices.Contains(z.SuperUsers, caller.Principal) {
		return true
	}
	if a.res.name == "" {
		return z.State.AllowedAny(string(caller.Principal), caller.Host, a.res.typ, a.op)
	}
	return z.State.Allowed(string(caller.Principal), caller.Host, a.res.typ, a.res.name, a.op)
}

// refusal is the typed error for a refused access. On a state not
// Confirmed it marks the request pending (Authorize discards the answer);
// a node whose confirmed metadata is behind (Behind) answers UNAVAILABLE
// instead, which clients retry: the ACLs that allow the caller may be
// among what it has yet to apply, and a definite refusal decided on a
// lagging, empty or rebuilding state would stop a client that is allowed.
func (z Authorizer) refusal(caller Caller, a access) *strandpb.Response {
	if !z.Confirmed {
		if z.unconfirmed != nil {
			*z.unconfirmed = true // Authorize discards the answer: pending
		}
		return requestError(strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE,
			fmt.Sprintf("node: cannot authorize %s yet: this node's metadata is not confirmed current", caller.Principal))
	}
	if z.Behind != nil && z.Behind() {
		return requestError(strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE,
			fmt.Sprintf("node: cannot authorize %s yet: this node's metadata is still being replayed or rebuilt", caller.Principal))
	}
	return authRefusal(caller, a)
}

// requestError is a whole-request error answer.
func requestError(code strandpb.ErrorCode, msg string) *strandpb.Response {
	return &strandpb.Response{Error: &strandpb.Error{Code: code, Message: msg}}
}

// authRefusal is the authorization error for a refused access.
func authRefusal(caller Caller, a access) *strandpb.Response {
	code := strandpb.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED
	switch a.res.typ {
	case "topic":
		code = strandpb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED
	case "group":
		code = strandpb.ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED
	case txnIDResource:
		code = strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	}
	what := fmt.Sprintf("%s %q", a.res.typ, a.res.name)
	if a.res.name == "" {
		what = "any " + a.res.typ
	}
	return requestError(code, fmt.Sprintf("node: %s may not %s %s (no ACL allows it, or one denies it)", caller.Principal, a.op, what))
}

// Authorize checks every access req needs, in request order, and answers
// the first refused one for the whole request, before anything is
// proposed or read. Produce, Fetch and ListOffsets are refused per
// partition instead, as Kafka does (partitions.go), and DescribeTransactions
// and DescribeProducers per item (txn.go): it returns the request to run
// and the answer to use, or a nil request when it answered. Requests that
// list everything (Metadata without topics, DescribeTopics without names,
// ListGroups, ListTransactions) are filtered, in FilterAnswer.
//
// On a state not Confirmed, a request any of whose accesses would be
// refused is pending: nothing is answered or run (nil request, nil
// answer, pending true), and the caller asks again with Confirmed once
// its metadata caught up with a read index taken after the request
// arrived. A request allowed in whole is decided at once.
func (z Authorizer) Authorize(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) (run *strandpb.Request, runAnswer func(*strandpb.Response), pending bool) {
	if z.Confirmed {
		run, runAnswer = z.authorize(caller, req, answer)
		return run, runAnswer, false
	}
	var unconfirmed, decided bool
	var held *strandpb.Response
	z.unconfirmed = &unconfirmed
	run, runAnswer = z.authorize(caller, req, func(resp *strandpb.Response) {
		if !decided { // a whole-request refusal, answered during authorize
			held = resp
			return
		}
		answer(resp)
	})
	if unconfirmed {
		return nil, nil, true
	}
	decided = true
	if held != nil {
		answer(held)
	}
	return run, runAnswer, false
}

// authorize is Authorize's decision, refusals answered as refusal says.
func (z Authorizer) authorize(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) (*strandpb.Request, func(*strandpb.Response)) {
	for _, a := range z.requestAccesses(caller, req) {
		if !z.allowed(caller, a) {
			answer(z.refusal(caller, a))
			return nil, nil
		}
	}
	if run, runAnswer, handled := z.splitTxnRequest(caller, req, answer); handled { // txn.go
		return run, runAnswer
	}
	return z.splitPartitions(caller, req, answer)
}

// requestAccesses lists what req needs, as Kafka's authorizer asks. A
// request type not listed here needs ALTER on the cluster, so a new
// request is closed until someone decides what it needs.
func (z Authorizer) requestAccesses(caller Caller, req *strandpb.Request) []access {
	var out []access
	topics := func(op string, names ...string) {
		for _, n := range names {
			out = append(out, topicAccess(n, op))
		}
	}
	if txnOut, handled := z.txnAccesses(caller, req, out); handled { // txn.go
		return txnOut
	}
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Metadata:
		topics("describe", b.Metadata.GetTopics()...)
	case *strandpb.Request_Produce, *strandpb.Request_Fetch, *strandpb.Request_ListOffsets:
		// Per partition: splitPartitions.
	case *strandpb.Request_CreateTopics:
		if !z.allowed(caller, clusterAccess("create")) {
			for _, t := range b.CreateTopics.GetTopics() {
				topics("create", t.GetName())
			}
		}
	case *strandpb.Request_DeleteTopics:
		topics("delete", b.DeleteTopics.GetNames()...)
	case *strandpb.Request_DescribeTopics:
		// DESCRIBE, not Kafka's DESCRIBE_CONFIGS: the clients' existence
		// check before a produce or consume is a DescribeTopics, and a
		// producer's WRITE implies DESCRIBE. Configs are no secret from
		// those who may use the topic.
		topics("describe", b.DescribeTopics.GetNames()...)
	case *strandpb.Request_InitProducerId:
		// Kafka: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic.
		out = append(out, access{resource{"topic", ""}, "write"})
	case *strandpb.Request_AlterConfigs:
		for _, t := range b.AlterConfigs.GetTopics() {
			topics("alter-configs", t.GetName())
		}
	case *strandpb.Request_DeleteRecords:
		for _, p := range b.DeleteRecords.GetPartitions() {
			topics("delete", p.GetTopic())
		}
	case *strandpb.Request_DescribePartitions:
		for _, p := range b.DescribePartitions.GetPartitions() {
			topics("describe", p.GetTopic())
		}
	case *strandpb.Request_CreatePartitions:
		for _, t := range b.CreatePartitions.GetTopics() {
			topics("alter", t.GetName())
		}
	default:
		out = groupAccesses(req, out)
	}
	return out
}

// topicNamed is the name ACLs check for a partition named by name or (Kafka
// v13 requests) only by topic id: the applied topic with that id. An id
// no applied topic has reports false: nothing to authorize, and the
// request's handler answers UNKNOWN_TOPIC_ID, as Kafka does (the id of a
// deleted incarnation, or of one this node has not applied yet: the
// client refreshes and follows the topic; a definite refusal would stop
// it). An unknown random id reveals nothing.
func (z Authorizer) topicNamed(name string, id []byte) (string, bool) {
	if name != "" || len(id) == 0 {
		return name, true
	}
	if u, ok := metadata.UUIDFromBytes(id); ok {
		if n, ok := z.State.TopicByUUID(u); ok {
			return n, true
		}
	}
	return "", false
}

// groupAccesses lists what group and security requests need.
func groupAccesses(req *strandpb.Request, out []access) []access {
	topics := func(op string, parts []*strandpb.GroupTopicPartitions) {
		for _, p := range parts {
			out = append(out, topicAccess(p.GetTopic(), op))
		}
	}
	switch b := req.GetBody().(type) {
	case *strandpb.Request_FindCoordinator:
		out = append(out, groupAccess(b.FindCoordinator.GetGroup(), "describe"))
	case *strandpb.Request_GroupHeartbeat:
		out = append(out, groupAccess(b.GroupHeartbeat.GetGroup(), "read"))
		for _, t := range b.GroupHeartbeat.GetSubscriptions() {
			out = append(out, topicAccess(t, "describe"))
		}
	case *strandpb.Request_OffsetCommit:
		out = append(out, groupAccess(b.OffsetCommit.GetGroup(), "read"))
		for _, p := range b.OffsetCommit.GetOffsets() {
			out = append(out, topicAccess(p.GetTopic(), "read"))
		}
	case *strandpb.Request_TxnOffsetCommit:
		out = append(out, groupAccess(b.TxnOffsetCommit.GetCommit().GetGroup(), "read"))
		for _, p := range b.TxnOffsetCommit.GetCommit().GetOffsets() {
			out = append(out, topicAccess(p.GetTopic(), "read"))
		}
	case *strandpb.Request_OffsetFetch:
		out = append(out, groupAccess(b.OffsetFetch.GetGroup(), "describe"))
		topics("describe", b.OffsetFetch.GetPartitions())
	case *strandpb.Request_ListGroups:
		// Filtered: the answer lists only groups the caller may describe.
	case *strandpb.Request_DescribeGroups:
		for _, g := range b.DescribeGroups.GetGroups() {
			out = append(out, groupAccess(g, "describe"))
		}
	case *strandpb.Request_DeleteGroups:
		for _, g := range b.DeleteGroups.GetGroups() {
			out = append(out, groupAccess(g, "delete"))
		}
	case *strandpb.Request_OffsetDelete:
		out = append(out, groupAccess(b.OffsetDelete.GetGroup(), "delete"))
		topics("read", b.OffsetDelete.GetPartitions())
	case *strandpb.Request_ListUsers, *strandpb.Request_DescribeAcls, *strandpb.Request_ClusterMembers:
		out = append(out, clusterAccess("describe"))
	default: // AlterUsers, AlterAcls, AlterQuotas, and anything new
		out = append(out, clusterAccess("alter"))
	}
	return out
}

// FilterAnswer wraps answer so an answer that lists everything lists only
// what caller may describe: Metadata without topics, DescribeTopics
// without names, ListGroups, ListTransactions. Nothing the caller may not
// describe is revealed, not even its name.
func (z Authorizer) FilterAnswer(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) func(*strandpb.Response) {
	if filtered := z.filterTxnAnswer(caller, req, answer); filtered != nil {
		return filtered
	}
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Metadata:
		if len(b.Metadata.GetTopics()) > 0 {
			return answer
		}
		return func(resp *strandpb.Response) {
			if m := resp.GetMetadata(); m != nil {
				m.Topics = slices.DeleteFunc(m.Topics, func(t *strandpb.MetadataResponse_Topic) bool {
					return !z.allowed(caller, topicAccess(t.GetName(), "describe"))
				})
			}
			answer(resp)
		}
	case *strandpb.Request_DescribeTopics:
		if len(b.DescribeTopics.GetNames()) > 0 {
			return answer
		}
		return func(resp *strandpb.Response) {
			if d := resp.GetDescribeTopics(); d != nil {
				d.Topics = slices.DeleteFunc(d.Topics, func(t *strandpb.DescribeTopicsResponse_Topic) bool {
					return !z.allowed(caller, topicAccess(t.GetName(), "describe"))
				})
			}
			answer(resp)
		}
	case *strandpb.Request_ListGroups:
		return func(resp *strandpb.Response) {
			if l := resp.GetListGroups(); l != nil {
				l.Groups = slices.DeleteFunc(l.Groups, func(g *strandpb.ListGroupsResponse_Group) bool {
					return !z.allowed(caller, groupAccess(g.GetGroup(), "describe"))
				})
			}
			answer(resp)
		}
	}
	return answer
}
