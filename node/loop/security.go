package loop

import (
	"log/slog"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// Security is a copy of the applied credentials and quotas, immutable once
// published: the SASL lookups and the quota meters read it without asking
// the loop.
type Security struct {
	// Version is the metadata version it was built at.
	Version uint64
	creds   map[string]metadata.Credential // name + "\x00" + mechanism
	quotas  map[string]metadata.Quota      // by principal
}

// Credential finds a user's credential for mechanism.
func (s *Security) Credential(name, mechanism string) (metadata.Credential, bool) {
	c, ok := s.creds[name+"\x00"+mechanism]
	return c, ok
}

// Quota is principal's quota, if it has one.
func (s *Security) Quota(principal node.Principal) (metadata.Quota, bool) {
	q, ok := s.quotas[string(principal)]
	return q, ok
}

// HasQuotas reports whether any principal has a quota.
func (s *Security) HasQuotas() bool { return len(s.quotas) > 0 }

// Security is the latest view (never nil after New). Safe from any
// goroutine.
func (r *Round) Security() *Security { return r.security.Load() }

// LookupCredential finds a user's credential in the latest view: the
// SASL sessions' lookup (sasl.Lookup). Safe from any goroutine.
func (r *Round) LookupCredential(name, mechanism string) (metadata.Credential, bool) {
	return r.security.Load().Credential(name, mechanism)
}

// NoteSecurity rebuilds the security view when the metadata version
// moved. Run after every Process and before every answer leaves.
func (r *Round) NoteSecurity() {
	v := r.core.MetadataVersion()
	if r.security.Load() != nil {
		if bugStaleSecurity() { // planted (simbugs): rebuilt only when the leader moves
			if r.metaLeader == r.secLeader {
				return
			}
		} else if v == r.secVersion {
			return
		}
	}
	r.secVersion, r.secLeader = v, r.metaLeader
	_, creds, quotas := r.core.SecurityState()
	view := &Security{Version: v, creds: make(map[string]metadata.Credential, len(creds)), quotas: make(map[string]metadata.Quota, len(quotas))}
	for _, c := range creds {
		view.creds[c.Name+"\x00"+c.Mechanism] = c
	}
	for _, q := range quotas {
		view.quotas[q.Principal] = q
	}
	r.security.Store(view)
}

// bootstrapUser creates Config.BootstrapUser (a super user) with its
// password, for the mechanisms the applied metadata lacks: the first
// administrator of a cluster that requires SASL, which could not
// otherwise authenticate to create anyone. One request in flight at a
// time; a failed one is retried by a later round.
func (r *Round) bootstrapUser() {
	name := r.cfg.BootstrapUser
	if name == "" || r.bootstrapping || r.metaLeader == 0 {
		return
	}
	var upserts []*strandpb.AlterUsersRequest_Upsert
	for _, mech := range sasl.Mechanisms {
		if _, ok := r.LookupCredential(name, mech); ok {
			continue
		}
		cred, err := sasl.NewCredentialRand(mech, name, r.cfg.BootstrapPassword, r.cfg.BootstrapIterations, r.cfg.BootstrapRand)
		if err != nil {
			r.logger.Error("cannot create the bootstrap user", slog.String("user", name), slog.Any("err", err))
			r.cfg.BootstrapUser = ""
			return
		}
		upserts = append(upserts, &strandpb.AlterUsersRequest_Upsert{Name: name, Credential: cred})
	}
	if len(upserts) == 0 {
		return
	}
	r.bootstrapping = true
	r.bootstrapSent++
	req := &strandpb.Request{Body: &strandpb.Request_AlterUsers{AlterUsers: &strandpb.AlterUsersRequest{Upserts: upserts}}}
	r.core.HandleAs(node.Caller{Principal: node.Principal("User:" + name), Host: "127.0.0.1"}, req, func(resp *strandpb.Response) {
		r.bootstrapping = false // on the loop: completions run inside Process
		if e := resp.GetError(); e != nil {
			r.logger.Warn("bootstrap user not created yet", slog.String("user", name), slog.String("err", e.GetMessage()))
		}
	})
}
