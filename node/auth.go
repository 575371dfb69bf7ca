package node

import (
	"fmt"
	"slices"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// Principal names who sends a request, as Kafka writes it: "User:alice"
// (SASL), "User:CN=client1,O=acme" (a TLS client certificate's subject), or
// Anonymous. The server decides it per connection (node/server: SASL and
// TLS live there, with their randomness and sockets); the Core only
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

// resource is what one request touches: a topic, a group, the cluster or
// a transactional id (auth_txn.go).
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

// authorizing reports whether ACLs are checked at all: Config.Authorization.
// Off (the default, and strand dev), every request is allowed.
func (c *Core) authorizing() bool { return c.cfg.Authorization }

// allowed evaluates one access for caller: super users may do anything;
// otherwise the applied ACLs decide (deny wins; none: no).
func (c *Core) allowed(caller Caller, a access) bool {
	if !c.authorizing() || slices.Contains(c.cfg.SuperUsers, caller.Principal) {
		return true
	}
	if a.res.name == "" {
		return c.meta.meta.AllowedAny(string(caller.Principal), caller.Host, a.res.typ, a.op)
	}
	return c.meta.meta.Allowed(string(caller.Principal), caller.Host, a.res.typ, a.res.name, a.op)
}

// refusal is the typed error for a refused access. A node whose metadata
// is behind (metadataBehind) answers UNAVAILABLE instead, which clients
// retry: the ACLs that allow the caller may be among what it has yet to
// apply, and a definite refusal decided on an empty or replaying state
// would stop a client that is allowed.
func (c *Core) refusal(caller Caller, a access) *strandpb.Response {
	if c.metadataBehind() {
		return requestError(strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE,
			fmt.Sprintf("node: cannot authorize %s yet: this node's metadata is still being replayed or rebuilt", caller.Principal))
	}
	return authRefusal(caller, a)
}

// metadataBehind reports whether this node's applied metadata cannot
// decide a refusal: its metadata replica is rebuilding from its peers (a
// lost disk), has not applied all it knows committed (a restart replays
// it), knows no leader (after a restart or in an election: what it knows
// committed may be far behind the cluster, as a KRaft broker stays fenced
// until it caught up with the controller), or has not confirmed, in the
// leader's term, that it applied all the leader had committed
// (confirmMetadata). A follower knows the leader's commit index only up
// to what the leader knows it holds: right after a restart it hears the
// leader's heartbeat, which carries no more than that, before any append,
// so it knew a leader and had applied all its own commit index said while
// the ACLs it lacked were committed (simnet seed 197 with production's
// ticks: applied 7 of the leader's 23, the workload's principal refused).
func (c *Core) metadataBehind() bool {
	g := c.meta
	if g == nil {
		return false
	}
	st := g.raw.BasicStatus()
	if g.rejoin != nil && g.rejoin.phase != rejoinDone || g.appliedRaft < st.GetCommit() || st.Lead == 0 {
		return true
	}
	c.confirmMetadata()
	return g.confirmedTerm != st.GetTerm()
}

// confirmMetadata, on a node that authorizes, starts a ReadIndex on the
// metadata group once per leader's term, unless one is in flight: it is
// served once this replica applied all the leader had committed when
// asked, and the term is then confirmed. Tick runs it, so the
// confirmation is usually in place before a refusal needs it.
func (c *Core) confirmMetadata() {
	g := c.meta
	lead, term := c.metaLeader()
	if !c.authorizing() || lead == 0 || g.confirmedTerm == term || g.confirming == term ||
		g.live >= c.cfg.PendingRequestsMax {
		return
	}
	g.confirming = term
	c.readIndex(g.group, term, func(*group) { g.confirmedTerm = term }, func(error, NodeID) { g.confirming = 0 })
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

// authorize checks every access req needs, in request order, and answers
// the first refused one for the whole request, before anything is
// proposed or read. Produce, Fetch and ListOffsets are refused per
// partition instead, as Kafka does (auth_partitions.go): it returns the
// request to run and the answer to use, or a nil request when it answered.
// Requests that list everything (Metadata without topics, DescribeTopics
// without names, ListGroups, ListTransactions) are filtered, in
// filterAnswer.
func (c *Core) authorize(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) (*strandpb.Request, func(*strandpb.Response)) {
	if !c.authorizing() || c.bugSkipAuthorization(req) {
		return req, answer
	}
	for _, a := range requestAccesses(c, caller, req) {
		if !c.allowed(caller, a) {
			answer(c.refusal(caller, a))
			return nil, nil
		}
	}
	if run, runAnswer, handled := c.splitTxnRequest(caller, req, answer); handled { // auth_txn.go
		return run, runAnswer
	}
	return c.splitPartitions(caller, req, answer)
}

// requestAccesses lists what req needs, as Kafka's authorizer asks. A
// request type not listed here needs ALTER on the cluster, so a new
// request is closed until someone decides what it needs.
func requestAccesses(c *Core, caller Caller, req *strandpb.Request) []access {
	var out []access
	topics := func(op string, names ...string) {
		for _, n := range names {
			out = append(out, topicAccess(n, op))
		}
	}
	if txnOut, handled := txnAccesses(c, caller, req, out); handled { // auth_txn.go
		return txnOut
	}
	switch b := req.GetBody().(type) {
	case *strandpb.Request_Metadata:
		topics("describe", b.Metadata.GetTopics()...)
	case *strandpb.Request_Produce, *strandpb.Request_Fetch, *strandpb.Request_ListOffsets:
		// Per partition: splitPartitions.
	case *strandpb.Request_CreateTopics:
		if !c.allowed(caller, clusterAccess("create")) {
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
func (c *Core) topicNamed(name string, id []byte) (string, bool) {
	if name != "" || len(id) == 0 {
		return name, true
	}
	if u, ok := metadata.UUIDFromBytes(id); ok {
		if n, ok := c.meta.meta.TopicByUUID(u); ok {
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

// filterAnswer wraps answer so an answer that lists everything lists only
// what caller may describe: Metadata without topics, DescribeTopics
// without names, ListGroups. Nothing the caller may not describe is
// revealed, not even its name.
func (c *Core) filterAnswer(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) func(*strandpb.Response) {
	if !c.authorizing() {
		return answer
	}
	if filtered := c.filterTxnAnswer(caller, req, answer); filtered != nil {
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
					return !c.allowed(caller, topicAccess(t.GetName(), "describe"))
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
					return !c.allowed(caller, topicAccess(t.GetName(), "describe"))
				})
			}
			answer(resp)
		}
	case *strandpb.Request_ListGroups:
		return func(resp *strandpb.Response) {
			if l := resp.GetListGroups(); l != nil {
				l.Groups = slices.DeleteFunc(l.Groups, func(g *strandpb.ListGroupsResponse_Group) bool {
					return !c.allowed(caller, groupAccess(g.GetGroup(), "describe"))
				})
			}
			answer(resp)
		}
	}
	return answer
}
