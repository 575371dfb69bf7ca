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

// lookupCredential finds a user's credential in the round's latest
// security view (package loop). Safe from any goroutine.
func (r *Server) lookupCredential(name, mechanism string) (metadata.Credential, bool) {
	return r.round.LookupCredential(name, mechanism)
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
		if st.Confirm {
			// A refusal only on credentials confirmed current: this
			// node may not have applied a user the metadata group
			// acknowledged (sasl.ServerStep.Confirm).
			st = sess.Confirmed(&req, c.r.confirmCredentials(c.lc.Done()))
		}
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

// errShuttingDown fails a confirmation the loop did not take before it
// stopped.
var errShuttingDown = errors.New("node: shutting down")

// confirmCredentials asks the loop to confirm the node's credentials
// current (loop.Round.ConfirmSecurity: a metadata read index started
// now, the security view rebuilt from the state it confirmed) and waits
// for the outcome: the SASL exchanges of both listeners call it before a
// refusal, from the connection's goroutine (never the loop's). The wait
// is bounded by helloTimeout and by done (the connection closing); the
// Core bounds its own (no metadata leader, too many waiting, the request
// timeout). Safe from any goroutine.
func (r *Server) confirmCredentials(done <-chan struct{}) error {
	ch := make(chan error, 1)
	timer := time.NewTimer(helloTimeout)
	defer timer.Stop()
	select {
	case r.requests <- loopRequest{confirm: func(err error) { ch <- err }}:
	case <-done:
		return errShuttingDown
	case <-timer.C:
		return errors.New("node: the loop did not take the confirmation in time")
	}
	select {
	case err := <-ch:
		return err
	case <-done:
		return errShuttingDown
	case <-timer.C:
		return errors.New("node: the credentials were not confirmed in time")
	}
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
