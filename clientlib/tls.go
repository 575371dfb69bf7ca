package clientlib

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// WithTLS connects to every node over TLS with cfg (cloned). When cfg
// names no ServerName, each connection verifies the host of the address it
// dials, as crypto/tls does. A client certificate in cfg is the client's
// principal on nodes that ask for one (--tls-client-auth).
//
// A node that does not speak TLS on that address fails the connection at
// once with a *TLSError (not retried); so does a certificate the client
// does not trust.
func WithTLS(cfg *tls.Config) Opt {
	return func(c *config) { c.tls = cfg.Clone() }
}

// TLSError is a TLS handshake with a node that cannot succeed as
// configured: the node's listener is plaintext (Plaintext), or a
// certificate was refused by either side. It is definite: the same
// connection would fail again. NodeWantsTLS marks the opposite mismatch:
// a client without TLS on a TLS listener.
type TLSError struct {
	Addr         string
	Plaintext    bool // the node answered without TLS: its listener is plaintext
	NodeWantsTLS bool // the node's listener is TLS and this client did not use it
	Err          error
}

// Error implements error.
func (e *TLSError) Error() string {
	switch {
	case e.Plaintext:
		return fmt.Sprintf("%s does not speak TLS (its listener is plaintext): connect without TLS, or start the node with --tls-cert", e.Addr)
	case e.NodeWantsTLS:
		return fmt.Sprintf("%s requires TLS: connect with TLS (--tls, clientlib.WithTLS)", e.Addr)
	}
	var ua x509.UnknownAuthorityError
	if errors.As(e.Err, &ua) {
		return fmt.Sprintf("TLS handshake with %s failed: %v (trust the cluster's CA: --tls-ca, tls.Config.RootCAs)", e.Addr, e.Err)
	}
	if isRemoteAlert(e.Err) && strings.Contains(e.Err.Error(), "certificate required") {
		return fmt.Sprintf("%s requires a client certificate signed by the cluster's CA (--tls-cert and --tls-key, tls.Config.Certificates)", e.Addr)
	}
	return fmt.Sprintf("TLS handshake with %s failed: %v", e.Addr, e.Err)
}

// Unwrap gives the cause.
func (e *TLSError) Unwrap() error { return e.Err }

// Retriable is false.
func (e *TLSError) Retriable() bool { return false }

// tlsHandshake wraps nc in TLS and completes the handshake within ctx. A
// failure that says the configuration is wrong (a non-TLS answer, a
// certificate refused, an alert from the node) is a definite
// *NotStrandError carrying a *TLSError; a connection lost mid-handshake
// stays a retriable *ConnError (a node restarting does that too).
func tlsHandshake(ctx context.Context, cfg *tls.Config, nc net.Conn, addr string) (net.Conn, error) {
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
	}
	tc := tls.Client(nc, cfg)
	err := tc.HandshakeContext(ctx)
	if err == nil {
		return tc, nil
	}
	nc.Close()
	var (
		rh tls.RecordHeaderError
		op *net.OpError
	)
	switch {
	case errors.As(err, &rh):
		return nil, definiteTLS(&TLSError{Addr: addr, Plaintext: true, Err: err})
	case isRemoteAlert(err):
		return nil, definiteTLS(&TLSError{Addr: addr, Err: err})
	case errors.As(err, &op), ctx.Err() != nil, errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, &ConnError{Addr: addr, Err: fmt.Errorf("TLS handshake: %w", err)}
	}
	// A certificate refused (by us or, as an alert, by the node) or
	// parameters the two sides do not share.
	return nil, definiteTLS(&TLSError{Addr: addr, Err: err})
}

// definiteTLS wraps a TLS failure so every caller treats it as definite.
func definiteTLS(e *TLSError) error {
	return &NotStrandError{Addr: e.Addr, Err: &ConnError{Addr: e.Addr, Err: e}}
}

// isRemoteAlert reports whether err is a TLS alert the node sent (a
// certificate it refused, or one it required and did not get; with TLS 1.3
// it arrives at the first read after the handshake). crypto/tls reports
// it as a *net.OpError "remote error" around its unexported alert type.
func isRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}
