package node

import (
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// handleSecurityRequest serves the user, ACL and quota admin requests (HandleAs
// authorized them: ALTER or DESCRIBE on the cluster). It reports whether
// req was one of them.
func (c *Core) handleSecurityRequest(req *strandpb.Request, answer func(*strandpb.Response)) bool {
	switch b := req.GetBody().(type) {
	case *strandpb.Request_AlterUsers:
		c.handleAlterUsers(b.AlterUsers, answer)
	case *strandpb.Request_ListUsers:
		answer(&strandpb.Response{Body: &strandpb.Response_ListUsers{ListUsers: c.listUsers()}})
	case *strandpb.Request_AlterAcls:
		if !c.adminPreflight(answer) {
			return true
		}
		data, err := metadata.EncodeAlterACLs(b.AlterAcls.GetAdd(), b.AlterAcls.GetRemove())
		c.proposeSecurity(data, err, answer, func(res metadata.Result) *strandpb.Response {
			return &strandpb.Response{Body: &strandpb.Response_AlterAcls{AlterAcls: &strandpb.AlterAclsResponse{
				Added: res.ACLsAdded, Removed: res.ACLsRemoved}}}
		})
	case *strandpb.Request_DescribeAcls:
		answer(&strandpb.Response{Body: &strandpb.Response_DescribeAcls{DescribeAcls: c.describeACLs(b.DescribeAcls)}})
	case *strandpb.Request_AlterQuotas:
		if !c.adminPreflight(answer) {
			return true
		}
		data, err := metadata.EncodeSetQuotas(b.AlterQuotas.GetQuotas())
		c.proposeSecurity(data, err, answer, func(metadata.Result) *strandpb.Response {
			return &strandpb.Response{Body: &strandpb.Response_AlterQuotas{AlterQuotas: &strandpb.AlterQuotasResponse{}}}
		})
	case *strandpb.Request_SaslAuthenticate:
		answer(requestError(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			"node: SASL is answered by the connection, right after its hello, and only when the node requires it"))
	default:
		return false
	}
	return true
}

// proposeSecurity proposes one metadata command and answers ok(result)
// once it applied here, else the error.
func (c *Core) proposeSecurity(data []byte, err error, answer func(*strandpb.Response), ok func(metadata.Result) *strandpb.Response) {
	if err != nil {
		answer(&strandpb.Response{Error: metaError(err)})
		return
	}
	c.proposeMeta(data, uint64(c.cfg.RequestTimeoutTicks), func(res metadata.Result, err error) {
		switch {
		case err != nil:
			answer(&strandpb.Response{Error: c.wireError(err, 0, nil)})
		case res.Err != nil:
			answer(&strandpb.Response{Error: metaError(res.Err)})
		default:
			answer(ok(res))
		}
	})
}

// handleAlterUsers proposes each upsert, then each delete, and answers
// every user's outcome in that order.
func (c *Core) handleAlterUsers(req *strandpb.AlterUsersRequest, answer func(*strandpb.Response)) {
	if !c.adminPreflight(answer) || !c.checkCount(len(req.GetUpserts())+len(req.GetDeletes()), answer) {
		return
	}
	var cmds []topicCommand
	for _, u := range req.GetUpserts() {
		data, err := metadata.EncodeUpsertUser(u.GetName(), u.GetCredential())
		cmds = append(cmds, topicCommand{name: u.GetName(), data: data, err: metaError(err)})
	}
	for _, d := range req.GetDeletes() {
		data, err := metadata.EncodeDeleteUser(d.GetName(), d.GetMechanism())
		cmds = append(cmds, topicCommand{name: d.GetName(), data: data, err: metaError(err)})
	}
	c.runTopicCommands(cmds, 0, func(out []*strandpb.TopicResult) {
		resp := &strandpb.AlterUsersResponse{}
		for _, r := range out {
			resp.Results = append(resp.Results, &strandpb.AlterUsersResponse_Result{Name: r.GetName(), Error: r.GetError()})
		}
		answer(&strandpb.Response{Body: &strandpb.Response_AlterUsers{AlterUsers: resp}})
	})
}

// listUsers lists users and their mechanisms from the applied state,
// never a credential.
func (c *Core) listUsers() *strandpb.ListUsersResponse {
	resp := &strandpb.ListUsersResponse{}
	for _, cred := range c.meta.meta.Credentials() {
		n := len(resp.Users)
		if n == 0 || resp.Users[n-1].Name != cred.Name {
			resp.Users = append(resp.Users, &strandpb.ListUsersResponse_User{Name: cred.Name})
			n++
		}
		u := resp.Users[n-1]
		u.Mechanisms = append(u.Mechanisms, cred.Mechanism)
		u.Iterations = append(u.Iterations, cred.Iterations)
	}
	return resp
}

// describeACLs lists the applied bindings (of one principal or resource
// name when asked) and the quotas.
func (c *Core) describeACLs(req *strandpb.DescribeAclsRequest) *strandpb.DescribeAclsResponse {
	resp := &strandpb.DescribeAclsResponse{}
	for _, a := range c.meta.meta.ACLs() {
		if (req.GetPrincipal() == "" || a.Principal == req.GetPrincipal()) && (req.GetResourceName() == "" || a.ResourceName == req.GetResourceName()) {
			resp.Bindings = append(resp.Bindings, a.Proto())
		}
	}
	for _, q := range c.meta.meta.Quotas() {
		if req.GetPrincipal() == "" || q.Principal == req.GetPrincipal() {
			resp.Quotas = append(resp.Quotas, q.Proto())
		}
	}
	return resp
}

// SecurityState returns the applied credentials and quotas and the
// metadata version they are of.
func (c *Core) SecurityState() (version uint64, creds []metadata.Credential, quotas []metadata.Quota) {
	return c.meta.meta.Version(), c.meta.meta.Credentials(), c.meta.meta.Quotas()
}

// MetadataVersion is the applied metadata version: the server rebuilds its
// copy of the credentials and quotas when it moves.
func (c *Core) MetadataVersion() uint64 { return c.meta.meta.Version() }
