package metadata

import (
	"bytes"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/strandlog/strand/proto/strandpb"
)

// secModel is the trivial model of the security state: maps, sorted only
// when compared.
type secModel struct {
	users   map[[2]string]int32 // (name, mechanism) -> iterations
	acls    map[ACL]bool
	quotas  map[string]Quota
	version uint64
}

var (
	secUsers      = []string{"alice", "bob", "", "bad name"}
	secMechanisms = []string{ScramSHA256, ScramSHA512, "PLAIN"}
	secBindings   = []ACL{
		{"User:alice", "topic", "orders", "literal", "write", "allow", "*"},
		{"User:alice", "topic", "logs-", "prefixed", "read", "allow", "*"},
		{"User:*", "group", "*", "literal", "all", "deny", "10.0.0.1"},
		{"User:bob", "cluster", ClusterResourceName, "literal", "alter", "allow", "*"},
		{"User:bob", "topic", "x", "literal", "fly", "allow", "*"},      // invalid operation
		{"bob", "topic", "x", "literal", "read", "allow", "*"},          // invalid principal
		{"User:bob", "cluster", "other", "literal", "all", "deny", "*"}, // invalid cluster name
	}
)

// TestSecurityAgainstModel runs random user, ACL and quota commands, with
// restarts from snapshots, against the model: the state, its version and
// its snapshot agree after every step, and refused commands change nothing.
func TestSecurityAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := newApplier(t)
		m := &secModel{users: map[[2]string]int32{}, acls: map[ACL]bool{}, quotas: map[string]Quota{}}
		t.Repeat(map[string]func(*rapid.T){
			"upsert": func(t *rapid.T) { m.upsert(t, a) },
			"delete": func(t *rapid.T) { m.deleteUser(t, a) },
			"acls":   func(t *rapid.T) { m.alterACLs(t, a) },
			"quota":  func(t *rapid.T) { m.setQuota(t, a) },
			"restart": func(t *rapid.T) {
				s, err := Restore(a.s.Snapshot())
				if err != nil || !bytes.Equal(s.Snapshot(), a.s.Snapshot()) {
					t.Fatalf("restore: %v", err)
				}
				a.s = s
			},
			"": func(t *rapid.T) { m.check(t, a.s) },
		})
	})
}

func (m *secModel) upsert(t *rapid.T, a *applier) {
	name := rapid.SampledFrom(secUsers).Draw(t, "name")
	mech := rapid.SampledFrom(secMechanisms).Draw(t, "mechanism")
	iters := int32(rapid.SampledFrom([]int{4095, 4096, 8192}).Draw(t, "iterations"))
	n := max(scramKeyBytes(mech), 32)
	c := &strandpb.UserCredential{Mechanism: mech, Salt: bytes.Repeat([]byte{1}, 16), Iterations: iters,
		StoredKey: bytes.Repeat([]byte{2}, n), ServerKey: bytes.Repeat([]byte{3}, n)}
	r := a.do(EncodeUpsertUser(name, c))
	valid := ValidateUserName(name) == nil && scramKeyBytes(mech) != 0 && iters >= ScramIterationsMin
	if !valid {
		expect(t, r, ErrInvalidUser)
		return
	}
	expect(t, r, nil)
	key := [2]string{name, mech}
	if old, ok := m.users[key]; !ok || old != iters {
		m.version++
	}
	m.users[key] = iters
}

func (m *secModel) deleteUser(t *rapid.T, a *applier) {
	name := rapid.SampledFrom(secUsers).Draw(t, "name")
	mech := rapid.SampledFrom(append([]string{""}, secMechanisms...)).Draw(t, "mechanism")
	r := a.do(EncodeDeleteUser(name, mech))
	removed := false
	for k := range m.users {
		if k[0] == name && (mech == "" || k[1] == mech) {
			delete(m.users, k)
			removed = true
		}
	}
	if !removed {
		expect(t, r, ErrUnknownUser)
		return
	}
	expect(t, r, nil)
	m.version++
}

func (m *secModel) alterACLs(t *rapid.T, a *applier) {
	add := rapid.SliceOfN(rapid.SampledFrom(secBindings), 0, 3).Draw(t, "add")
	remove := rapid.SliceOfN(rapid.SampledFrom(secBindings), 0, 2).Draw(t, "remove")
	var addP, removeP []*strandpb.AclBinding
	for _, b := range add {
		addP = append(addP, b.Proto())
	}
	for _, b := range remove {
		removeP = append(removeP, b.Proto())
	}
	r := a.do(EncodeAlterACLs(addP, removeP))
	for _, b := range add {
		if b.Validate() != nil {
			expect(t, r, ErrInvalidACL)
			return
		}
	}
	expect(t, r, nil)
	changed := false
	for _, b := range remove {
		if m.acls[b] {
			delete(m.acls, b)
			changed = true
		}
	}
	for _, b := range add {
		if !m.acls[b] {
			m.acls[b] = true
			changed = true
		}
	}
	if changed {
		m.version++
	}
}

func (m *secModel) setQuota(t *rapid.T, a *applier) {
	q := Quota{Principal: rapid.SampledFrom([]string{"User:alice", "User:bob", "alice"}).Draw(t, "principal"),
		ProduceBytesPerSec: rapid.SampledFrom([]int64{-1, 0, 1000}).Draw(t, "produce"),
		FetchBytesPerSec:   rapid.SampledFrom([]int64{0, 5000}).Draw(t, "fetch")}
	r := a.do(EncodeSetQuotas([]*strandpb.Quota{q.Proto()}))
	if ValidatePrincipal(q.Principal) != nil {
		expect(t, r, ErrInvalidQuota)
		return
	}
	if q.ProduceBytesPerSec < 0 {
		expect(t, r, ErrInvalidQuota)
		return
	}
	expect(t, r, nil)
	old, had := m.quotas[q.Principal]
	switch {
	case q.ProduceBytesPerSec == 0 && q.FetchBytesPerSec == 0:
		if had {
			delete(m.quotas, q.Principal)
			m.version++
		}
	case !had || old != q:
		m.quotas[q.Principal] = q
		m.version++
	}
}

func (m *secModel) check(t *rapid.T, s *State) {
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if s.Version() != m.version {
		t.Fatalf("version %d, model %d", s.Version(), m.version)
	}
	var users [][2]string
	for k := range m.users {
		users = append(users, k)
	}
	sort.Slice(users, func(i, j int) bool {
		return users[i][0] < users[j][0] || users[i][0] == users[j][0] && users[i][1] < users[j][1]
	})
	creds := s.Credentials()
	if len(creds) != len(users) {
		t.Fatalf("%d credentials, model %d", len(creds), len(users))
	}
	for i, c := range creds {
		if [2]string{c.Name, c.Mechanism} != users[i] || c.Iterations != m.users[users[i]] {
			t.Fatalf("credential %s/%s, model %v", c.Name, c.Mechanism, users[i])
		}
	}
	var acls []ACL
	for b := range m.acls {
		acls = append(acls, b)
	}
	slices.SortFunc(acls, compareACL)
	if got := s.ACLs(); !slices.Equal(got, acls) {
		t.Fatalf("ACLs %v, model %v", got, acls)
	}
	var quotas []Quota
	for _, q := range m.quotas {
		quotas = append(quotas, q)
	}
	slices.SortFunc(quotas, compareQuota)
	if got := s.Quotas(); !slices.Equal(got, quotas) {
		t.Fatalf("quotas %v, model %v", got, quotas)
	}
}
