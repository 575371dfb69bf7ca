package metadata

import (
	"sort"
	"strings"
)

// Allowed evaluates the stored ACLs as Kafka's StandardAuthorizer does:
// a matching deny wins over any allow; without a matching allow the answer
// is no. A binding matches when its principal is the caller's or "User:*",
// its host is the caller's or "*", its resource type is resourceType and its
// pattern covers name (literal: equal, or the literal "*"; prefixed: a
// prefix of name). A binding for operation "all" covers every operation,
// and an allow of read, write, delete or alter implies describe, and of
// alter-configs implies describe-configs (as in Kafka). Super users and
// authorization being off are the caller's business (node.authorize).
//
// Bindings are sorted by principal first, so only the caller's and
// "User:*"'s runs are scanned (binary search): O(log n + k).
func (s *State) Allowed(principal, host, resourceType, name, operation string) bool {
	allowed := false
	for _, run := range [2][]ACL{s.principalRun(principal), s.principalRun("User:*")} {
		for i := range run {
			a := &run[i]
			if a.ResourceType != resourceType || !hostMatches(a.Host, host) || !patternMatches(a, name) {
				continue
			}
			if a.Permission == "deny" {
				if a.Operation == operation || a.Operation == "all" {
					return false
				}
				continue
			}
			if a.Operation == operation || a.Operation == "all" || implies(a.Operation, operation) {
				allowed = true
			}
		}
	}
	return allowed
}

// principalRun is the sorted bindings' run of one principal.
func (s *State) principalRun(principal string) []ACL {
	acls := s.sec.acls
	lo := sort.Search(len(acls), func(i int) bool { return acls[i].Principal >= principal })
	hi := lo + sort.Search(len(acls)-lo, func(i int) bool { return acls[lo+i].Principal > principal })
	return acls[lo:hi]
}

func hostMatches(binding, host string) bool { return binding == "*" || binding == host }

func patternMatches(a *ACL, name string) bool {
	if a.PatternType == "prefixed" {
		return strings.HasPrefix(name, a.ResourceName)
	}
	return a.ResourceName == name || a.ResourceName == "*"
}

// implies reports whether an allow of granted also allows op.
func implies(granted, op string) bool {
	switch op {
	case "describe":
		return granted == "read" || granted == "write" || granted == "delete" || granted == "alter"
	case "describe-configs":
		return granted == "alter-configs"
	}
	return false
}

// AllowedAny reports whether some binding allows principal operation on
// some resource of resourceType (Kafka's authorizeByResourceType, used for
// InitProducerId: WRITE on any topic), unless a deny of it on every
// resource of that type (literal "*") applies.
func (s *State) AllowedAny(principal, host, resourceType, operation string) bool {
	allowed := false
	for _, run := range [2][]ACL{s.principalRun(principal), s.principalRun("User:*")} {
		for i := range run {
			a := &run[i]
			if a.ResourceType != resourceType || !hostMatches(a.Host, host) || (a.Operation != operation && a.Operation != "all") {
				continue
			}
			if a.Permission == "deny" {
				if a.PatternType == "literal" && a.ResourceName == "*" {
					return false
				}
				continue
			}
			allowed = true
		}
	}
	return allowed
}
