package kafkaproto

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// SASL on the Kafka listener (Config.SASL): SaslHandshake (key 17, v1)
// names the mechanism, SaslAuthenticate (key 36, v0-2) carries the SCRAM
// messages, as kfake and Kafka answer them. Until the exchange succeeds a
// connection may send only ApiVersions and those two; anything else, and a
// failed step, is answered SASL_AUTHENTICATION_FAILED and the connection
// closes after the answer. PLAIN is not offered (it would need TLS).
// Rejected: the v0 handshake (raw SASL bytes outside Kafka framing, from
// clients before Kafka 1.0). The nonce check is RFC 5802's, strict, as
// Kafka 4's is (CVE-2024-56128): librdkafka before 2.6.1 (so kcat built on
// it, e.g. Debian's librdkafka 2.0.2) sends the client nonce twice in its
// client-final message and is refused; Kafka 3.x accepted that.

// saslAPIs are advertised by ApiVersions when the listener requires SASL.
var saslAPIs = []api{
	// SaslHandshake (answered in serveSASL). v0 is advertised because
	// librdkafka requires it in the range before it uses SASL at all, but
	// answered ILLEGAL_SASL_STATE: clients that speak v1 send v1.
	{key: 17, min: 0, max: 1, serve: nil},
	{key: 36, min: 0, max: 2, serve: nil}, // SaslAuthenticate
}

// CallerBackend is a Backend that also takes who sent each request: the
// principal the connection authenticated as ("" when anonymous) and the
// client's host. The node's listener implements it; Submit serves the rest.
type CallerBackend interface {
	SubmitAs(done <-chan struct{}, principal, host string, req *strandpb.Request, reply func(*strandpb.Response)) error
}

// host is the client's IP, as ACLs name hosts.
func (c *conn) host() string { return c.clientHost }

// serveSASL answers keys 17 and 36, and refuses every other request of a
// connection that has not authenticated yet on a listener that requires
// it. handled reports whether it answered h.
func (c *conn) serveSASL(h header, body []byte) (p *pending, handled bool, err error) {
	if c.s.cfg.SASL == nil || c.principal != "" && h.key != 17 && h.key != 36 || h.key == 18 {
		return nil, false, nil
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return nil, true, fmt.Errorf("unknown API key %d", h.key)
	}
	if h.version < 0 || h.version > req.MaxVersion() {
		return nil, true, fmt.Errorf("API key %d version %d unknown to this node", h.key, h.version)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return nil, true, err
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, true, fmt.Errorf("%w: %s v%d: %v", errMalformed, kmsg.NameForKey(h.key), h.version, err)
	}
	p = &pending{corr: h.corr, flexibleHeader: req.IsFlexible()}
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		p.resp = ready(c.saslHandshake(r, p))
	case *kmsg.SASLAuthenticateRequest:
		p.resp = ready(c.saslAuthenticate(r, p))
	default:
		// Closed without an answer, as Kafka does: most responses have no
		// top-level error code at the version asked (an empty Metadata
		// answer would read as "no topics").
		return nil, true, fmt.Errorf("%s before SASL authentication: this listener requires SASL/SCRAM (%v)",
			kmsg.NameForKey(h.key), sasl.Mechanisms)
	}
	return p, true, nil
}

// saslHandshake picks the mechanism (once per connection).
func (c *conn) saslHandshake(r *kmsg.SASLHandshakeRequest, p *pending) *kmsg.SASLHandshakeResponse {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(r.Version)
	resp.SupportedMechanisms = slices.Clone(sasl.Mechanisms)
	switch {
	case r.Version == 0:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		p.closeAfter = "SaslHandshake v0 (SASL outside Kafka framing) is not served; v1 is"
	case c.principal != "" || c.mechanism != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		p.closeAfter = "a second SaslHandshake"
	case !slices.Contains(sasl.Mechanisms, r.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		p.closeAfter = fmt.Sprintf("unsupported SASL mechanism %q", r.Mechanism)
	default:
		c.mechanism = r.Mechanism
	}
	return resp
}

// saslAuthenticate runs one step of the exchange.
func (c *conn) saslAuthenticate(r *kmsg.SASLAuthenticateRequest, p *pending) *kmsg.SASLAuthenticateResponse {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(r.Version)
	fail := func(why error) *kmsg.SASLAuthenticateResponse {
		msg := "authentication failed (unknown user, wrong password, or an exchange out of order)"
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
		p.closeAfter = fmt.Sprintf("SASL: %v", why)
		return resp
	}
	switch {
	case c.mechanism == "":
		return fail(errors.New("SaslAuthenticate before SaslHandshake"))
	case c.principal != "":
		return fail(errors.New("SaslAuthenticate after the exchange succeeded (a replay?)"))
	case c.exchange == nil:
		ex, err := sasl.Start(c.mechanism, c.s.cfg.SASL)
		if err != nil {
			return fail(err)
		}
		c.exchange = ex
	}
	out, done, err := c.exchange.Step(r.SASLAuthBytes)
	if err != nil {
		return fail(err)
	}
	resp.SASLAuthBytes = out
	if done {
		c.principal = c.exchange.Principal()
		if c.lc != nil {
			c.lc.SetPrincipal(c.principal)
		}
		c.s.logger.Debug("Kafka connection authenticated", slog.String("principal", c.principal), slog.String("remote", c.host()))
	}
	return resp
}
