package metadata

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

func testCredential(mech string, iters int32) *strandpb.UserCredential {
	n := scramKeyBytes(mech)
	return &strandpb.UserCredential{Mechanism: mech, Salt: bytes.Repeat([]byte{7}, 16), Iterations: iters,
		StoredKey: bytes.Repeat([]byte{1}, n), ServerKey: bytes.Repeat([]byte{2}, n)}
}

func binding(principal, rtype, name, pattern, op, perm string) *strandpb.AclBinding {
	return &strandpb.AclBinding{Principal: principal, ResourceType: rtype, ResourceName: name, PatternType: pattern,
		Operation: op, Permission: perm, Host: "*"}
}

// TestUsers shows credentials stored per mechanism, validated (iterations
// at least 4096, keys of the hash's size), deleted, and kept by a snapshot.
func TestUsers(t *testing.T) {
	a := newApplier(t)
	a.ok(EncodeUpsertUser("alice", testCredential(ScramSHA256, 4096)))
	a.ok(EncodeUpsertUser("alice", testCredential(ScramSHA512, 8192)))
	a.ok(EncodeUpsertUser("bob", testCredential(ScramSHA256, 4096)))
	wantErr(t, a.do(EncodeUpsertUser("carol", testCredential(ScramSHA256, 4095))), ErrInvalidUser)
	wantErr(t, a.do(EncodeUpsertUser("carol", testCredential("PLAIN", 4096))), ErrInvalidUser)
	wantErr(t, a.do(EncodeUpsertUser("ca rol", testCredential(ScramSHA256, 4096))), ErrInvalidUser)
	if c, ok := a.s.Credential("alice", ScramSHA512); !ok || c.Iterations != 8192 {
		t.Fatalf("alice/512 = %+v, %v", c, ok)
	}
	r, err := Restore(a.s.Snapshot())
	if err != nil || len(r.Credentials()) != 3 || !bytes.Equal(r.Snapshot(), a.s.Snapshot()) {
		t.Fatalf("restore: %v, %d credentials", err, len(r.Credentials()))
	}
	a.ok(EncodeDeleteUser("alice", ""))
	wantErr(t, a.do(EncodeDeleteUser("alice", "")), ErrUnknownUser)
	if got := a.s.Credentials(); len(got) != 1 || got[0].Name != "bob" {
		t.Fatalf("after delete: %+v", got)
	}
}

// TestAllowed shows ACL evaluation: no binding denies, an allow grants,
// deny wins over allow, prefixes and wildcards match, and read implies
// describe.
func TestAllowed(t *testing.T) {
	a := newApplier(t)
	a.ok(EncodeAlterACLs([]*strandpb.AclBinding{
		binding("User:alice", "topic", "orders", "literal", "write", "allow"),
		binding("User:alice", "topic", "logs-", "prefixed", "read", "allow"),
		binding("User:alice", "topic", "logs-secret", "literal", "all", "deny"),
		binding("User:*", "group", "*", "literal", "read", "allow"),
	}, nil))
	cases := []struct {
		principal, rtype, name, op string
		want                       bool
	}{
		{"User:alice", "topic", "orders", "write", true},
		{"User:alice", "topic", "orders", "read", false},
		{"User:alice", "topic", "orders", "describe", true},
		{"User:bob", "topic", "orders", "write", false},
		{"User:alice", "topic", "logs-app", "read", true},
		{"User:alice", "topic", "logs-secret", "read", false},
		{"User:alice", "topic", "logs-secret", "describe", false},
		{"User:bob", "group", "g1", "read", true},
		{"User:alice", "cluster", ClusterResourceName, "alter", false},
	}
	for _, c := range cases {
		if got := a.s.Allowed(c.principal, "127.0.0.1", c.rtype, c.name, c.op); got != c.want {
			t.Errorf("Allowed(%s, %s %s, %s) = %v, want %v", c.principal, c.rtype, c.name, c.op, got, c.want)
		}
	}
	r := a.ok(EncodeAlterACLs(nil, []*strandpb.AclBinding{binding("User:alice", "topic", "orders", "literal", "write", "allow")}))
	if r.ACLsRemoved != 1 || a.s.Allowed("User:alice", "h", "topic", "orders", "write") {
		t.Fatalf("remove: %+v", r)
	}
	hostOnly := binding("User:alice", "topic", "h", "literal", "read", "allow")
	hostOnly.Host = "10.0.0.1"
	a.ok(EncodeAlterACLs([]*strandpb.AclBinding{hostOnly}, nil))
	if !a.s.Allowed("User:alice", "10.0.0.1", "topic", "h", "read") || a.s.Allowed("User:alice", "127.0.0.1", "topic", "h", "read") {
		t.Fatal("a binding for host 10.0.0.1 must allow from there only")
	}
	wantErr(t, a.do(EncodeAlterACLs([]*strandpb.AclBinding{binding("User:a", "topic", "x", "literal", "fly", "allow")}, nil)), ErrInvalidACL)
	wantErr(t, a.do(EncodeAlterACLs([]*strandpb.AclBinding{binding("alice", "topic", "x", "literal", "read", "allow")}, nil)), ErrInvalidACL)
}

// TestQuotas shows quotas set, replaced, removed with zero rates, and
// negative rates refused.
func TestQuotas(t *testing.T) {
	a := newApplier(t)
	a.ok(EncodeSetQuotas([]*strandpb.Quota{{Principal: "User:alice", ProduceBytesPerSec: 1000}}))
	a.ok(EncodeSetQuotas([]*strandpb.Quota{{Principal: "User:alice", FetchBytesPerSec: 5}}))
	if q := a.s.Quotas(); len(q) != 1 || q[0].ProduceBytesPerSec != 0 || q[0].FetchBytesPerSec != 5 {
		t.Fatalf("quotas %+v", q)
	}
	wantErr(t, a.do(EncodeSetQuotas([]*strandpb.Quota{{Principal: "User:alice", FetchBytesPerSec: -1}})), ErrInvalidQuota)
	a.ok(EncodeSetQuotas([]*strandpb.Quota{{Principal: "User:alice"}}))
	if q := a.s.Quotas(); len(q) != 0 {
		t.Fatalf("quotas %+v", q)
	}
}

// BenchmarkAllowed measures one ACL check against 1,000 bindings (a
// linear scan; the figure is in notes/auth.md).
func BenchmarkAllowed(b *testing.B) {
	a := newApplier(b)
	var bs []*strandpb.AclBinding
	for i := range 1000 {
		bs = append(bs, binding(fmt.Sprintf("User:u%d", i), "topic", fmt.Sprintf("t%d", i), "literal", "write", "allow"))
	}
	a.ok(EncodeAlterACLs(bs, nil))
	b.ResetTimer()
	for range b.N {
		if !a.s.Allowed("User:u999", "127.0.0.1", "topic", "t999", "write") {
			b.Fatal("refused")
		}
	}
}
