// Package sasl authenticates Strand connections with SASL/SCRAM (RFC 5802,
// RFC 7677: SCRAM-SHA-256 and SCRAM-SHA-512) on both the native and the
// Kafka listener, and computes the salted credentials `strand user create`
// stores. The SCRAM arithmetic is github.com/xdg-go/scram's (a well-kept
// implementation, also what Kafka clients in Go are tested against); this
// package only binds it to the credentials of the metadata group.
//
// It owns randomness (nonces, salts), so it lives outside the pure node
// core: the Core only sees the principal that resulted. Every source of
// randomness can be injected (NewServerSession, NewClientRand,
// NewCredentialRand; nil is crypto/rand, what production passes), so the
// simulator replays a seed's exchanges.
//
// A connection's exchange is transport-free (session.go):
// ServerSession.Step takes one request and returns the answer, done with
// the principal, or the refusal (SASL_AUTHENTICATION_FAILED for a failed
// step, a non-SASL request first or more than SessionStepsMax steps;
// UNSUPPORTED_SASL_MECHANISM), and ClientSession's First and Next are the
// client's side. node/server's native connections and clientlib's TCP
// connections are reads and writes around them; the simulator (simnet)
// runs the same steps over its simulated connections, clientlib's
// simulated Client included. The Kafka listener (kafkaproto) runs
// Exchange inside its own SaslHandshake/SaslAuthenticate framing.
//
// A refusal is decided only on confirmed credentials. The lookup reads the
// node's applied metadata, which may lag the metadata group: a node that
// has not applied a user (or a password change) the group acknowledged
// would refuse that user's login. So a step that would fail on what the
// lookup holds (an unknown user; a proof that does not match the
// credential found) answers nothing yet (ServerStep.Confirm,
// Exchange.Unconfirmed); the caller confirms the lookup current — the
// node applied up to a metadata ReadIndex started after the step arrived
// (node.Core.ConfirmMetadata, loop.Round.ConfirmSecurity) — and calls
// Confirmed with the same step, whose refusal is then final. A
// confirmation that fails (no metadata leader, the read not served in
// time) ends the exchange retriably (UNAVAILABLE; the Kafka listener
// closes unanswered), never SASL_AUTHENTICATION_FAILED; so does a proof
// checked against a credential the confirmed state replaced
// (ErrCredentialChanged). The answers say nothing of whether the user
// exists. Each confirmation costs the metadata group at most a share of
// one ReadIndex per loop round (the Core batches them with the ACL
// check's), and the Core bounds how many wait.
//
// Planted bugs (simbugs builds only, SetBugs): AcceptsAnyProof, the server
// taking a final message with a wrong proof as proven;
// SASLRefusesUnconfirmed, a refusal without the confirmation.
package sasl

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/xdg-go/scram"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// Mechanisms are the SASL mechanisms Strand offers, in preference order.
// PLAIN is not offered: without TLS it would send the password in clear.
var Mechanisms = []string{metadata.ScramSHA512, metadata.ScramSHA256}

// ErrUnsupportedMechanism: a mechanism not in Mechanisms.
var ErrUnsupportedMechanism = errors.New("sasl: unsupported mechanism")

// ErrAuthentication: the exchange failed (unknown user, wrong password,
// a replayed, truncated or malformed message). The text never says which,
// so a client cannot probe for user names.
var ErrAuthentication = errors.New("sasl: authentication failed")

// Lookup finds a user's stored credential for a mechanism.
type Lookup func(name, mechanism string) (metadata.Credential, bool)

// ExchangeBytesMax bounds one client message of an exchange.
const ExchangeBytesMax = 4096

// hash returns the mechanism's hash function.
func hash(mechanism string) (scram.HashGeneratorFcn, error) {
	switch mechanism {
	case metadata.ScramSHA256:
		return scram.SHA256, nil
	case metadata.ScramSHA512:
		return scram.SHA512, nil
	}
	return nil, fmt.Errorf("%w: %q (offered: %v)", ErrUnsupportedMechanism, mechanism, Mechanisms)
}

// Exchange is the server side of one SCRAM exchange: two client messages,
// two answers. Not safe for concurrent use.
//
// A failure that rests only on what the lookup held — an unknown user, a
// proof that does not match the credential found — may be the lookup
// lagging: a node that has not applied a user (or a password change) the
// metadata group acknowledged. Such a failure is Unconfirmed: the caller
// confirms its lookup current (a metadata read index started after the
// message arrived, and the lookup reading at least that state) and calls
// Confirmed with the same message, whose failure is then final.
type Exchange struct {
	srv    *scram.Server
	lookup Lookup
	mech   string
	conv   *scram.ServerConversation
	done   bool
	err    error
	// cred is the credential the first message found; missing: the
	// last lookup found none.
	cred    metadata.Credential
	missing bool
	// lag is set when err rests on the lookup alone (lagUnknownUser,
	// lagProof), until Confirmed decides it.
	lag lagKind
	// steps counts the messages stepped on the current conversation.
	steps int
}

// lagKind is why an exchange's failure may be its lookup lagging.
type lagKind uint8

const (
	lagNone        lagKind = iota
	lagUnknownUser         // the first message named a user the lookup lacks
	lagProof               // the final message's proof does not match the credential found
)

// ErrCredentialChanged: the user's credential, confirmed current, is not
// the one the exchange began with (a password change the node had not
// applied): the client authenticates again, on a new exchange. Retriable.
var ErrCredentialChanged = errors.New("sasl: the user's credential changed during the exchange; authenticate again")

// Start begins an exchange for mechanism, looking credentials up with
// lookup. It fails with ErrUnsupportedMechanism.
func Start(mechanism string, lookup Lookup) (*Exchange, error) {
	return start(mechanism, lookup, nil)
}

// StartRand is Start with the server nonce drawn from random (nil:
// crypto/rand): for a caller in virtual time (the simulator runs the
// Kafka listener's exchange with a seeded source).
func StartRand(mechanism string, lookup Lookup, random io.Reader) (*Exchange, error) {
	return start(mechanism, lookup, random)
}

// start is Start with the server nonce drawn from random (nil: crypto/rand).
func start(mechanism string, lookup Lookup, random io.Reader) (*Exchange, error) {
	h, err := hash(mechanism)
	if err != nil {
		return nil, err
	}
	e := &Exchange{lookup: lookup, mech: mechanism}
	srv, err := h.NewServer(func(name string) (scram.StoredCredentials, error) {
		c, ok := e.lookup(name, mechanism)
		e.cred, e.missing = c, !ok
		if !ok {
			return scram.StoredCredentials{}, fmt.Errorf("unknown user")
		}
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
			StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
	})
	if err != nil {
		return nil, err
	}
	if random != nil {
		srv = srv.WithNonceGenerator(nonceFrom(random))
	}
	e.srv, e.conv = srv, srv.NewConversation()
	return e, nil
}

// Step answers one client message. done is set once the client proved its
// password; after an error (ErrAuthentication, wrapping the reason for the
// log) the exchange is over and the caller closes the connection, unless
// the error is Unconfirmed.
func (e *Exchange) Step(in []byte) (out []byte, done bool, err error) {
	switch {
	case e.err != nil:
		return nil, false, e.err
	case e.done:
		e.err = fmt.Errorf("%w: a message after the exchange completed (a replay?)", ErrAuthentication)
		return nil, false, e.err
	case len(in) > ExchangeBytesMax:
		e.err = fmt.Errorf("%w: message of %d bytes", ErrAuthentication, len(in))
		return nil, false, e.err
	}
	e.steps++
	first := e.steps == 1
	resp, err := e.conv.Step(string(in))
	forged := err != nil && e.conv.Done() && resp == scram.ErrInvalidProof && bugAcceptsAnyProof()
	if err != nil && !forged {
		e.err = fmt.Errorf("%w: %v", ErrAuthentication, err)
		switch {
		case first && e.missing:
			e.lag = lagUnknownUser
		case !first && resp == scram.ErrInvalidProof:
			e.lag = lagProof
		}
		return []byte(resp), false, e.err
	}
	if e.conv.Done() {
		if !e.conv.Valid() && !forged {
			e.err = fmt.Errorf("%w: invalid proof", ErrAuthentication)
			e.lag = lagProof
			return []byte(resp), false, e.err
		}
		e.done = true
	}
	return []byte(resp), e.done, nil
}

// Unconfirmed reports whether the exchange's failure rests only on what
// the lookup held (an unknown user, a proof that does not match the
// credential found), so a lookup that lags the metadata group may be
// its cause: the caller confirms the lookup current, then calls
// Confirmed.
func (e *Exchange) Unconfirmed() bool {
	return e.err != nil && e.lag != lagNone && !bugRefusesUnconfirmed() // planted-bug hook (simbugs: SASLRefusesUnconfirmed)
}

// Confirmed decides an Unconfirmed failure once the lookup reads state
// confirmed current for the message in (the one whose Step failed): a
// first message is stepped again on a fresh conversation; a final one's
// refusal stands if the credential found is still the user's, and fails
// with ErrCredentialChanged (retriable) if another replaced it. Its
// failure is final. Called on an exchange that is not Unconfirmed, it
// returns the exchange's state unchanged.
func (e *Exchange) Confirmed(in []byte) (out []byte, done bool, err error) {
	lag := e.lag
	e.lag = lagNone
	switch lag {
	case lagUnknownUser:
		e.err, e.cred, e.missing, e.steps = nil, metadata.Credential{}, false, 0
		e.conv = e.srv.NewConversation()
		out, done, err = e.Step(in)
		e.lag = lagNone
		return out, done, err
	case lagProof:
		now, ok := e.lookup(e.conv.Username(), e.mech)
		if ok && !sameCredential(now, e.cred) {
			e.err = fmt.Errorf("%w (%w)", ErrCredentialChanged, e.err)
		}
		return nil, false, e.err
	}
	return nil, e.done, e.err
}

// sameCredential reports whether a and b are one stored credential.
func sameCredential(a, b metadata.Credential) bool {
	return a.Iterations == b.Iterations && bytes.Equal(a.Salt, b.Salt) && bytes.Equal(a.StoredKey, b.StoredKey) &&
		bytes.Equal(a.ServerKey, b.ServerKey)
}

// Principal is the authenticated principal, "User:NAME"; empty before the
// exchange succeeded.
func (e *Exchange) Principal() string {
	if !e.done {
		return ""
	}
	return "User:" + e.conv.Username()
}

// NewCredential computes the credential to store for a password: a fresh
// 32-byte salt, iterations rounds of PBKDF2 (at least
// metadata.ScramIterationsMin; 0 means 8192), and StoredKey and ServerKey.
// The password itself is not in the result.
func NewCredential(mechanism, user, password string, iterations int) (*strandpb.UserCredential, error) {
	return NewCredentialRand(mechanism, user, password, iterations, nil)
}

// NewCredentialRand is NewCredential with the salt drawn from random (nil:
// crypto/rand): the simulator passes a seeded source.
func NewCredentialRand(mechanism, user, password string, iterations int, random io.Reader) (*strandpb.UserCredential, error) {
	h, err := hash(mechanism)
	if err != nil {
		return nil, err
	}
	if iterations == 0 {
		iterations = 8192
	}
	if iterations < metadata.ScramIterationsMin || iterations > metadata.ScramIterationsMax {
		return nil, fmt.Errorf("sasl: %d iterations, want %d..%d", iterations, metadata.ScramIterationsMin, metadata.ScramIterationsMax)
	}
	client, err := h.NewClient(user, password, "")
	if err != nil {
		return nil, fmt.Errorf("sasl: %v", err)
	}
	salt := make([]byte, 32)
	if random == nil {
		random = rand.Reader
	}
	if _, err := io.ReadFull(random, salt); err != nil {
		return nil, fmt.Errorf("sasl: salt: %v", err)
	}
	creds, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return nil, fmt.Errorf("sasl: %v", err)
	}
	return &strandpb.UserCredential{Mechanism: mechanism, Salt: salt, Iterations: int32(iterations),
		StoredKey: slices.Clone(creds.StoredKey), ServerKey: slices.Clone(creds.ServerKey)}, nil
}

// Client is the client side of one exchange (tests), and the identity
// its Sessions share: the salted password is computed once per client, not
// once per connection.
type Client struct {
	mechanism string
	client    *scram.Client
	conv      *scram.ClientConversation
}

// NewClient begins a client exchange for user and password.
func NewClient(mechanism, user, password string) (*Client, error) {
	return NewClientRand(mechanism, user, password, nil)
}

// NewClientRand is NewClient with every client nonce drawn from random
// (nil: crypto/rand): the simulator passes a seeded source.
func NewClientRand(mechanism, user, password string, random io.Reader) (*Client, error) {
	h, err := hash(mechanism)
	if err != nil {
		return nil, err
	}
	c, err := h.NewClient(user, password, "")
	if err != nil {
		return nil, fmt.Errorf("sasl: %v", err)
	}
	c = c.WithMinIterations(metadata.ScramIterationsMin)
	if random != nil {
		c = c.WithNonceGenerator(nonceFrom(random))
	}
	return &Client{mechanism: mechanism, client: c, conv: c.NewConversation()}, nil
}

// nonceFrom draws nonces as xdg-go/scram's default does (24 random bytes,
// base64) from random.
func nonceFrom(random io.Reader) scram.NonceGeneratorFcn {
	return func() string {
		b := make([]byte, 24)
		if _, err := io.ReadFull(random, b); err != nil {
			panic("sasl: nonce source: " + err.Error())
		}
		return base64.StdEncoding.EncodeToString(b)
	}
}

// Step answers the server's message (nil for the first step).
func (c *Client) Step(in []byte) ([]byte, error) {
	out, err := c.conv.Step(string(in))
	return []byte(out), err
}

// Done reports whether the client verified the server's final message.
func (c *Client) Done() bool { return c.conv.Done() && c.conv.Valid() }
