package clientlib

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// saslConfig is the SASL identity of every connection (SASL option).
type saslConfig struct {
	mechanism, user, password string
}

// SASL authenticates every connection with SASL/SCRAM (mechanism
// SCRAM-SHA-256 or SCRAM-SHA-512) as user, right after the Hello, for
// nodes started with --sasl. A wrong password fails each call with an
// *Error of code SASL_AUTHENTICATION_FAILED (definite).
func SASL(mechanism, user, password string) Opt {
	return func(c *config) { c.sasl = &saslConfig{mechanism: mechanism, user: user, password: password} }
}

// authenticate runs the client side of the exchange on a fresh connection.
func authenticate(nc net.Conn, r *bufio.Reader, s *saslConfig) error {
	cl, err := sasl.NewClient(s.mechanism, s.user, s.password)
	if err != nil {
		return &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_SASL_MECHANISM, Message: err.Error()}
	}
	var in []byte
	for step := range 3 {
		out, err := cl.Step(in)
		if err != nil {
			return &Error{Code: strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, Message: fmt.Sprintf("sasl: %v", err)}
		}
		req := &strandpb.SaslAuthenticateRequest{AuthBytes: out}
		if step == 0 {
			req.Mechanism = s.mechanism
		}
		buf, err := frame.Append(nil, &strandpb.Request{Body: &strandpb.Request_SaslAuthenticate{SaslAuthenticate: req}})
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
		if err := errorFromWire(resp.GetError()); err != nil {
			return authFailed(err, s.user)
		}
		a := resp.GetSaslAuthenticate()
		if a.GetDone() {
			if _, err := cl.Step(a.GetAuthBytes()); err != nil || !cl.Done() {
				return &Error{Code: strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED,
					Message: "sasl: the node did not prove it knows the credential"}
			}
			return nil
		}
		in = a.GetAuthBytes()
	}
	return errors.New("sasl: the exchange did not end")
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
	var out *strandpb.Response
	err := c.withRetries(ctx, func() error {
		resp, err := c.controllerRequest(ctx, req)
		if err == nil {
			err = errorFromWire(resp.GetError())
		}
		out = resp
		return err
	})
	return out, err
}

// CreateUser stores user's SCRAM credential for mechanism (replacing one
// stored for it), salted here: the password never leaves this process.
func (c *Client) CreateUser(ctx context.Context, user, password, mechanism string) error {
	cred, err := sasl.NewCredential(mechanism, user, password, 0)
	if err != nil {
		return err
	}
	return c.alterUsers(ctx, &strandpb.AlterUsersRequest{Upserts: []*strandpb.AlterUsersRequest_Upsert{{Name: user, Credential: cred}}})
}

// DeleteUser removes every credential of user.
func (c *Client) DeleteUser(ctx context.Context, user string) error {
	return c.alterUsers(ctx, &strandpb.AlterUsersRequest{Deletes: []*strandpb.AlterUsersRequest_Delete{{Name: user}}})
}

func (c *Client) alterUsers(ctx context.Context, req *strandpb.AlterUsersRequest) error {
	resp, err := c.securityCall(ctx, &strandpb.Request{Body: &strandpb.Request_AlterUsers{AlterUsers: req}})
	if err != nil {
		return err
	}
	for _, r := range resp.GetAlterUsers().GetResults() {
		if err := errorFromWire(r.GetError()); err != nil {
			return err
		}
	}
	return nil
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
