package sasl

import (
	"errors"
	"fmt"
	"io"

	"github.com/xdg-go/scram"

	"github.com/strandlog/strand/proto/strandpb"
)

// The session types below are a connection's authentication without the
// connection: a step takes one request (or answer) and returns what to
// send back. node/server's native connections and clientlib's TCP
// connections run them around reads and writes; the simulator (simnet)
// runs the same steps over its simulated network, so the exchange it
// proves is production's.

// ErrRequired: a request other than SaslAuthenticate before the
// connection authenticated.
var ErrRequired = errors.New("the node requires SASL authentication (SCRAM-SHA-256 or SCRAM-SHA-512) before any request")

// SessionStepsMax bounds the SaslAuthenticate requests of one exchange
// (SCRAM needs two): a further one is refused.
const SessionStepsMax = 4

// refusedMessage is the refusal's text: it never says whether the user
// exists.
const refusedMessage = "sasl: authentication failed (unknown user, wrong password, or an exchange out of order)"

// ServerSession is the server side of one connection's authentication:
// the requests that arrive before the connection authenticated go to
// Step, each answered at once. Not safe for concurrent use.
type ServerSession struct {
	lookup Lookup
	random io.Reader // server nonces; nil: crypto/rand
	ex     *Exchange
	steps  int
	over   bool
	// confirming: the last Step asked for a confirmation (Confirm) that
	// Confirmed has not taken yet.
	confirming bool
}

// ServerStep is what one request did to a ServerSession.
type ServerStep struct {
	// Answer is the response to write, always set (its correlation id
	// is the request's).
	Answer *strandpb.Response
	// Done: the client proved its password; Principal ("User:NAME") is
	// who the connection's later requests come from.
	Done      bool
	Principal string
	// Refused ends the session: Answer carries the refusal
	// (SASL_AUTHENTICATION_FAILED, or UNSUPPORTED_SASL_MECHANISM), and
	// the connection closes once it is written. The error (the reason,
	// for the log) is never sent: the answer does not say whether the
	// user exists.
	Refused error
	// Confirm: the step would refuse on what the lookup holds (an unknown
	// user, a proof that does not match the stored credential), which
	// may lag the metadata group (a node that has not applied a user the
	// group acknowledged). Nothing is answered yet (Answer is nil): the
	// caller confirms its lookup current — its metadata applied up to a
	// metadata read index started after the request arrived, and the
	// lookup reading that state — and calls Confirmed with the same
	// request. A refusal is decided only on confirmed state.
	Confirm bool
}

// NewServerSession begins a connection's authentication, looking
// credentials up with lookup (the node's applied metadata) and drawing
// server nonces from random (nil: crypto/rand; the simulator passes a
// seeded source).
func NewServerSession(lookup Lookup, random io.Reader) *ServerSession {
	return &ServerSession{lookup: lookup, random: random}
}

// Step answers one request of a connection not yet authenticated: a
// SaslAuthenticate step, or a refusal (any other request; a failed step;
// an unknown mechanism; more than SessionStepsMax steps). After Done or a
// refusal the session is over and Step refuses everything.
func (s *ServerSession) Step(req *strandpb.Request) ServerStep {
	resp := &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	switch {
	case s.over:
		return s.refuse(resp, strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, errors.New("a step after the exchange ended"))
	case s.confirming:
		return s.refuse(resp, strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, errors.New("a step while the last one waits for a confirmation"))
	}
	s.steps++
	step := req.GetSaslAuthenticate()
	switch {
	case step == nil:
		return s.refuse(resp, strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, ErrRequired)
	case s.steps > SessionStepsMax:
		return s.refuse(resp, strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, errors.New("too many SASL steps"))
	case s.ex == nil:
		ex, err := start(step.GetMechanism(), s.lookup, s.random)
		if err != nil {
			return s.refuse(resp, strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_SASL_MECHANISM, err)
		}
		s.ex = ex
	}
	out, done, err := s.ex.Step(step.GetAuthBytes())
	if err != nil && s.ex.Unconfirmed() {
		s.confirming = true
		return ServerStep{Confirm: true}
	}
	return s.answer(resp, out, done, err)
}

// Confirmed decides the step that asked for a confirmation (Confirm): req
// is the same request; err is nil once the lookup reads state confirmed
// current for it, else why it could not be confirmed (no metadata leader,
// the read not served in time), and the session ends with a retriable
// refusal (UNAVAILABLE: the client authenticates again, here or on
// another node), never SASL_AUTHENTICATION_FAILED. A refusal decided on
// the confirmed state is final; a credential replaced since the exchange
// began is UNAVAILABLE too (ErrCredentialChanged).
func (s *ServerSession) Confirmed(req *strandpb.Request, err error) ServerStep {
	resp := &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	if !s.confirming || s.over {
		return s.refuse(resp, strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, errors.New("a confirmation no step asked for"))
	}
	s.confirming = false
	if err != nil {
		return s.refuse(resp, strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, fmt.Errorf("%w: %v", ErrNotConfirmed, err))
	}
	out, done, err := s.ex.Confirmed(req.GetSaslAuthenticate().GetAuthBytes())
	if errors.Is(err, ErrCredentialChanged) {
		return s.refuse(resp, strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, err)
	}
	return s.answer(resp, out, done, err)
}

// ErrNotConfirmed: a refusal could not be decided, the node's credentials
// not confirmed current (retriable).
var ErrNotConfirmed = errors.New("sasl: cannot authenticate yet: this node's credentials are not confirmed current")

// answer is a step's answer: its refusal, or the exchange's next message.
func (s *ServerSession) answer(resp *strandpb.Response, out []byte, done bool, err error) ServerStep {
	if err != nil {
		return s.refuse(resp, strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, err)
	}
	body := &strandpb.SaslAuthenticateResponse{AuthBytes: out, Done: done}
	st := ServerStep{Answer: resp}
	if done {
		s.over = true
		st.Done, st.Principal = true, s.ex.Principal()
		body.Principal = st.Principal
	}
	resp.Body = &strandpb.Response_SaslAuthenticate{SaslAuthenticate: body}
	return st
}

// refuse ends the session with code.
func (s *ServerSession) refuse(resp *strandpb.Response, code strandpb.ErrorCode, why error) ServerStep {
	s.over = true
	msg := refusedMessage
	switch {
	case errors.Is(why, ErrNotConfirmed):
		msg = ErrNotConfirmed.Error()
	case errors.Is(why, ErrCredentialChanged):
		msg = ErrCredentialChanged.Error()
	case code == strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_SASL_MECHANISM:
		msg = why.Error()
	case errors.Is(why, ErrRequired):
		msg = ErrRequired.Error()
	}
	resp.Body = nil
	resp.Error = &strandpb.Error{Code: code, Message: msg}
	return ServerStep{Answer: resp, Refused: fmt.Errorf("sasl: %w", why)}
}

// RefusedError is a node's refusal of a client exchange: its error as
// the node sent it.
type RefusedError struct{ Err *strandpb.Error }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("sasl: refused (%s): %s", e.Err.GetCode(), e.Err.GetMessage())
}

// ClientSession is the client side of one connection's authentication:
// First is the request to send, Next takes each answer and returns the
// next request, or done. Not safe for concurrent use.
type ClientSession struct {
	mechanism string
	conv      *scram.ClientConversation
	steps     int
}

// Session begins a connection's exchange for c's user (its salted
// password is cached in c across sessions).
func (c *Client) Session() *ClientSession {
	return &ClientSession{mechanism: c.mechanism, conv: c.client.NewConversation()}
}

// First is the exchange's first request (the mechanism and the client's
// first message).
func (s *ClientSession) First() (*strandpb.Request, error) {
	out, err := s.conv.Step("")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAuthentication, err)
	}
	s.steps = 1
	return &strandpb.Request{Body: &strandpb.Request_SaslAuthenticate{SaslAuthenticate: &strandpb.SaslAuthenticateRequest{
		Mechanism: s.mechanism, AuthBytes: []byte(out)}}}, nil
}

// Next takes the node's answer to the last request: the next request to
// send, or done once the node proved it knows the credential. A refusal
// is a *RefusedError; a node that does not prove itself, a malformed
// answer or an exchange that does not end wrap ErrAuthentication.
func (s *ClientSession) Next(resp *strandpb.Response) (next *strandpb.Request, done bool, err error) {
	if e := resp.GetError(); e != nil && e.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
		return nil, false, &RefusedError{Err: e}
	}
	a := resp.GetSaslAuthenticate()
	if a.GetDone() {
		if _, err := s.conv.Step(string(a.GetAuthBytes())); err != nil || !s.conv.Done() || !s.conv.Valid() {
			return nil, false, fmt.Errorf("%w: the node did not prove it knows the credential", ErrAuthentication)
		}
		return nil, true, nil
	}
	if s.steps >= 3 {
		return nil, false, fmt.Errorf("%w: the exchange did not end", ErrAuthentication)
	}
	out, err := s.conv.Step(string(a.GetAuthBytes()))
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrAuthentication, err)
	}
	s.steps++
	return &strandpb.Request{Body: &strandpb.Request_SaslAuthenticate{SaslAuthenticate: &strandpb.SaslAuthenticateRequest{
		AuthBytes: []byte(out)}}}, false, nil
}
