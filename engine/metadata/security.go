package metadata

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/strandlog/strand/proto/strandpb"
)

// Security state (issue 13): SCRAM users, ACL bindings and quotas live in
// the metadata group so every node authenticates and authorizes from the
// same applied state. Only salted credentials are stored (salt, iterations,
// StoredKey, ServerKey: RFC 5802), computed by the client, never a password.
// Every list is kept sorted, so snapshots and reads never depend on map
// order. Rejected: a separate security raft group (a second log to order
// against topic creates), passwords hashed by the node (the password would
// cross the wire and sit in the raft log).

// Security refusals, carried in Result.Err.
var (
	// ErrInvalidUser: a bad user name or credential (unknown mechanism,
	// fewer than ScramIterationsMin iterations, key of the wrong length).
	ErrInvalidUser = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: invalid user")
	// ErrUnknownUser: no such user (or no credential for that mechanism).
	ErrUnknownUser = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: unknown user")
	// ErrInvalidACL: a binding with an unknown field value.
	ErrInvalidACL = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: invalid ACL")
	// ErrInvalidQuota: a bad principal or a negative rate.
	ErrInvalidQuota = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: invalid quota")
	// ErrTooManySecurityEntries: more than SecurityEntriesMax users, bindings
	// or quotas.
	ErrTooManySecurityEntries = strandpb.NewSentinel(strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, "metadata: too many users, ACLs or quotas")
)

// Security bounds.
const (
	// ScramIterationsMin is RFC 7677's minimum (Kafka's too).
	ScramIterationsMin = 4096
	// ScramIterationsMax bounds the work of one authentication.
	ScramIterationsMax = 1 << 20
	// SecurityEntriesMax bounds each of users, bindings and quotas.
	SecurityEntriesMax = 10000
	// securityTextMax bounds names, principals and hosts, in bytes.
	securityTextMax = 255
	// ClusterResourceName names the cluster resource, as Kafka does.
	ClusterResourceName = "kafka-cluster"
)

// Mechanism names.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// scramKeyBytes is each mechanism's key length (its hash's size).
func scramKeyBytes(mechanism string) int {
	switch mechanism {
	case ScramSHA256:
		return 32
	case ScramSHA512:
		return 64
	}
	return 0
}

// Credential is a user's stored SCRAM credential for one mechanism.
type Credential struct {
	Name       string
	Mechanism  string
	Salt       []byte
	Iterations int32
	StoredKey  []byte
	ServerKey  []byte
}

// ACL is one binding; the fields hold the lower-case names of the proto.
type ACL struct {
	Principal, ResourceType, ResourceName, PatternType, Operation, Permission, Host string
}

// Quota is a principal's byte rates on each node (0: unlimited).
type Quota struct {
	Principal                            string
	ProduceBytesPerSec, FetchBytesPerSec int64
}

// Field values of an ACL binding.
var (
	aclResourceTypes = []string{"topic", "group", "cluster", "transactional-id"}
	aclPatternTypes  = []string{"literal", "prefixed"}
	// ACLOperations are the operations a binding may name.
	ACLOperations  = []string{"read", "write", "create", "delete", "describe", "alter", "describe-configs", "alter-configs", "all"}
	aclPermissions = []string{"allow", "deny"}
)

// security is the security part of State.
type security struct {
	users  []Credential // sorted by name, mechanism
	acls   []ACL        // sorted by every field
	quotas []Quota      // sorted by principal
}

func compareCredential(a, b Credential) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Mechanism, b.Mechanism))
}

func compareACL(a, b ACL) int {
	return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.ResourceName, b.ResourceName), cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission), cmp.Compare(a.Host, b.Host))
}

func compareQuota(a, b Quota) int { return cmp.Compare(a.Principal, b.Principal) }

// CredentialFromProto converts a wire credential for user name.
func CredentialFromProto(name string, c *strandpb.UserCredential) Credential {
	return Credential{Name: name, Mechanism: c.GetMechanism(), Salt: slices.Clone(c.GetSalt()), Iterations: c.GetIterations(),
		StoredKey: slices.Clone(c.GetStoredKey()), ServerKey: slices.Clone(c.GetServerKey())}
}

// Proto is the credential on the wire.
func (c Credential) Proto() *strandpb.UserCredential {
	return &strandpb.UserCredential{Mechanism: c.Mechanism, Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
}

// ACLFromProto converts a wire binding, lower-casing its enumerated fields.
func ACLFromProto(b *strandpb.AclBinding) ACL {
	return ACL{Principal: b.GetPrincipal(), ResourceType: strings.ToLower(b.GetResourceType()), ResourceName: b.GetResourceName(),
		PatternType: strings.ToLower(b.GetPatternType()), Operation: strings.ToLower(b.GetOperation()),
		Permission: strings.ToLower(b.GetPermission()), Host: b.GetHost()}
}

// Proto is the binding on the wire.
func (a ACL) Proto() *strandpb.AclBinding {
	return &strandpb.AclBinding{Principal: a.Principal, ResourceType: a.ResourceType, ResourceName: a.ResourceName,
		PatternType: a.PatternType, Operation: a.Operation, Permission: a.Permission, Host: a.Host}
}

// Proto is the quota on the wire.
func (q Quota) Proto() *strandpb.Quota {
	return &strandpb.Quota{Principal: q.Principal, ProduceBytesPerSec: q.ProduceBytesPerSec, FetchBytesPerSec: q.FetchBytesPerSec}
}

// ValidateUserName checks a SCRAM user name: 1..255 bytes of printable
// ASCII without spaces.
func ValidateUserName(name string) error {
	if name == "" || len(name) > securityTextMax {
		return fmt.Errorf("%w: name of %d bytes", ErrInvalidUser, len(name))
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] > '~' {
			return fmt.Errorf("%w: %q has byte %#x at %d", ErrInvalidUser, name, name[i], i)
		}
	}
	return nil
}

// validate checks a credential.
func (c Credential) validate() error {
	if err := ValidateUserName(c.Name); err != nil {
		return err
	}
	n := scramKeyBytes(c.Mechanism)
	switch {
	case n == 0:
		return fmt.Errorf("%w: %q: mechanism %q, want %s or %s", ErrInvalidUser, c.Name, c.Mechanism, ScramSHA256, ScramSHA512)
	case c.Iterations < ScramIterationsMin || c.Iterations > ScramIterationsMax:
		return fmt.Errorf("%w: %q: %d iterations, want %d..%d", ErrInvalidUser, c.Name, c.Iterations, ScramIterationsMin, ScramIterationsMax)
	case len(c.Salt) < 8 || len(c.Salt) > 128:
		return fmt.Errorf("%w: %q: salt of %d bytes, want 8..128", ErrInvalidUser, c.Name, len(c.Salt))
	case len(c.StoredKey) != n || len(c.ServerKey) != n:
		return fmt.Errorf("%w: %q: keys of %d and %d bytes, want %d", ErrInvalidUser, c.Name, len(c.StoredKey), len(c.ServerKey), n)
	}
	return nil
}

// ValidatePrincipal checks "User:NAME" (NAME may be "*" in ACLs).
func ValidatePrincipal(p string) error {
	name, ok := strings.CutPrefix(p, "User:")
	if !ok || name == "" || len(p) > securityTextMax {
		return fmt.Errorf("principal %q: want User:NAME", p)
	}
	return nil
}

// Validate checks a binding's fields.
func (a ACL) Validate() error {
	if err := ValidatePrincipal(a.Principal); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidACL, err)
	}
	switch {
	case !slices.Contains(aclResourceTypes, a.ResourceType):
		return fmt.Errorf("%w: resource type %q, want topic, group, cluster or transactional-id", ErrInvalidACL, a.ResourceType)
	case a.ResourceName == "" || len(a.ResourceName) > securityTextMax:
		return fmt.Errorf("%w: resource name of %d bytes", ErrInvalidACL, len(a.ResourceName))
	case a.ResourceType == "cluster" && a.ResourceName != ClusterResourceName:
		return fmt.Errorf("%w: the cluster resource is named %q, not %q", ErrInvalidACL, ClusterResourceName, a.ResourceName)
	case !slices.Contains(aclPatternTypes, a.PatternType):
		return fmt.Errorf("%w: pattern type %q, want literal or prefixed", ErrInvalidACL, a.PatternType)
	case !slices.Contains(ACLOperations, a.Operation):
		return fmt.Errorf("%w: operation %q, want one of %s", ErrInvalidACL, a.Operation, strings.Join(ACLOperations, ", "))
	case !slices.Contains(aclPermissions, a.Permission):
		return fmt.Errorf("%w: permission %q, want allow or deny", ErrInvalidACL, a.Permission)
	case a.Host == "" || len(a.Host) > securityTextMax:
		return fmt.Errorf("%w: host of %d bytes (\"*\": any)", ErrInvalidACL, len(a.Host))
	}
	return nil
}

// upsertUser stores a credential, replacing the user's one for that
// mechanism.
func (s *State) upsertUser(c *strandpb.MetadataUpsertUser) Result {
	cred := CredentialFromProto(c.GetName(), c.GetCredential())
	if err := cred.validate(); err != nil {
		return Result{Err: err}
	}
	i, found := slices.BinarySearchFunc(s.sec.users, cred, compareCredential)
	if found {
		if old := s.sec.users[i]; old.Iterations == cred.Iterations && bytes.Equal(old.Salt, cred.Salt) &&
			bytes.Equal(old.StoredKey, cred.StoredKey) && bytes.Equal(old.ServerKey, cred.ServerKey) {
			return Result{} // the same credential again: nothing changes, the version stays
		}
		s.sec.users[i] = cred
	} else {
		if len(s.sec.users) >= SecurityEntriesMax {
			return Result{Err: fmt.Errorf("%w: %d credentials", ErrTooManySecurityEntries, len(s.sec.users))}
		}
		s.sec.users = slices.Insert(s.sec.users, i, cred)
	}
	s.changed()
	return Result{}
}

// deleteUser removes a user's credential for one mechanism, or all.
func (s *State) deleteUser(c *strandpb.MetadataDeleteUser) Result {
	n := len(s.sec.users)
	s.sec.users = slices.DeleteFunc(s.sec.users, func(u Credential) bool {
		return u.Name == c.GetName() && (c.GetMechanism() == "" || u.Mechanism == c.GetMechanism())
	})
	if len(s.sec.users) == n {
		return Result{Err: fmt.Errorf("%w: %q", ErrUnknownUser, c.GetName())}
	}
	s.changed()
	return Result{}
}

// alterACLs removes then adds bindings, all or none; a removal of a
// binding that is not stored, or an add of one that is, changes nothing
// for it. Result.ACLsAdded/ACLsRemoved count what changed.
func (s *State) alterACLs(c *strandpb.MetadataAlterAcls) Result {
	acls := slices.Clone(s.sec.acls)
	removed, added := 0, 0
	for _, b := range c.GetRemove() {
		if i, found := slices.BinarySearchFunc(acls, ACLFromProto(b), compareACL); found {
			acls = slices.Delete(acls, i, i+1)
			removed++
		}
	}
	for _, b := range c.GetAdd() {
		a := ACLFromProto(b)
		if err := a.Validate(); err != nil {
			return Result{Err: err}
		}
		if i, found := slices.BinarySearchFunc(acls, a, compareACL); !found {
			acls = slices.Insert(acls, i, a)
			added++
		}
	}
	if len(acls) > SecurityEntriesMax {
		return Result{Err: fmt.Errorf("%w: %d ACL bindings", ErrTooManySecurityEntries, len(acls))}
	}
	if added+removed > 0 {
		s.sec.acls = acls
		s.changed()
	}
	return Result{ACLsAdded: int32(added), ACLsRemoved: int32(removed)}
}

// setQuotas sets quotas, all or none; both rates 0 removes one.
func (s *State) setQuotas(c *strandpb.MetadataSetQuotas) Result {
	quotas := slices.Clone(s.sec.quotas)
	for _, pq := range c.GetQuotas() {
		q := Quota{Principal: pq.GetPrincipal(), ProduceBytesPerSec: pq.GetProduceBytesPerSec(), FetchBytesPerSec: pq.GetFetchBytesPerSec()}
		if err := ValidatePrincipal(q.Principal); err != nil {
			return Result{Err: fmt.Errorf("%w: %v", ErrInvalidQuota, err)}
		}
		if q.ProduceBytesPerSec < 0 || q.FetchBytesPerSec < 0 {
			return Result{Err: fmt.Errorf("%w: %s: negative rate", ErrInvalidQuota, q.Principal)}
		}
		i, found := slices.BinarySearchFunc(quotas, q, compareQuota)
		switch {
		case q.ProduceBytesPerSec == 0 && q.FetchBytesPerSec == 0:
			if found {
				quotas = slices.Delete(quotas, i, i+1)
			}
		case found:
			quotas[i] = q
		default:
			quotas = slices.Insert(quotas, i, q)
		}
	}
	if len(quotas) > SecurityEntriesMax {
		return Result{Err: fmt.Errorf("%w: %d quotas", ErrTooManySecurityEntries, len(quotas))}
	}
	if !slices.Equal(quotas, s.sec.quotas) {
		s.sec.quotas = quotas
		s.changed()
	}
	return Result{}
}

// Credential returns user name's credential for mechanism, if stored.
func (s *State) Credential(name, mechanism string) (Credential, bool) {
	i, found := slices.BinarySearchFunc(s.sec.users, Credential{Name: name, Mechanism: mechanism}, compareCredential)
	if !found {
		return Credential{}, false
	}
	return s.sec.users[i], true
}

// Credentials returns every stored credential, sorted by name then
// mechanism (the slices inside are shared: do not modify them).
func (s *State) Credentials() []Credential { return slices.Clone(s.sec.users) }

// ACLs returns every binding, sorted.
func (s *State) ACLs() []ACL { return slices.Clone(s.sec.acls) }

// Quotas returns every quota, sorted by principal.
func (s *State) Quotas() []Quota { return slices.Clone(s.sec.quotas) }

// checkSecurity verifies the security lists are valid and sorted.
func (s *State) checkSecurity() error {
	for i, u := range s.sec.users {
		if err := u.validate(); err != nil {
			return err
		}
		if i > 0 && compareCredential(s.sec.users[i-1], u) >= 0 {
			return fmt.Errorf("users out of order at %q", u.Name)
		}
	}
	for i, a := range s.sec.acls {
		if err := a.Validate(); err != nil {
			return err
		}
		if i > 0 && compareACL(s.sec.acls[i-1], a) >= 0 {
			return fmt.Errorf("ACLs out of order at %+v", a)
		}
	}
	for i, q := range s.sec.quotas {
		if ValidatePrincipal(q.Principal) != nil || q.ProduceBytesPerSec < 0 || q.FetchBytesPerSec < 0 {
			return fmt.Errorf("invalid quota %+v", q)
		}
		if i > 0 && compareQuota(s.sec.quotas[i-1], q) >= 0 {
			return fmt.Errorf("quotas out of order at %q", q.Principal)
		}
	}
	if len(s.sec.users) > SecurityEntriesMax || len(s.sec.acls) > SecurityEntriesMax || len(s.sec.quotas) > SecurityEntriesMax {
		return ErrTooManySecurityEntries
	}
	return nil
}

// securityToSnapshot fills the snapshot's security fields.
func (s *State) securityToSnapshot(snap *strandpb.MetadataSnapshot) {
	for _, u := range s.sec.users {
		snap.Users = append(snap.Users, &strandpb.MetadataUser{Name: u.Name, Credential: u.Proto()})
	}
	for _, a := range s.sec.acls {
		snap.Acls = append(snap.Acls, a.Proto())
	}
	for _, q := range s.sec.quotas {
		snap.Quotas = append(snap.Quotas, q.Proto())
	}
}

// securityFromSnapshot restores the security fields (Check validates them).
func (s *State) securityFromSnapshot(snap *strandpb.MetadataSnapshot) {
	for _, u := range snap.GetUsers() {
		s.sec.users = append(s.sec.users, CredentialFromProto(u.GetName(), u.GetCredential()))
	}
	for _, a := range snap.GetAcls() {
		s.sec.acls = append(s.sec.acls, ACLFromProto(a))
	}
	for _, q := range snap.GetQuotas() {
		s.sec.quotas = append(s.sec.quotas, Quota{Principal: q.GetPrincipal(), ProduceBytesPerSec: q.GetProduceBytesPerSec(),
			FetchBytesPerSec: q.GetFetchBytesPerSec()})
	}
}

// EncodeUpsertUser stores user name's credential for its mechanism.
func EncodeUpsertUser(name string, c *strandpb.UserCredential) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_UpsertUser{
		UpsertUser: &strandpb.MetadataUpsertUser{Name: name, Credential: c}}})
}

// EncodeDeleteUser removes user name's credential for mechanism (empty:
// every mechanism).
func EncodeDeleteUser(name, mechanism string) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_DeleteUser{
		DeleteUser: &strandpb.MetadataDeleteUser{Name: name, Mechanism: mechanism}}})
}

// EncodeAlterACLs removes then adds bindings, all or none.
func EncodeAlterACLs(add, remove []*strandpb.AclBinding) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_AlterAcls{
		AlterAcls: &strandpb.MetadataAlterAcls{Add: add, Remove: remove}}})
}

// EncodeSetQuotas sets quotas (both rates 0: removed).
func EncodeSetQuotas(quotas []*strandpb.Quota) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_SetQuotas{
		SetQuotas: &strandpb.MetadataSetQuotas{Quotas: quotas}}})
}
