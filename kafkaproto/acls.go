package kafkaproto

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
)

// Kafka's ACL admin (CreateAcls 30, DescribeAcls 29, DeleteAcls 31) on
// the metadata group's bindings (native AlterAcls/DescribeAcls), so
// kafka-acls.sh and kadm manage what strand acl manages. Only the topic,
// group, cluster and transactional-id resources and the operations Strand checks translate;
// anything else is answered INVALID_REQUEST per binding.

var (
	aclResourceNames = map[kmsg.ACLResourceType]string{
		kmsg.ACLResourceTypeTopic: "topic", kmsg.ACLResourceTypeGroup: "group", kmsg.ACLResourceTypeCluster: "cluster",
		kmsg.ACLResourceTypeTransactionalId: "transactional-id"}
	aclOperationNames = map[kmsg.ACLOperation]string{
		kmsg.ACLOperationAll: "all", kmsg.ACLOperationRead: "read", kmsg.ACLOperationWrite: "write",
		kmsg.ACLOperationCreate: "create", kmsg.ACLOperationDelete: "delete", kmsg.ACLOperationAlter: "alter",
		kmsg.ACLOperationDescribe: "describe", kmsg.ACLOperationDescribeConfigs: "describe-configs",
		kmsg.ACLOperationAlterConfigs: "alter-configs"}
	aclPatternNames = map[kmsg.ACLResourcePatternType]string{
		kmsg.ACLResourcePatternTypeLiteral: "literal", kmsg.ACLResourcePatternTypePrefixed: "prefixed"}
	aclPermissionNames = map[kmsg.ACLPermissionType]string{
		kmsg.ACLPermissionTypeAllow: "allow", kmsg.ACLPermissionTypeDeny: "deny"}
)

// reverse finds the Kafka enum of a Strand name.
func reverse[K comparable](m map[K]string, name string) K {
	for k, v := range m {
		if v == name {
			return k
		}
	}
	var zero K
	return zero
}

// kafkaBinding turns one Kafka ACL into Strand's, or false.
func kafkaBinding(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) (*strandpb.AclBinding, bool) {
	b := &strandpb.AclBinding{Principal: principal, ResourceType: aclResourceNames[rt], ResourceName: name,
		PatternType: aclPatternNames[pt], Operation: aclOperationNames[op], Permission: aclPermissionNames[perm], Host: host}
	return b, b.ResourceType != "" && b.PatternType != "" && b.Operation != "" && b.Permission != ""
}

// createACLs adds the bindings in one metadata command.
func (c *conn) createACLs(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.CreateACLsRequest)
	out := kmsg.NewPtrCreateACLsResponse()
	out.SetVersion(r.Version)
	out.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	var add []*strandpb.AclBinding
	var sent []int
	for i, cr := range r.Creations {
		out.Results[i] = kmsg.NewCreateACLsResponseResult()
		b, ok := kafkaBinding(cr.ResourceType, cr.ResourceName, cr.ResourcePatternType, cr.Principal, cr.Host, cr.Operation, cr.PermissionType)
		if !ok {
			msg := "Strand's ACLs cover topic, group, cluster and transactional-id resources, literal or prefixed, and the operations it checks"
			out.Results[i].ErrorCode, out.Results[i].ErrorMessage = kerr.InvalidRequest.Code, &msg
			continue
		}
		add = append(add, b)
		sent = append(sent, i)
	}
	if len(add) == 0 {
		return ready(out)
	}
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_AlterAcls{AlterAcls: &strandpb.AlterAclsRequest{Add: add}}})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		code, msg := aclError(resp.GetError())
		for _, i := range sent {
			out.Results[i].ErrorCode, out.Results[i].ErrorMessage = code, msg
		}
		return out
	}
}

// aclError is a whole-request error's Kafka code and message.
func aclError(e *strandpb.Error) (int16, *string) {
	if e == nil {
		return 0, nil
	}
	msg := e.GetMessage()
	return kafkaCode(e), &msg
}

// aclMatches reports whether binding b passes a Describe/Delete filter.
func aclMatches(b *strandpb.AclBinding, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType,
	principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) bool {
	switch {
	case rt != kmsg.ACLResourceTypeAny && aclResourceNames[rt] != b.GetResourceType():
		return false
	case op != kmsg.ACLOperationAny && aclOperationNames[op] != b.GetOperation():
		return false
	case perm != kmsg.ACLPermissionTypeAny && aclPermissionNames[perm] != b.GetPermission():
		return false
	case principal != nil && *principal != b.GetPrincipal(), host != nil && *host != b.GetHost():
		return false
	case pt == kmsg.ACLResourcePatternTypeMatch:
		return name == nil || b.GetResourceName() == *name || b.GetResourceName() == "*" && b.GetPatternType() == "literal" ||
			b.GetPatternType() == "prefixed" && strings.HasPrefix(*name, b.GetResourceName())
	case pt != kmsg.ACLResourcePatternTypeAny && aclPatternNames[pt] != b.GetPatternType():
		return false
	}
	return name == nil || *name == b.GetResourceName()
}

// describeACLs answers from the applied bindings, grouped by resource.
func (c *conn) describeACLs(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.DescribeACLsRequest)
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_DescribeAcls{DescribeAcls: &strandpb.DescribeAclsRequest{}}})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		out := kmsg.NewPtrDescribeACLsResponse()
		out.SetVersion(r.Version)
		if out.ErrorCode, out.ErrorMessage = aclError(resp.GetError()); out.ErrorCode != 0 {
			return out
		}
		for _, b := range resp.GetDescribeAcls().GetBindings() {
			if !aclMatches(b, r.ResourceType, r.ResourceName, r.ResourcePatternType, r.Principal, r.Host, r.Operation, r.PermissionType) {
				continue
			}
			rt, pt := reverse(aclResourceNames, b.GetResourceType()), reverse(aclPatternNames, b.GetPatternType())
			n := len(out.Resources)
			if n == 0 || out.Resources[n-1].ResourceType != rt || out.Resources[n-1].ResourceName != b.GetResourceName() ||
				out.Resources[n-1].ResourcePatternType != pt {
				res := kmsg.NewDescribeACLsResponseResource()
				res.ResourceType, res.ResourceName, res.ResourcePatternType = rt, b.GetResourceName(), pt
				out.Resources = append(out.Resources, res)
				n++
			}
			acl := kmsg.NewDescribeACLsResponseResourceACL()
			acl.Principal, acl.Host = b.GetPrincipal(), b.GetHost()
			acl.Operation, acl.PermissionType = reverse(aclOperationNames, b.GetOperation()), reverse(aclPermissionNames, b.GetPermission())
			out.Resources[n-1].ACLs = append(out.Resources[n-1].ACLs, acl)
		}
		return out
	}
}

// deleteACLs finds the bindings each filter matches, then removes them
// in one metadata command (two round trips: a describe, then the alter).
func (c *conn) deleteACLs(req kmsg.Request) func() kmsg.Response {
	r := req.(*kmsg.DeleteACLsRequest)
	k := c.submit(&strandpb.Request{Body: &strandpb.Request_DescribeAcls{DescribeAcls: &strandpb.DescribeAclsRequest{}}})
	return func() kmsg.Response {
		resp := c.wait(k)
		if resp == nil {
			return nil
		}
		out := kmsg.NewPtrDeleteACLsResponse()
		out.SetVersion(r.Version)
		out.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
		code, msg := aclError(resp.GetError())
		var remove []*strandpb.AclBinding
		for i, f := range r.Filters {
			out.Results[i] = kmsg.NewDeleteACLsResponseResult()
			out.Results[i].ErrorCode, out.Results[i].ErrorMessage = code, msg
			for _, b := range resp.GetDescribeAcls().GetBindings() {
				if code != 0 || !aclMatches(b, f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType) {
					continue
				}
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = reverse(aclResourceNames, b.GetResourceType()), b.GetResourceName()
				m.ResourcePatternType, m.Principal, m.Host = reverse(aclPatternNames, b.GetPatternType()), b.GetPrincipal(), b.GetHost()
				m.Operation, m.PermissionType = reverse(aclOperationNames, b.GetOperation()), reverse(aclPermissionNames, b.GetPermission())
				out.Results[i].MatchingACLs = append(out.Results[i].MatchingACLs, m)
				remove = append(remove, b)
			}
		}
		if len(remove) == 0 {
			return out
		}
		alter := c.wait(c.submit(&strandpb.Request{Body: &strandpb.Request_AlterAcls{AlterAcls: &strandpb.AlterAclsRequest{Remove: remove}}}))
		if alter == nil {
			return nil
		}
		if code, msg := aclError(alter.GetError()); code != 0 {
			for i := range out.Results {
				out.Results[i].ErrorCode, out.Results[i].ErrorMessage, out.Results[i].MatchingACLs = code, msg, nil
			}
		}
		return out
	}
}
