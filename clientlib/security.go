package clientlib

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// saslConfig is the SASL identity of every connection (SASL option).
type saslConfig struct {
	mechanism, user, password string
	random                    io.Reader // client nonces; nil: crypto/rand (SASLRand)
	mu                        sync.Mutex
	client                    *sasl.Client // kept across connections: the salted password once
}

// SASL authenticates every connection with SASL/SCRAM (mechanism
// SCRAM-SHA-256 or SCRAM-SHA-512) as user, right after the Hello, for
// nodes started with --sasl. A wrong password fails each call with an
// *Error of code SASL_AUTHENTICATION_FAILED (definite); a node that has
// not applied the user yet (its metadata lags) waits for a metadata read
// before it refuses, and answers UNAVAILABLE (retriable) if it cannot
// confirm its credentials current. A simulated
// Client whose Transport models connections (clientcore.Conns)
// authenticates each simulated connection with the same steps
// (sim_sasl.go), its nonces drawn from the RandSeed source.
func SASL(mechanism, user, password string) Opt {
	return func(c *config) { c.sasl = &saslConfig{mechanism: mechanism, user: user, password: password} }
}

// authenticate runs the client side of the exchange on a fresh
// connection: writes and reads around the transport-free
// sasl.ClientSession (the simulated path runs the same steps over its
// Transport: saslSession).
func authenticate(nc net.Conn, r *bufio.Reader, s *saslConfig) error {
	sess, req, err := s.begin()
	if err != nil {
		return err
	}
	for range sasl.SessionStepsMax {
		buf, err := frame.Append(nil, req)
		if err != nil {
			return err
		}
		if _, err := nc.Write(buf); err != nil {
			return err
		}
		var resp strandpb.Response
		if _, err := frame.Decode(r, nil, frame.BytesMaxDefault, &resp); err != nil {
			return err
		}
		next, done, err := sess.Next(&resp)
		if err != nil || done {
			return s.stepErr(err)
		}
		req = next
	}
	return errors.New("sasl: the exchange did not end")
}

// begin starts one connection's exchange: the session and its first
// request. The salted password is computed once per client (the
// sasl.Client is kept), not once per connection.
func (s *saslConfig) begin() (*sasl.ClientSession, *strandpb.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		cl, err := sasl.NewClientRand(s.mechanism, s.user, s.password, s.random)
		if err != nil {
			return nil, nil, &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_SASL_MECHANISM, Message: err.Error()}
		}
		s.client = cl
	}
	sess := s.client.Session()
	req, err := sess.First()
	if err != nil {
		return nil, nil, s.stepErr(err)
	}
	return sess, req, nil
}

// stepErr is a failed step as clientlib's error: the node's refusal (see
// authFailed), or SASL_AUTHENTICATION_FAILED when the node did not prove
// itself.
func (s *saslConfig) stepErr(err error) error {
	var refused *sasl.RefusedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		return authFailed(errorFromWire(refused.Err), s.user)
	case errors.Is(err, sasl.ErrAuthentication):
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, Message: err.Error()}
	}
	return err
}

// authFailed names the user in a refused authentication and says what
// the node cannot (it never tells whether a user exists): the password may
// be wrong, or the user not created yet, as a new cluster's bootstrap
// administrator until the metadata group has applied it.
func authFailed(err error, user string) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED {
		return err
	}
	return &Error{Code: e.Code, Message: fmt.Sprintf("sasl: authentication failed for user %s: wrong password, "+
		"or the user does not exist (yet: a new cluster creates --sasl-bootstrap-user once it is up; "+
		"strand cluster wait waits for that)", user)}
}

// securityCall sends an admin request to the metadata group's leader and
// returns its answer, retrying what is retriable.
func (c *Client) securityCall(ctx context.Context, req *strandpb.Request) (*strandpb.Response, error) {
	resp, _, err := c.securityCallUnsure(ctx, req)
	return resp, err
}

// securityCallUnsure is securityCall, and reports whether an attempt's
// outcome was unknown (its answer lost: it may have been applied). A call
// that then fails definitely fails with a *RetriesExhaustedError that is
// MaybeWritten, wrapping the last error (withRetriesUnsure, which also
// counts the first node's lost answer inside an attempt). Before, an AlterQuotas
// whose first attempt's answer was lost and whose last reached no node
// failed with a plain UnreachableError, "not applied", and the quota was
// set (simnet's operator read-back, TestSimJoins seed 19 on an
// intermediate tree).
func (c *Client) securityCallUnsure(ctx context.Context, req *strandpb.Request) (_ *strandpb.Response, unsure bool, _ error) {
	var out *strandpb.Response
	err := c.withRetriesUnsure(ctx, &unsure, func() error {
		resp, err := c.controllerRequest(ctx, req, &unsure)
		if err == nil {
			err = errorFromWire(resp.GetError())
			if err != nil && !IsRetriable(err) && bugAdminDropsRefusal() {
				err = nil
			}
		}
		out = resp
		return err
	})
	return out, unsure, err
}

// CreateUser stores user's SCRAM credential for mechanism (replacing one
// stored for it), salted here: the password never leaves this process.
func (c *Client) CreateUser(ctx context.Context, user, password, mechanism string) error {
	cred, err := sasl.NewCredentialRand(mechanism, user, password, 0, c.saltSource())
	if err != nil {
		return err
	}
	_, err = c.alterUsers(ctx, &strandpb.AlterUsersRequest{Upserts: []*strandpb.AlterUsersRequest_Upsert{{Name: user, Credential: cred}}})
	return err
}

// DeleteUser removes every credential of user. When an attempt's answer
// was lost (it may have deleted the user) and a retry is refused (the
// node knows no such user), the call asks whether the user exists: gone,
// it was deleted as asked, and the call succeeds. Before, it failed
// "unknown user", a definite failure for a delete that had happened
// (sample seeds 14 and 77, once the simulator's clients kept their own
// deadlines: the operator's read-back found the user it was told was
// still there gone).
func (c *Client) DeleteUser(ctx context.Context, user string) error {
	unsure, err := c.alterUsers(ctx, &strandpb.AlterUsersRequest{Deletes: []*strandpb.AlterUsersRequest_Delete{{Name: user}}})
	if err == nil || !unsure || IsRetriable(err) || ClassifyErr(err).MaybeWritten {
		return err
	}
	users, lerr := c.ListUsers(ctx)
	if lerr != nil || slices.ContainsFunc(users, func(u UserListing) bool { return u.Name == user }) {
		return err
	}
	return nil
}

// alterUsers sends req; unsure reports that an attempt's outcome was
// unknown.
func (c *Client) alterUsers(ctx context.Context, req *strandpb.AlterUsersRequest) (unsure bool, _ error) {
	resp, unsure, err := c.securityCallUnsure(ctx, &strandpb.Request{Body: &strandpb.Request_AlterUsers{AlterUsers: req}})
	if err != nil {
		return unsure, err
	}
	for _, r := range resp.GetAlterUsers().GetResults() {
		if err := errorFromWire(r.GetError()); err != nil {
			return unsure, err
		}
	}
	return unsure, nil
}

// UserListing is one user and the mechanisms it has credentials for.
type UserListing struct {
	Name       string
	Mechanisms []string
	Iterations []int32
}

// ListUsers lists users (never credentials), sorted by name.
func (c *Client) ListUsers(ctx context.Context) ([]UserListing, error) {
	resp, err := c.securityCall(ctx, &strandpb.Request{Body: &strandpb.Request_ListUsers{ListUsers: &strandpb.ListUsersRequest{}}})
	if err != nil {
		return nil, err
	}
	var out []UserListing
	for _, u := range resp.GetListUsers().GetUsers() {
		out = append(out, UserListing{Name: u.GetName(), Mechanisms: u.GetMechanisms(), Iterations: u.GetIterations()})
	}
	return out, nil
}

// AlterACLs adds and removes ACL bindings; it returns how many changed.
func (c *Client) AlterACLs(ctx context.Context, add, remove []*strandpb.AclBinding) (added, removed int, err error) {
	resp, err := c.securityCall(ctx, &strandpb.Request{Body: &strandpb.Request_AlterAcls{AlterAcls: &strandpb.AlterAclsRequest{Add: add, Remove: remove}}})
	if err != nil {
		return 0, 0, err
	}
	return int(resp.GetAlterAcls().GetAdded()), int(resp.GetAlterAcls().GetRemoved()), nil
}

// DescribeACLs lists the bindings (of one principal and/or resource name
// when not empty) and the quotas.
func (c *Client) DescribeACLs(ctx context.Context, principal, resourceName string) (*strandpb.DescribeAclsResponse, error) {
	resp, err := c.securityCall(ctx, &strandpb.Request{Body: &strandpb.Request_DescribeAcls{DescribeAcls: &strandpb.DescribeAclsRequest{
		Principal: principal, ResourceName: resourceName}}})
	if err != nil {
		return nil, err
	}
	return resp.GetDescribeAcls(), nil
}

// SetQuota sets a principal's produce and fetch byte rates per node (0:
// unlimited; both 0 removes the quota).
func (c *Client) SetQuota(ctx context.Context, principal string, produceBytesPerSec, fetchBytesPerSec int64) error {
	_, err := c.securityCall(ctx, &strandpb.Request{Body: &strandpb.Request_AlterQuotas{AlterQuotas: &strandpb.AlterQuotasRequest{
		Quotas: []*strandpb.Quota{{Principal: principal, ProduceBytesPerSec: produceBytesPerSec, FetchBytesPerSec: fetchBytesPerSec}}}}})
	return err
}
