package node

import (
	"errors"
	"fmt"

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
// planted-bug hooks, and what only the metadata replica knows: whether its
// applied state is current enough to decide a refusal (confirmThenHandle,
// metadataRebuilding).

// authorizing reports whether ACLs are checked at all: Config.Authorization.
// Off (the default, and strand dev), every request is allowed.
func (c *Core) authorizing() bool { return c.cfg.Authorization }

// authorizer is authorization over this node's applied metadata;
// confirmed: that state is at least as new as a metadata read index taken
// after the request arrived.
func (c *Core) authorizer(confirmed bool) authz.Authorizer {
	return authz.Authorizer{SuperUsers: c.cfg.SuperUsers, State: metaACLs{c}, Confirmed: confirmed, Behind: c.metadataRebuilding}
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
// it answered (a refusal) or parked the request (confirmThenHandle: the
// applied metadata would refuse it and is not confirmed current for it).
// confirmed: this is the request's second pass, after that confirmation.
func (c *Core) authorize(caller Caller, req *strandpb.Request, answer func(*strandpb.Response), confirmed bool) (*strandpb.Request, func(*strandpb.Response)) {
	if !c.authorizing() || c.bugSkipAuthorization(req) { // planted-bug hook (simbugs: AuthSkipsAlterQuotas)
		return req, answer
	}
	confirmed = confirmed || c.meta == nil || c.bugRefuseUnconfirmed() // planted-bug hook (simbugs: AuthRefusesUnconfirmed)
	run, runAnswer, pending := c.authorizer(confirmed).Authorize(caller, req, answer)
	if pending {
		c.confirmThenHandle(caller, req, answer)
		return nil, nil
	}
	return run, runAnswer
}

// filterAnswer runs authz.Authorizer.FilterAnswer when authorization is on.
func (c *Core) filterAnswer(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) func(*strandpb.Response) {
	if !c.authorizing() {
		return answer
	}
	return c.authorizer(true).FilterAnswer(caller, req, answer)
}

// confirmThenHandle parks a request the applied metadata would refuse, as
// a linearizable read: the next Process starts a ReadIndex on the metadata
// group for every request parked since the last (startAuthConfirm), after
// they all arrived (a follower's is forwarded to the leader, which fixes
// it at its commit index then; the leader fixes its own at the call), and
// once this replica applied up to it each request is handled again from
// the start, its refusals decided on that state, which holds every ACL
// change acknowledged before the request was sent. A follower knows the
// leader's commit index only from what reaches it, so its applied state,
// even confirmed once in the leader's term, may lack an ACL the leader
// committed and acknowledged since (simnet seed 45 without features: node
// 3 had applied and confirmed 16, the workload's principal was refused on
// it after the admin's grant was acknowledged; seed 197 with production's
// ticks: a restarted node, applied 7 of the leader's 23). One ReadIndex a
// round whatever the number of requests parked: a client refused in a
// loop costs the metadata group no more than one heartbeat round per
// Process. The wait is bounded: a node that knows no metadata leader,
// has too many requests parked or waits on its metadata group, or whose
// read is not served within the request timeout answers a retriable
// error (UNAVAILABLE, BUSY), never a refusal. The second pass runs as a
// completion, after Process has reconciled what was applied (a topic the
// request names is hosted by then).
func (c *Core) confirmThenHandle(caller Caller, req *strandpb.Request, answer func(*strandpb.Response)) {
	switch lead, _ := c.metaLeader(); {
	case lead == 0:
		answer(notConfirmed(caller, "this node knows no metadata leader to confirm its metadata with"))
		return
	case len(c.authParked) >= c.cfg.PendingRequestsMax:
		answer(&strandpb.Response{Error: c.wireError(ErrBusy, 0, nil)})
		return
	}
	c.stats.AuthorizationsParked++
	c.authParked = append(c.authParked, authWait{caller: caller, req: req, answer: answer})
}

// authWait is a request parked by confirmThenHandle, or a confirmation
// asked by ConfirmMetadata (confirmed set, the rest unset).
type authWait struct {
	caller    Caller
	req       *strandpb.Request
	answer    func(*strandpb.Response)
	confirmed func(error)
}

// ConfirmMetadata calls done(nil) once this node's applied metadata is
// confirmed current for a caller that asked now: applied up to a metadata
// ReadIndex started after the call (the read confirmThenHandle runs for
// a parked request, sharing its round's), so it holds every user, ACL and
// credential change the metadata group acknowledged before. It calls
// done(err) when that cannot be confirmed, with the bounds and errors of
// confirmThenHandle (no metadata leader, too many waiting, the read not
// served within the request timeout, the node stopping, the metadata
// replica rebuilding); a node without a metadata group (static mode) has
// nothing to lag and calls done(nil) at once. The SASL exchanges decide a
// refusal only after it (sasl.ServerStep.Confirm): a node that has not
// applied an acknowledged user yet would refuse the user's login. done
// runs on the loop (inside HandleAs or Process); it must not block.
func (c *Core) ConfirmMetadata(done func(error)) {
	if c.meta == nil {
		done(nil)
		return
	}
	switch lead, _ := c.metaLeader(); {
	case lead == 0:
		done(ErrNoMetadataLeader)
		return
	case len(c.authParked) >= c.cfg.PendingRequestsMax:
		done(ErrBusy)
		return
	}
	c.stats.AuthorizationsParked++
	c.authParked = append(c.authParked, authWait{confirmed: done})
}

// ErrNoMetadataLeader: this node knows no metadata leader to confirm its
// metadata with (ConfirmMetadata).
var ErrNoMetadataLeader = errors.New("node: this node knows no metadata leader to confirm its metadata with")

// startAuthConfirm starts one metadata ReadIndex for the requests parked
// since the last call (confirmThenHandle); Process calls it first.
func (c *Core) startAuthConfirm() {
	if len(c.authParked) == 0 {
		return
	}
	parked := c.authParked
	c.authParked = nil
	g := c.meta
	lead, term := c.metaLeader()
	fail := func(cause error, resp func(authWait) *strandpb.Response) {
		for _, w := range parked {
			if w.confirmed != nil {
				w.confirmed(cause)
				continue
			}
			w.answer(resp(w))
		}
	}
	switch {
	case lead == 0:
		fail(ErrNoMetadataLeader, func(w authWait) *strandpb.Response {
			return notConfirmed(w.caller, "this node knows no metadata leader to confirm its metadata with")
		})
		return
	case g.live >= c.cfg.PendingRequestsMax:
		fail(ErrBusy, func(authWait) *strandpb.Response { return &strandpb.Response{Error: c.wireError(ErrBusy, 0, nil)} })
		return
	}
	c.readIndex(g.group, term, func(*group) {
		c.completions = append(c.completions, func() {
			for _, w := range parked {
				switch {
				case w.confirmed != nil && c.closed:
					w.confirmed(ErrStopped)
				case w.confirmed != nil && c.metadataRebuilding():
					w.confirmed(errMetadataRebuilding)
				case w.confirmed != nil:
					w.confirmed(nil)
				case c.closed:
					w.answer(&strandpb.Response{Error: c.wireError(ErrStopped, 0, nil)})
				default:
					c.handle(w.caller, w.req, w.answer, true)
				}
			}
		})
	}, func(err error, _ NodeID) {
		fail(fmt.Errorf("node: this node's metadata was not confirmed current (%w)", err), func(w authWait) *strandpb.Response {
			return notConfirmed(w.caller, fmt.Sprintf("this node's metadata was not confirmed current (%v)", err))
		})
	})
}

// errMetadataRebuilding: the metadata replica, even caught up with a read
// index, is rebuilding from its peers (metadataRebuilding).
var errMetadataRebuilding = errors.New("node: this node's metadata replica is rebuilding from its peers")

// stopAuthConfirm answers the requests still parked when the node stops.
func (c *Core) stopAuthConfirm() {
	for _, w := range c.authParked {
		if w.confirmed != nil {
			w.confirmed(ErrStopped)
			continue
		}
		w.answer(&strandpb.Response{Error: c.wireError(ErrStopped, 0, nil)})
	}
	c.authParked = nil
}

// notConfirmed is the retriable answer to a request whose refusal could
// not be decided: UNAVAILABLE, which clients retry.
func notConfirmed(caller Caller, why string) *strandpb.Response {
	return requestError(strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, fmt.Sprintf("node: cannot authorize %s yet: %s", caller.Principal, why))
}

// metadataRebuilding reports whether this node's metadata replica, even
// caught up with a read index, cannot decide a refusal: it is rebuilding
// from its peers (a lost disk, rejoin.go).
func (c *Core) metadataRebuilding() bool {
	g := c.meta
	return g != nil && g.rejoin != nil && g.rejoin.phase != rejoinDone
}
