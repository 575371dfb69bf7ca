package node

import (
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node/authz"
	"github.com/strandlog/strand/proto/strandpb"
)

// Principal names who sends a request (package authz).
type Principal = authz.Principal

// Anonymous is the principal of a connection that did not authenticate.
const Anonymous = authz.Anonymous

// Caller is who sends a request and from where (package authz).
type Caller = authz.Caller

// Authorization is package authz, a function of the applied metadata; the
// Core holds its switches (Config.Authorization, Config.SuperUsers), the
// planted-bug hook, and what only the metadata replica knows: whether its
// applied state can decide a refusal (metadataBehind).

// authorizing reports whether ACLs are checked at all: Config.Authorization.
// Off (the default, and strand dev), every request is allowed.
func (c *Core) authorizing() bool { return c.cfg.Authorization }

// authorizer is authorization over this node's applied metadata.
func (c *Core) authorizer() authz.Authorizer {
	return authz.Authorizer{SuperUsers: c.cfg.SuperUsers, State: metaACLs{c}, Behind: c.metadataBehind}
}

// metaACLs is authz's view of the metadata replica's applied state, read
// at each call: an answer filtered later reads what is applied by then.
type metaACLs struct{ c *Core }

func (v metaACLs) Allowed(principal, host, resourceType, name, operation string) bool {
	return v.c.meta.meta.Allowed(principal, host, resourceType, name, operation)
}

func (v metaACLs) AllowedAny(principal, host, resourceType, operation string) bool {
	return v.c.meta.meta.AllowedAny(principal, host, resourceType, operation)
}

func (v metaACLs) TopicByUUID(u metadata.UUID) (string, bool) { return v.c.meta.meta.TopicByUUID(u) }

// authorize runs authz.Authorizer.Authorize when authorization is on: it
// returns the request to run and the answer to use, or a nil request when
// it answered (a refusal).
func (c *Core) authorize(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) (*strandpb.Request, func(*strandpb.Response)) {
	if !c.authorizing() || c.bugSkipAuthorization(req) { // planted-bug hook (simbugs: AuthSkipsAlterQuotas)
		return req, answer
	}
	return c.authorizer().Authorize(caller, req, answer)
}

// filterAnswer runs authz.Authorizer.FilterAnswer when authorization is on.
func (c *Core) filterAnswer(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) func(*strandpb.Response) {
	if !c.authorizing() {
		return answer
	}
	return c.authorizer().FilterAnswer(caller, req, answer)
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
