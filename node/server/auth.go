package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// securityView is the loop's copy of the applied credentials and quotas,
// rebuilt when the metadata version moves and read by connection
// goroutines (SASL lookups, quota buckets) without asking the loop.
type securityView struct {
	creds  map[string]metadata.Credential // name + "\x00" + mechanism
	quotas map[string]metadata.Quota      // by principal
}

// noteSecurity rebuilds the security view when the metadata version moved.
// Called by the loop after Process.
func (r *Server) noteSecurity() {
	v := r.core.MetadataVersion()
	if v == r.secVersion && r.security.Load() != nil {
		return
	}
	r.secVersion = v
	_, creds, quotas := r.core.SecurityState()
	view := &securityView{creds: make(map[string]metadata.Credential, len(creds)), quotas: make(map[string]metadata.Quota, len(quotas))}
	for _, c := range creds {
		view.creds[c.Name+"\x00"+c.Mechanism] = c
	}
	for _, q := range quotas {
		view.quotas[q.Principal] = q
	}
	r.security.Store(view)
}

// lookupCredential finds a user's credential in the latest view.
func (r *Server) lookupCredential(name, mechanism string) (metadata.Credential, bool) {
	view := r.security.Load()
	if view == nil {
		return metadata.Credential{}, false
	}
	c, ok := view.creds[name+"\x00"+mechanism]
	return c, ok
}

// logSecurity says once, at start, what the node checks: with
// authorization off every request is allowed, and the log says so.
func (r *Server) logSecurity() {
	if !r.cfg.Core.Authorization {
		level := slog.LevelWarn
		if r.cfg.SecurityNoticeInBanner {
			level = slog.LevelDebug
		}
		r.logger.Log(context.Background(), level, "authorization off: every request is allowed (serve --authorization to check ACLs)")
	} else {
		supers := make([]string, len(r.cfg.Core.SuperUsers))
		for i, p := range r.cfg.Core.SuperUsers {
			supers[i] = string(p)
		}
		r.logger.Info("authorization on: requests need ACLs", slog.String("super_users", strings.Join(supers, ",")))
		if !r.cfg.SASL {
			r.logger.Warn("authorization on without --sasl-enabled: clients without a TLS client certificate are User:ANONYMOUS, " +
				"so only ACLs for User:ANONYMOUS apply to them and no super user can connect that way")
		}
	}
	if r.cfg.SASL {
		r.logger.Info("SASL required on client listeners", slog.String("mechanisms", strings.Join(sasl.Mechanisms, ",")))
	}
}

// caller is who the connection's requests come from: the SASL principal,
// else the TLS one (set by the TLS listener), else anonymous.
func (c *nativeConn) caller() node.Caller {
	p := c.principal
	if p == "" {
		p = node.Anonymous
	}
	return node.Caller{Principal: p, Host: c.host}
}

// authenticate runs the SASL exchange right after the Hello when the node
// requires it: the connection's requests go to a sasl.ServerSession (the
// transport-free exchange the simulator runs too) until it is done. Any
// other request, or a failed step, is answered SASL_AUTHENTICATION_FAILED
// (UNSUPPORTED_SASL_MECHANISM for an unknown mechanism) and the
// connection closes. A peer's connection (Hello with a peer id) skips it
// (peers are authenticated by mutual TLS), and so does one whose TLS
// client certificate already named its principal.
func (c *nativeConn) authenticate(br *bufio.Reader) error {
	if !c.r.cfg.SASL || c.peer != 0 || c.principal != "" {
		return nil // off, a peer, or authenticated by its TLS certificate
	}
	c.lc.Net().SetReadDeadline(time.Now().Add(helloTimeout))
	defer c.lc.Net().SetReadDeadline(time.Time{})
	sess := sasl.NewServerSession(c.r.lookupCredential, nil)
	for range sasl.SessionStepsMax + 1 { // the last is refused: too many steps
		var req strandpb.Request
		if _, err := frame.Decode(br, nil, frame.BytesMaxDefault, &req); err != nil {
			return fmt.Errorf("sasl: %v", err)
		}
		st := sess.Step(&req)
		if st.Done {
			c.principal = node.Principal(st.Principal)
			c.lc.SetPrincipal(st.Principal)
		}
		err := c.writeNow(st.Answer)
		switch {
		case st.Refused != nil:
			return st.Refused
		case err != nil:
			return err
		case st.Done:
			return nil
		}
	}
	return errors.New("sasl: the exchange did not end") // unreachable: the session refuses a step past its bound
}

// writeNow writes one answer before the writer runs (the Hello and SASL
// steps).
func (c *nativeConn) writeNow(resp *strandpb.Response) error {
	out, err := frame.Append(nil, resp)
	if err != nil {
		return err
	}
	nc := c.lc.Net()
	nc.SetWriteDeadline(time.Now().Add(helloTimeout))
	defer nc.SetWriteDeadline(time.Time{})
	if _, err := nc.Write(out); err != nil {
		return fmt.Errorf("sasl answer: %v", err)
	}
	return nil
}

// bootstrapUser creates Config.SASLBootstrapUser (a super user) with its
// password, for both mechanisms, while the applied metadata lacks it: the
// first administrator of a cluster that requires SASL, which could not
// otherwise authenticate to create anyone. Called by the loop; one
// request in flight at a time.
func (r *Server) bootstrapUser() {
	name := r.cfg.SASLBootstrapUser
	if name == "" || r.bootstrapping || r.metaLeader.Load() == 0 {
		return
	}
	var upserts []*strandpb.AlterUsersRequest_Upsert
	for _, mech := range sasl.Mechanisms {
		if _, ok := r.lookupCredential(name, mech); ok {
			continue
		}
		cred, err := sasl.NewCredential(mech, name, r.cfg.SASLBootstrapPassword, 0)
		if err != nil {
			r.logger.Error("cannot create the bootstrap user", slog.String("user", name), slog.Any("err", err))
			r.cfg.SASLBootstrapUser = ""
			return
		}
		upserts = append(upserts, &strandpb.AlterUsersRequest_Upsert{Name: name, Credential: cred})
	}
	if len(upserts) == 0 {
		return
	}
	r.bootstrapping = true
	req := &strandpb.Request{Body: &strandpb.Request_AlterUsers{AlterUsers: &strandpb.AlterUsersRequest{Upserts: upserts}}}
	r.core.HandleAs(node.Caller{Principal: node.Principal("User:" + name), Host: "127.0.0.1"}, req, func(resp *strandpb.Response) {
		r.bootstrapping = false // on the loop: completions run inside Process
		if e := resp.GetError(); e != nil {
			r.logger.Warn("bootstrap user not created yet", slog.String("user", name), slog.String("err", e.GetMessage()))
		}
	})
}
