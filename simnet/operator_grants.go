package simnet

import (
	"fmt"
	"strings"
	"time"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/authz"
	"github.com/strandlog/strand/proto/strandpb"
)

// The grant check (authorization on): a request of User:app or User:ops
// that reached its node after the grants allowing it were acknowledged is
// never refused. The grants are bootstrapACLs once the admin's AlterAcls
// was acknowledged, then the grant probe's (below), taken as they stood
// when the request reached its node. Nothing in a run revokes them (the
// operator adds and removes only User:ops-p* bindings, allow ones), so
// such a refusal was decided on a metadata state lacking an acknowledged
// grant: node/auth.go decides a refusal only on metadata confirmed current
// by a read index taken after the request arrived (seed 45 without
// features refused the workload's principal on a follower that had not
// heard of the grant). Whether the grants allow everything the request
// needs is asked of package authz itself, over a state holding the grants
// alone: the check covers every request type, native or Kafka
// (kafkaproto's translation reaches deliver as strandpb), with the node's
// own mapping of requests to accesses. A request the grants refuse in
// whole or in part (an operator's transactional request, a topic outside
// "sim") is not this check's; nor is one naming a partition by topic id
// only (the grants know no ids). Authorization errors are looked for where
// package authz puts them: the whole request, and each partition or item
// of the requests it refuses per partition or item.

// The grant probe: the bootstrap grants come before any workload request,
// when every node has just applied them, so a node lagging them is rare
// (seed 45 without features). Under the seed's faults a node often lags
// the metadata log, and the probe makes the check meet it: a few times
// while the workload runs, the operator's principal grants itself DESCRIBE
// on a group of its own ("probe-N", literal: outside its "ops" prefix, so
// refused until then) through AlterAcls to one node, and once that is
// acknowledged it asks every node for the group's coordinator
// (FindCoordinator needs DESCRIBE on the group). A node that refuses it
// decided on a state without the acknowledged grant: the grant check
// fails the run. A grant whose answer is lost is never used. Its own client
// and random stream (the operator's plan and streams stay as they were).

// streamGrantProbe is the grant probe's random stream.
const streamGrantProbe uint64 = 51

// grantProbes is how many grants the probe makes in a run.
const grantProbes = 16

// grantProbe is the operator's grant probe (authorization on only).
type grantProbe struct {
	op     *operator
	client *wireClient // sends as principalOperator
	sent   int         // grants asked so far
}

// grantsAt is the grants acknowledged so far (bootstrapACLs once the
// admin's AlterAcls was, then the probe's): what a request reaching a
// node now must not be refused. nil: none yet, nothing to check.
func (op *operator) grantsAt() []*strandpb.AclBinding {
	if op == nil || !op.auth {
		return nil
	}
	return op.grants[:len(op.grants):len(op.grants)]
}

// startGrantProbe starts the probe once the workload runs.
func (op *operator) startGrantProbe() {
	if op == nil || !op.auth {
		return
	}
	c := newWireClient(op.ww, 0, kindOperator)
	c.rng = newStream(op.ww.w.opts.Seed, streamGrantProbe)
	op.probe = &grantProbe{op: op, client: c}
	c.after(op.probe.pace(), op.probe.grant)
}

// pace spaces the probe's grants over the workload's run.
func (p *grantProbe) pace() time.Duration {
	return time.Duration(50+p.client.rng.Int64N(450)) * time.Millisecond
}

// grant asks one node for the next grant; once acknowledged, use.
func (p *grantProbe) grant() {
	if p.op.ww.active == 0 || p.sent == grantProbes {
		return
	}
	p.sent++
	b := aclBinding(principalOperator, "group", fmt.Sprintf("probe-%d", p.sent), "literal", "describe")
	p.client.attempts = 0
	p.ask(b, p.client.randomNode())
}

// ask sends b's grant to target, again (idempotent) after a retriable
// error, up to grantProbeAttempts times.
func (p *grantProbe) ask(b *strandpb.AclBinding, target int) {
	ww, c := p.op.ww, p.client
	c.attempts++
	ww.call(c, target, &strandpb.Request{Body: &strandpb.Request_AlterAcls{AlterAcls: &strandpb.AlterAclsRequest{
		Add: []*strandpb.AclBinding{b}}}}, func(resp *strandpb.Response, err error) {
		if err == nil {
			err = wireErr(resp.GetError())
		}
		switch {
		case err == nil:
			ww.w.coverage.Inc("auth/grant-probe")
			p.op.grants = append(p.op.grants, b)
			p.use(b.GetResourceName())
		case clientlib.ClassifyErr(err).Retriable && c.attempts < grantProbeAttempts:
			c.refresh()
			next := c.controllerTarget(err)
			c.after(wireBackoff.Delay(c.attempts, c.rng), func() { p.ask(b, next) })
			return
		default:
			ww.w.coverage.Inc("auth/grant-probe-unacknowledged") // never used
		}
		c.after(p.pace(), p.grant)
	})
}

// grantProbeAttempts bounds the sends of one grant.
const grantProbeAttempts = 6

// use asks every node for group's coordinator, right after its grant was
// acknowledged; deliver's grant check judges the answers.
func (p *grantProbe) use(group string) {
	for i := range p.op.ww.w.nodes {
		p.op.ww.call(p.client, i, &strandpb.Request{Body: &strandpb.Request_FindCoordinator{FindCoordinator: &strandpb.FindCoordinatorRequest{
			Group: group}}}, func(resp *strandpb.Response, err error) {
			if err == nil && resp.GetError() == nil {
				p.op.ww.w.coverage.Inc("auth/grant-probe-allowed")
			}
		})
	}
}

// checkGrantRefusal fails the run when resp, the answer to req from
// caller that reached node n when grants were acknowledged, refuses an
// access grants allow.
func (op *operator) checkGrantRefusal(n *simNode, caller node.Caller, req *strandpb.Request, resp *strandpb.Response, grants []*strandpb.AclBinding) {
	if caller.Principal != principalApp && caller.Principal != principalOperator {
		return
	}
	refusal := authRefusalOf(resp)
	if refusal == nil {
		return
	}
	w := op.ww.w
	state := &grantState{bindings: grants}
	z := authz.Authorizer{State: state, Confirmed: true}
	refused := false
	run, _, _ := z.Authorize(caller, req, func(*strandpb.Response) { refused = true })
	if refused || run != req || state.unresolved {
		w.coverage.Inc("auth/grant-check-not-covered") // the grants do not allow it all
		return
	}
	w.fail("authorization: %s's %s request reached node %d after the ACL grants allowing it were acknowledged and was refused: %s: %s",
		caller.Principal, requestType(req), n.index+1, refusal.GetCode(), refusal.GetMessage())
}

// authRefusalOf is the first authorization refusal in resp: the whole
// request's, or a partition's or item's of the answers package authz
// refuses per partition or item; nil when none.
func authRefusalOf(resp *strandpb.Response) *strandpb.Error {
	var errs []*strandpb.Error
	errs = append(errs, resp.GetError())
	for _, p := range resp.GetProduce().GetPartitions() {
		errs = append(errs, p.GetError())
	}
	for _, p := range resp.GetFetch().GetPartitions() {
		errs = append(errs, p.GetError())
	}
	for _, p := range resp.GetListOffsets().GetPartitions() {
		errs = append(errs, p.GetError())
	}
	for _, t := range resp.GetDescribeTransactions().GetTransactions() {
		errs = append(errs, t.GetError())
	}
	for _, p := range resp.GetDescribeProducers().GetPartitions() {
		errs = append(errs, p.GetError())
	}
	for _, e := range errs {
		if authRefusal(e) {
			return e
		}
	}
	return nil
}

// grantState is authz.State over a fixed list of allow bindings (no
// denies: bootstrapACLs has none), Kafka's matching: a literal name or a
// prefix, any host or the caller's, the operation or "all".
type grantState struct {
	bindings []*strandpb.AclBinding
	// unresolved: a partition named only by a topic id was asked about.
	unresolved bool
}

func (s *grantState) Allowed(principal, host, resourceType, name, operation string) bool {
	for _, b := range s.bindings {
		if s.matches(b, principal, host, resourceType, operation) &&
			(b.GetPatternType() == "literal" && b.GetResourceName() == name ||
				b.GetPatternType() == "prefixed" && strings.HasPrefix(name, b.GetResourceName())) {
			return true
		}
	}
	return false
}

func (s *grantState) AllowedAny(principal, host, resourceType, operation string) bool {
	for _, b := range s.bindings {
		if s.matches(b, principal, host, resourceType, operation) {
			return true
		}
	}
	return false
}

func (s *grantState) TopicByUUID(metadata.UUID) (string, bool) {
	s.unresolved = true
	return "", false
}

// matches is b's principal, host, type and operation test.
func (s *grantState) matches(b *strandpb.AclBinding, principal, host, resourceType, operation string) bool {
	return b.GetPermission() == "allow" && b.GetPrincipal() == principal && (b.GetHost() == "*" || b.GetHost() == host) &&
		b.GetResourceType() == resourceType && (b.GetOperation() == "all" || b.GetOperation() == operation)
}
