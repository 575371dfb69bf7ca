package kafkaproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
// connection may send only ApiVersions and those two: anything else closes
// it without an answer (as Kafka does), and a failed step is answered
// SASL_AUTHENTICATION_FAILED and the connection closes after the answer.
// The rule and the exchange are one socket-free value, SASLGate: the
// listener's connections run every request through it, and the simulator
// (simnet) runs the same gate on its simulated Kafka connections. PLAIN is not offered (it would need TLS).
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

// SASLGate is the Kafka listener's SASL state machine for one
// connection, without the connection: the mechanism SaslHandshake named,
// the exchange in progress, and the principal once it succeeded. Every
// request of the connection goes through it before it is served. The
// zero SASLGate requires nothing (a listener without Config.SASL). Not
// safe for concurrent use (a connection's reader owns it).
type SASLGate struct {
	lookup    sasl.Lookup // nil: the listener does not require SASL
	random    io.Reader   // server nonces; nil: crypto/rand
	mechanism string
	exchange  *sasl.Exchange
	principal string
	// confirming is the SaslAuthenticate step whose refusal waits for a
	// confirmation (Confirmed), nil when none does.
	confirming *gateConfirm
}

// gateConfirm is a SaslAuthenticate step waiting for a confirmation.
type gateConfirm struct {
	r *kmsg.SASLAuthenticateRequest
	p *pending
}

// NewSASLGate is the gate of a connection to a listener that requires
// SASL/SCRAM, looking credentials up with lookup and drawing server
// nonces from random (nil: crypto/rand; the simulator passes a seeded
// source).
func NewSASLGate(lookup sasl.Lookup, random io.Reader) *SASLGate {
	return &SASLGate{lookup: lookup, random: random}
}

// Authenticate sets the connection's principal before its first request
// (a TLS client certificate's): its requests pass the gate.
func (g *SASLGate) Authenticate(principal string) { g.principal = principal }

// Principal is who the connection authenticated as ("" until then).
func (g *SASLGate) Principal() string { return g.principal }

// SASLStep is what one request did at a SASLGate.
type SASLStep struct {
	// Pass: the gate does not answer the request; the connection serves
	// it as Principal ("" when the listener requires no SASL).
	Pass      bool
	Principal string
	// Answer is the framed response (size prefix included) to a
	// SaslHandshake or SaslAuthenticate; nil when the request passed or
	// the connection closes without an answer.
	Answer []byte
	// Authenticated: this step completed the exchange.
	Authenticated bool
	// Close, when set, is why the connection closes (once Answer, if
	// any, is written).
	Close string
	// Confirm: the step would refuse on what the lookup holds (an
	// unknown user, a proof that does not match: sasl.Exchange's
	// Unconfirmed), which may lag the metadata group. Nothing is answered
	// yet: the caller confirms the lookup current, as SASLConfig's
	// SASLConfirm does for the listener, and calls Confirmed.
	Confirm bool
}

// Step runs one request (the bytes after its size prefix) through the
// gate, as the listener's connection does before serving it.
func (g *SASLGate) Step(frame []byte) SASLStep {
	h, body, err := parseHeader(frame)
	if err != nil {
		return SASLStep{Principal: g.principal, Close: err.Error()}
	}
	before := g.principal
	p, handled, err := g.serve(h, body)
	switch {
	case !handled:
		return SASLStep{Pass: true, Principal: g.principal}
	case err != nil:
		return SASLStep{Principal: g.principal, Close: err.Error()}
	case g.confirming != nil:
		return SASLStep{Principal: g.principal, Confirm: true}
	}
	return g.stepOf(before, p)
}

// stepOf is the SASLStep that answers p.
func (g *SASLGate) stepOf(before string, p *pending) SASLStep {
	if p.resp == nil {
		return SASLStep{Principal: g.principal, Close: p.closeAfter}
	}
	return SASLStep{Principal: g.principal, Answer: appendResponse(nil, p, p.resp()),
		Authenticated: before == "" && g.principal != "", Close: p.closeAfter}
}

// Confirmed decides the step that asked for a confirmation (Confirm): err
// is nil once the lookup reads state confirmed current, and the step's
// refusal (or its success, the user applied meanwhile) is then final;
// otherwise the connection closes without an answer, which Kafka clients
// retry (no SaslAuthenticate error code is retriable to them), never
// SASL_AUTHENTICATION_FAILED.
func (g *SASLGate) Confirmed(err error) SASLStep {
	before := g.principal
	p := g.confirmed(err)
	if p == nil {
		return SASLStep{Principal: g.principal, Close: "SASL: a confirmation no step asked for"}
	}
	return g.stepOf(before, p)
}

// confirmed ends g.confirming with err (see Confirmed): its pending with
// the answer set, or with none and closeAfter set.
func (g *SASLGate) confirmed(err error) *pending {
	c := g.confirming
	if c == nil {
		return nil
	}
	g.confirming = nil
	if err != nil {
		c.p.closeAfter = fmt.Sprintf("SASL: cannot decide the exchange, the node's credentials not confirmed current: %v", err)
		return c.p
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(c.r.Version)
	out, done, err := g.exchange.Confirmed(c.r.SASLAuthBytes)
	if resp := g.answer(resp, c.p, out, done, err); resp != nil {
		c.p.resp = ready(resp)
	}
	return c.p
}

// serve answers keys 17 and 36, and refuses every other request of a
// connection that has not authenticated yet on a listener that requires
// it. handled reports whether it answered h; an error closes the
// connection without an answer.
func (g *SASLGate) serve(h header, body []byte) (p *pending, handled bool, err error) {
	saslKey := h.key == 17 || h.key == 36
	if g.lookup == nil || h.key == 18 || !saslKey && (g.principal != "" || g.mechanism != "" && bugHandshakeAuthenticates()) {
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
		p.resp = ready(g.handshake(r, p))
	case *kmsg.SASLAuthenticateRequest:
		if resp := g.authenticate(r, p); resp != nil {
			p.resp = ready(resp)
		}
	default:
		// Closed without an answer, as Kafka does: most responses have no
		// top-level error code at the version asked (an empty Metadata
		// answer would read as "no topics").
		return nil, true, fmt.Errorf("%s before SASL authentication: this listener requires SASL/SCRAM (%v)",
			kmsg.NameForKey(h.key), sasl.Mechanisms)
	}
	return p, true, nil
}

// handshake picks the mechanism (once per connection).
func (g *SASLGate) handshake(r *kmsg.SASLHandshakeRequest, p *pending) *kmsg.SASLHandshakeResponse {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(r.Version)
	resp.SupportedMechanisms = slices.Clone(sasl.Mechanisms)
	switch {
	case r.Version == 0:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		p.closeAfter = "SaslHandshake v0 (SASL outside Kafka framing) is not served; v1 is"
	case g.principal != "" || g.mechanism != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		p.closeAfter = "a second SaslHandshake"
	case !slices.Contains(sasl.Mechanisms, r.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		p.closeAfter = fmt.Sprintf("unsupported SASL mechanism %q", r.Mechanism)
	default:
		g.mechanism = r.Mechanism
	}
	return resp
}

// authenticate runs one step of the exchange.
func (g *SASLGate) authenticate(r *kmsg.SASLAuthenticateRequest, p *pending) *kmsg.SASLAuthenticateResponse {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(r.Version)
	switch {
	case g.mechanism == "":
		return g.answer(resp, p, nil, false, errors.New("SaslAuthenticate before SaslHandshake"))
	case g.principal != "":
		return g.answer(resp, p, nil, false, errors.New("SaslAuthenticate after the exchange succeeded (a replay?)"))
	case g.confirming != nil:
		return g.answer(resp, p, nil, false, errors.New("SaslAuthenticate while the last step waits for a confirmation"))
	case g.exchange == nil:
		ex, err := sasl.StartRand(g.mechanism, g.lookup, g.random)
		if err != nil {
			return g.answer(resp, p, nil, false, err)
		}
		g.exchange = ex
	}
	out, done, err := g.exchange.Step(r.SASLAuthBytes)
	if err != nil && g.exchange.Unconfirmed() {
		g.confirming = &gateConfirm{r: r, p: p}
		return nil // answered by Confirmed
	}
	return g.answer(resp, p, out, done, err)
}

// answer fills resp with a step's outcome: its refusal (closing the
// connection after it), or the exchange's next message.
func (g *SASLGate) answer(resp *kmsg.SASLAuthenticateResponse, p *pending, out []byte, done bool, err error) *kmsg.SASLAuthenticateResponse {
	if err != nil {
		msg := "authentication failed (unknown user, wrong password, or an exchange out of order)"
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
		p.closeAfter = fmt.Sprintf("SASL: %v", err)
		if errors.Is(err, sasl.ErrCredentialChanged) {
			return nil // retriable: closed without an answer (Confirmed)
		}
		return resp
	}
	resp.SASLAuthBytes = out
	if done {
		g.principal = g.exchange.Principal()
	}
	return resp
}

// serveSASL runs a request through the connection's gate; handled
// reports whether the gate answered (or refused) it.
func (c *conn) serveSASL(h header, body []byte) (p *pending, handled bool, err error) {
	before := c.gate.principal
	p, handled, err = c.gate.serve(h, body)
	if c.gate.confirming != nil {
		var cerr error
		if confirm := c.s.cfg.SASLConfirm; confirm != nil {
			cerr = confirm(c.done)
		}
		if p = c.gate.confirmed(cerr); p.resp == nil {
			return nil, true, errors.New(p.closeAfter) // closed without an answer
		}
	}
	if c.gate.principal != before {
		if c.lc != nil {
			c.lc.SetPrincipal(c.gate.principal)
		}
		c.s.logger.Debug("Kafka connection authenticated", slog.String("principal", c.gate.principal), slog.String("remote", c.host()))
	}
	return p, handled, err
}

// The client's side, for callers that carry Kafka requests themselves
// (the simulator's Kafka clients authenticate with these frames): the
// SCRAM messages come from sasl.ClientSession.

// Versions the client side speaks.
const (
	clientSASLHandshakeVersion    = 1
	clientSASLAuthenticateVersion = 2
)

// EncodeSASLHandshake frames a SaslHandshake v1 naming mechanism (size
// prefix included); decode returns the answer as a Strand response: no
// error when the listener accepted the mechanism, else the refusal.
func EncodeSASLHandshake(mechanism string, corr int32) (frame []byte, decode func([]byte) (*strandpb.Response, error)) {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.SetVersion(clientSASLHandshakeVersion)
	r.Mechanism = mechanism
	return clientFrame(r, corr), func(f []byte) (*strandpb.Response, error) {
		body, err := responseBodyHeader(f, corr, false)
		if err != nil {
			return nil, err
		}
		a := kmsg.NewPtrSASLHandshakeResponse()
		a.SetVersion(r.Version)
		if err := a.ReadFrom(body); err != nil {
			return nil, fmt.Errorf("kafkaproto: SaslHandshake response: %w", err)
		}
		return &strandpb.Response{CorrelationId: uint64(corr), Error: strandError(a.ErrorCode, nil)}, nil
	}
}

// EncodeSASLAuthenticate frames a SaslAuthenticate v2 carrying one
// client message (size prefix included); decode returns the answer as
// Strand's SaslAuthenticate response, or its refusal. Kafka's answer does
// not say the exchange is done (the client knows it by the mechanism's
// round trips: SCRAM's second answer is the last), so Done is unset.
func EncodeSASLAuthenticate(authBytes []byte, corr int32) (frame []byte, decode func([]byte) (*strandpb.Response, error)) {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.SetVersion(clientSASLAuthenticateVersion)
	r.SASLAuthBytes = authBytes
	return clientFrame(r, corr), func(f []byte) (*strandpb.Response, error) {
		body, err := responseBodyHeader(f, corr, true)
		if err != nil {
			return nil, err
		}
		a := kmsg.NewPtrSASLAuthenticateResponse()
		a.SetVersion(r.Version)
		if err := a.ReadFrom(body); err != nil {
			return nil, fmt.Errorf("kafkaproto: SaslAuthenticate response: %w", err)
		}
		out := &strandpb.Response{CorrelationId: uint64(corr)}
		if out.Error = strandError(a.ErrorCode, a.ErrorMessage); out.Error == nil {
			out.Body = &strandpb.Response_SaslAuthenticate{SaslAuthenticate: &strandpb.SaslAuthenticateResponse{AuthBytes: a.SASLAuthBytes}}
		}
		return out, nil
	}
}

// clientFrame frames kreq as a Kafka client sends it: size, key,
// version, correlation id, client id "strand", the header's empty tag
// section when flexible, the body.
func clientFrame(kreq kmsg.Request, corr int32) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(kreq.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(kreq.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 6)
	b = append(b, "strand"...)
	if kreq.IsFlexible() {
		b = append(b, 0)
	}
	b = kreq.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}
